"""The chunk store's packs: several records in one file, and the key -> record lookup.

A pack is written once, whole, by a temporary file and a rename, and never changed after: a batch
of a build's new records costs one file instead of a file a record. Its layout (all integers
big-endian)::

    magic     4 bytes   b"NRCP"
    version   u16       PACK_VERSION; any other version is a rebuild
    flags     u16       0
    count     u32       records in the pack
    entries   count x 48 bytes, sorted by key:
                sha256   32 bytes   the redacted text's digest
                analyze  u32        the key's ANALYZE_VERSION
                offset   u32        where the record's bytes start, from the file's start
                length   u32        how many they are
                crc      u32        their CRC-32
    crc       u32       the CRC-32 of everything above
    records   the records' bytes, each a framed chunk record (store.chunkstore)

A pack whose header or entries do not check (short, foreign, another version, a CRC that
differs, an entry past the file's end) is damaged as a whole and deleted: its records are
derived, and whoever needs one analyses the file again.

The lookup (:class:`PackIndex`, one a directory and process) holds every pack's entries in a
``dict`` from key to (pack, entry): a lookup is one dict probe. A key not found looks at the
directory's own stat first (``st_ino``, ``st_mtime_ns``): only when another process added or
removed a pack since the last listing is the directory listed again, and only the new packs'
entries read (a pack never changes, so its entries are read once a process). Directory times
tick coarsely on some file systems: within a second of the directory's last change a miss lists
it again, at most every 50 ms.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.atomic import store_error, write_atomic

__all__ = [
    "MAX_RECORDS",
    "PACKS",
    "PACK_MAGIC",
    "PACK_SUFFIX",
    "PACK_VERSION",
    "Pack",
    "PackIndex",
    "discard",
    "pack_bytes",
    "pack_index",
    "parse_entries",
    "read_entries",
    "reset_indexes",
    "write_pack",
]

PACK_MAGIC = b"NRCP"
PACK_VERSION = 4  # the chunk store's version: 4, records in zstd with their words joined; 3, packs
PACK_SUFFIX = ".ckp"
PACKS = "packs"
"""The packs' directory under the chunk store's."""
MAX_RECORDS = 1 << 16
"""Records a pack holds at most: a bigger batch is written as several packs."""

_HEAD = struct.Struct(">4sHHI")
_ENTRY = struct.Struct(">32sIIII")
_CRC = struct.Struct(">I")
_FIRST_READ = 1 << 16  # one read holds the entries of about 1,300 records
_RACY_NS = 1_000_000_000  # a listing this close after the directory's change may miss a pack
_RACY_EVERY = 0.05


def key_of(sha: bytes, version: int) -> str:
    return f"{sha.hex()}-{version}"


def split_key(key: str) -> tuple[bytes, int]:
    sha, _, version = key.partition("-")
    return bytes.fromhex(sha), int(version)


def pack_bytes(blobs: list[tuple[str, bytes]]) -> bytes:
    """A pack holding each (key, record bytes), in key order; keys must be distinct."""
    blobs = sorted(blobs)
    offset = _HEAD.size + _ENTRY.size * len(blobs) + _CRC.size
    head = bytearray(_HEAD.pack(PACK_MAGIC, PACK_VERSION, 0, len(blobs)))
    for key, data in blobs:
        sha, version = split_key(key)
        head += _ENTRY.pack(sha, version, offset, len(data), zlib.crc32(data))
        offset += len(data)
    head += _CRC.pack(zlib.crc32(head))
    return bytes(head) + b"".join(data for _, data in blobs)


def parse_entries(head: bytes, size: int) -> list[tuple[str, int, int, int]] | int:
    """A pack's entries as (key, offset, length, crc) from its first bytes, checked against the
    file's size; or, when ``head`` is too short to hold them all, how many bytes would.
    :class:`errors.FormatError` for a damaged pack."""
    if len(head) < _HEAD.size:
        raise FormatError(f"a {len(head)}-byte pack is shorter than its header: rebuild")
    magic, version, flags, count = _HEAD.unpack_from(head)
    if magic != PACK_MAGIC:
        raise FormatError(f"not a chunk pack (magic {magic!r}): rebuild")
    if version != PACK_VERSION:
        raise FormatError(f"chunk pack format version {version}, not {PACK_VERSION}: rebuild")
    if flags:
        raise FormatError(f"a chunk pack's unknown flags 0x{flags:04x}: rebuild")
    end: int = _HEAD.size + _ENTRY.size * int(count) + _CRC.size
    if end > size:
        raise FormatError(f"a chunk pack of {count} records is cut short: rebuild")
    if len(head) < end:
        return end
    (crc,) = _CRC.unpack_from(head, end - _CRC.size)
    if zlib.crc32(memoryview(head)[: end - _CRC.size]) != crc:
        raise FormatError("a chunk pack's entries fail their CRC: rebuild")
    out: list[tuple[str, int, int, int]] = []
    last = ""
    for sha, version, offset, length, rcrc in _ENTRY.iter_unpack(
        memoryview(head)[_HEAD.size : end - _CRC.size]
    ):
        key = key_of(sha, version)
        if offset < end or offset + length > size or key <= last:
            raise FormatError("a chunk pack's entry lies outside its records: rebuild")
        last = key
        out.append((key, offset, length, rcrc))
    return out


def read_entries(path: Path) -> tuple[list[tuple[str, int, int, int]], os.stat_result]:
    """The entries of the pack at path and its stat; FormatError when damaged, OSError when it
    cannot be read (FileNotFoundError: gone)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        head = f.read(_FIRST_READ)
        got = parse_entries(head, st.st_size)
        if isinstance(got, int):
            head += f.read(got - len(head))
            got = parse_entries(head, st.st_size)
            if isinstance(got, int):  # pragma: no cover - the size was checked
                raise FormatError("a chunk pack is cut short: rebuild")
    return got, st


@dataclass(slots=True)
class Pack:
    """One pack as a process knows it: its name and entries (a pack never changes)."""

    name: str
    keys: list[str]
    offsets: list[int]
    lengths: list[int]
    crcs: list[int]


def new_pack_name() -> str:
    """A name no other writer picks: the time (so names sort roughly by age) and 48 random bits."""
    return f"{time.time_ns():016x}-{secrets.token_hex(6)}{PACK_SUFFIX}"


def write_pack(directory: Path, blobs: list[tuple[str, bytes]]) -> tuple[Pack, int]:
    """Write a new pack of (key, record bytes) into directory (atomically, not fsync'ed: a pack
    cut short by a power failure fails its checks and is rebuilt); the pack and its size."""
    data = pack_bytes(blobs)
    name = new_pack_name()
    write_atomic(directory / name, data, sync=False)
    entries = parse_entries(data, len(data))
    assert not isinstance(entries, int)  # noqa: S101 - the whole pack is at hand
    return _pack(name, entries), len(data)


def _pack(name: str, entries: list[tuple[str, int, int, int]]) -> Pack:
    return Pack(
        name,
        [e[0] for e in entries],
        [e[1] for e in entries],
        [e[2] for e in entries],
        [e[3] for e in entries],
    )


def _is_pack(name: str) -> bool:
    return name.endswith(PACK_SUFFIX) and not name.startswith(".")


def discard(path: Path) -> None:
    """Delete a damaged pack; one left behind is found damaged again."""
    with contextlib.suppress(OSError):
        path.unlink()


class PackIndex:
    """Every pack's entries under one directory, as this process last listed it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._packs = os.path.join(directory, PACKS)  # a str: a miss's stat parses no Path
        self.lock = threading.Lock()
        self.packs: dict[str, Pack] = {}
        self.where: dict[str, tuple[Pack, int]] = {}
        self.dups: dict[str, list[tuple[Pack, int]]] = {}
        self._sig: tuple[int, int] | None = None
        self._racy = True
        self._listed = 0.0
        self._looked = float("-inf")  # the last _refresh's start (time.monotonic)
        self.listings = 0
        """How many times the directory was listed (for tests and profiles)."""
        self.damaged = 0
        """Packs found damaged and deleted."""

    def find(self, key: str, *, looked_since: float | None = None) -> tuple[Pack, int] | None:
        """Where the record of key lies; the directory looked at again when it is not known,
        unless ``looked_since`` is given and it was looked at since then (time.monotonic): a
        caller for which a pack written meanwhile may be missed (the record made twice) bounds
        its misses to one look."""
        got = self.where.get(key)
        if got is not None:
            return got
        with self.lock:
            if looked_since is None or self._looked < looked_since:
                self._refresh()
            return self.where.get(key)

    def locations(self, key: str) -> list[tuple[Pack, int]]:
        first = self.find(key)
        if first is None:
            return []
        return [first, *self.dups.get(key, ())]

    def add(self, pack: Pack) -> None:
        """A pack this process wrote (known at once, without listing)."""
        with self.lock:
            self._add(pack)

    def drop(self, name: str) -> None:
        """Forget a pack found gone or damaged."""
        with self.lock:
            self._drop(name)

    def all(self) -> list[Pack]:
        """Every pack there is now (the directory listed again)."""
        with self.lock:
            self._refresh(force=True)
            return list(self.packs.values())

    def _add(self, pack: Pack) -> None:
        if pack.name in self.packs:
            return
        self.packs[pack.name] = pack
        for i, key in enumerate(pack.keys):
            if key in self.where:
                self.dups.setdefault(key, []).append((pack, i))
            else:
                self.where[key] = (pack, i)

    def _drop(self, name: str) -> None:
        pack = self.packs.pop(name, None)
        if pack is None:
            return
        for key in pack.keys:
            rest = [loc for loc in self.dups.pop(key, ()) if loc[0] is not pack]
            here = self.where.get(key)
            if here is not None and here[0] is pack:
                del self.where[key]
                if rest:
                    self.where[key] = rest.pop(0)
            if rest:
                self.dups[key] = rest

    def _refresh(self, *, force: bool = False) -> None:
        self._looked = time.monotonic()
        try:
            st = os.stat(self._packs, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as exc:
            raise store_error("reading", self._packs, exc) from exc
        if st is None or not stat.S_ISDIR(st.st_mode):  # none, or not ours (a link out)
            for name in list(self.packs):
                self._drop(name)
            self._sig = None
            return
        sig = (st.st_ino, st.st_mtime_ns)
        now = time.monotonic()
        if not force and sig == self._sig and not (self._racy and now - self._listed > _RACY_EVERY):
            return
        packs = self.directory / PACKS
        self._racy = time.time_ns() - st.st_mtime_ns < _RACY_NS
        self._listed = now
        self._sig = sig
        self.listings += 1
        try:
            with os.scandir(packs) as it:
                names = {e.name for e in it if _is_pack(e.name)}
        except (FileNotFoundError, NotADirectoryError):
            names = set()
        except OSError as exc:
            raise store_error("listing", packs, exc) from exc
        for name in [n for n in self.packs if n not in names]:
            self._drop(name)
        for name in sorted(names - self.packs.keys()):
            path = packs / name
            try:
                entries, _ = read_entries(path)
            except FormatError:
                self.damaged += 1
                discard(path)
                continue
            except (FileNotFoundError, IsADirectoryError):
                continue
            except OSError as exc:
                raise store_error("reading", path, exc) from exc
            self._add(_pack(name, entries))


_INDEXES: dict[str, PackIndex] = {}
_INDEXES_LOCK = threading.Lock()


def pack_index(directory: Path) -> PackIndex:
    """The process's lookup of the chunk store at directory (one for every ChunkStore of it)."""
    name = os.path.abspath(directory)
    with _INDEXES_LOCK:
        got = _INDEXES.get(name)
        if got is None:
            got = _INDEXES[name] = PackIndex(Path(name))
        return got


def reset_indexes() -> None:
    """Forget every directory's lookup: the next use lists its packs again, as a new process
    would (for tests, and for a process that wants what another wrote without waiting)."""
    with _INDEXES_LOCK:
        _INDEXES.clear()
