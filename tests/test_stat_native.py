"""The refresher's stat and watch, compiled (actors/_stat_native.c) and in Python: the same answers.

A real git tree with links, a FIFO, a directory, files that vanish, non-UTF-8 names and names that
cannot be paths; the refresher's plans made with each path, before and after the tree changes
between two calls; and the watch's descriptors and events with each.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.actors import _stat, refresher
from nodwyn_retrieval.actors import _watch as watch_mod
from nodwyn_retrieval.actors._watch import TreeWatch
from nodwyn_retrieval.actors.refresher import Plan, RefresherActor
from nodwyn_retrieval.guard.guard import default_guard
from nodwyn_retrieval.store.manifest import Entry, Manifest

from tests.support import make_repo

native = pytest.importorskip("nodwyn_retrieval.actors._stat_native")

FILES: dict[str, str | bytes] = {
    "a.py": "def alpha():\n    return 1\n",
    "pkg/b.py": "def beta():\n    return 2\n",
    "pkg/deep/c.md": "# Gamma\n",
    "pkg/deep/d.txt": "delta\n",
    "gone.py": "GONE = 1\n",
    "later.py": "LATER = 1\n",
}


def _tree(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository with every kind of name the refresher may be given, and the names."""
    root = make_repo(tmp_path / "repo", FILES)
    (root / "link.py").symlink_to(root / "a.py")  # a link to a file
    (root / "dangling.py").symlink_to(root / "nowhere.py")
    (root / "pkglink").symlink_to(root / "pkg")  # a link to a directory
    os.mkfifo(root / "fifo.py")
    raw = os.fsencode(root) + b"/caf\xe9.py"  # a name that is not UTF-8
    with open(raw, "wb") as f:
        f.write(b"CAFE = 1\n")
    (root / "gone.py").unlink()  # listed, then vanished
    names = [
        *FILES,
        "link.py",
        "dangling.py",
        "pkglink",
        "pkglink/b.py",  # a file through a linked directory: lstat follows the parent
        "fifo.py",
        "pkg",
        "pkg/deep",
        os.fsdecode(b"caf\xe9.py"),
        "no/such/file.py",
        "a.py/under-a-file",  # ENOTDIR
        "nul\0name.py",  # not a path
        "lone\ud800surrogate.py",  # cannot be encoded
        "",
        "/etc/hostname",  # absolute: beneath the root by its whole path, as os.lstat has it
        "pkg/../a.py",
        "x" * 5000,  # too long a name
    ]
    return root, names


def test_native_and_python_stats_agree_on_every_kind_of_name(tmp_path: Path) -> None:
    root, names = _tree(tmp_path)
    base = str(root) + os.sep
    got = native.lstat_all(base, names)
    want = _stat.lstat_all_python(base, names)
    assert got == want
    by = dict(zip(names, got, strict=True))
    st = os.lstat(root / "a.py")
    assert by["a.py"] == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert by["pkglink/b.py"] == by["pkg/b.py"] is not None
    assert by[os.fsdecode(b"caf\xe9.py")] is not None
    for refused in ("link.py", "dangling.py", "pkglink", "fifo.py", "pkg", "gone.py", ""):
        assert by[refused] is None, refused
    for bad in ("nul\0name.py", "lone\ud800surrogate.py", "x" * 5000, "no/such/file.py"):
        assert by[bad] is None
    assert by["pkg/../a.py"] == by["a.py"]
    # Without the trailing separator the root's name runs on into each path, in both.
    assert native.lstat_all(str(root), ["/a.py"]) == _stat.lstat_all_python(str(root), ["/a.py"])
    assert native.lstat_all(str(root), ["a.py"]) == [None]
    assert native.lstat_all(base, []) == []


def test_a_root_that_is_not_a_directory_or_not_a_path_gives_none_for_all(tmp_path: Path) -> None:
    root, _ = _tree(tmp_path)
    for base in (str(root / "a.py") + os.sep, str(tmp_path / "none") + os.sep, "bad\0/", "\ud800/"):
        assert native.lstat_all(base, ["a.py", "x"]) == [None, None]
        assert _stat.lstat_all_python(base, ["a.py", "x"]) == [None, None]
    # A link to the root is followed, as by a path (only the last component is not).
    (tmp_path / "rootlink").symlink_to(root)
    via = native.lstat_all(str(tmp_path / "rootlink") + os.sep, ["a.py"])
    assert via == native.lstat_all(str(root) + os.sep, ["a.py"]) != [None]


def test_a_path_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="a path is a str"):
        native.lstat_all(str(tmp_path) + os.sep, ["a.py", b"b.py"])
    with pytest.raises(TypeError):
        native.lstat_all(str(tmp_path) + os.sep, 3)


def test_a_time_past_64_bits_of_nanoseconds_is_exact(tmp_path: Path) -> None:
    f = tmp_path / "far.txt"
    f.write_text("x")
    for seconds in (0, -1, 2**33, 9_100_000_000, -9_100_000_000):
        try:
            os.utime(f, ns=(seconds * 10**9 + 7, seconds * 10**9 + 7))
        except (OSError, OverflowError):
            continue  # a time this file system cannot hold
        got = native.lstat_all(str(tmp_path) + os.sep, ["far.txt"])
        assert got == _stat.lstat_all_python(str(tmp_path) + os.sep, ["far.txt"])
        assert got[0] is not None
        assert got[0][1] == os.lstat(f).st_mtime_ns


def _plan(root: Path, manifest: Manifest | None, stat_with: object) -> Plan:
    """A new session's plan of the tree against manifest, stat-ed by stat_with."""
    r = RefresherActor(root, root.parent / "m.manifest", None, default_guard(root), watch=False)  # type: ignore[arg-type]
    if manifest is not None:
        r.manifest = manifest
        r._disk_sig = r._stat_sig()
    saved = refresher.lstat_all
    refresher.lstat_all = stat_with  # type: ignore[assignment]
    try:
        return r._plan(None, False, time.monotonic() + 60)
    finally:
        refresher.lstat_all = saved


def _summary(plan: Plan) -> tuple[object, ...]:
    return (
        [(s.path, s.size, s.mtime_ns, s.inode) for s in plan.to_read],
        sorted(plan.drop),
        plan.skipped,
        plan.over,
        plan.not_seen,
    )


def test_plans_are_the_same_with_each_path_before_and_after_changes(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    raw = os.fsencode(root) + b"/caf\xe9.py"
    with open(raw, "wb") as f:
        f.write(b"CAFE = 1\n")
    first = _plan(root, None, native.lstat_all)
    assert _summary(first) == _summary(_plan(root, None, _stat.lstat_all_python))
    assert {s.path for s in first.to_read} == set(FILES)  # the non-UTF-8 name is left out
    entries = {s.path: Entry(s.size, s.mtime_ns, s.inode, "0" * 64 + "-1") for s in first.to_read}
    manifest = Manifest(str(root), 1, entries)
    unchanged = _plan(root, manifest, native.lstat_all)
    assert _summary(unchanged) == _summary(_plan(root, manifest, _stat.lstat_all_python))
    assert unchanged.to_read == []
    assert unchanged.drop == {}
    # Between the two calls: an edit, a rename-save keeping size and time, a new file, a deleted
    # one, a link planted where a file was, and a FIFO in another's place.
    (root / "a.py").write_text("def alpha():\n    return 11\n")
    b = root / "pkg/b.py"
    st = b.stat()
    tmp = root / "pkg/b.py.tmp"
    tmp.write_text("def betA():\n    return 2\n")
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    tmp.replace(b)
    (root / "new.py").write_text("NEW = 1\n")
    subprocess.run(["git", "add", "new.py"], cwd=root, check=True)
    (root / "gone.py").unlink()
    (root / "later.py").unlink()
    (root / "later.py").symlink_to(root / "a.py")
    (root / "pkg/deep/d.txt").unlink()
    os.mkfifo(root / "pkg/deep/d.txt")
    after = _plan(root, manifest, native.lstat_all)
    assert _summary(after) == _summary(_plan(root, manifest, _stat.lstat_all_python))
    assert [s.path for s in after.to_read] == ["a.py", "new.py", "pkg/b.py"]
    assert sorted(after.drop) == ["gone.py", "later.py", "pkg/deep/d.txt"]


@pytest.mark.skipif(not watch_mod.available(), reason="no inotify on this system")
def test_the_watch_is_the_same_with_each_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    (root / "dirlink").symlink_to(root / "pkg")
    dirs = ["", "pkg", "pkg/deep", "gone", "a.py", "dirlink", "pkg", os.fsdecode(b"caf\xe9")]
    os.mkdir(os.fsencode(root) + b"/caf\xe9")
    seen = []
    for add in (native.add_watches, None):
        monkeypatch.setattr(watch_mod, "add_watches", add)
        w = TreeWatch(root)
        try:
            assert w.watch_dirs(dirs)
            assert w.watch_dirs(["pkg"])  # watched already: nothing to add
            (root / "pkg/deep/c.md").write_text("# changed\n")
            (root / f"{'pkg'}/new.txt").write_text("new\n")
            ch = w.drain()
            seen.append((dict(w._wd), sorted(w._dirs), ch.unknown, ch.touched, ch.created))
        finally:
            w.close()
        (root / "pkg/new.txt").unlink()
    assert seen[0] == seen[1]
    wds, watched, unknown, touched, created = seen[0]
    assert sorted(wds.values()) == watched
    assert watched == sorted({"", "pkg", "pkg/deep", os.fsdecode(b"caf\xe9")})
    assert not unknown
    assert touched == {"pkg/deep/c.md", "pkg/new.txt"}
    assert created == {"pkg/new.txt"}


@pytest.mark.skipif(not watch_mod.available(), reason="no inotify on this system")
def test_a_watch_that_cannot_be_added_stops_the_batch(tmp_path: Path) -> None:
    # A descriptor that is not inotify's: EBADF/EINVAL for the first directory, none after.
    with open(tmp_path / "plain", "w") as f:
        got = native.add_watches(f.fileno(), str(tmp_path), str(tmp_path) + "/", ["", "x"], 0x2)
    assert len(got) == 1
    assert got[0] < 0
    with pytest.raises(ValueError, match="null"):
        native.add_watches(-1, str(tmp_path), str(tmp_path) + "/", ["a\0b"], 0x2)
    with pytest.raises(TypeError, match="a directory is a str"):
        native.add_watches(-1, str(tmp_path), str(tmp_path) + "/", [b"a"], 0x2)


def test_the_python_path_is_taken_when_asked(tmp_path: Path) -> None:
    code = (
        "from nodwyn_retrieval.actors import _stat, _watch; "
        "print(_stat.NATIVE, _stat.lstat_all is _stat.lstat_all_python, _watch.add_watches)"
    )
    for value, want in (("1", "False True None"), ("0", "True False <built-in")):
        env = {**os.environ, "NODWYN_RETRIEVAL_PURE_PYTHON": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.startswith(want), out.stdout
