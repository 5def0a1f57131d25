"""A clone's own ``git`` program is never the git that is run.

git is started in the working tree. A person's ``PATH`` with a relative directory in it (an
empty entry, as ``PATH=:$PATH`` or a trailing ``:`` makes; ``.``; ``node_modules/.bin``; ``bin``)
names, for a process started there, a directory of the clone: an executable ``git`` the clone
holds there was run at every search, before git itself (seen: a marker written at each of the
eight runs of a first search). Only ``PATH``'s absolute directories are looked in now.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from nodwyn_retrieval.store.paths import git_program, git_repo

from tests._hostile import cli
from tests.support import make_repo

REAL_GIT = git_program()


def _planted_git(marker: Path) -> str:
    """A program named git that leaves a mark, then runs the real git (so nothing else shows)."""
    return f'#!/bin/sh\necho ran >> "{marker}"\nexec "{REAL_GIT}" "$@"\n'


@pytest.mark.parametrize(
    ("entry", "where"),
    [("", "."), (".", "."), ("bin", "bin"), ("node_modules/.bin", "node_modules/.bin")],
)
def test_a_relative_directory_of_path_runs_no_git_of_the_clone(
    tmp_path: Path,
    dirs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    entry: str,
    where: str,
) -> None:
    marker = tmp_path / "marker"
    clone = make_repo(
        tmp_path / "clone",
        {"app.py": "def inside_wombat():\n    return 1\n", f"{where}/git": _planted_git(marker)},
    )
    planted = clone / where / "git"
    planted.chmod(planted.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    path = f"{entry}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path}
    for args in (("search", "inside wombat"), ("update",), ("status", "--json")):
        out = cli("--root", str(clone), *args, cwd=tmp_path, dirs=dirs, env=env)
        assert out.returncode == 0, (args, out.stderr)
        assert not marker.exists(), (args, marker.read_text())
    out = cli("--root", str(clone), "search", "inside wombat", cwd=tmp_path, dirs=dirs, env=env)
    assert "app.py" in out.stdout  # git listed the tree, as a repository
    # The same in this process (the library), PATH as the person's.
    monkeypatch.setenv("PATH", path)
    assert git_program() == REAL_GIT
    assert git_repo(clone) is not None
    assert not marker.exists()


def test_no_git_in_paths_absolute_directories_is_git_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a relative directory holds a git: as if git were not there (a plain directory)."""
    planted = _planted_git(tmp_path / "m")
    clone = make_repo(tmp_path / "clone", {"app.py": "x = 1\n", "git": planted})
    (clone / "git").chmod(0o755)
    monkeypatch.chdir(clone)
    monkeypatch.setenv("PATH", f".{os.pathsep}{tmp_path / 'empty'}")
    with pytest.raises(FileNotFoundError):
        git_program()
    assert git_repo(clone) is None
    assert not (tmp_path / "m").exists()
