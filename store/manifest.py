"""Per-tree manifests: what each working tree's files were when they were last indexed.

§4: "Each working tree (the main checkout, each worktree) has a manifest: path, size, modification
time, inode and content hash per file. It is updated as a policy file is: under a lock beside it,
written to a temporary file and renamed into place." §5 compares every listed file's size,
modification time and inode with it on each search, so it must load fast for 20,000 files (§2's
limit): it is stored by columns, not as one map per file:

    magic b"NRMF", version 3, zlib-compressed msgpack map:
      root        str           the working tree's real path
      generation  int           raised by every save, so a session sees that the tree changed
      cursor      str | nil     where an interrupted update goes on (§5: "from where it stopped")
      partial     bool          the tree is over §2's limits, or an update was cut short
      updated     float         when it was saved, seconds since the epoch
      extra       [str]         directories index-update PATH added whole (ignored files included)
      guard       str           the fingerprint of the guard that allowed every listed file ("" for
                                none known): a new session skips the precheck of a file whose
                                entry is unchanged when its guard's fingerprint is this one
      paths       [str]         the files, relative to root, "/"-separated
      size        bin           uint64 little-endian, one per path
      mtime_ns    bin           int64 little-endian, one per path
      inode       bin           uint64 little-endian, one per path
      keys        [str]         the chunk store key of each path's content

Loading checks every column's length against the paths, every type, and that no path repeats; a
manifest that fails is a :class:`errors.FormatError` and the caller rebuilds the tree's index from
its files (§4: everything is derived).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import filelock
import numpy as np
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.atomic import file_lock, read_stored, store_error, write_atomic
from nodwyn_retrieval.store.codec import decode, encode

__all__ = [
    "MAGIC",
    "SUFFIX",
    "VERSION",
    "Entry",
    "Manifest",
    "list_manifests",
    "load_manifest",
    "manifest_lock",
    "manifest_path",
    "save_manifest",
]

MAGIC = b"NRMF"
VERSION = 3  # 2: extra, the directories index-update added whole; 3: guard
SUFFIX = ".manifest"

_U64 = np.dtype("<u8")
_I64 = np.dtype("<i8")
_FIELDS = frozenset(
    {"root", "generation", "cursor", "partial", "updated", "extra", "guard"}
    | {"paths", "size", "mtime_ns", "inode", "keys"}
)
_MAX_GENERATION = 2**63 - 1
_KEY = re.compile(r"[0-9a-f]{64}-[0-9]{1,9}|![a-z0-9_]{1,32}")
_GUARD = re.compile(r"(?:[0-9a-f]{64})?")


@dataclass(slots=True)
class Entry:
    """One file of a tree as it was indexed: its stat fields and its content's store key."""

    size: int
    """Bytes, as ``os.lstat`` gave them."""
    mtime_ns: int
    """Modification time in nanoseconds."""
    inode: int
    """The inode number: a file replaced by a rename changes it even when size and time agree."""
    key: str
    """The chunk store key of the redacted content (§4), or a marker of the refresher's for a
    file it read and left out (binary, too large)."""

    def matches(self, st: os.stat_result) -> bool:
        """Whether ``st`` shows the file unchanged since it was indexed (§5's comparison)."""
        return (
            self.size == st.st_size and self.mtime_ns == st.st_mtime_ns and self.inode == st.st_ino
        )


@dataclass
class Manifest:
    """A working tree's manifest (§4). Mutable: the refresher updates it, then saves it."""

    root: str
    """The working tree's real path."""
    generation: int
    """Raised by the refresher at each save; a session reloads its index when it changes."""
    entries: dict[str, Entry] = field(default_factory=dict)
    """Relative path ("/"-separated) to its entry."""
    cursor: str | None = None
    """Where an update cut short by its deadline goes on (§5), or None when complete."""
    partial: bool = False
    """The index does not hold the whole tree (§2's limits, or a cut-short update)."""
    updated: float = 0.0
    """When it was last saved, seconds since the epoch."""
    extra: list[str] = field(default_factory=list)
    """Directories (relative) that index-update PATH added whole, ignored files included (§2):
    every later refresh walks them too, so a search does not drop what the update added."""
    guard: str = ""
    """The fingerprint of the guard (its real root, denylist and denied directories) whose
    precheck allowed every entry, or "" when the entries' guards are not known to be one: a
    refresh that finds this fingerprint its own may take an unchanged entry's precheck as done."""


def manifest_path(trees_dir: Path, root: Path | str) -> Path:
    """The manifest of the working tree ``root``: ``<sha256(realpath root)[:16]>.manifest``."""
    return Path(trees_dir) / f"{_root_hash(root)}{SUFFIX}"


def manifest_lock(trees_dir: Path, root: Path | str, timeout: float = 30) -> filelock.BaseFileLock:
    """The lock beside the manifest of ``root``, ``<h16>.lock`` (§4); hold it from load to save.
    It is ``manifest_path(...).with_suffix(".lock")``, the name the refresher locks."""
    return file_lock(manifest_path(trees_dir, root).with_suffix(".lock"), timeout)


def _root_hash(root: Path | str) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:16]


def list_manifests(trees_dir: Path) -> list[Path]:
    """Every manifest file in ``trees_dir``, sorted; for the collection of gone trees (§4)."""
    try:
        names = os.listdir(trees_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise store_error("listing", trees_dir, exc) from exc
    return sorted(
        Path(trees_dir) / n for n in names if n.endswith(SUFFIX) and not n.startswith(".")
    )


def save_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest`` to ``path`` atomically (fsync'ed: it is what says the index is whole).

    The caller holds :func:`manifest_lock` from the load it started from to this save, so two
    refreshes of one tree never overwrite each other's work (§4)."""
    entries = manifest.entries
    n = len(entries)
    values = entries.values()
    payload = {
        "root": manifest.root,
        "generation": manifest.generation,
        "cursor": manifest.cursor,
        "partial": manifest.partial,
        "updated": float(manifest.updated),
        "extra": list(manifest.extra),
        "guard": manifest.guard,
        "paths": list(entries),
        "size": np.fromiter((e.size for e in values), dtype=_U64, count=n).tobytes(),
        "mtime_ns": np.fromiter((e.mtime_ns for e in values), dtype=_I64, count=n).tobytes(),
        "inode": np.fromiter((e.inode for e in values), dtype=_U64, count=n).tobytes(),
        "keys": [e.key for e in values],
    }
    # Not fsync'ed: a manifest is derived (§4), and one torn by a power failure fails to decode
    # and is rebuilt; an fsync under the lock cost a search on a large tree up to 0.2 s.
    write_atomic(Path(path), encode(MAGIC, VERSION, payload), sync=False)


def load_manifest(path: Path) -> Manifest | None:
    """The manifest at ``path``; None when there is none; FormatError when it is off."""
    try:
        data = read_stored(path, "manifest")
    except FileNotFoundError:
        return None
    return _from_payload(decode(MAGIC, VERSION, data))


def _bad(what: str) -> FormatError:
    return FormatError(f"manifest: {what}: rebuild")


def _column(obj: dict[str, object], name: str, dtype: np.dtype[np.generic], n: int) -> list[int]:
    raw = obj[name]
    if not isinstance(raw, bytes):
        raise _bad(f"{name} is bytes, got {type(raw).__name__}")
    if len(raw) != 8 * n:
        raise _bad(f"{name} holds {len(raw)} bytes for {n} paths")
    values: list[int] = np.frombuffer(raw, dtype=dtype).tolist()
    return values


def _from_payload(obj: object) -> Manifest:
    if not isinstance(obj, dict):
        raise _bad(f"a manifest is a map, got {type(obj).__name__}")
    if set(obj) != _FIELDS:
        missing = ", ".join(sorted(_FIELDS - set(obj))) or "none"
        extra = ", ".join(sorted(map(repr, set(obj) - _FIELDS))) or "none"
        raise _bad(f"wrong fields (missing: {missing}; unexpected: {extra})")
    root = obj["root"]
    if not isinstance(root, str) or not root:
        raise _bad("root is not a path")
    generation = obj["generation"]
    if type(generation) is not int or not 0 <= generation <= _MAX_GENERATION:
        raise _bad(f"generation {generation!r} is out of range")
    cursor = obj["cursor"]
    if cursor is not None and not isinstance(cursor, str):
        raise _bad(f"cursor is a path or nil, got {type(cursor).__name__}")
    partial = obj["partial"]
    if not isinstance(partial, bool):
        raise _bad(f"partial is a bool, got {type(partial).__name__}")
    updated = obj["updated"]
    if type(updated) not in (int, float) or not math.isfinite(updated):
        raise _bad(f"updated {updated!r} is not a time")
    extra = obj["extra"]
    if not isinstance(extra, list) or (extra and set(map(type, extra)) != {str}):
        raise _bad("extra is a list of directories")
    guard = obj["guard"]
    if not isinstance(guard, str) or not _GUARD.fullmatch(guard):
        raise _bad("guard is not a fingerprint")
    paths = obj["paths"]
    keys = obj["keys"]
    if not isinstance(paths, list) or not isinstance(keys, list):
        raise _bad("paths and keys are lists")
    n = len(paths)
    if len(keys) != n:
        raise _bad(f"{len(keys)} keys for {n} paths")
    # set(map(type, ...)) runs in C: a fifth of the time of a generator over 20,000 items.
    if n and (set(map(type, paths)) != {str} or set(map(type, keys)) != {str}):
        raise _bad("a path or a key is not a string")
    # A key is a chunk store key or the refresher's marker of a file it left out: anything else
    # would make the next refresh fail instead of rebuilding (§4: a file that is off is rebuilt).
    if n and not all(map(_KEY.fullmatch, keys)):
        raise _bad("a key is neither a chunk store key nor a marker")
    sizes = _column(obj, "size", _U64, n)
    mtimes = _column(obj, "mtime_ns", _I64, n)
    inodes = _column(obj, "inode", _U64, n)
    entries = dict(zip(paths, map(Entry, sizes, mtimes, inodes, keys), strict=True))
    if len(entries) != n:
        raise _bad("a path is listed twice")
    if "" in entries:
        raise _bad("a path is empty")
    return Manifest(
        root=root,
        generation=generation,
        entries=entries,
        cursor=cursor,
        partial=partial,
        updated=float(updated),
        extra=list(extra),
        guard=guard,
    )
