"""The CPU work of indexing a file, in a worker process or in the calling one.

Given a file's bytes, :func:`analyze_blob` decides whether it is text (§2: binary and non-UTF-8
files are skipped), redacts it as the log redacts a tool result (§3: the index is built from the
text the model would read), hashes the redacted text (§4: the content address) and, unless the
chunk store already holds that content, cuts it into chunks and words. Everything here is a pure
function of the bytes and the store's directory, so a batch can go to the process pool whole.

Beside it, what the indexer measures and reads without its state: the slowdown of this process's
CPU work (:class:`Contention`), a chunk's lines, and the snapshot's file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from nodwyn_retrieval.bus._worker import past_deadline
from nodwyn_retrieval.errors import DeadlineExceeded, FormatError, StoreError
from nodwyn_retrieval.guard.beneath import Beneath, LinkRefused, RootRef
from nodwyn_retrieval.guard.redact import redact
from nodwyn_retrieval.retrieval.analyze import FileRecord, analyze
from nodwyn_retrieval.retrieval.tree import Pairs, TreeSegment, pairs_of
from nodwyn_retrieval.store.atomic import clear_in_way, read_stored
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.codec import decode

__all__ = [
    "BINARY_SNIFF",
    "MAX_FILE_BYTES",
    "SNAPSHOT_MAGIC",
    "SNAPSHOT_VERSION",
    "Analyzed",
    "Contention",
    "ReadBatch",
    "analyze_batch",
    "analyze_blob",
    "analyze_packed",
    "analyze_read",
    "cpu_seconds",
    "is_binary",
    "load_factor",
    "load_snapshot",
    "read_beneath",
    "read_snapshot",
    "sched_times",
]

log = logging.getLogger("nodwyn_retrieval.actors.indexer")  # the snapshot's messages are its

MAX_FILE_BYTES = 1 << 20  # §2: a file is indexed whole up to 1 MiB (fs-read's whole-file cap)
# git's own test for a binary file: a NUL byte in the first 8,000 bytes.
BINARY_SNIFF = 8000
_LOAD_FACTOR_MAX = 32.0


@dataclass(frozen=True, slots=True)
class Analyzed:
    """What became of one file's bytes."""

    path: str
    """The file, relative to the root."""
    skip: str | None
    """"binary" or "not_utf8" when the file is not indexed; None when it is. From a worker that
    read the file itself (:func:`analyze_read`), also "gone" (not read: see :func:`read_beneath`)
    or "too_large" (more than :data:`MAX_FILE_BYTES` when read)."""
    key: str = ""
    """The chunk store key of its redacted text."""
    record: FileRecord | None = None
    """Its chunks and words; None when the store already held the key (nothing to write)."""
    redactions: int = 0
    """How many credential shapes redaction replaced."""
    text_bytes: int = 0
    """The size of its text."""
    stored: bool = False
    """The record was written to the chunk store where it was made (a worker process)."""
    store_error: str | None = None
    """Why writing it failed (a full disk): the record is still indexed in memory."""
    packed: bool = False
    """Its postings travel in the batch's :class:`~retrieval.tree.Pairs` instead of a record."""


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF]


def analyze_blob(
    path: str,
    data: bytes,
    chunks_dir: str | None,
    *,
    store: bool = False,
    chunks: ChunkStore | None = None,
) -> Analyzed:
    """Decode, redact, hash and (when the store lacks it) analyze one file's bytes.

    With ``store``, a new record is also written to the chunk store here: in a worker process
    that spreads the compression and the writes over the cores instead of the session's thread.
    ``chunks`` is the store at chunks_dir when the caller holds one (a batch's, made once: the
    process's lookup of its packs is the same either way), else one is opened here.
    """
    if is_binary(data):
        return Analyzed(path, "binary")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Analyzed(path, "not_utf8")
    red = redact(text)
    digest = hashlib.sha256(red.text.encode("utf-8")).hexdigest()
    key = ChunkStore.key(digest)
    if chunks_dir is None:
        chunks = None
    elif chunks is None:
        chunks = ChunkStore(Path(chunks_dir))
    if chunks is not None and chunks.exists(key):
        return Analyzed(path, None, key, None, red.count, len(data))
    record = analyze(red.text)
    made = Analyzed(path, None, key, record, red.count, len(data))
    return _put(chunks, made, record) if store and chunks is not None else made


def analyze_batch(items: list[tuple[str, bytes]], chunks_dir: str | None) -> list[Analyzed]:
    """:func:`analyze_blob` for each (path, bytes), storing the new records in one pack: a
    worker's unit of work. Past the work's deadline it stops between files (DeadlineExceeded),
    the records of the files done stored first."""
    out: list[Analyzed] = []
    store = ChunkStore(Path(chunks_dir), one_look=True) if chunks_dir is not None else None
    try:
        for p, d in _in_time(items):
            out.append(analyze_blob(p, d, chunks_dir, chunks=store))
    except DeadlineExceeded:
        if store is not None:
            _put_all(store, out)
        raise
    return _put_all(store, out) if store is not None else out


def _in_time(items: list[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
    """items, one at a time while the work running in this worker is not past its deadline."""
    for item in items:
        if past_deadline():
            raise DeadlineExceeded("a batch stopped at its deadline: its caller no longer waits")
        yield item


def analyze_packed(items: list[tuple[str, bytes]], chunks_dir: str) -> tuple[list[Analyzed], Pairs]:
    """:func:`analyze_batch` for a build whose segment is made of the batches' postings.

    Each indexed file's postings go into one :class:`~retrieval.tree.Pairs` for the batch, in
    the items' order, rather than a record a file: the session maps one vocabulary a batch,
    and receives flat arrays. A record the store already holds is read here (touched first, §4),
    not in the session; one that no longer decodes is analysed again and put back.
    """
    store = ChunkStore(Path(chunks_dir), one_look=True)
    made: list[Analyzed] = []
    held: dict[int, FileRecord] = {}  # records the store held, read here
    try:
        for path, data in _in_time(items):
            made.append(_made(store, path, data, chunks_dir, held=held, n=len(made)))
    except DeadlineExceeded:
        _put_all(store, made)  # what was made is kept for the next call
        raise
    out: list[Analyzed] = []
    recs: list[tuple[str, FileRecord]] = []
    for n, a in enumerate(_put_all(store, made)):
        rec = held.get(n, a.record)
        if rec is None:
            out.append(a)
            continue
        path = a.path
        recs.append((path, rec))
        stored = a.stored or a.record is None  # written here, or found in the store
        out.append(
            Analyzed(path, None, a.key, None, a.redactions, a.text_bytes, stored, a.store_error,
                     packed=True)
        )  # fmt: skip
    return out, pairs_of(recs)


def read_beneath(tree: Beneath, rel: str) -> bytes | None:
    """The file's bytes (at most 1 MiB + 1), or None when it is gone or not a regular file.

    Read beneath the root without following a link at any component (guard/beneath.py): a
    file or a directory on its way replaced by a link after the guard's decision is not
    followed, and a FIFO or a device is not waited on (O_NONBLOCK) nor read.
    """
    try:
        return tree.read(rel, MAX_FILE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None
    except LinkRefused:
        log.info("not read: %s has a link on its way (not followed)", rel)
        return None
    except OSError as e:
        log.info("cannot read %s: %s", rel, e.strerror)
        return None


@dataclass(frozen=True, slots=True)
class ReadBatch:
    """What a worker that read a batch itself sends back (:func:`analyze_read`)."""

    analyzed: list[Analyzed]
    """One a path, in order."""
    sizes: list[int]
    """The bytes read of each (0 for a file not read)."""
    pairs: Pairs | None
    """The postings of the files analysed, for a packed batch."""
    kept: dict[int, bytes]
    """The bytes of each file (by its index) whose record the store held when it was looked
    for, not packed: the session reads that record, and analyses these bytes if it is gone."""


def analyze_read(paths: list[str], root: RootRef, chunks_dir: str, packed: bool) -> ReadBatch:
    """The files at paths read here, beneath root, then :func:`analyze_packed` (``packed``) or
    :func:`analyze_batch` of those read: a worker's unit of work when it reads the files itself,
    so that their bytes do not travel from the session through a pipe.

    The session has decided every path with the guard; the read here is the one it would have
    made (:func:`read_beneath`: no link followed at any component, a FIFO or a device neither
    waited on nor read, at most 1 MiB + 1 bytes), beneath the very directory it holds open
    (:meth:`~guard.beneath.Beneath.reopen` refuses any other: the session then reads the batch
    itself). One :class:`Analyzed` a path, in order: "gone" or "too_large" for a file not read.
    """
    read: list[tuple[str, bytes]] = []
    where: list[int] = []  # the index in paths of each file read
    out: list[Analyzed | None] = []
    sizes: list[int] = []
    with Beneath.reopen(root) as tree:
        for n, path in enumerate(paths):
            data = read_beneath(tree, path)
            sizes.append(0 if data is None else len(data))
            if data is None or len(data) > MAX_FILE_BYTES:
                out.append(Analyzed(path, "gone" if data is None else "too_large"))
                continue
            out.append(None)
            where.append(n)
            read.append((path, data))
    pairs: Pairs | None = None
    if packed:
        made, pairs = analyze_packed(read, chunks_dir)
    else:
        made = analyze_batch(read, chunks_dir)
    kept: dict[int, bytes] = {}
    for n, a, (_, data) in zip(where, made, read, strict=True):
        out[n] = a
        if a.skip is None and a.record is None and not a.packed:
            kept[n] = data
    return ReadBatch([a for a in out if a is not None], sizes, pairs, kept)


def _made(
    store: ChunkStore,
    path: str,
    data: bytes,
    chunks_dir: str,
    *,
    held: dict[int, FileRecord],
    n: int,
) -> Analyzed:
    """The n-th file of a packed batch analysed, or its record read from the store (touched
    first, and put in held at n); a record gone or damaged since it was looked for is made
    again."""
    a = analyze_blob(path, data, chunks_dir, chunks=store)
    if a.skip is None and a.record is None:
        rec: FileRecord | None
        try:
            store.touch(a.key)
            rec = store.get(a.key)
        except StoreError:
            rec = None
        if rec is None:  # gone or damaged since it was looked for: made again
            return analyze_blob(path, data, None)
        held[n] = rec
    return a


def _put(store: ChunkStore, a: Analyzed, rec: FileRecord) -> Analyzed:
    """a, with its new record written to the store (or why that failed: still indexed)."""
    return _put_all(store, [Analyzed(a.path, None, a.key, rec, a.redactions, a.text_bytes)])[0]


def _put_all(store: ChunkStore, made: list[Analyzed]) -> list[Analyzed]:
    """made, with their new records written to the store in one pack (or why that failed:
    still indexed in memory)."""
    new = [(a.key, a.record) for a in made if a.record is not None]
    if not new:
        return made
    try:
        store.put_many(new)
    except StoreError as e:
        err: str | None = str(e)
    else:
        err = None
    return [
        a if a.record is None
        else Analyzed(a.path, None, a.key, a.record, a.redactions, a.text_bytes, err is None, err)
        for a in made
    ]  # fmt: skip


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def sched_times() -> tuple[int, int] | None:
    """Nanoseconds this process's threads have run on a CPU, and waited runnable for one (the
    kernel's schedstat); None where the system does not say."""
    run = wait = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    seen = False
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                parts = f.read().split()
            run += int(parts[0])
            wait += int(parts[1])
            seen = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return (run, wait) if seen else None


class Contention:
    """How much longer CPU work takes now than it would alone on a core, measured as it runs.

    Over a window of this process's own time, ``(run + wait) / run``: the time its threads were
    runnable over the time they ran (a thread that has half a core spends as long waiting as
    running). This is what a share of the CPU actually was, whatever the load average says: it
    counts processes of any priority as the scheduler weighs them, and nothing of a thread's
    sleeps (reads, waits for workers). Too little run time in the window to tell (less than
    ``MIN_RUN`` seconds), the last window's figure is used; with none, ``fallback()``.
    """

    MIN_RUN = 0.05

    def __init__(self, fallback: Callable[[], float]) -> None:
        self._fallback = fallback
        self._last: float | None = None
        self._at = sched_times()

    def start(self) -> None:
        """Begin a new window (its figure replaces the last one once it has enough)."""
        got = self._measure()
        if got is not None:
            self._last = got
        self._at = sched_times()

    def _measure(self) -> float | None:
        now = sched_times()
        if now is None or self._at is None:
            return None
        run = max(0, now[0] - self._at[0])
        wait = max(0, now[1] - self._at[1])
        if run < self.MIN_RUN * 1e9:
            return None
        return (run + wait) / run

    def factor(self) -> float:
        """The slowdown now, at least 1."""
        got = self._measure()
        if got is None:
            got = self._last if self._last is not None else self._fallback()
        return max(1.0, got)


def cpu_seconds() -> float:
    """CPU time of the calling thread (what a phase cost, whatever else ran)."""
    return time.thread_time()


def load_factor() -> float:
    """How much slower CPU work runs now than on an idle machine, where it cannot be measured
    (Contention): the run queue per core (the one-minute load average over the
    cores this process may use), at least 1 and at most 32."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average on this system
        return 1.0
    return min(_LOAD_FACTOR_MAX, max(1.0, load / cpu_count()))


# -- the snapshot's file, which the indexer writes ------------------------------------------------

SNAPSHOT_MAGIC = b"NRTS"
SNAPSHOT_VERSION = 3  # 2: packed postings, sorted vocabulary, CRC-32; 3: frequencies in half bytes


def load_snapshot(path: Path) -> TreeSegment | None:
    """The tree segment stored at path, or None when it is missing or must be rebuilt."""
    return read_snapshot(path)[0]


def read_snapshot(path: Path) -> tuple[TreeSegment | None, bool]:
    """The tree segment stored at path, and whether a damaged one was dropped."""
    try:
        data = read_stored(path, "snapshot")
    except FileNotFoundError:
        return None, False
    except FormatError as e:  # a directory, a FIFO, a size no write made: in the way
        log.info("snapshot %s dropped: %s", path, e)
        clear_in_way(path)
        return None, True
    except (OSError, StoreError) as e:
        log.warning("cannot read %s: %s", path, e)
        return None, False
    try:
        return TreeSegment.from_obj(decode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, data)), False
    except FormatError as e:
        log.info("snapshot %s dropped: %s", path, e)
        with contextlib.suppress(OSError):
            path.unlink()
        return None, True
