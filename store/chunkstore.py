"""The content-addressed chunk store: one file's chunks and words, stored once per content.

§4: "A file's chunks and words are stored once, under the SHA-256 of its redacted text and the
version of the chunker and tokenizer, so every worktree, branch and session of the project with
that file shares them." A key is ``<sha256 hex>-<ANALYZE_VERSION>``: a new chunker or word splitter
never reads a record an older one wrote, it simply finds nothing under its own key.

Layout: ``<directory>/<key[:2]>/<key>.ck``, each file framed by :mod:`store.codec` with the magic
``b"NRCK"`` and holding ``{"key": <key>, "record": FileRecord.to_obj(), "widths": <6 bytes>}``.
The key inside the file catches a record renamed or copied under another key. Version 2 stores
each of the record's six arrays (``starts``, ``ends``, ``offsets``, ``word``, ``body``,
``first``) in the fewest bytes a value that hold its largest (1, 2 or 4: ``widths``, in that
order; without it every array is 4 bytes a value): on Python sources the records shrink by a
sixth, compressed, at no cost in time. Version 1 records (4 bytes a value always) are rebuilt.

No lock is needed: two processes that write one key write the same bytes, and each write is atomic.
A record that does not decode is deleted and reported missing, so the caller analyzes the file
again and puts it back (§4: everything here is derived; a file that fails to parse is rebuilt).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from nodwyn_retrieval.errors import BadInput, FormatError
from nodwyn_retrieval.retrieval.analyze import ANALYZE_VERSION, FileRecord
from nodwyn_retrieval.store.atomic import TEMP_SUFFIX, store_error, write_atomic
from nodwyn_retrieval.store.codec import decode, encode

__all__ = ["MAGIC", "SUFFIX", "VERSION", "ChunkStore", "ChunkStoreStats", "read_record"]

MAGIC = b"NRCK"
VERSION = 2  # 2: arrays in 1, 2 or 4 bytes a value ("widths")
SUFFIX = ".ck"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_KEY = re.compile(r"[0-9a-f]{64}-[0-9]{1,9}")


@dataclass(slots=True)
class ChunkStoreStats:
    """What one :class:`ChunkStore` instance did, for status lines and tests."""

    hits: int = 0
    """Records found and decoded."""
    misses: int = 0
    """Keys with no record."""
    rebuilt: int = 0
    """Records that were corrupt, truncated, foreign or of another version: deleted, reported
    missing, so that the caller rebuilds them."""
    written: int = 0
    """Records put."""
    bytes_written: int = 0
    """Their bytes, framed and compressed."""


class ChunkStore:
    """Content-addressed :class:`FileRecord` files under one directory (§4)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.stats = ChunkStoreStats()

    def __repr__(self) -> str:
        return f"ChunkStore({str(self.directory)!r}, {self.stats})"

    @staticmethod
    def key(sha256_hex: str) -> str:
        """The store key of a redacted text whose SHA-256 is ``sha256_hex`` (64 lowercase hex)."""
        if not _SHA256.fullmatch(sha256_hex):
            raise BadInput(f"a content hash is 64 lowercase hex digits, got {sha256_hex!r}")
        return f"{sha256_hex}-{ANALYZE_VERSION}"

    def path(self, key: str) -> Path:
        """Where the record of ``key`` lives; a key this store would not make is refused."""
        if not _KEY.fullmatch(key):
            raise BadInput(f"{key!r} is not a chunk store key")
        return self.directory / key[:2] / f"{key}{SUFFIX}"

    def get(self, key: str) -> FileRecord | None:
        """The record stored under ``key``, or None when there is none.

        A record that fails to decode or validate is deleted, counted in ``stats.rebuilt`` and
        reported as None: the caller analyzes the file again. An unreadable directory (a
        permission) is a :class:`errors.StoreError`, since rebuilding would not help.
        """
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except IsADirectoryError:
            data = b""  # something else sits where a record should: rebuilt like a corrupt one
        except OSError as exc:
            raise store_error("reading", path, exc) from exc
        try:
            record = read_record(data, key)
        except FormatError:
            self.stats.rebuilt += 1
            self._discard(path)
            return None
        self.stats.hits += 1
        return record

    def put(self, key: str, record: FileRecord) -> int:
        """Store ``record`` under ``key``, compressed and atomically; the bytes written.

        Not fsync'ed: a record cut short by a power failure fails to decode and is rebuilt, which
        costs one file's analysis; an fsync per file would cost every build far more.
        """
        path = self.path(key)
        # zlib level 1: on Python sources a record shrinks to 0.22 of the text instead of 0.19 at
        # level 6, for a third of the compression time, which a first build pays for every file.
        rec, widths = _narrow(record.to_obj())
        obj = {"key": key, "record": rec, "widths": widths}
        data = encode(MAGIC, VERSION, obj, compress=True, level=1)
        write_atomic(path, data, sync=False)
        self.stats.written += 1
        self.stats.bytes_written += len(data)
        return len(data)

    def touch(self, key: str) -> None:
        """Mark ``key`` as in use now, so a collection of old records spares it (amendment
        2026-10-16: "a refresh that reuses a stored chunk touches it"). A missing record is left
        missing: the caller finds that with :meth:`get`."""
        path = self.path(key)
        try:
            os.utime(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise store_error("touching", path, exc) from exc

    def exists(self, key: str) -> bool:
        """Whether a record file for ``key`` is present (not whether it decodes)."""
        return self.path(key).is_file()

    def remove(self, key: str) -> None:
        """Delete the record of ``key``; a missing one is no error."""
        path = self.path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise store_error("removing", path, exc) from exc

    def iter_entries(self) -> Iterator[tuple[str, float, int]]:
        """Every stored record as ``(key, mtime, size)``, mtime in seconds since the epoch.

        For the collection (§4: "stored files no manifest names for seven days are removed").
        Files that are not records (temporary files, strays) are not listed. A directory that
        vanishes meanwhile (another process's collection) is skipped.
        """
        for bucket in _scan(self.directory):
            if len(bucket.name) != 2 or not bucket.is_dir(follow_symlinks=False):
                continue
            for entry in _scan(Path(bucket.path)):
                name = entry.name
                if not name.endswith(SUFFIX):
                    continue
                key = name[: -len(SUFFIX)]
                if not _KEY.fullmatch(key) or key[:2] != bucket.name:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield key, st.st_mtime, st.st_size

    def remove_stale_temp(self, older_than: float = 3600.0) -> int:
        """Delete temporary files a killed writer left behind, older than ``older_than`` seconds;
        how many. A younger one may be a write in progress in another process."""
        cutoff = time.time() - older_than
        removed = 0
        for bucket in _scan(self.directory):
            if not bucket.is_dir(follow_symlinks=False):
                continue
            for entry in _scan(Path(bucket.path)):
                if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
        return removed

    @staticmethod
    def _discard(path: Path) -> None:
        with contextlib.suppress(OSError):  # a record left behind is found corrupt again
            path.unlink()


def _scan(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise store_error("listing", directory, exc) from exc


def read_record(data: bytes, key: str | None = None) -> FileRecord:
    """The record a chunk file's bytes hold, checked whole (and stored as ``key`` when given);
    :class:`errors.FormatError` on anything off."""
    obj = decode(MAGIC, VERSION, data)
    if not isinstance(obj, dict) or set(obj) - {"widths"} != {"key", "record"}:
        raise FormatError("a chunk record is a map of key, record and widths: rebuild")
    if key is not None and obj["key"] != key:
        raise FormatError(f"a chunk record of {obj['key']!r} stored as {key!r}: rebuild")
    return FileRecord.from_obj(_widen(obj["record"], obj.get("widths")))


_ARRAYS = ("starts", "ends", "offsets", "word", "body", "first")
_DTYPES: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}


def _narrow(rec: dict[str, object]) -> tuple[dict[str, object], bytes]:
    """The record's arrays (little-endian uint32 bytes) each in the fewest bytes a value."""
    widths = bytearray()
    for name in _ARRAYS:
        raw = rec[name]
        assert isinstance(raw, bytes)  # noqa: S101 - FileRecord.to_obj's own output
        a = np.frombuffer(raw, dtype="<u4")
        top = int(a.max()) if a.size else 0
        width = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4
        widths.append(width)
        if width != 4:
            rec[name] = a.astype(_DTYPES[width]).tobytes()
    return rec, bytes(widths)


def _widen(rec: object, widths: object) -> object:
    """The record's arrays back as 4 bytes a value; FormatError for widths that are off."""
    if widths is None:
        return rec
    if not isinstance(widths, bytes) or len(widths) != len(_ARRAYS):
        raise FormatError("a chunk record's widths are 6 bytes: rebuild")
    if not isinstance(rec, dict):
        return rec  # FileRecord.from_obj says what is wrong
    out = dict(rec)
    for name, width in zip(_ARRAYS, widths, strict=True):
        if width not in _DTYPES:
            raise FormatError(f"a chunk record's {name} is {width} bytes a value: rebuild")
        raw = out.get(name)
        if width == 4 or not isinstance(raw, bytes):
            continue
        if len(raw) % width:
            raise FormatError(f"a chunk record's {name} is not whole: rebuild")
        out[name] = np.frombuffer(raw, dtype=_DTYPES[width]).astype("<u4").tobytes()
    return out
