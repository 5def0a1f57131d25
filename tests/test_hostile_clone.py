"""A clone cannot move the root: its configuration, a `.git` file and the caller's environment.

The root is the directory the caller names, or its ancestor holding `.git`. Each attack here
points git at a directory outside that root holding words found nowhere else; each tree is
refused with one line and exit 2, or indexed as itself, and no outside word reaches the store,
a result or the output.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._listing import _beneath_root, list_tree
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store.paths import git_toplevel, project_key

from tests._hostile import OUTSIDE_WORDS, assert_no_outside_bytes, cli, plant_outside
from tests.support import git, make_repo

INSIDE = {"src/app.py": "def inside_wombat():\n    return 1\n", "README.md": "inside wombat\n"}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working tree outside every root, as a git repository of its own."""
    out = plant_outside(tmp_path / "outside", ("secret.py",))
    git(out, "init", "-q", "-b", "main")
    git(out, "add", "-A")
    git(out, "commit", "-q", "-m", "outside")
    return out


def _refused(repo: Path, dirs: tuple[Path, Path], env: dict[str, str] | None = None) -> None:
    """update and search with an explicit root: exit 2, one line, nothing of outside stored."""
    for args in (("update", "--json"), ("search", "quokka wallaby", "--json")):
        out = cli("--root", str(repo), *args, cwd=repo.parent, dirs=dirs, env=env)
        assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert lines[0].startswith("nodwyn-retrieval:"), lines
        assert "refused" in lines[0], lines
        assert_no_outside_bytes(dirs[0], out.stdout, out.stderr)


def test_core_worktree_outside_is_refused_with_an_explicit_root(
    tmp_path: Path, dirs: tuple[Path, Path], outside: Path
) -> None:
    repo = make_repo(tmp_path / "repo", INSIDE)
    git(repo, "config", "core.worktree", str(outside))
    _refused(repo, dirs)
    with pytest.raises(BadInput, match=r"core\.worktree"):
        git_toplevel(repo)


def test_core_worktree_pointing_at_the_tree_itself_is_accepted(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", INSIDE)
    git(repo, "config", "core.worktree", "..")  # relative to .git: the tree itself
    assert git_toplevel(repo / "src") == repo.resolve()
    out = cli("--root", str(repo), "search", "inside wombat", "--json", cwd=tmp_path, dirs=dirs)
    assert out.returncode == 0, out.stderr
    assert "src/app.py" in out.stdout


def test_an_included_file_naming_an_outside_worktree_moves_nothing(
    tmp_path: Path, dirs: tuple[Path, Path], outside: Path
) -> None:
    """git takes core.worktree from the repository's own file only, not from what it includes:
    the tree is indexed as itself, with git told the directories whatever an include says."""
    repo = make_repo(tmp_path / "repo", INSIDE)
    inc = tmp_path / "planted.inc"
    inc.write_text(f"[core]\n\tworktree = {outside}\n\texcludesFile = {outside / 'secret.py'}\n")
    with (repo / ".git" / "config").open("a") as f:
        f.write(f'[includeIf "gitdir:{repo}/"]\n\tpath = {inc}\n')
        f.write(f"[include]\n\tpath = {inc}\n")
    assert git_toplevel(repo) == repo.resolve()
    assert sorted(list_tree(repo)[0]) == sorted(INSIDE)
    up = cli("--root", str(repo), "update", "--json", cwd=tmp_path, dirs=dirs)
    found = cli("--root", str(repo), "search", "inside wombat", cwd=tmp_path, dirs=dirs)
    assert up.returncode == 0, up.stderr
    assert found.returncode == 0, found.stderr
    assert "src/app.py" in found.stdout
    assert_no_outside_bytes(dirs[0], up.stdout, found.stdout, found.stderr)


@pytest.mark.parametrize("how", ["gitdir-file", "dotgit-link"])
def test_a_git_file_naming_another_repository_is_refused(
    tmp_path: Path, dirs: tuple[Path, Path], outside: Path, how: str
) -> None:
    repo = tmp_path / "repo"
    for name, body in INSIDE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(body)
    if how == "gitdir-file":
        (repo / ".git").write_text(f"gitdir: {outside / '.git'}\n")
    else:
        (repo / ".git").symlink_to(outside / ".git", target_is_directory=True)
    _refused(repo, dirs)
    with pytest.raises(BadInput, match="refused"):
        list_tree(repo)


@pytest.mark.asyncio
async def test_a_linked_worktree_and_a_submodule_keep_working(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    main = make_repo(tmp_path / "main", INSIDE)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    assert git_toplevel(linked / "src") == linked.resolve()
    assert project_key(linked) == project_key(main)  # §4: one project, one store
    listed, in_git = list_tree(linked)
    assert in_git
    assert sorted(listed) == sorted(INSIDE)
    async with await Engine.open(linked, data_dir=dirs[0], config_dir=dirs[1], workers=1) as e:
        out = await e.index_search("inside wombat", "repo")
    assert {h["path"] for h in out.hits} == {"src/app.py", "README.md"}

    sub_origin = make_repo(tmp_path / "origin", {"lib.py": "def sub_kangaroo():\n    pass\n"})
    git(main, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_origin), "sub")
    sub = main / "sub"
    assert (sub / ".git").is_file()
    assert git_toplevel(sub) == sub.resolve()
    listed, in_git = list_tree(sub)
    assert in_git
    assert listed == ["lib.py"]


def test_git_variables_in_the_environment_move_nothing(
    tmp_path: Path, dirs: tuple[Path, Path], outside: Path
) -> None:
    repo = make_repo(tmp_path / "repo", INSIDE)
    env = {
        **os.environ,
        "GIT_DIR": str(outside / ".git"),
        "GIT_WORK_TREE": str(outside),
        "GIT_COMMON_DIR": str(outside / ".git"),
        "GIT_INDEX_FILE": str(outside / ".git" / "index"),
        "GIT_CEILING_DIRECTORIES": str(tmp_path),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.worktree",
        "GIT_CONFIG_VALUE_0": str(outside),
        "GIT_CONFIG_PARAMETERS": f"'core.worktree'='{outside}'",
    }
    out = cli("--root", str(repo), "update", "--json", cwd=tmp_path, dirs=dirs, env=env)
    assert out.returncode == 0, out.stderr
    found = cli("--root", str(repo), "search", "inside wombat", cwd=tmp_path, dirs=dirs, env=env)
    assert "src/app.py" in found.stdout
    assert_no_outside_bytes(dirs[0], out.stdout, found.stdout, found.stderr)


def test_every_listed_name_is_a_plain_path_beneath_the_root() -> None:
    for good in ("a.py", "src/a.py", ".github/x.yml", "a..b/c", "...", ".gitignore"):
        assert _beneath_root(good), good
    for bad in ("", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", ".git/config",
                "sub/.GIT/config", "a\0b"):  # fmt: skip
        assert not _beneath_root(bad), bad


def test_the_outside_words_are_unique_to_the_planted_file() -> None:
    """The check would prove nothing if an inside file held these words."""
    for body in INSIDE.values():
        assert not any(w in body for w in OUTSIDE_WORDS)
