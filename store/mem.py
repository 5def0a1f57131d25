"""A log's ``.mem``: the words of its events and its turns' cards, beside the log (ADR 51, and
ADR 0050's amendment "the words beside each log, the results under their turns").

``<task-id>.mem`` lies beside ``<task-id>.jsonl``. For the log's events up to the end of its last
whole turn (the last ``turn.end``) it holds the postings of every ranked event's words
(retrieval.events), where each event's line lies in the log, and a card per turn. It is derived:
deleting it loses nothing, and anything off about it (missing, truncated, corrupt, foreign, of
another version, or no longer matching its log) makes it rebuilt from the log, never trusted and
never a crash.

The layout lets a search decode the postings of its own words only, in a few microseconds a log
(§9: one search reads every earlier task's ``.mem``)::

    0    codec frame header (store.codec.HEADER): b"NRME", version u16 BE, flags u16 BE (0)
    8    u32   CRC-32 of the fixed head
    12   fixed head, little-endian (:data:`_HEAD`): counts, the check against the log, the words
         and events versions, and a table of sections [offset, length, CRC-32]
    ..   sections, 8-byte aligned, little-endian:
         keys       u64 × V      each word's key (below), ascending
         poff       u32 × (V+1)  word i's postings block is postings[poff[i]:poff[i+1]]
         width      u8 × V       the byte width of word i's frequencies: 1, 2 or 4
         bcheck     u16 × V      a check of word i's block (its documents, frequencies, width)
         postings   per word: its documents (u16, or u32 past 65,536 documents), ascending,
                    then its weighted frequencies (of its width)
         doc_len    u32 × D      each document's weighted length
         doc_event  u32 × D      each document's event, an index into the ev_* arrays
         ev_seq     u64 × E      every covered event's seq, ascending
         ev_off     u64 × E      where its line starts in the log
         ev_len     u32 × E      its line's length, without the newline
         ev_turn    u32 × E      its turn
         ev_kind    u8 × E       its kind, an index into names' kinds
         ev_agent   u16 × E      its agent, an index into names' agents
         names      msgpack (store.codec's bounded decoding): {"kinds": [...], "agents": [...]}
         cards      msgpack: the turns' cards (retrieval.events.Card.to_obj)

Words are kept as keys, not text: a word's key is a 64-bit hash of its bytes (FNV-1a with
murmur3's finaliser, :func:`word_key`; computed for all the words of a build at once in numpy). A
search finds all of its words (and their candidate forms) by one search of ``keys`` in the mapped
file (``MemIndex.find_keys``), and reads a word's block by its index; extending a
``.mem`` merges by key; and no text of the log is in the file but its cards' lines. Two words
of one log sharing a key (about one chance in 10^9 for a log of 100,000 distinct words) would
share postings: a search for one would also find the other's events. The hash is not keyed: a
log written to collide two words only makes one word find the other's events.

What a search reads is checked before it is used: the fixed head by its CRC; ``doc_len`` (read
whole, 4 bytes a document) by its section CRC; each word's block by its check, so a damaged block
is found with a chance of 65,535 in 65,536 and rebuilt; the event arrays, names and cards by their
CRCs when a result or a recall reads them. Every count and length is a size and is bounded by the
bytes that hold it (the sections must fit the file and each other exactly); a frequency and a
document's length are quantities of the text, read as numbers up to 2^31-1 (amendment
2026-10-16).

The check against the log: the byte length covered and SHA-256 of the covered bytes' first 4 KiB
and last 64 KiB. A log that was rewritten or cut fails it and the ``.mem`` is rebuilt; a log that
only grew keeps it, and the events after it are folded at the search (:class:`LogView`). Hashing
64 KiB for each of a project's logs at every search is most of a search's time, so the log's
inode, size, modification and change times are also kept, and when the log's ``stat`` still shows
exactly those, the hashes are skipped, but only if the log's change time was more than
:data:`RACY_NS` older than the build: a write in the same clock tick as the build leaves the times
as they were, so a log changed that recently is always hashed (git's "racily clean" rule). The
change time cannot be set back by a program; it moves with every write.

A settled task's ``.mem`` in a tasks directory may be held by the directory's join instead of a
file of its own (store.mem_join): a view that finds no file finds it there, checked against the
log by the same rule.

When the log has grown by whole turns, the ``.mem`` is extended to cover them from its own
postings and the new events, without reading the log's beginning again. It is written atomically
(store.atomic) under a lock in the log's directory (``.mem.lock``); a writer that finds, under the
lock, a ``.mem`` matching the log and covering as much leaves it.

The module is the ``.mem``'s facade and its view of a log at a search (:class:`LogView`); the
concepts below it have modules of their own: :mod:`store.mem_log` (the log's lines and the check
against the log), :mod:`store.mem_fold` (word keys and the fold of events into postings and
cards), :mod:`store.mem_encode` (the layout's encoding), :mod:`store.mem_format` (the checked
reading of a file). Import from here: the names of all five are re-exported.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import Timeout
from nodwyn_retrieval.errors import FormatError, NotFound, StoreError
from nodwyn_retrieval.retrieval.bm25 import Segment, SegmentBuilder
from nodwyn_retrieval.retrieval.events import (
    Memo,
    event_counts,
)
from nodwyn_retrieval.store.atomic import file_lock, store_error, write_atomic
from nodwyn_retrieval.store.log import open_log
from nodwyn_retrieval.store.mem_encode import MemBuild, build_mem
from nodwyn_retrieval.store.mem_fold import (
    Fold,
    fold_events,
    merge_cards,
    merge_folds,
    word_key,
    word_keys,
)
from nodwyn_retrieval.store.mem_format import (
    MAGIC,
    VERSION,
    EventArrays,
    MemIndex,
    postings_of,
)
from nodwyn_retrieval.store.mem_join import joined_mem
from nodwyn_retrieval.store.mem_log import (
    HEAD_BYTES,
    RACY_NS,
    TAIL_BYTES,
    LogCheck,
    LoggedEvent,
    covered_end,
    parse_lines,
)
from nodwyn_retrieval.store.transcripts import NODWYN, Reader, reader_for

__all__ = [
    "HEAD_BYTES",
    "LOCK_NAME",
    "LOCK_SECONDS",
    "MAGIC",
    "RACY_NS",
    "TAIL_BYTES",
    "VERSION",
    "EventArrays",
    "Fold",
    "LogView",
    "LoggedEvent",
    "MemBuild",
    "MemIndex",
    "build_mem",
    "covered_end",
    "fold_events",
    "mem_path",
    "merge_cards",
    "merge_folds",
    "parse_lines",
    "postings_of",
    "remove_locked",
    "word_key",
    "word_keys",
]

log = logging.getLogger("nodwyn_retrieval.store.mem")

LOCK_NAME = ".mem.lock"
"""The lock every writer of a ``.mem`` in one directory takes (store.atomic.file_lock)."""
LOCK_SECONDS = 30.0


def mem_path(log_path: Path) -> Path:
    """``<task-id>.mem`` beside ``<task-id>.jsonl`` (any other name: the name with ``.mem``); an
    agent's transcript's in this project's data directory (store.transcripts.reader_for)."""
    return Path(reader_for(log_path).mem_file(os.fspath(log_path)))


# -- a log as a search sees it -------------------------------------------------------------------


def _read_after(path: Path, fd: int, start: int, size: int) -> bytes:
    """The log's bytes from ``start`` to ``size``, whole: one read returns at most about 2 GiB,
    so what it left is read after it (a log cut meanwhile ends it early, as a torn tail does). A
    part too large to hold is a :class:`StoreError` saying so, not a ``MemoryError``."""
    parts: list[bytes] = []
    at = start
    try:
        while at < size:
            got = os.pread(fd, size - at, at)
            if not got:
                break
            parts.append(got)
            at += len(got)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except MemoryError:
        raise StoreError(
            f"{path} is too large to read: {size - start:,} bytes past what its index covers"
        ) from None


@dataclass(slots=True)
class LogView:
    """One log at the moment of one search: its ``.mem`` (checked, rebuilt or extended) and the
    events after it, folded here. Close it when the search is done: nothing is kept.

    The log itself is opened only when it must be read: to hash it when ``stat`` cannot show it
    unchanged, to read the events after the ``.mem``, to build, or to read a result's event.
    """

    path: Path
    """The log."""
    mem: MemIndex | None = None
    """The ``.mem``, None while the log holds no whole turn."""
    tail: list[LoggedEvent] = field(default_factory=list)
    """The events after what the ``.mem`` covers."""
    tail_segment: Segment | None = None
    """The tail's ranked events' words, None when it has none; document i is
    ``tail[tail_docs[i]]``."""
    tail_docs: list[int] = field(default_factory=list)
    """For each tail document, its index in :attr:`tail`."""
    rebuilt: str | None = None
    """Why the ``.mem`` was rebuilt, when it was (damaged, the log changed); None otherwise."""
    wrote: bool = False
    """Whether this view wrote the ``.mem``."""
    reader: Reader = NODWYN
    """What reads the log's lines and places its ``.mem`` (store.transcripts)."""
    _file: Any = None
    _unchanged: bool = False
    """Whether the last check found the log's ``stat`` as the ``.mem`` was built from."""

    @classmethod
    def open(
        cls,
        log_path: Path,
        *,
        write: bool = True,
        st: os.stat_result | None = None,
        reader: Reader | None = None,
    ) -> LogView:
        """Check the log's ``.mem`` against it, rebuild or extend it as needed (written when
        ``write``), and fold the events after it. NotFound when there is no log. ``st`` is the
        log's ``stat`` when the caller has just taken it; ``reader`` what reads it when the
        caller knows (store.transcripts.reader_for otherwise)."""
        view = cls(log_path if isinstance(log_path, Path) else Path(log_path))
        view.reader = reader_for(view.path) if reader is None else reader
        if st is None:
            try:
                st = os.stat(view.path)
            except FileNotFoundError:
                raise NotFound(f"no log at {view.path}") from None
            except OSError as exc:
                raise store_error("reading", view.path, exc) from exc
        if stat.S_ISDIR(st.st_mode):
            raise NotFound(f"no log at {view.path}: it is a directory")
        if not stat.S_ISREG(st.st_mode):  # a FIFO's read would wait for ever
            raise NotFound(f"no log at {view.path}: it is not a regular file")
        try:
            view._load(st, write)
        except BaseException:
            view.close()
            raise
        return view

    def _log(self) -> Any:
        """The log, opened at its first use."""
        if self._file is None:
            try:
                self._file = open_log(self.path)
            except FileNotFoundError:
                raise NotFound(f"no log at {self.path}") from None
            except OSError as exc:
                raise store_error("reading", self.path, exc) from exc
        return self._file

    def _checked(self, mpath: str, st: os.stat_result) -> tuple[MemIndex | None, str | None]:
        """The ``.mem`` at mpath if it matches the log; otherwise None and why."""
        try:
            mem = MemIndex.open(mpath)
        except FileNotFoundError:
            # A settled task's .mem may live in its directory's join instead (store.mem_join),
            # checked against the log below as the file would be.
            joined = joined_mem(self.path, st) if self.reader is NODWYN else None
            if joined is None:
                return None, "missing"
            mem = joined
        except FormatError as exc:
            log.info("%s: %s", mpath, exc)
            return None, str(exc)
        try:
            self._unchanged = mem.check.unchanged(st)
            ok = self._unchanged or mem.check.hashes_match(self._log())
        except OSError as exc:
            mem.close()
            raise store_error("reading", self.path, exc) from exc
        except BaseException:
            mem.close()
            raise
        if not ok:
            mem.close()
            return None, "the log no longer holds what it was built from"
        return mem, None

    def _load(self, st: os.stat_result, write: bool, damaged: str | None = None) -> None:
        mpath = self.reader.mem_file(os.fspath(self.path))
        mem, why = (None, damaged) if damaged is not None else self._checked(mpath, st)
        start = mem.covered if mem is not None else 0
        after = mem.last_seq if mem is not None else 0
        events: list[LoggedEvent] = []
        skipped = 0
        if mem is None or st.st_size != start or not self._unchanged:
            f = self._log()
            st = os.fstat(f.fileno())
            data = _read_after(self.path, f.fileno(), start, st.st_size)
            events, _end, skipped = self.reader.parse(data, start, after, mem)
        new_cov, k = covered_end(events, start)
        if k:
            f = self._log()
            try:
                built = build_mem(
                    events[:k], check=LogCheck.of(f, new_cov, st), skipped=skipped, base=mem
                )
            except FormatError as exc:
                # The old .mem is damaged in a section its opening did not read: start over. (A
                # build from the events alone reads no stored file, so mem is not None here.)
                log.info("%s: %s", mpath, exc)
                if mem is not None:
                    mem.close()
                self._load(st, write, str(exc))
                return
            if mem is not None:
                mem.close()
            mem, self.wrote = self._install(mpath, built, write)
            events = events[k:]
            self.rebuilt = why if why not in (None, "missing") else None
        elif mem is None and why not in (None, "missing") and write:
            # A damaged .mem of a log without a whole turn: nothing to build, so remove it.
            remove_locked(Path(mpath))
        self.mem = mem
        self.tail = events
        if events:
            b = SegmentBuilder()
            memo: Memo = {}
            for i, le in enumerate(events):
                counts = event_counts(le.event, memo)
                if counts is not None:
                    b.add(counts)
                    self.tail_docs.append(i)
            self.tail_segment = b.build()

    def _install(self, mfile: str, built: MemBuild, write: bool) -> tuple[MemIndex, bool]:
        """Write a built ``.mem`` under the lock unless one as good is there now; open it."""
        mpath = Path(mfile)
        if write:
            try:
                with file_lock(mpath.parent / LOCK_NAME, timeout=LOCK_SECONDS):
                    there, _ = self._checked(mfile, os.fstat(self._log().fileno()))
                    if there is not None and there.covered >= built.covered:
                        return there, False
                    if there is not None:
                        there.close()
                    write_atomic(mpath, built.data, sync=False)
                return MemIndex.open(mpath), True
            except (StoreError, Timeout, FileNotFoundError) as exc:
                # A full disk or a read-only directory: the search goes on from memory.
                log.warning("cannot write %s: %s", mpath, exc)
            except FormatError as exc:  # replaced by a damaged file between write and read
                log.warning("cannot read back %s: %s", mpath, exc)
        return MemIndex.from_bytes(built.data), False

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> LogView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def n_events(self) -> int:
        """Every event of the log (ranked or not)."""
        return (self.mem.n_events if self.mem is not None else 0) + len(self.tail)

    @property
    def n_ranked(self) -> int:
        """The events a search ranks."""
        return (self.mem.n_docs if self.mem is not None else 0) + len(self.tail_docs)

    @property
    def first_seq(self) -> int:
        if self.mem is not None and self.mem.n_events:
            return self.mem.first_seq
        return self.tail[0].event["seq"] if self.tail else 0

    @property
    def last_seq(self) -> int:
        if self.tail:
            seq: int = self.tail[-1].event["seq"]
            return seq
        return self.mem.last_seq if self.mem is not None else 0

    def read_line(self, offset: int, length: int) -> bytes:
        """The bytes of a line of the log, read now."""
        return os.pread(self._log().fileno(), length, offset)

    def read_event(self, offset: int, length: int, seq: int) -> dict[str, Any]:
        """The event whose line the ``.mem`` places at offset, read from the log now. A line that
        is not that event means the log changed under the search: FormatError."""
        line = self.read_line(offset, length)
        ok = len(line) == length
        event = self.reader.line_event(line, seq, self.mem, self.read_line) if ok else None
        if event is None or event["seq"] != seq:
            raise FormatError(f"{self.path} no longer holds seq {seq} where its .mem says: rebuild")
        return event


def remove_locked(path: Path) -> None:
    """Remove a file of a tasks directory under the directory's lock (derived: a file that cannot
    be removed, or whose lock is held too long, is left and said in the log, never an error)."""
    try:
        with file_lock(path.parent / LOCK_NAME, timeout=LOCK_SECONDS):
            path.unlink(missing_ok=True)
    except (OSError, Timeout) as exc:
        log.warning("cannot remove %s: %s", path, exc)
