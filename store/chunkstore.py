"""The content-addressed chunk store: one file's chunks and words, stored once per content.

§4: "A file's chunks and words are stored once, under the SHA-256 of its redacted text and the
version of the chunker and tokenizer, so every worktree, branch and session of the project with
that file shares them." A key is ``<sha256 hex>-<ANALYZE_VERSION>``: a new chunker or word splitter
never reads a record an older one wrote, it simply finds nothing under its own key.

The records are kept in packs (:mod:`store.packs`): ``<directory>/packs/<name>.ckp``, one
file a batch of new records (a worker's megabyte of text, about a hundred files), written once
by a rename and never changed. Each record in a pack is framed by :mod:`store.codec` with the
magic ``b"NRCK"``, zstd-compressed, and holds ``{"key": <key>, "record": ..., "widths": <6
bytes>}``: the key inside catches an entry that points at another key's record; the record is
``FileRecord.to_obj()``'s map with its words joined by newlines into one string and each chunk's
word ids after its first stored as the difference from the one before; and each of the six
arrays (``starts``, ``ends``, ``offsets``, ``word``, ``body``, ``first``) is stored in the fewest
bytes a value that hold its largest (1, 2 or 4: ``widths``, in that order). Version 4 made the
record so (version 3 was zlib level 1, the words a list and the ids as they are): over big's
records a worker's writes take half the CPU and the records a quarter less room
(docs/store-format.md). Older records are not read: their packs are deleted when listed, and
their files analysed again; version 2's one file a record (``<directory>/<key[:2]>/<key>.ck``)
is not read either, and the collection deletes those files.

No lock is needed: a pack's name is its writer's alone, and two processes that store one key
store the same record twice, which any reader may take (the collection frees the copy). A record
or a pack that does not check is reported missing and its pack deleted, so the callers analyse
their files again and put them back (§4: everything here is derived; a file that fails to parse
is rebuilt).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.errors import BadInput, FormatError
from nodwyn_retrieval.retrieval.analyze import ANALYZE_VERSION, FileRecord
from nodwyn_retrieval.store.atomic import TEMP_SUFFIX, store_error
from nodwyn_retrieval.store.codec import decode, frame
from nodwyn_retrieval.store.packs import (
    MAX_RECORDS,
    PACK_SUFFIX,
    PACKS,
    Pack,
    discard,
    pack_index,
    parse_entries,
    read_entries,
    write_pack,
)

__all__ = [
    "LEGACY_SUFFIX",
    "MAGIC",
    "SUFFIX",
    "VERSION",
    "ChunkStore",
    "ChunkStoreStats",
    "PackInfo",
    "read_pack",
    "read_record",
    "record_bytes",
    "record_payload",
    "records_bytes",
]

MAGIC = b"NRCK"
VERSION = 4  # 4: zstd, the words joined, word ids as differences; 3: records in packs; 2: widths
SUFFIX = PACK_SUFFIX
LEGACY_SUFFIX = ".ck"
"""Version 2's record files, which the collection deletes."""
MAX_PACK_BYTES = 64 << 20  # a batch past this (or past MAX_RECORDS) is written as several packs

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
    """Records that were corrupt, truncated, foreign or of another version, and packs whose
    entries were (one each: which records they held cannot be read): deleted, reported
    missing, so that the callers rebuild them."""
    written: int = 0
    """Records put."""
    bytes_written: int = 0
    """Their bytes, framed and compressed, with their packs' headers."""
    packs_written: int = 0
    """Packs written."""


@dataclass(frozen=True, slots=True)
class PackInfo:
    """One pack as the collection sees it."""

    path: Path
    mtime_ns: int
    size: int
    keys: tuple[str, ...]
    lengths: tuple[int, ...]

    @property
    def mtime(self) -> float:
        return self.mtime_ns / 1e9


def record_bytes(key: str, record: FileRecord) -> bytes:
    """The framed bytes a pack holds for record under key."""
    return records_bytes([(key, record)])[0]


def record_payload(key: str, record: FileRecord) -> dict[str, object]:
    """The msgpack object :func:`record_bytes` frames for record under key (for tests and tools
    that make a record's bytes by hand)."""
    return next(_payloads([(key, record)]))


def records_bytes(items: list[tuple[str, FileRecord]]) -> list[bytes]:
    """The framed bytes of each (key, record), in order: what a pack holds.

    zstd level 3: over big's records a third of zlib level 1's time, and smaller; the arrays'
    narrowing and the words' differences are done over the whole batch at once, since numpy's
    cost a call is most of it for a record of a few hundred pairs."""
    return [
        frame(MAGIC, VERSION, msgpack.packb(payload, use_bin_type=True), compress=True,
              level=_LEVEL, method="zstd")
        for payload in _payloads(items)
    ]  # fmt: skip


class ChunkStore:
    """Content-addressed :class:`FileRecord` records in packs under one directory (§4)."""

    def __init__(self, directory: Path, *, one_look: bool = False) -> None:
        """``one_look``: :meth:`exists` looks at the directory for keys it does not know at most
        once after this object is made (a batch's store: a record another process writes
        meanwhile is then made twice, which is harmless, instead of the packs' directory being
        listed again at each miss while the other workers write theirs)."""
        self.directory = Path(directory)
        self.stats = ChunkStoreStats()
        self._index = pack_index(self.directory)
        self._since = time.monotonic() if one_look else None

    def __repr__(self) -> str:
        return f"ChunkStore({str(self.directory)!r}, {self.stats})"

    @property
    def packs_dir(self) -> Path:
        return self.directory / PACKS

    @staticmethod
    def key(sha256_hex: str) -> str:
        """The store key of a redacted text whose SHA-256 is ``sha256_hex`` (64 lowercase hex)."""
        if not _SHA256.fullmatch(sha256_hex):
            raise BadInput(f"a content hash is 64 lowercase hex digits, got {sha256_hex!r}")
        return f"{sha256_hex}-{ANALYZE_VERSION}"

    @staticmethod
    def _checked(key: str) -> str:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise BadInput(f"{key!r} is not a chunk store key")
        return key

    def _find(self, key: str, looked_since: float | None = None) -> tuple[Pack, int] | None:
        """Where key's record lies; the packs found damaged on the way are counted rebuilt."""
        before = self._index.damaged
        got = self._index.find(key, looked_since=looked_since)
        self.stats.rebuilt += self._index.damaged - before
        return got

    def path(self, key: str) -> Path:
        """The pack that holds the record of ``key``; a key this store would not make is refused,
        and FileNotFoundError raised when no pack holds it."""
        got = self._find(self._checked(key))
        if got is None:
            raise FileNotFoundError(f"no chunk record of {key} in {self.packs_dir}")
        return self.packs_dir / got[0].name

    def get(self, key: str) -> FileRecord | None:
        """The record stored under ``key``, or None when there is none.

        A record that fails its CRC, to decode or to validate is counted in ``stats.rebuilt``,
        its pack deleted and the next copy tried; with none left the answer is None and the
        caller analyses the file again. An unreadable directory (a permission) is a
        :class:`errors.StoreError`, since rebuilding would not help.
        """
        self._checked(key)
        for _ in range(8):  # each turn forgets a pack: gone, damaged, or rewritten meanwhile
            got = self._find(key)
            if got is None:
                break
            pack, i = got
            path = self.packs_dir / pack.name
            try:
                data = _pread(path, pack.offsets[i], pack.lengths[i])
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                self._index.drop(pack.name)
                continue
            except OSError as exc:
                raise store_error("reading", path, exc) from exc
            try:
                if len(data) != pack.lengths[i] or zlib.crc32(data) != pack.crcs[i]:
                    raise FormatError("a chunk record fails its CRC: rebuild")
                record = read_record(data, key)
            except FormatError:
                self.stats.rebuilt += 1
                self._index.drop(pack.name)
                discard(path)
                continue
            self.stats.hits += 1
            return record
        self.stats.misses += 1
        return None

    def put(self, key: str, record: FileRecord) -> int:
        """Store ``record`` under ``key`` (a pack of one); the bytes written."""
        return self.put_many([(key, record)])

    def put_many(self, items: Iterable[tuple[str, FileRecord]]) -> int:
        """Store each (key, record) in one new pack, written atomically; the bytes written.

        A key given twice is stored once. Not fsync'ed: a pack cut short by a power failure
        fails its checks and is rebuilt, which costs its files' analysis; an fsync a batch
        would cost every build more. A write that fails is a :class:`errors.StoreError` and
        stores nothing.
        """
        todo: dict[str, FileRecord] = {}
        for key, record in items:
            if self._checked(key) not in todo:
                todo[key] = record
        pairs = list(todo.items())
        return self.write_raw(list(zip(todo, records_bytes(pairs), strict=True)))

    def write_raw(self, blobs: list[tuple[str, bytes]]) -> int:
        """Write records already framed (``record_bytes``) as new packs; the bytes written."""
        total = 0
        while blobs:
            n, size = 0, 0
            while n < len(blobs) and n < MAX_RECORDS and size < MAX_PACK_BYTES:
                size += len(blobs[n][1])
                n += 1
            part, blobs = blobs[:n], blobs[n:]
            pack, written = write_pack(self.packs_dir, part)
            self._index.add(pack)
            self.stats.written += len(part)
            self.stats.packs_written += 1
            self.stats.bytes_written += written
            total += written
        return total

    def touch(self, key: str) -> None:
        """Mark ``key`` as in use now, so a collection of old records spares it (amendment
        2026-10-16: "a refresh that reuses a stored chunk touches it"): its pack's mtime is
        renewed, which spares every record of the pack. A missing record is left missing: the
        caller finds that with :meth:`get`."""
        for _ in range(8):
            got = self._find(self._checked(key))
            if got is None:
                return
            path = self.packs_dir / got[0].name
            try:
                os.utime(path)
            except FileNotFoundError:
                self._index.drop(got[0].name)
                continue
            except OSError as exc:
                raise store_error("touching", path, exc) from exc
            return

    def exists(self, key: str) -> bool:
        """Whether a pack holds a record of ``key`` (not whether it decodes)."""
        return self._find(self._checked(key), self._since) is not None

    def remove(self, key: str) -> None:
        """Delete the record of ``key``: each pack holding it is written again without it (the
        others' records kept); a missing one is no error."""
        for pack, _ in self._index.locations(self._checked(key)):
            path = self.packs_dir / pack.name
            keep = [k for k in pack.keys if k != key]
            blobs = self.read_raw(path, keep) if keep else []
            if blobs:
                self.write_raw(blobs)
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise store_error("removing", path, exc) from exc
            self._index.drop(pack.name)

    def read_raw(self, path: Path, keys: Iterable[str]) -> list[tuple[str, bytes]]:
        """The framed bytes of keys' records in the pack at path, those that pass their CRC
        (a damaged one is left out: whoever needs it analyses its file again). FormatError
        when the pack itself is damaged; OSError when it cannot be read."""
        entries, _ = read_entries(path)
        want = set(keys)
        with open(path, "rb") as f:
            data = f.read()
        out: list[tuple[str, bytes]] = []
        for key, offset, length, crc in entries:
            if key in want:
                blob = data[offset : offset + length]
                if len(blob) == length and zlib.crc32(blob) == crc:
                    out.append((key, blob))
        return out

    def list_packs(self) -> list[PackInfo]:
        """Every pack there is now, oldest name first, with its mtime, size and records."""
        out: list[PackInfo] = []
        for pack in sorted(self._index.all(), key=lambda p: p.name):
            path = self.packs_dir / pack.name
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise store_error("reading", path, exc) from exc
            out.append(PackInfo(path, st.st_mtime_ns, st.st_size, tuple(pack.keys),
                                tuple(pack.lengths)))  # fmt: skip
        return out

    def forget(self, path: Path) -> None:
        """Drop a pack from this process's lookup (it was removed or renamed)."""
        self._index.drop(path.name)

    def iter_entries(self) -> Iterator[tuple[str, float, int]]:
        """Every stored record as ``(key, mtime, size)``: mtime its pack's, in seconds since
        the epoch, and size the record's bytes in the pack. A key stored in two packs is listed
        twice. Files that are not packs (temporary files, strays) are not listed."""
        for info in self.list_packs():
            for key, length in zip(info.keys, info.lengths, strict=True):
                yield key, info.mtime, length

    def legacy_files(self) -> Iterator[Path]:
        """Version 2's record files (``<key[:2]>/<key>.ck``), which this version never reads."""
        for bucket in _scan(self.directory):
            if len(bucket.name) != 2 or not bucket.is_dir(follow_symlinks=False):
                continue
            for entry in _scan(Path(bucket.path)):
                if entry.name.endswith(LEGACY_SUFFIX) and not entry.name.startswith("."):
                    yield Path(entry.path)

    def remove_stale_temp(self, older_than: float = 3600.0) -> int:
        """Delete temporary files a killed writer left behind, older than ``older_than`` seconds;
        how many. A younger one may be a write in progress in another process."""
        cutoff = time.time() - older_than
        removed = 0
        dirs = [self.packs_dir] + [
            Path(b.path) for b in _scan(self.directory)
            if len(b.name) == 2 and b.is_dir(follow_symlinks=False)
        ]  # fmt: skip
        for directory in dirs:
            for entry in _scan(directory):
                if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
        return removed


def _pread(path: Path, offset: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


def _scan(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise store_error("listing", directory, exc) from exc


def read_pack(data: bytes) -> list[tuple[str, FileRecord]]:
    """Every (key, record) a pack's bytes hold, each checked whole; FormatError on anything off
    (for checks of a store: a reader takes one record at a time)."""
    entries = parse_entries(data, len(data))
    if isinstance(entries, int):  # pragma: no cover - the whole pack is at hand
        raise FormatError("a chunk pack is cut short: rebuild")
    out: list[tuple[str, FileRecord]] = []
    for key, offset, length, crc in entries:
        blob = data[offset : offset + length]
        if zlib.crc32(blob) != crc:
            raise FormatError("a chunk record fails its CRC: rebuild")
        out.append((key, read_record(blob, key)))
    return out


def read_record(data: bytes, key: str | None = None) -> FileRecord:
    """The record a pack's framed bytes hold, checked whole (and stored as ``key`` when given);
    :class:`errors.FormatError` on anything off."""
    obj = decode(MAGIC, VERSION, data)
    if not isinstance(obj, dict) or set(obj) != {"key", "record", "widths"}:
        raise FormatError("a chunk record is a map of key, record and widths: rebuild")
    if key is not None and obj["key"] != key:
        raise FormatError(f"a chunk record of {obj['key']!r} stored as {key!r}: rebuild")
    return FileRecord.from_obj(_decoded(obj["record"], obj["widths"]))


_ARRAYS = ("starts", "ends", "offsets", "word", "body", "first")
_DTYPES: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}
_LEVEL = 3
_U32 = np.dtype("<u4")


def _payloads(items: list[tuple[str, FileRecord]]) -> Iterator[dict[str, object]]:
    """Each record's payload: ``{"key", "record", "widths"}``, the record's map as
    ``FileRecord.to_obj`` gives it but its words joined by newlines (a list when a word would
    not come back from the join), each chunk's word ids after its first as the difference from
    the one before (ascending, so small), and each array in the fewest bytes a value (1, 2 or
    4) that hold its largest value in this record."""
    if not items:
        return
    records = [record for _, record in items]
    n = len(records)
    n_chunks = np.fromiter((len(r.starts) for r in records), dtype=np.int64, count=n)
    n_pairs = np.fromiter((len(r.word) for r in records), dtype=np.int64, count=n)
    cols = {name: np.concatenate([getattr(r, name) for r in records]).astype(_U32)
            for name in _ARRAYS}  # fmt: skip
    cols["word"] = _differences(cols["word"], records, n_chunks, n_pairs)
    ends = {"starts": np.cumsum(n_chunks), "offsets": np.cumsum(n_chunks + 1),
            "word": np.cumsum(n_pairs)}  # fmt: skip
    ends["ends"], ends["body"], ends["first"] = ends["starts"], ends["word"], ends["word"]
    cut: dict[str, tuple[list[int], dict[int, bytes], list[int]]] = {}
    for name in _ARRAYS:
        col, end = cols[name], ends[name]
        top = _tops(col, end)
        widths = np.where(top < 1 << 8, 1, np.where(top < 1 << 16, 2, 4))
        # One narrowed copy of the whole batch a width in use; each record takes its slice.
        # (A set, not np.unique: its first call imports numpy.ma, 10 to 25 ms in a worker.)
        by_width = {w: col.astype(_DTYPES[w]).tobytes() for w in set(widths.tolist())}
        cut[name] = (widths.tolist(), by_width, end.tolist())
    for i, (key, record) in enumerate(items):
        rec: dict[str, object] = {"vocab": _joined(record.vocab)}
        widths_i = bytearray()
        for name in _ARRAYS:
            widths_l, by_width, end_l = cut[name]
            w = widths_l[i]
            lo = end_l[i - 1] if i else 0
            rec[name] = by_width[w][lo * w : end_l[i] * w]
            widths_i.append(w)
        yield {"key": key, "record": rec, "widths": bytes(widths_i)}


def _tops(col: npt.NDArray[np.uint32], end: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each record's largest value of a batch's column (0 for a record with none)."""
    start = np.concatenate(([0], end[:-1]))
    top = np.zeros(len(end), dtype=np.int64)
    some = end > start
    if bool(some.any()):
        top[some] = np.maximum.reduceat(col, start[some])
    return top


def _differences(
    word: npt.NDArray[np.uint32],
    records: list[FileRecord],
    n_chunks: npt.NDArray[np.int64],
    n_pairs: npt.NDArray[np.int64],
) -> npt.NDArray[np.uint32]:
    """A batch's word ids, each chunk's first as it is and the others as the difference from
    the one before, modulo 2**32: :func:`_sums` gives back any record's ids exactly, and a
    record's ascending ids come out small. Where a record's chunks begin is taken from its own
    offsets, and only where they fall among its own pairs."""
    out = word.copy()
    out[1:] -= word[:-1]
    base = np.cumsum(n_pairs) - n_pairs
    begins = np.concatenate([r.offsets[:-1] for r in records]).astype(np.int64)
    inside = begins < np.repeat(n_pairs, n_chunks)
    begins = (begins + np.repeat(base, n_chunks))[inside]
    out[begins] = word[begins]
    return out


def _sums(diff: npt.NDArray[np.uint32], offsets: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """A record's word ids from :func:`_differences`' form; offsets that do not run from 0 to
    the pairs without going back leave them as they are, for ``FileRecord.from_obj`` to refuse
    the record."""
    n = len(diff)
    if not len(offsets) or int(offsets[0]) != 0 or int(offsets[-1]) != n:
        return diff
    wide: npt.NDArray[np.int64] = offsets.astype(np.int64)
    sizes = wide[1:] - wide[:-1]
    if not n or int(sizes.min()) < 0:
        return diff
    total = np.cumsum(diff, dtype=np.uint32)
    begins = offsets[:-1].astype(np.int64)
    before = np.zeros(len(begins), dtype=np.uint32)
    later = begins > 0
    before[later] = total[begins[later] - 1]
    out: npt.NDArray[np.uint32] = total - np.repeat(before, sizes)
    return out


def _joined(vocab: tuple[str, ...]) -> str | list[str]:
    """The words joined by newlines, which no word holds: ``str.split`` gives them back. The
    list itself where it would not: a newline in a word, or one word that is empty (it would
    read back as no word)."""
    if not vocab:
        return ""
    text = "\n".join(vocab)
    if text and text.count("\n") == len(vocab) - 1:
        return text
    return list(vocab)


def _decoded(rec: object, widths: object) -> object:
    """The record's map as ``FileRecord.to_obj`` gives it, from :func:`_payloads`' form;
    FormatError for widths that are off. What is not of the form's types is left for
    ``FileRecord.from_obj`` to name."""
    if not isinstance(widths, bytes) or len(widths) != len(_ARRAYS):
        raise FormatError("a chunk record's widths are 6 bytes: rebuild")
    if not isinstance(rec, dict):
        return rec
    out = dict(rec)
    vocab = out.get("vocab")
    if isinstance(vocab, str):
        out["vocab"] = vocab.split("\n") if vocab else []
    arrays: dict[str, npt.NDArray[np.uint32]] = {}
    for name, width in zip(_ARRAYS, widths, strict=True):
        if width not in _DTYPES:
            raise FormatError(f"a chunk record's {name} is {width} bytes a value: rebuild")
        raw = out.get(name)
        if not isinstance(raw, bytes):
            continue
        if len(raw) % width:
            raise FormatError(f"a chunk record's {name} is not whole: rebuild")
        arrays[name] = np.frombuffer(raw, dtype=_DTYPES[width]).astype(_U32)
        out[name] = arrays[name].tobytes()
    if "word" in arrays and "offsets" in arrays:
        out["word"] = _sums(arrays["word"], arrays["offsets"]).astype(_U32).tobytes()
    return out
