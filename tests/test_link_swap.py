"""No read follows a link at any component, however late the link appears (ADR 0050 §2-§3).

A directory of the tree is swapped for a link to a directory outside the root: between the
guard's decision and the open (a register-check checker does it, so it happens every time), in a
real race with a second process, and during a search's live read of a result. Each runs with
openat2 and with the walk of directory descriptors it falls back to. Afterwards no word of the
outside files is in a chunk record, a snapshot or manifest, a result, or the session's log.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import CheckResult, Verdict, beneath, default_guard, precheck_all
from nodwyn_retrieval.guard import guard as gmod
from nodwyn_retrieval.guard.beneath import Beneath, LinkRefused, OutsideRoot

from tests._hostile import OUTSIDE_WORDS, assert_no_outside_bytes, plant_outside
from tests.support import Log, make_repo

ROUNDS = int(os.environ.get("NODWYN_RACE_ROUNDS", "200"))
RACE_SECONDS = float(os.environ.get("NODWYN_RACE_SECONDS", "120"))
NAMES = tuple(f"m{i:02d}.py" for i in range(12))
INSIDE_BODY = "def inside_wombat():\n    return 'numbat'\n"
OTHER_BODY = "def other_mole():\n    return 1\n"


def _tree(tmp_path: Path, git_tree: bool = True) -> Path:
    # Only d/m00.py holds the words searched for, so it is the one result read live.
    files: dict[str, str | bytes] = {f"d/{n}": OTHER_BODY for n in NAMES}
    files["d/m00.py"] = INSIDE_BODY
    files["top.py"] = "def top_level():\n    pass\n"
    if git_tree:
        return make_repo(tmp_path / "repo", files)
    root = tmp_path / "plain"
    for p, body in files.items():
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text(str(body))
    return root


def _swap(root: Path, outside: Path) -> None:
    """d/ becomes a link to the outside directory (the real one kept as d.orig/)."""
    os.rename(root / "d", root / "d.orig")
    os.symlink(outside, root / "d", target_is_directory=True)


def _on_first(path: str, act: Callable[[], None], armed: list[bool]) -> Any:
    """A checker that does act once, the first time it is asked about path while armed:
    after the guard's rules allowed the read, before the open."""

    def check(p: str, size: int) -> CheckResult:
        if armed and p == path:
            armed.clear()
            act()
        return CheckResult(Verdict.ALLOW)

    return check


async def _open(root: Path, dirs: tuple[Path, Path], log: Path, **kw: Any) -> Engine:
    """The engine, writing its guard.decision and index.update records to the session log."""
    if not log.exists():
        Log(log).add("person.message", text="Where is the top level defined?")
    return await Engine.open(root, data_dir=dirs[0], config_dir=dirs[1], log=log, workers=1, **kw)


@pytest.mark.parametrize("git_tree", [True, False], ids=["git", "plain"])
@pytest.mark.asyncio
async def test_a_directory_swapped_for_a_link_between_decision_and_open_is_not_followed(
    tmp_path: Path, dirs: tuple[Path, Path], how: str, git_tree: bool
) -> None:
    root = _tree(tmp_path, git_tree)
    outside = plant_outside(tmp_path / "outside", NAMES)
    log = tmp_path / "task.jsonl"
    armed = [True]
    check = _on_first("d/m00.py", lambda: _swap(root, outside), armed)
    async with await _open(root, dirs, log, checkers=[check]) as e:
        out = await e.index_search("quokka wallaby platypus", "repo")
        assert not armed, "the checker never ran: the test proves nothing"
        again = await e.index_search("quokka wallaby platypus", "repo")
        up = await e.index_update()
        assert "d/m00.py" not in [h["path"] for h in out.hits]
    # The hits, not the whole text: the text repeats the query's words.
    texts = [str(out.hits), str(again.hits), up.text]
    assert_no_outside_bytes(dirs[0], *texts, logs=(log,))


@pytest.mark.asyncio
async def test_a_swap_during_a_search_live_read_shows_nothing_from_outside(
    tmp_path: Path, dirs: tuple[Path, Path], how: str
) -> None:
    root = _tree(tmp_path)
    outside = plant_outside(tmp_path / "outside", NAMES)
    log = tmp_path / "task.jsonl"
    armed: list[bool] = []  # armed once the index is built: the swap hits the live read
    check = _on_first("d/m00.py", lambda: _swap(root, outside), armed)
    async with await _open(root, dirs, log, checkers=[check]) as e:
        first = await e.index_search("inside wombat numbat", "repo")
        assert [h["path"] for h in first.hits] == ["d/m00.py"]
        armed.append(True)
        out = await e.index_search("inside wombat numbat", "repo")
        assert not armed, "the checker never ran: the test proves nothing"
    shown = out.text + str(out.to_json())
    assert_no_outside_bytes(dirs[0], shown, logs=(log,))


_SWAPPER = r"""
import os, sys, time
root, outside, stop = sys.argv[1], sys.argv[2], sys.argv[3]
d, kept = os.path.join(root, "d"), os.path.join(root, "d.orig")
n = 0
while not os.path.exists(stop):
    os.rename(d, kept)
    os.symlink(outside, d, target_is_directory=True)
    time.sleep(0.0005)
    os.unlink(d)
    os.rename(kept, d)
    n += 1
    time.sleep(0.0005)
print(n)
"""


@pytest.mark.asyncio
async def test_a_real_race_of_swaps_never_reads_outside(
    tmp_path: Path, dirs: tuple[Path, Path], how: str
) -> None:
    """A second process swaps d/ and a link to outside as fast as it can while this one runs
    at least ROUNDS updates (each a full listing, stat and read of what changed)."""
    root = _tree(tmp_path)
    outside = plant_outside(tmp_path / "outside", NAMES)
    # Outside files of another size, so each swap changes what the stat sees and is read.
    for n in NAMES:
        (outside / n).write_text((outside / n).read_text() + "# " + "x" * 40 + "\n")
    log = tmp_path / "task.jsonl"
    stop = tmp_path / "stop"
    swapper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SWAPPER, str(root), str(outside), str(stop),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    rounds = reads = 0
    t0 = time.monotonic()
    async with await _open(root, dirs, log) as e:
        try:
            while rounds < ROUNDS and time.monotonic() - t0 < RACE_SECONDS:
                up = await e.index_update()
                reads += up.summary["read"] + len(up.summary["refused"])
                rounds += 1
        finally:
            stop.touch()
            out, _ = await asyncio.wait_for(swapper.communicate(), 30)
        # The swapper stops with d/ the real directory again: nothing is refused now.
        searched = await e.index_search("quokka wallaby platypus bandicoot", "repo")
        assert searched.hits == []
    swaps = int(out.strip() or b"0")
    assert rounds >= ROUNDS, f"only {rounds} rounds in {RACE_SECONDS} s"
    assert swaps > rounds, (swaps, rounds)
    assert reads > 0, "no round tried a read: the race proves nothing"
    assert_no_outside_bytes(dirs[0], str(searched.hits), logs=(log,))


# -- the module itself ----------------------------------------------------------------------


def _links(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside\n")
    outside = plant_outside(tmp_path / "out", ("f.txt",))
    (root / "a" / "out").symlink_to(outside, target_is_directory=True)
    (root / "a" / "lb").symlink_to("b", target_is_directory=True)  # a link inside the root
    (root / "a" / "lf").symlink_to("b/f.txt")
    return root, outside


def test_beneath_reads_plain_paths_and_refuses_every_link_and_escape(
    tmp_path: Path, how: str
) -> None:
    root, _ = _links(tmp_path)
    with Beneath(root) as tree:
        assert tree.uses_openat2 == (how == "openat2")
        assert tree.read("a/b/f.txt", 100) == b"inside\n"
        assert tree.read("a/b/f.txt", 3) == b"ins"
        assert tree.stat("a/b/f.txt").st_size == 7
        for p in ("a/out/f.txt", "a/lb/f.txt", "a/lf", "a/out"):
            with pytest.raises(LinkRefused):
                tree.read(p, 100)
        with pytest.raises(LinkRefused):
            tree.stat("a/lf")
        for p in ("../out/f.txt", "/etc/passwd", "a/../a/b/f.txt", "a//b/f.txt", "./a", ""):
            with pytest.raises(OutsideRoot):
                tree.read(p, 100)
        with pytest.raises(FileNotFoundError):
            tree.read("a/b/missing", 100)
        with pytest.raises(NotADirectoryError):
            tree.read("a/b/f.txt/x", 100)
        with pytest.raises(IsADirectoryError):
            tree.read("a/b", 100)


def test_beneath_walk_keeps_the_directory_it_opened_when_a_name_is_swapped(
    tmp_path: Path, how: str
) -> None:
    """Once the walk holds a directory, a swap of its name changes nothing it opens through it;
    a walk that starts after the swap refuses the link."""
    root, outside = _links(tmp_path)
    with Beneath(root) as tree:
        assert tree.read("a/b/f.txt", 100) == b"inside\n"
        os.rename(root / "a" / "b", root / "a" / "b.orig")
        os.symlink(outside, root / "a" / "b", target_is_directory=True)
        try:
            data = tree.read("a/b/f.txt", 100)
        except LinkRefused:
            data = None
        assert data in (None, b"inside\n")  # openat2 refuses, the walk reads what it held
    with Beneath(root) as tree, pytest.raises(LinkRefused):
        tree.read("a/b/f.txt", 100)


@pytest.mark.parametrize("err", [errno.ENOSYS, errno.EPERM])
def test_without_openat2_the_walk_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    """A kernel without openat2 (ENOSYS) or a seccomp filter that refuses it (EPERM)."""

    def refused(dirfd: int, path: str, flags: int) -> int:
        raise OSError(err, os.strerror(err), path)

    monkeypatch.setattr(beneath, "_openat2", refused)
    monkeypatch.setattr(beneath, "_state", {})
    assert not beneath.openat2_available()
    root, _ = _links(tmp_path)
    with Beneath(root) as tree:
        assert not tree.uses_openat2
        assert tree.read("a/b/f.txt", 100) == b"inside\n"
        with pytest.raises(LinkRefused):
            tree.read("a/out/f.txt", 100)


def test_close_waits_for_an_open_under_way_and_the_outside_words_are_unique() -> None:
    assert all(w not in INSIDE_BODY + OTHER_BODY for w in OUTSIDE_WORDS)
    tree = Beneath("/")
    tree.close()
    tree.close()
    with pytest.raises(ValueError, match="closed"):
        tree.read("etc/hostname", 10)


@pytest.mark.asyncio
async def test_the_guard_refuses_a_path_that_keeps_changing_while_it_is_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """realpath raises when a link on the way vanishes between its lstat and its readlink (the
    race above found it): the pin refuses such a path instead of failing the refresh."""
    root, _ = _links(tmp_path)
    g = default_guard(root)

    def vanishing(path: str) -> str:
        raise FileNotFoundError(errno.ENOENT, "gone", path)

    monkeypatch.setattr(gmod.os.path, "realpath", vanishing)
    for d in (g.precheck("a/b/f.txt"), *precheck_all(g, ["a/lb/f.txt", "a/lf"])):
        assert not d.allowed
        assert d.rule == "pin"
        assert "kept changing" in d.reason
    # A guard for reads made beneath the root decides a plain path as written, without
    # resolving it; a path that is not plain is still resolved.
    beneath_guard = g.without_asking().reading_beneath()
    assert beneath_guard.beneath
    assert not beneath_guard.asking
    assert (await beneath_guard.check_read("a/b/f.txt", 7)).allowed
    assert not (await beneath_guard.check_read("a/../a/b/f.txt", 7)).allowed
    monkeypatch.undo()
    d = await beneath_guard.check_read("../out/f.txt", 7)
    assert (d.allowed, d.rule) == (False, "pin")
