"""A clone whose tree is very deep is searched, not failed.

A path of 1,400 directories (``d/d/.../deep.py``, 2,807 bytes: within what Linux and git allow)
passed Python's recursion limit where a directory was resolved from its parent's by a call a
level: the guard's precheck of a refresh (both ways of reading) and the walk of directory
descriptors (``guard/beneath.py`` without openat2). Every search of such a clone failed with
``RecursionError`` (the command line: "unexpected error", exit 1), whatever it asked for.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard.beneath import Beneath

from tests._hostile import cli
from tests.support import git, make_repo

DEPTH = 1400
DEEP = "d/" * DEPTH + "deep.py"


def _deep_tree(root: Path) -> None:
    """root/d/d/.../deep.py, DEPTH directories, made one level at a time through descriptors
    (``os.makedirs`` itself recurses a level a call)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        out = os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"def inside_deepest_numbat():\n    return 1\n")
        os.close(out)
    finally:
        os.close(fd)


def _remove_deep(root: Path) -> None:
    """The deep tree removed from the bottom up (``shutil.rmtree`` recurses a level a call)."""
    for level in range(DEPTH, 0, -1):
        d = root / ("d/" * level)
        for name in os.listdir(d):
            if name != "d":
                os.unlink(d / name)
        d.rmdir()


@pytest.fixture
def deep_clone(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A clone holding app.py and DEEP: committed ("git"), or a plain tree ("plain")."""
    inside = {"app.py": "def inside_wombat():\n    return 1\n"}
    if request.param == "git":
        clone = make_repo(tmp_path / "clone", inside)
        _deep_tree(clone)
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", "deep")
        assert DEEP in git(clone, "ls-files").split("\n")
    else:  # a plain tree: walked
        clone = tmp_path / "clone"
        clone.mkdir()
        (clone / "app.py").write_text(inside["app.py"])
        _deep_tree(clone)
    yield clone
    _remove_deep(clone)


@pytest.mark.asyncio
@pytest.mark.parametrize("deep_clone", ["git", "plain"], indirect=True)
async def test_a_tree_1400_directories_deep_is_searched(
    deep_clone: Path, dirs: tuple[Path, Path], how: str
) -> None:
    async with await Engine.open(
        deep_clone, data_dir=dirs[0], config_dir=dirs[1], workers=1
    ) as engine:
        deep = await asyncio.wait_for(engine.index_search("inside deepest numbat", "repo"), 120)
        near = await asyncio.wait_for(engine.index_search("inside wombat", "repo"), 120)
    assert DEEP in {h["path"] for h in deep.hits}, deep.text[:300]
    assert "app.py" in {h["path"] for h in near.hits}, near.text[:300]


@pytest.mark.parametrize("deep_clone", ["git"], indirect=True)
def test_the_command_line_searches_a_deep_tree(
    deep_clone: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    out = cli("--root", str(deep_clone), "search", "inside wombat", cwd=tmp_path, dirs=dirs)
    assert out.returncode == 0, out.stderr
    assert "app.py" in out.stdout
    assert "unexpected error" not in out.stderr


@pytest.mark.parametrize("deep_clone", ["plain"], indirect=True)
def test_the_walk_of_descriptors_reads_a_deep_file(deep_clone: Path) -> None:
    """The module alone: the walk, its directory cache full (512) long before the file, opens
    the rest one from another, and still refuses a link at the deepest level."""
    with Beneath(deep_clone, use_openat2=False) as tree:
        assert tree.read(DEEP, 100).startswith(b"def inside_deepest_numbat")
        assert tree.stat(DEEP).st_size > 0
    # A link planted at the bottom: refused, as at any other level.
    fd = os.open(deep_clone, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.symlink("/etc", "etc", dir_fd=fd)
    os.close(fd)
    with Beneath(deep_clone, use_openat2=False) as tree, pytest.raises(OSError):
        tree.read("d/" * DEPTH + "etc/hostname", 100)
