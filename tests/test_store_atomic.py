"""store.atomic: a write is whole or absent, and a failure says where and why (ADR 0050 §4)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import filelock
import pytest
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.store.atomic import file_lock, write_atomic


def test_an_atomic_write_creates_parents_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.bin"
    write_atomic(target, b"one")
    write_atomic(target, b"two", sync=False)
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["file.bin"]


def test_a_new_file_is_private_and_an_existing_files_mode_is_kept(tmp_path: Path) -> None:
    new = tmp_path / "new"
    write_atomic(new, b"x")
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    kept = tmp_path / "kept.toml"
    kept.write_bytes(b"old")
    kept.chmod(0o644)
    write_atomic(kept, b"new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644


def test_a_full_disk_during_the_write_keeps_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.bin"
    write_atomic(target, b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreError, match=rf"^no space left on device writing {target}$"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.bin"]


def test_a_failed_rename_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.bin"

    def refuse(src: object, dst: object) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(StoreError, match=rf"^permission denied writing {target}$") as info:
        write_atomic(target, b"new")
    assert isinstance(info.value, OSError)
    assert os.listdir(tmp_path) == []


def test_an_unlisted_os_error_is_named_by_its_own_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def odd(src: object, dst: object) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(os, "replace", odd)
    with pytest.raises(StoreError, match=r"^device or resource busy writing .*file$"):
        write_atomic(tmp_path / "file", b"x")


def test_a_parent_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(StoreError, match=r"writing .*f/x$"):
        write_atomic(tmp_path / "f" / "x", b"x")


def test_a_file_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "x.lock"
    first = file_lock(path)
    second = file_lock(path, timeout=0.05)
    with first, pytest.raises(filelock.Timeout):
        second.acquire()
    with second:
        assert second.is_locked


def test_a_write_in_pieces_is_their_join_and_is_as_atomic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.bin"
    write_atomic(target, [b"head", b"", b"x" * 100_000, b"tail"])
    assert target.read_bytes() == b"head" + b"x" * 100_000 + b"tail"

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreError, match=rf"^no space left on device writing {target}$"):
        write_atomic(target, [b"new", b"er"])
    assert target.read_bytes() == b"head" + b"x" * 100_000 + b"tail"
    assert os.listdir(tmp_path) == ["file.bin"]


def test_a_bytearray_or_a_memoryview_is_written_whole_as_bytes_is(tmp_path: Path) -> None:
    target = tmp_path / "file.bin"
    write_atomic(target, bytearray(b"array"))
    assert target.read_bytes() == b"array"
    write_atomic(target, memoryview(b"view of bytes")[8:])
    assert target.read_bytes() == b"bytes"
    assert os.listdir(tmp_path) == ["file.bin"]
