"""A split index's shared file planted as a FIFO does not stall every search.

``git update-index --split-index`` keeps most of the index in ``sharedindex.<hash>`` beside
``index``, and git opens it at every call that reads the index (``ls-files``). A clone holding a
FIFO there (or a link to one) made each search wait for the listing's timeouts and find nothing:
``git rev-parse`` does not read the index, so the tree was taken for a repository, and the
listing with untracked files, then the index's alone, each waited on the FIFO until the search's
deadline. Such a git directory is no repository now (docs/guard.md, "The root"): the tree is
searched as a plain directory.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._listing import _Early
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.paths import git_repo

from tests._hostile import cli
from tests.support import git, make_repo

INSIDE = {"app.py": "def inside_wombat():\n    return 1\n"}


def _split(tree: Path, git_dir: Path) -> Path:
    """The tree's index made a split one; its shared file."""
    git(tree, "update-index", "--split-index")
    shared = sorted(git_dir.glob("sharedindex.*"))
    assert len(shared) == 1, shared
    return shared[0]


def _plant(shared: Path, how: str, outside: Path) -> None:
    shared.unlink()
    if how == "fifo":
        os.mkfifo(shared)
    else:  # a link to a FIFO outside the tree: git follows it
        outside.mkdir(parents=True, exist_ok=True)
        os.mkfifo(outside / "fifo")
        shared.symlink_to(outside / "fifo")


async def _searches_find(tree: Path, dirs: tuple[Path, Path]) -> None:
    async with await Engine.open(tree, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        for _ in range(2):
            # A generous bound: each search waited out its own deadline (10 s) and found nothing.
            out = await asyncio.wait_for(engine.index_search("inside wombat", "repo"), 120)
            assert {h["path"] for h in out.hits} == {"app.py"}, out.text
            assert "partial" not in out.text, out.text


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["fifo", "link-to-fifo"])
async def test_a_fifo_as_the_split_indexs_shared_file_does_not_stall_every_search(
    tmp_path: Path, dirs: tuple[Path, Path], how: str
) -> None:
    clone = make_repo(tmp_path / "clone", INSIDE)
    _plant(_split(clone, clone / ".git"), how, tmp_path / "outside")
    assert git_repo(clone) is None  # a plain directory
    assert _Early.start(clone, 60.0) is None  # nor is git started early there
    await _searches_find(clone, dirs)
    out = cli("--root", str(clone), "search", "inside wombat", cwd=tmp_path, dirs=dirs)
    assert out.returncode == 0, out.stderr
    assert "app.py" in out.stdout, (out.stdout, out.stderr)
    assert "did not finish" not in out.stderr  # the listing was never cut


@pytest.mark.asyncio
async def test_a_fifo_as_a_linked_worktrees_shared_index_does_not_stall_its_searches(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """A linked worktree's split index lives in its own git directory, under the main one's
    ``worktrees/``: the same check there."""
    main = make_repo(tmp_path / "main", INSIDE)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    _plant(_split(linked, main / ".git" / "worktrees" / "linked"), "fifo", tmp_path / "outside")
    assert git_repo(main) is not None  # the main repository's own index is not split
    assert git_repo(linked) is None
    await _searches_find(linked, dirs)


def test_a_split_index_as_git_makes_it_is_still_a_repository(tmp_path: Path) -> None:
    """What the check keeps: a split index whose shared file is a regular file."""
    clone = make_repo(tmp_path / "clone", INSIDE)
    _split(clone, clone / ".git")
    repo = git_repo(clone)
    assert repo is not None
    assert repo.work_tree == clone.resolve()
