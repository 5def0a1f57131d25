"""The tree's inotify watch at its edges: what it cannot account for is said unknown, so that the
refresher lists and stats the whole tree (§5); what it can, it narrows (actors/_watch.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._watch import TreeWatch, available

pytestmark = pytest.mark.skipif(not available(), reason="inotify is Linux's")


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    (root / "sub" / "b.txt").write_text("b\n")
    return root


def test_a_directory_gone_before_it_is_watched_leaves_the_watch_whole(tmp_path: Path) -> None:
    root = tree(tmp_path)
    w = TreeWatch(root)
    try:
        # Gone already: its parent's events say so, and the rest is watched as before.
        assert w.watch_dirs(["", "gone", "sub"]) is True
        assert not w.broken
        assert "watching 2 directories" in repr(w)
        (root / "sub" / "b.txt").write_text("b2\n")
        ch = w.drain()
        assert (ch.unknown, ch.touched, ch.created) == (False, {"sub/b.txt"}, set())
    finally:
        w.close()


def test_a_directory_that_cannot_be_watched_makes_every_change_unknown(tmp_path: Path) -> None:
    root = tree(tmp_path)
    w = TreeWatch(root)
    try:
        # A name too long for the system (not a directory gone): the watch is not whole.
        assert w.watch_dirs(["", "x" * 5000]) is False
        assert w.broken
        assert "broken" in repr(w)
        assert w.drain().unknown
    finally:
        w.close()


def test_a_git_directory_that_cannot_be_watched_makes_every_change_unknown(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path)
    w = TreeWatch(root, git_dir=root / "no-such-git-dir")
    try:
        assert w.watch_dirs([""]) is True
        assert w.drain().unknown
    finally:
        w.close()


def test_a_closed_watch_says_it_knows_nothing(tmp_path: Path) -> None:
    root = tree(tmp_path)
    w = TreeWatch(root)
    w.watch_dirs([""])
    w.close()
    assert w.fd == -1
    first = w.drain()
    assert first.unknown
    assert w.broken
    assert w.drain().unknown  # and stays so
    w.close()  # twice is harmless


def test_a_watched_directory_moved_away_alone_is_unknown(tmp_path: Path) -> None:
    # Only the subdirectory is watched: its move is one event of no name, alone in the queue.
    root = tree(tmp_path)
    w = TreeWatch(root)
    try:
        assert w.watch_dirs(["sub"]) is True
        os.rename(root / "sub", tmp_path / "moved")
        ch = w.drain()
        assert ch.unknown
        assert "watching 0 directories" in repr(w)
    finally:
        w.close()
        shutil.rmtree(tmp_path / "moved", ignore_errors=True)


def test_a_queue_that_overflowed_is_unknown(tmp_path: Path) -> None:
    root = tree(tmp_path)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"the system queues {limit} events")
    w = TreeWatch(root)
    try:
        w.watch_dirs([""])
        a, b = root / "a.txt", root / "c.txt"
        b.write_text("c\n")
        for i in range(limit // 2 + 100):  # two files in turn: no two events in a row merge
            os.utime(a, ns=(i, i))
            os.utime(b, ns=(i, i))
        assert w.drain().unknown
        # Once read, the queue is empty again: a change after it is known.
        a.write_text("a2\n")
        ch = w.drain()
        assert (ch.unknown, ch.touched) == (False, {"a.txt"})
    finally:
        w.close()


def test_inotify_is_found_without_a_process_and_else_by_the_librarys_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctypes
    import ctypes.util

    from nodwyn_retrieval.actors import _watch

    def no_process(name: str) -> str | None:
        raise AssertionError("find_library runs ldconfig in a new process")

    monkeypatch.setattr(ctypes.util, "find_library", no_process)
    _watch._lib.cache_clear()
    try:
        assert _watch._lib() is not None
        root = tree(tmp_path)
        w = TreeWatch(root)
        try:
            assert w.watch_dirs(["", "sub"]) is True
            (root / "a.txt").write_text("a2\n")
            assert w.drain().touched == {"a.txt"}
        finally:
            w.close()
        # An interpreter whose own symbols lack inotify: the C library is looked up by name.
        real_cdll = ctypes.CDLL
        asked: list[str | None] = []

        def cdll(name: str | None, **kw: object) -> ctypes.CDLL:
            asked.append(name)
            if name is None:
                raise OSError("no symbols of its own")
            return real_cdll(name, use_errno=True)

        monkeypatch.setattr(ctypes, "CDLL", cdll)
        monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
        _watch._lib.cache_clear()
        assert _watch._lib() is not None
        assert asked == [None, "libc.so.6"]
    finally:
        _watch._lib.cache_clear()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "ctypes"])
@pytest.mark.parametrize("err", ["EPERM", "ENOSPC", "EACCES"])
def test_a_watch_the_system_refuses_breaks_the_watch_and_stops_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool, err: str
) -> None:
    """Any error but a directory gone (ENOENT, ENOTDIR) leaves the watch unable to say what
    changed: broken, and no directory after it is watched (each refresh then lists the tree)."""
    import errno

    from nodwyn_retrieval.actors import _watch

    root = tree(tmp_path)
    (root / "sub2").mkdir()
    code = getattr(errno, err)
    w = TreeWatch(root)
    try:
        real_add = w._add

        def add(path: str) -> int | None:
            if path.endswith("sub"):
                _watch.ctypes.set_errno(code)
                return None
            return real_add(path)

        def add_watches(fd: int, root_: str, prefix: str, dirs: list[str], mask: int) -> list[int]:
            out: list[int] = []
            for d in dirs:
                if d == "sub":
                    return [*out, -code]
                wd = real_add(prefix + d if d else root_)
                out.append(-errno.ENOENT if wd is None else wd)
            return out

        if compiled:
            monkeypatch.setattr(_watch, "add_watches", add_watches)
        else:
            monkeypatch.setattr(_watch, "add_watches", None)
            monkeypatch.setattr(w, "_add", add)
        assert w.watch_dirs(["", "sub", "sub2"]) is False
        assert w.broken
        assert sorted(w._dirs) == [""]  # the root only: sub refused, sub2 never tried
        assert w.drain().unknown
    finally:
        w.close()
