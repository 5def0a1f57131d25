"""Reads beneath the root: the edges tests/test_link_swap.py does not reach.

What an attacker who controls the tree tries: a FIFO or a link where a file is expected, a file
where a directory is expected, more directories than the walk keeps open, a closed reader reused,
a read limit met exactly. Each runs with openat2 and with the walk of directory descriptors, on
real files, links and FIFOs.
"""

from __future__ import annotations

import errno
import os
import platform
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.guard import beneath
from nodwyn_retrieval.guard.beneath import Beneath, LinkRefused, OutsideRoot, clean_relative


@pytest.fixture(params=["openat2", "walk"])
def use_openat2(request: pytest.FixtureRequest) -> bool:
    if request.param == "openat2" and not beneath.openat2_available():
        pytest.skip("this kernel (or its seccomp filter) has no openat2")
    return bool(request.param == "openat2")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_bytes(b"inside\n")
    (root / "top.txt").write_bytes(b"top\n")
    (root / "a" / "b" / "empty").write_bytes(b"")
    os.mkfifo(root / "a" / "fifo")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"outside-wombat\n")
    (root / "a" / "out").symlink_to(outside, target_is_directory=True)
    (root / "a" / "secret.txt").symlink_to(outside / "secret.txt")
    return root


def test_a_file_at_the_root_and_a_limit_met_exactly(tree: Path, use_openat2: bool) -> None:
    with Beneath(tree, use_openat2=use_openat2) as b:
        assert b.uses_openat2 is use_openat2
        assert b.read("top.txt", 100) == b"top\n"
        assert b.read("top.txt", 4) == b"top\n"
        assert b.read("top.txt", 1) == b"t"
        assert b.read("top.txt", 0) == b""
        assert b.read("a/b/empty", 10) == b""
        assert b.stat("top.txt").st_size == 4
        assert stat.S_ISDIR(b.stat("a/b").st_mode)


def test_a_read_past_a_mebibyte_is_cut_at_its_limit(tree: Path, use_openat2: bool) -> None:
    # Pieces of 1 MiB at most: a limit of 1 MiB + 1 takes two of them.
    big = bytes(range(256)) * (5 << 12)  # 5 MiB / 4 = 1.25 MiB
    (tree / "big.bin").write_bytes(big)
    with Beneath(tree, use_openat2=use_openat2) as b:
        assert b.read("big.bin", (1 << 20) + 1) == big[: (1 << 20) + 1]
        assert b.read("big.bin", 1 << 30) == big


def test_a_fifo_is_neither_waited_on_nor_read(tree: Path, use_openat2: bool) -> None:
    done: list[BaseException | None] = []

    def attempt() -> None:
        with Beneath(tree, use_openat2=use_openat2) as b:
            try:
                b.read("a/fifo", 10)
            except IsADirectoryError as e:
                done.append(e)
            else:
                done.append(None)
            st = b.stat("a/fifo")  # the status of a FIFO does not open it for reading
            assert stat.S_ISFIFO(st.st_mode)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the thread before failing: open a writer
        fd = os.open(tree / "a" / "fifo", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("reading a FIFO blocked")
    assert len(done) == 1
    assert isinstance(done[0], IsADirectoryError)


def test_a_link_as_the_last_component_is_refused_and_not_read(
    tree: Path, use_openat2: bool
) -> None:
    with Beneath(tree, use_openat2=use_openat2) as b:
        for p in ("a/secret.txt", "a/out/secret.txt", "a/out"):
            with pytest.raises(LinkRefused) as e:
                b.read(p, 100)
            assert e.value.errno in (errno.ELOOP, errno.EXDEV)
        for p in ("a/secret.txt", "a/out/secret.txt"):
            with pytest.raises(LinkRefused):
                b.stat(p)
        # A link to a directory, opened as one: refused (O_DIRECTORY answers before the link
        # check with the walk and with openat2 alike), never followed.
        with pytest.raises((LinkRefused, NotADirectoryError)):
            os.close(b.open_dir("a/out"))


def test_a_file_where_a_directory_is_expected_is_not_taken_for_a_link(
    tree: Path, use_openat2: bool
) -> None:
    with Beneath(tree, use_openat2=use_openat2) as b:
        for p in ("top.txt/x", "a/b/f.txt/x", "a/b/f.txt/x/y"):
            with pytest.raises(NotADirectoryError):
                b.read(p, 10)
        with pytest.raises(FileNotFoundError):
            b.read("a/missing/f.txt", 10)


@pytest.mark.parametrize(
    "path",
    ["", "/", "/etc/passwd", "a/", "a//b", "./a", "a/./b", "..", "a/../top.txt", "a\0b"],
)
def test_what_is_not_a_clean_relative_path_is_refused_before_any_call(
    tree: Path, path: str
) -> None:
    assert clean_relative(path) is False
    for use in (True, False):
        if use and not beneath.openat2_available():
            continue
        with Beneath(tree, use_openat2=use) as b, pytest.raises(OutsideRoot):
            b.read(path, 10)


def test_clean_relative_paths() -> None:
    for p in ("a", "a/b", "a/b/c.txt", ".env", "..a", "a..", "a/.b"):
        assert clean_relative(p) is True, p


def test_the_root_directory_and_a_subdirectory_are_opened_as_directories(
    tree: Path, use_openat2: bool
) -> None:
    with Beneath(tree, use_openat2=use_openat2) as b:
        for p, names in (("", {"a", "top.txt"}), ("a/b", {"f.txt", "empty"})):
            fd = b.open_dir(p)
            try:
                assert stat.S_ISDIR(os.fstat(fd).st_mode)
                assert set(os.listdir(fd)) == names
            finally:
                os.close(fd)
        with pytest.raises(NotADirectoryError):
            os.close(b.open_dir("top.txt"))


def test_a_closed_reader_refuses_every_use_and_closes_its_descriptors(tree: Path) -> None:
    before = _fds()
    b = Beneath(tree, use_openat2=False)
    assert b.read("a/b/f.txt", 10) == b"inside\n"  # holds a/ and a/b/
    assert _fds() == before + 3
    b.close()
    assert _fds() == before
    b.close()  # idempotent
    for use in (lambda: b.read("top.txt", 1), lambda: b.open_dir(""), lambda: b.stat("top.txt")):
        with pytest.raises(ValueError, match="closed"):
            use()
    assert _fds() == before


def test_close_during_an_open_waits_for_it_and_leaks_nothing(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _fds()
    b = Beneath(tree, use_openat2=False)
    entered, release = threading.Event(), threading.Event()
    real_open = os.open
    got: list[bytes] = []

    def slow_open(name: str, flags: int, *args: Any, **kw: Any) -> int:
        if name == "f.txt":
            entered.set()
            release.wait(10)
        return real_open(name, flags, *args, **kw)

    def reader() -> None:
        got.append(b.read("a/b/f.txt", 10))

    monkeypatch.setattr(os, "open", slow_open)
    t = threading.Thread(target=reader)
    t.start()
    try:
        assert entered.wait(10)
        b.close()  # an open is under way: its descriptors are closed when it is done
        assert _fds() > before
    finally:
        release.set()
        t.join(10)
    monkeypatch.undo()
    assert got == [b"inside\n"]
    assert _fds() == before
    with pytest.raises(ValueError, match="closed"):
        b.read("top.txt", 1)


def test_more_directories_than_the_walk_keeps_open_are_all_read_and_closed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    n = beneath.DIR_CACHE + 40
    for i in range(n):
        d = root / f"d{i:04d}"
        d.mkdir(parents=True)
        (d / "f").write_bytes(str(i).encode())
    before = _fds()
    with Beneath(root, use_openat2=False) as b:
        for i in range(n):
            assert b.read(f"d{i:04d}/f", 10) == str(i).encode()
        # The walk keeps DIR_CACHE directories open and opens and closes its own past that.
        assert _fds() == before + 1 + beneath.DIR_CACHE
        for i in range(n):  # a second pass: cached or not, the same answers
            assert b.read(f"d{i:04d}/f", 10) == str(i).encode()
        assert _fds() == before + 1 + beneath.DIR_CACHE
    assert _fds() == before


def test_the_walk_keeps_one_descriptor_per_directory_under_threads(tree: Path) -> None:
    before = _fds()
    with Beneath(tree, use_openat2=False) as b:
        errors: list[BaseException] = []

        def many() -> None:
            try:
                for _ in range(50):
                    assert b.read("a/b/f.txt", 10) == b"inside\n"
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=many) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        assert _fds() == before + 3  # the root, a/ and a/b/: each once
    assert _fds() == before


def test_openat2_is_probed_once_and_its_refusals_mean_the_walk(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def refused(dirfd: int, path: str, flags: int) -> int:
        calls.append(path)
        raise OSError(errno.E2BIG, os.strerror(errno.E2BIG), path)

    monkeypatch.setattr(beneath, "_openat2", refused)
    monkeypatch.setattr(beneath, "_state", {})
    assert not beneath.openat2_available()
    assert not beneath.openat2_available()
    assert calls == ["."]
    with Beneath(tree) as b:
        assert not b.uses_openat2
        assert "walk" in repr(b)
        assert b.read("a/b/f.txt", 10) == b"inside\n"

    # Any other error of the probe (the kernel has openat2 but refused this open) is openat2.
    def other(dirfd: int, path: str, flags: int) -> int:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(beneath, "_openat2", other)
    monkeypatch.setattr(beneath, "_state", {})
    assert beneath.openat2_available()


def test_openat2_on_a_machine_it_is_not_known_on_is_enosys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "pdp11")
    with pytest.raises(OSError) as e:
        beneath._openat2(-1, ".", os.O_RDONLY)
    assert e.value.errno == errno.ENOSYS
    monkeypatch.setattr(beneath, "_state", {})
    assert not beneath.openat2_available()


@pytest.mark.skipif(not beneath.openat2_available(), reason="no openat2 here")
def test_openat2_reports_the_kernels_error(tree: Path) -> None:
    root_fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = beneath._openat2(root_fd, "top.txt", os.O_RDONLY)
        assert fd >= 0
        assert os.read(fd, 10) == b"top\n"
        os.close(fd)
        with pytest.raises(FileNotFoundError):
            beneath._openat2(root_fd, "missing", os.O_RDONLY)
        with pytest.raises(OSError) as e:
            beneath._openat2(root_fd, "a/secret.txt", os.O_RDONLY)
        assert e.value.errno == errno.ELOOP
        with pytest.raises(OSError) as e:
            beneath._openat2(root_fd, "../root/top.txt", os.O_RDONLY)
        assert e.value.errno == errno.EXDEV
    finally:
        os.close(root_fd)


def test_a_swap_of_a_directory_for_a_link_is_refused_from_then_on(tree: Path) -> None:
    # The walk, then openat2: a reader made after the swap never follows the new link.
    os.rename(tree / "a" / "b", tree / "a" / "b.orig")
    os.symlink(tree.parent / "outside", tree / "a" / "b", target_is_directory=True)
    (tree.parent / "outside" / "f.txt").write_bytes(b"outside-wombat\n")
    time.sleep(0)
    for use in (False, True):
        if use and not beneath.openat2_available():
            continue
        with Beneath(tree, use_openat2=use) as b, pytest.raises(LinkRefused):
            b.read("a/b/f.txt", 100)


def _kernel_openat2_works() -> bool:
    """openat2 called here directly, without the module: does this kernel let this process?"""
    import ctypes

    number = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
    if number is None:
        return False

    class How(ctypes.Structure):
        _fields_ = [
            ("flags", ctypes.c_uint64),
            ("mode", ctypes.c_uint64),
            ("resolve", ctypes.c_uint64),
        ]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    how = How(os.O_PATH, 0, 0x08)
    fd = libc.syscall(ctypes.c_long(number), ctypes.c_int(-100), ctypes.c_char_p(b"."),
                      ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))  # fmt: skip
    if fd < 0:
        return False
    os.close(fd)
    return True


def test_where_the_kernel_has_openat2_the_reads_use_it(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's answer is the kernel's, and it is kept: a kernel with openat2 is not read
    through the slower walk for want of a probe that says so."""
    works = _kernel_openat2_works()
    monkeypatch.setattr(beneath, "_state", {})
    assert beneath.openat2_available() is works
    assert beneath.openat2_available() is works  # the kept answer, a bool too
    with Beneath(tree) as b:
        assert b.uses_openat2 is works
        assert b.read("a/b/f.txt", 10) == b"inside\n"
