"""Which files a tree's index covers (§2), and what the watch says changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._listing import git_ls_files, list_tree, walk_dir
from nodwyn_retrieval.actors._watch import TreeWatch, available

from tests.support import git, make_repo


def test_git_lists_tracked_and_untracked_but_not_ignored_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x", ".gitignore": "*.log\nbuild/\n"})
    (repo / "new.py").write_text("y")
    (repo / "x.log").write_text("z")
    (repo / "build").mkdir()
    (repo / "build" / "out.py").write_text("z")
    assert sorted(git_ls_files(repo) or []) == [".gitignore", "a.py", "new.py"]


def test_untracked_files_under_nodwyn_are_left_out_but_tracked_ones_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {".nodwyn/policy.toml": "kept", "a.py": "x"})
    (repo / ".nodwyn" / "worktrees").mkdir()
    (repo / ".nodwyn" / "worktrees" / "other.py").write_text("another session's tree")
    assert sorted(git_ls_files(repo) or []) == [".nodwyn/policy.toml", "a.py"]


def test_a_name_with_a_newline_and_invalid_utf8_is_listed_exactly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x"})
    odd = os.fsdecode(b"we\nird\xff.py")
    (repo / odd).write_text("z")
    assert odd in (git_ls_files(repo) or [])


def test_outside_git_the_walk_honours_gitignore_and_skips_hidden_and_links(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a")
    (root / "src" / "deep" / "b.py").write_text("b")
    (root / "src" / "gen.py").write_text("g")
    (root / "src" / ".gitignore").write_text("gen.py\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.py").write_text("h")
    (root / "top.md").write_text("t")
    (root / "link.py").symlink_to(root / "top.md")
    (root / "loop").symlink_to(root)
    files, in_git = list_tree(root)
    assert not in_git
    assert sorted(files) == ["src/a.py", "src/deep/b.py", "top.md"]


def test_a_directory_given_to_update_is_walked_whole(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "build" / ".cache").mkdir(parents=True)
    (root / "build" / "out.py").write_text("o")
    (root / "build" / ".cache" / "c.py").write_text("c")
    (root / "build" / ".gitignore").write_text("*\n")
    got = sorted(walk_dir(root, root / "build", honour_ignores=False, skip_hidden=False))
    assert got == ["build/.cache/c.py", "build/.gitignore", "build/out.py"]


needs_inotify = pytest.mark.skipif(not available(), reason="inotify is Linux only")


@needs_inotify
def test_the_watch_reports_a_written_file_and_a_new_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"pkg/a.py": "a"})
    w = TreeWatch(repo, repo / ".git")
    try:
        assert w.watch_dirs(["", "pkg"])
        assert not w.drain().touched
        (repo / "pkg" / "a.py").write_text("changed")
        (repo / "pkg" / "b.py").write_text("new")
        ch = w.drain()
        assert not ch.unknown
        assert ch.touched == {"pkg/a.py", "pkg/b.py"}
        assert ch.created == {"pkg/b.py"}
    finally:
        w.close()


@needs_inotify
@pytest.mark.parametrize(
    "act",
    [
        lambda r: (r / "newdir").mkdir(),
        lambda r: (r / "pkg" / ".gitignore").write_text("*.py\n"),
        lambda r: git(r, "rm", "-q", "--cached", "pkg/a.py"),
        lambda r: os.rename(r / "pkg", r / "moved"),
    ],
    ids=["a-new-directory", "an-ignore-file", "the-git-index", "a-moved-directory"],
)
def test_what_the_watch_cannot_account_for_is_unknown(tmp_path: Path, act: object) -> None:
    repo = make_repo(tmp_path / "r", {"pkg/a.py": "a"})
    w = TreeWatch(repo, repo / ".git")
    try:
        w.watch_dirs(["", "pkg"])
        act(repo)  # type: ignore[operator]
        assert w.drain().unknown
    finally:
        w.close()
