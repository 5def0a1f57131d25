"""store.paths at its edges: which ``.git`` is a repository's own, a submodule's and a linked
worktree's keys, git run in a tree (ADR 0050 §2, §4)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import pytest
from nodwyn_retrieval import Engine
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store import paths
from nodwyn_retrieval.store.paths import git_repo, git_toplevel, project_dirs, project_key

from tests.support import git, make_repo

REFUSED = r"which is not a worktree or submodule of this repository: refused$"


def real(p: Path) -> Path:
    return Path(os.path.realpath(p))


def add_submodule(outer: Path, origin: Path, where: str) -> Path:
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), where)
    assert (outer / where / ".git").is_file()
    return outer / where


def test_git_run_in_a_tree_reports_a_failure_by_its_code(tmp_path: Path) -> None:
    repo = git_repo(make_repo(tmp_path / "r", {"a.py": "x = 1\n"}))
    assert repo is not None
    failed = repo.run("rev-parse", "--verify", "-q", "no-such-branch")
    assert failed.returncode != 0
    assert repo.run("rev-parse", "--verify", "-q", "main").returncode == 0


def test_git_run_in_a_tree_runs_in_the_directory_it_is_given(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r", {"pkg/a.py": "x = 1\n"})
    repo = git_repo(root)
    assert repo is not None
    assert repo.run("rev-parse", "--show-prefix", cwd=root / "pkg").stdout == b"pkg/\n"
    assert repo.run("rev-parse", "--show-prefix").stdout == b"\n"


@pytest.mark.parametrize("holds", ["HEAD", "objects"])
def test_a_dot_git_directory_that_is_no_repository_makes_a_plain_directory(
    tmp_path: Path, holds: str
) -> None:
    # The first .git met decides: passed over, it made the enclosing repository the root, so a
    # clone with such a .git inside a home directory kept in git searched the home directory.
    root = make_repo(tmp_path / "r", {"inner/a.py": "x = 1\n"})
    fake = root / "inner" / ".git"
    fake.mkdir()
    if holds == "HEAD":
        (fake / "HEAD").write_text("ref: refs/heads/main\n")
    else:
        (fake / "objects").mkdir()
    assert git_toplevel(root / "inner") is None
    assert project_key(root / "inner") != project_key(root)


def test_a_submodule_is_its_own_project_named_after_it(tmp_path: Path) -> None:
    outer = make_repo(tmp_path / "outer", {"a.py": "x = 1\n"})
    origin = make_repo(tmp_path / "origin", {"lib.py": "y = 2\n"})
    sub = add_submodule(outer, origin, "sub")
    assert git_toplevel(sub) == real(sub)
    key = project_key(sub)
    assert re.fullmatch(r"sub-[0-9a-f]{12}", key)
    assert key != project_key(outer)
    assert key != project_key(origin)
    assert project_key(sub) == key


def test_a_submodule_deeper_in_its_repository_is_found(tmp_path: Path) -> None:
    outer = make_repo(tmp_path / "outer", {"a.py": "x = 1\n"})
    origin = make_repo(tmp_path / "origin", {"lib.py": "y = 2\n"})
    sub = add_submodule(outer, origin, "vendor/libs/sub")
    assert git_toplevel(sub / "lib.py") == real(sub)


def test_a_submodule_of_a_linked_worktree_is_found(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main", {"a.py": "x = 1\n"})
    origin = make_repo(tmp_path / "origin", {"lib.py": "y = 2\n"})
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "side", str(wt))
    sub = add_submodule(wt, origin, "sub")
    assert git_toplevel(sub) == real(sub)
    assert project_key(wt) == project_key(main)


def test_a_submodule_under_a_dot_git_that_is_a_link_is_refused(tmp_path: Path) -> None:
    # A clone cannot borrow another repository's modules through a link named .git.
    outer = make_repo(tmp_path / "outer", {"a.py": "x = 1\n"})
    origin = make_repo(tmp_path / "origin", {"lib.py": "y = 2\n"})
    add_submodule(outer, origin, "sub")
    clone = tmp_path / "clone"
    (clone / "sub").mkdir(parents=True)
    (clone / ".git").symlink_to(outer / ".git", target_is_directory=True)
    (clone / "sub" / ".git").write_text(f"gitdir: {real(outer / '.git' / 'modules' / 'sub')}\n")
    with pytest.raises(BadInput, match=REFUSED):
        git_toplevel(clone / "sub")


def test_a_git_file_naming_a_repository_not_under_its_modules_is_refused(tmp_path: Path) -> None:
    outer = make_repo(tmp_path / "outer", {"a.py": "x = 1\n"})
    other = make_repo(tmp_path / "other", {"b.py": "y = 2\n"})
    (outer / "planted").mkdir()
    (outer / "planted" / ".git").write_text(f"gitdir: {other / '.git'}\n")
    with pytest.raises(BadInput, match=REFUSED):
        git_toplevel(outer / "planted")
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / ".git").write_text(f"gitdir: {other / '.git'}\n")
    with pytest.raises(BadInput, match=REFUSED):
        project_key(lone)


def test_a_copy_of_a_worktrees_git_file_elsewhere_is_refused(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main", {"a.py": "x = 1\n"})
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "side", str(wt))
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(wt / ".git", copy / ".git")
    with pytest.raises(BadInput, match=REFUSED):
        git_toplevel(copy)
    assert git_toplevel(wt) == real(wt)


def test_a_repository_found_and_a_projects_folders_cannot_be_pointed_elsewhere(
    tmp_path: Path,
) -> None:
    # What git agreed to is what every later git call names: no caller moves it afterwards.
    repo = git_repo(make_repo(tmp_path / "r", {"a.py": "x = 1\n"}))
    assert repo is not None
    with pytest.raises(AttributeError):
        repo.git_dir = tmp_path / "elsewhere" / ".git"  # type: ignore[misc]
    dirs = project_dirs(tmp_path / "data", "r-0123456789ab")
    with pytest.raises(AttributeError):
        dirs.chunks = tmp_path / "elsewhere"  # type: ignore[misc]
    assert repo.git_dir == real(tmp_path / "r" / ".git")
    assert dirs.chunks == tmp_path / "data" / "projects" / "r-0123456789ab" / "index" / "chunks"


def test_a_session_opened_in_a_worktrees_subdirectory_asks_git_once_for_root_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engine.open's root and project key come from one question to git: the same as
    git_toplevel's and project_key's, each of which asks on its own."""
    main = make_repo(tmp_path / "main", {"pkg/a.py": "x = 1\n"})
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "side", str(wt))
    asked: list[tuple[str, ...]] = []
    real_output = paths.git_output

    def counted(cwd: Path, *args: str) -> str | None:
        asked.append(args)
        return real_output(cwd, *args)

    monkeypatch.setattr(paths, "git_output", counted)

    async def opened() -> tuple[Path, str]:
        engine = await Engine.open(wt / "pkg", data_dir=tmp_path / "data")
        try:
            return engine.root, engine.key
        finally:
            await engine.close()

    root, key = asyncio.run(opened())
    assert sum(1 for a in asked if a and a[0] == "rev-parse") == 1
    assert root == git_toplevel(wt / "pkg") == real(wt)
    assert key == project_key(wt) == project_key(main)
