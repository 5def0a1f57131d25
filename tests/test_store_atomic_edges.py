"""store.atomic at its edges: each failure named by its reason and its place, the old file kept
whole, and an fsync only when asked (ADR 0050 §4)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.store.atomic import TEMP_SUFFIX, file_lock, store_error, write_atomic


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (errno.ENOSPC, "no space left on device"),
        (errno.EDQUOT, "disk quota exceeded"),
        (errno.EACCES, "permission denied"),
        (errno.EPERM, "permission denied"),
        (errno.EROFS, "read-only file system"),
        (errno.ENOENT, "a directory on the way is missing"),
        (errno.ENOTDIR, "a path on the way is not a directory"),
        (errno.EISDIR, "it is a directory"),
        (errno.EIO, "input/output error"),
    ],
)
def test_a_known_reason_is_said_in_plain_words(code: int, reason: str) -> None:
    err = store_error("reading", "/x/y", OSError(code, "Whatever The System Says"))
    assert str(err) == f"{reason} reading /x/y"
    assert isinstance(err, StoreError)


def test_an_unknown_reason_is_the_systems_own_words_in_lower_case() -> None:
    assert str(store_error("removing", "/p", OSError(errno.EBUSY, "Device Busy"))) == (
        "device busy removing /p"
    )
    assert str(store_error("writing", "/p", OSError("Odd Thing"))) == "odd thing writing /p"
    assert str(store_error("writing", "/p", OSError())) == "oserror writing /p"
    assert str(store_error("writing", "/p", PermissionError())) == "permissionerror writing /p"


def test_sync_is_an_fsync_of_the_new_bytes_and_no_sync_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    write_atomic(tmp_path / "a", b"one", sync=False)
    assert synced == []
    write_atomic(tmp_path / "a", b"two")
    assert len(synced) == 1
    assert (tmp_path / "a").read_bytes() == b"two"


def test_a_write_of_nothing_replaces_the_file_with_an_empty_one(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomic(target, b"old")
    write_atomic(target, b"")
    assert target.read_bytes() == b""
    assert os.listdir(tmp_path) == ["f"]


def test_a_mode_of_an_existing_file_is_kept_even_when_private_or_open(tmp_path: Path) -> None:
    for mode in (0o600, 0o640, 0o666, 0o400):
        target = tmp_path / f"m{mode:o}"
        target.write_bytes(b"old")
        target.chmod(mode)
        write_atomic(target, b"new")
        assert stat.S_IMODE(target.stat().st_mode) == mode
        assert target.read_bytes() == b"new"


def test_a_temporary_file_that_cannot_be_made_is_a_store_error_and_the_old_file_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f"
    write_atomic(target, b"old")

    def full(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(StoreError, match=rf"^no space left on device writing {target}$"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"


def test_a_failed_write_leaves_no_temporary_file_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f"

    def refuse(path: object, mode: int) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    write_atomic(target, b"old")
    monkeypatch.setattr(os, "chmod", refuse)
    with pytest.raises(StoreError, match=rf"^read-only file system writing {target}$"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(TEMP_SUFFIX)]


def test_a_lock_whose_parent_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(StoreError, match=rf"^.* locking {tmp_path / 'f' / 'x.lock'}$"):
        file_lock(tmp_path / "f" / "x.lock")


def test_a_lock_times_out_after_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with file_lock(path):
        lock = file_lock(path, timeout=0.2)
        assert lock.timeout == 0.2
        with pytest.raises(TimeoutError):
            lock.acquire()
    assert file_lock(path).timeout == 30
    assert path.exists()  # never removed


def test_a_lock_makes_every_missing_directory_on_its_way(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "x.lock"
    with file_lock(path):
        assert path.exists()
    with file_lock(path):  # its directories there now
        pass
