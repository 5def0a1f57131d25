"""A FIFO a clone's git configuration includes does not stall every search.

git reads the files its configuration includes (``include.path``, ``includeIf.<condition>.path``,
and the files those include) at every call, and waits on a FIFO among them: each search of such
a clone ran git to its timeouts (30 s a search from the command line) and did not read the tree
in time. The git directory's check (store/paths.py ``git_files_regular``) follows the includes
as git does and makes such a tree a plain directory, searched at once; includes of regular files,
of files that are not there, and of each other in a ring leave a repository a repository.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.paths import config_includes, git_files_regular, git_repo

from tests.support import make_repo

INSIDE = {"app.py": "def inside_wombat():\n    return 1\n"}


def _clone(tmp_path: Path, config: str) -> Path:
    clone = make_repo(tmp_path / "clone", INSIDE)
    with open(clone / ".git" / "config", "a", encoding="utf-8") as f:
        f.write(config)
    return clone


# Each way a configuration names a file to include, the file a FIFO (made at the {fifo} path).
INCLUDES = {
    "include": "[include]\n\tpath = {fifo}\n",
    "relative": "[include]\n\tpath = ../planted.cfg\n",
    "quoted with a comment": '[Include]\n\tPATH = "{fifo}" ; a comment\n',
    "includeIf": '[includeIf "gitdir:/"]\n\tpath = {fifo}\n',
    "a false condition": '[includeIf "onbranch:nowhere"]\n\tpath = {fifo}\n',
    "on the header's line": '[includeIf "gitdir:/"] path = {fifo}\n',
    "from home": "[include]\n\tpath = ~/planted.cfg\n",
    "nested": "[include]\n\tpath = {regular}\n",
}


@pytest.mark.asyncio
@pytest.mark.parametrize("how", list(INCLUDES))
async def test_a_fifo_a_clones_configuration_includes_does_not_stall_every_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    fifo = (home if how == "from home" else tmp_path / "clone") / "planted.cfg"
    regular = tmp_path / "regular.cfg"
    regular.write_text(f"[core]\n\tbare = false\n[include]\n\tpath = {fifo}\n", encoding="utf-8")
    clone = _clone(tmp_path, INCLUDES[how].format(fifo=fifo, regular=regular))
    os.mkfifo(fifo)
    assert git_repo(clone) is None
    async with await Engine.open(
        clone, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", workers=1
    ) as engine:
        for _ in range(2):
            start = time.monotonic()
            out = await asyncio.wait_for(engine.index_search("inside wombat", "repo"), 120)
            assert {h["path"] for h in out.hits} == {"app.py"}, out.text
            assert time.monotonic() - start < 5


def test_includes_of_regular_files_and_of_none_leave_a_repository(tmp_path: Path) -> None:
    a, b = tmp_path / "a.cfg", tmp_path / "b.cfg"
    a.write_text(f"[include]\n\tpath = {b}\n", encoding="utf-8")
    b.write_text("[user]\n\tname = x\n", encoding="utf-8")
    fifo = tmp_path / "fifo.cfg"
    os.mkfifo(fifo)
    clone = _clone(
        tmp_path,
        f"[include]\n\tpath = {a}\n\tpath = {tmp_path / 'missing.cfg'}\n"
        f"[other]\n\tpath = {fifo}\n# [include] path = {fifo}\n",  # not an include: no wait
    )
    repo = git_repo(clone)
    assert repo is not None
    assert repo.work_tree == clone.resolve()
    included = config_includes(str(clone / ".git" / "config"))
    assert included == [str(a), str(tmp_path / "missing.cfg")]


def test_includes_in_a_ring_are_followed_once(tmp_path: Path) -> None:
    # git refuses a ring (past its depth of ten); the check ends at it, and still finds a FIFO
    # one of the ring's files includes.
    git_dir = make_repo(tmp_path / "clone", INSIDE) / ".git"
    a, b = tmp_path / "a.cfg", tmp_path / "b.cfg"
    a.write_text(f"[include]\n\tpath = {b}\n", encoding="utf-8")
    b.write_text(f"[include]\n\tpath = {a}\n", encoding="utf-8")
    with open(git_dir / "config", "a", encoding="utf-8") as f:
        f.write(f"[include]\n\tpath = {a}\n")
    assert git_files_regular(git_dir)
    fifo = tmp_path / "fifo.cfg"
    os.mkfifo(fifo)
    with open(b, "a", encoding="utf-8") as f:
        f.write(f"[include]\n\tpath = {fifo}\n")
    assert not git_files_regular(git_dir)
