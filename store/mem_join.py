"""The tasks directory's joined words: every task's ``.mem`` postings in one file, so that a later
search of the earlier tasks finds and reads each of its words once for all the tasks instead of
once in each task's ``.mem`` (ADR 0050 §9; docs/store-format.md, "The joined words").

``earlier.join`` lies in the tasks directory beside the logs. It is derived from the tasks'
``.mem`` files (which stay: recall, the results' events and cards and every log that changed are
read through them) and deleting it loses nothing. For each task it keeps what its ``.mem`` keeps
to know its log unchanged (store.mem_log.LogCheck) and what identifies the ``.mem`` itself (its
inode, size and modification time, and the CRC of its head); a search serves a task from the join
only when the log's ``stat`` shows it unchanged by the ``.mem``'s own rule and the ``.mem`` is the
one the join was built from. Every other task (a log changed, grown, cut, replaced or new, a
``.mem`` rebuilt) is read through its own view, as without the join; a join that does not read
(damaged, cut, foreign, of another version) is not used and is written again.

Layout (little-endian after the frame)::

    0    codec frame header (store.codec.HEADER): b"NRJN", version u16 BE, flags u16 BE (0)
    8    u32   CRC-32 of the fixed head
    12   fixed head (:data:`_HEAD`): counts, widths, the words, events and ``.mem`` versions, and
         a table of sections [offset, length, CRC-32]
    ..   sections, 8-byte aligned:
         ids      the task ids, UTF-8, each followed by a newline
         tasks    :data:`_TASK` × T: each task's log check, its .mem's identity, its counts
         keys     u64 × K      every word key of every task, ascending
         poff     u32 × (K+1)  word i's postings are postings[poff[i]:poff[i+1]]
         bcheck   u16 × K      a check of word i's key and postings (store.mem_format's block
                               check, its key folded in)
         docs     u16 × P, or u32 past 65,536 documents: each posting's document, ascending in a
                  word; the documents are every task's ranked events end to end, task after task
         tfs      u8, u16 or u32 × P (the head's width): each posting's weighted frequency
         doc_len  u32 × D      each document's weighted length

A search reads the head, the table of tasks and the documents' lengths (each checked by its CRC),
one search of ``keys`` for all its words, and the blocks of the words it finds (each checked by
its block check). The file is mapped: only the pages a search reads are read.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.errors import FormatError, RetrievalError
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY
from nodwyn_retrieval.retrieval.events import EVENTS_VERSION
from nodwyn_retrieval.retrieval.words import WORDS_VERSION
from nodwyn_retrieval.store.atomic import file_lock, open_stored
from nodwyn_retrieval.store.codec import HEADER
from nodwyn_retrieval.store.mem_fold import I64, U32, U64, Fold, word_key
from nodwyn_retrieval.store.mem_format import (
    VERSION as MEM_VERSION,
)
from nodwyn_retrieval.store.mem_format import (
    MemIndex,
    _block_check,
    _block_checks,
    fold_of,
)
from nodwyn_retrieval.store.mem_log import LogCheck

__all__ = [
    "JOIN_NAME",
    "MAGIC",
    "VERSION",
    "Join",
    "JoinDamaged",
    "JoinEntry",
    "JoinedMem",
    "encode_join",
    "join_path",
    "joined_mem",
]

log = logging.getLogger("nodwyn_retrieval.store.mem_join")

JOIN_NAME = "earlier.join"
"""The joined words' file in the tasks directory."""
MAGIC = b"NRJN"
VERSION = 1

_SECTIONS = ("ids", "tasks", "keys", "poff", "bcheck", "docs", "tfs", "doc_len", "rest")
_REST = (
    "doc_event",
    "ev_seq",
    "ev_off",
    "ev_len",
    "ev_turn",
    "ev_kind",
    "ev_agent",
    "names",
    "cards",
)
"""The sections of each task's ``.mem`` the join keeps as they are, with their CRCs."""
_WHOLE = frozenset({"ids", "tasks", "doc_len"})
"""The sections a search reads whole, checked by their CRC."""
_S = {name: i for i, name in enumerate(_SECTIONS)}
_HEAD = struct.Struct(
    "<"
    "Q"  # tasks
    "Q"  # words (distinct keys)
    "Q"  # postings
    "Q"  # docs
    "B"  # doc width: 2 or 4
    "B"  # frequency width: 1, 2 or 4
    "6x"
    "I"  # WORDS_VERSION
    "I"  # EVENTS_VERSION
    "I"  # the .mem's VERSION
    "4x" + "QQI" * len(_SECTIONS)
)
_CRC = struct.Struct("<I")
_BASE = HEADER.size + _CRC.size + _HEAD.size
_TASK = struct.Struct(
    "<"
    "Q"  # covered: the log bytes its .mem covers
    "32s"  # head_sha
    "32s"  # tail_sha
    "Q"  # log_ino
    "Q"  # log_size
    "q"  # log_mtime_ns
    "q"  # log_ctime_ns
    "q"  # built_ns: its .mem's build
    "I"  # mem_crc: the CRC of its .mem's head
    "I"  # docs
    "Q"  # events
    "Q"  # cards
    "Q"  # first_seq
    "Q"  # last_seq
    "Q"  # skipped: the log's lines that are not events
    "Q" + "QQI" * len(_REST)  # total_length  # each kept section's offset in rest, length and CRC
)
_POFF_PAIR = struct.Struct("<II")
_U16 = struct.Struct("<H")
_ALIGN = 8
_DOC_DTYPES = {2: "<u2", 4: "<u4"}
_TF_DTYPES = {1: "<u1", 2: "<u2", 4: "<u4"}


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


class JoinDamaged(FormatError):
    """The join does not read, or no longer agrees with a task's ``.mem``: the search goes on
    without it (each task through its own view) and it is written again."""


def _bad(what: str) -> JoinDamaged:
    return JoinDamaged(f"{JOIN_NAME} {what}: rebuild")


def join_path(tasks_dir: Path) -> Path:
    """The joined words' file of a tasks directory."""
    return Path(tasks_dir) / JOIN_NAME


def _key_fold(key: int) -> int:
    k = key ^ (key >> 32)
    return (k ^ (k >> 16)) & 0xFFFF


# -- writing -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Part:
    """One task as the join takes it: its head's figures, the sections kept as they are, and
    its documents' lengths; its postings are the ``.mem``'s fold's (``fold``) or the old join's
    (``entry``)."""

    id: str
    head: tuple[Any, ...]
    """The task row's figures before the kept sections (_TASK)."""
    kept: list[bytes]
    doc_len: npt.NDArray[np.int64]
    fold: Fold | None = None
    entry: JoinEntry | None = None


def _from_mem(tid: str, data: bytes) -> _Part:
    mem = MemIndex.from_bytes(data)
    (crc,) = _CRC.unpack_from(data, HEADER.size)
    f = mem.fold()  # every section checked
    c = mem.check
    head = (
        *(mem.covered, c.head_sha, c.tail_sha, c.ino, c.size, c.mtime_ns, c.ctime_ns, c.built_ns),
        *(crc, mem.n_docs, mem.n_events, mem.n_cards, mem.first_seq, mem.last_seq),
        *(mem.skipped, mem.total_length),
    )
    kept = [mem._section(name) for name in _REST]
    return _Part(tid, head, kept, f.doc_len, fold=f)


def _from_join(join: Join, e: JoinEntry) -> _Part:
    c = e.check
    head = (
        *(c.covered, c.head_sha, c.tail_sha, c.ino, c.size, c.mtime_ns, c.ctime_ns),
        *(c.built_ns, e.mem_crc, e.n_docs, e.n_events, e.n_cards, e.first_seq, e.last_seq),
        *(e.skipped, e.total_length),
    )
    kept = [join.kept(e, name) for name in _REST]
    return _Part(e.id, head, kept, join.lengths(e).astype(np.int64), entry=e)


def _small_uint(top: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest unsigned type holding 0..top (a stable sort of it is a radix sort)."""
    return np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32


def encode_join(tasks: Sequence[tuple[str, bytes | None]], old: Join | None = None) -> bytes:
    """The join of the tasks, in the order a search ranks them: ``(task id, its .mem's bytes)``
    each, or ``(task id, None)`` for a task taken from ``old`` as it holds it. FormatError when
    one of them does not read; ValueError for an id that is empty or holds a newline, or one to
    take from a join that does not hold it."""
    taken: list[_Part] = []
    for tid, data in tasks:
        if "\n" in tid or not tid:
            raise ValueError(f"task id {tid!r} cannot be joined")
        if data is not None:
            taken.append(_from_mem(tid, data))
        elif old is not None and tid in old.entries:
            taken.append(_from_join(old, old.entries[tid]))
        else:
            raise ValueError(f"task {tid} is to be taken from a join that does not hold it")
    bases = np.cumsum([0, *(int(p.doc_len.shape[0]) for p in taken)])
    d = int(bases[-1])
    olds = [(i, p.entry) for i, p in enumerate(taken) if p.entry is not None]
    z = np.zeros(0, dtype=np.int64)
    sets = [p.fold.keys for p in taken if p.fold is not None]
    if olds and old is not None:
        o_keys, o_words, o_docs, o_tfs = old.all_words()  # every block checked
        sets.append(o_keys)
    all_keys: U64 = np.unique(np.concatenate(sets)) if sets else z.astype(np.uint64)
    k = int(all_keys.shape[0])
    words: list[npt.NDArray[np.int64]] = []
    docs: list[npt.NDArray[np.int64]] = []
    tfs: list[npt.NDArray[np.int64]] = []
    if olds and old is not None:
        # The old join's postings of the tasks kept, renumbered where they now are.
        n_old = len(old.entries)
        task_of = np.repeat(np.arange(n_old), np.diff(old._bases))[o_docs]
        shift = np.zeros(n_old, dtype=np.int64)
        keep = np.zeros(n_old, dtype=bool)
        for i, e in olds:
            shift[e.index] = int(bases[i]) - e.base
            keep[e.index] = True
        mine = keep[task_of]
        words.append(np.searchsorted(all_keys, o_keys).astype(np.int64)[o_words[mine]])
        docs.append(o_docs[mine] + shift[task_of[mine]])
        tfs.append(o_tfs[mine])
    for i, p in enumerate(taken):
        f = p.fold
        if f is not None:
            words.append(np.searchsorted(all_keys, f.keys).astype(np.int64)[f.pair_word])
            docs.append(f.pair_doc + int(bases[i]))
            tfs.append(f.pair_tf)
    pw = np.concatenate(words) if words else z
    pd = np.concatenate(docs) if docs else z
    pt = np.concatenate(tfs) if tfs else z
    if pw.size > 1:
        sw, sd = np.diff(pw), np.diff(pd)
        if not bool(np.all((sw > 0) | ((sw == 0) & (sd > 0)))):
            # By document, then (stably) by word: every word's documents ascending.
            order = np.argsort(pd.astype(_small_uint(d)), kind="stable")
            order = order[np.argsort(pw[order].astype(_small_uint(k)), kind="stable")]
            pw, pd, pt = pw[order], pd[order], pt[order]
    counts = np.bincount(pw, minlength=k).astype(np.int64)
    poff = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=poff[1:])
    dw = 2 if d <= 1 << 16 else 4
    top = int(pt.max()) if pt.size else 0
    tw = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4
    width = np.full(k, tw, dtype=np.int64)
    checks = _block_checks(pd, pt, counts, width, counts * (dw + tw)).astype(np.uint64)
    kf = all_keys ^ (all_keys >> np.uint64(32))
    kf = (kf ^ (kf >> np.uint64(16))) & np.uint64(0xFFFF)
    bcheck = (checks ^ kf).astype("<u2")
    ids = "".join(p.id + "\n" for p in taken).encode("utf-8")
    rest = bytearray()
    rows: list[bytes] = []
    for p in taken:
        where: list[int] = []
        for data in p.kept:
            where += [len(rest), len(data), zlib.crc32(data)]
            rest += data
        rows.append(_TASK.pack(*p.head, *where))
    sections = [
        ids,
        b"".join(rows),
        all_keys.astype("<u8").tobytes(),
        poff.astype("<u4").tobytes(),
        bcheck.tobytes(),
        pd.astype(_DOC_DTYPES[dw]).tobytes(),
        pt.astype(_TF_DTYPES[tw]).tobytes(),
        (np.concatenate([p.doc_len for p in taken]) if taken else z).astype("<u4").tobytes(),
        bytes(rest),
    ]
    body = bytearray()
    entries: list[int] = []
    for name, sec in zip(_SECTIONS, sections, strict=True):
        body += b"\0" * (_align(len(body)) - len(body))
        # The sections read whole have a CRC; the words' blocks have their own checks, and so
        # has each section kept in rest.
        entries += [len(body), len(sec), zlib.crc32(sec) if name in _WHOLE else 0]
        body += sec
    head = _HEAD.pack(
        len(taken), k, int(pd.shape[0]), d, dw, tw, WORDS_VERSION, EVENTS_VERSION, MEM_VERSION,
        *entries,
    )  # fmt: skip
    out = bytearray(HEADER.pack(MAGIC, VERSION, 0))
    out += _CRC.pack(zlib.crc32(head)) + head
    out += b"\0" * (_align(len(out)) - len(out))
    return bytes(out + body)


# -- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinEntry:
    """One task of the join: where its documents are, what its ``.mem`` was, where the sections
    kept from it are."""

    index: int
    """Its place in the join."""
    id: str
    base: int
    """Its first document in the join."""
    check: LogCheck
    """Its ``.mem``'s check of the log."""
    mem_crc: int
    n_docs: int
    n_events: int
    n_cards: int
    first_seq: int
    last_seq: int
    skipped: int
    total_length: int
    rest: tuple[int, ...]
    """Each kept section's offset in ``rest``, length and CRC, three by three (_REST's order)."""

    def serves(self, st: os.stat_result) -> bool:
        """Whether the join holds this task as its log now is: the log unchanged by its
        ``.mem``'s rule (LogCheck.unchanged), and holding nothing after what it covers."""
        return st.st_size == self.check.covered and self.check.unchanged(st)


class Join:
    """An open ``earlier.join``: its head, tasks and lengths read and checked, nothing else.

    What a search asks of it is remembered for that search only (the words' places and
    postings), and dropped with the file at :meth:`close`."""

    def __init__(self, buf: mmap.mmap | bytes, path: Path | None = None) -> None:
        self._buf = buf
        self.path = path
        self._found: dict[bytes, tuple[list[int], list[int], list[int]]] = {}
        self._blocks: dict[int, tuple[list[int], list[int], list[int]]] = {}
        try:
            self._parse()
        except FormatError:
            self.close()
            raise

    @classmethod
    def open(cls, tasks_dir: Path) -> Join | None:
        """The tasks directory's join, mapped; None when there is none. JoinDamaged when it does
        not read."""
        path = join_path(tasks_dir)
        try:
            fd = open_stored(path, "join")
        except FileNotFoundError:
            return None
        except RetrievalError as exc:  # not a file (a FIFO would block the open), unreadable
            raise _bad(f"cannot be read ({exc})") from None
        try:
            size = os.fstat(fd).st_size
            buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size >= _BASE else None
        except (OSError, ValueError) as exc:
            raise _bad(f"cannot be read ({exc})") from None
        finally:
            os.close(fd)
        if buf is None:
            raise _bad(f"of {size} bytes is shorter than its head")
        return cls(buf, path)

    def close(self) -> None:
        self._found = {}
        self._blocks = {}
        if isinstance(self._buf, mmap.mmap) and not self._buf.closed:
            # An array over it still held: the collector closes it.
            with contextlib.suppress(BufferError):
                self._buf.close()

    def discard(self) -> None:
        """Remove the file, found damaged (under the directory's lock): the next search writes
        it again, and each task is read through its own view until then."""
        if self.path is not None:
            _discard(self.path.parent)

    def all_words(self) -> tuple[U64, I64, I64, I64]:
        """Every posting of the join: the keys (ascending), and each posting's word (an index
        into them), document and frequency, by word then document. Every block is checked."""
        k, p, dw, tw = self.n_words, self.n_postings, self._dw, self._tw
        buf = self._buf
        keys = np.frombuffer(buf, dtype="<u8", count=k, offset=self._at[_S["keys"]]).copy()
        poff = np.frombuffer(buf, dtype="<u4", count=k + 1, offset=self._at[_S["poff"]])
        poff = poff.astype(np.int64)
        bcheck = np.frombuffer(buf, dtype="<u2", count=k, offset=self._at[_S["bcheck"]])
        bcheck = bcheck.astype(np.uint64)
        docs = np.frombuffer(buf, dtype=_DOC_DTYPES[dw], count=p, offset=self._at[_S["docs"]])
        docs = docs.astype(np.int64)
        tfs = np.frombuffer(buf, dtype=_TF_DTYPES[tw], count=p, offset=self._at[_S["tfs"]])
        tfs = tfs.astype(np.int64)
        counts = np.diff(poff)
        if k and (int(poff[0]) != 0 or int(poff[-1]) != p or bool(np.any(counts <= 0))):
            raise _bad("word entries are not a partition of the postings")
        if k and bool(np.any(keys[1:] <= keys[:-1])):
            raise _bad("keys are not ascending")
        if docs.size and (int(docs.max()) >= self.n_docs or int(tfs.max()) > MAX_QUANTITY):
            raise _bad("posting is out of range")
        width = np.full(k, tw, dtype=np.int64)
        kf = keys ^ (keys >> np.uint64(32))
        kf = (kf ^ (kf >> np.uint64(16))) & np.uint64(0xFFFF)
        got = _block_checks(docs, tfs, counts, width, counts * (dw + tw)).astype(np.uint64)
        if not np.array_equal(got ^ kf, bcheck):
            raise _bad("postings fail their checks")
        words = np.repeat(np.arange(k, dtype=np.int64), counts)
        return keys, words, docs, tfs

    def task_words(self, e: JoinEntry) -> tuple[U64, I64, I64, I64]:
        """One task's words as its ``.mem``'s fold holds them: its keys (ascending), and each
        posting's word (an index into them), document and frequency, by word then document."""
        keys, words, docs, tfs = self.all_words()
        mine = (docs >= e.base) & (docs < e.base + e.n_docs)
        ids, pair_word = np.unique(words[mine], return_inverse=True)
        return keys[ids], pair_word.astype(np.int64), docs[mine] - e.base, tfs[mine]

    def __enter__(self) -> Join:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parse(self) -> None:
        buf = self._buf
        size = len(buf)
        if size < _BASE:
            raise _bad(f"of {size} bytes is shorter than its head")
        magic, version, flags = HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise _bad(f"is not a join (magic {bytes(magic)!r})")
        if version != VERSION or flags:
            raise _bad(f"format version {version}, flags 0x{flags:04x} are not {VERSION}, 0")
        (crc,) = _CRC.unpack_from(buf, HEADER.size)
        head = buf[HEADER.size + _CRC.size : _BASE]
        if zlib.crc32(head) != crc:
            raise _bad("head fails its check")
        f = _HEAD.unpack(head)
        t, k, p, d, dw, tw = f[:6]
        if tuple(f[6:9]) != (WORDS_VERSION, EVENTS_VERSION, MEM_VERSION):
            raise _bad("words, events or .mem versions are not this program's")
        if dw not in _DOC_DTYPES or tw not in _TF_DTYPES or (dw == 2 and d > 1 << 16):
            raise _bad("widths are not 2 or 4 and 1, 2 or 4")
        table: tuple[int, ...] = f[9:]
        offs, lens, crcs = table[0::3], table[1::3], table[2::3]
        want = (lens[0], _TASK.size * t, 8 * k, 4 * (k + 1), 2 * k, dw * p, tw * p, 4 * d, lens[8])
        if lens != want:
            raise _bad("sections are not the lengths their counts say")
        base = _align(_BASE)
        if max(o + n for o, n in zip(offs, lens, strict=True)) + base > size:
            raise _bad("a section lies outside the file")
        self._at = [base + o for o in offs]
        self._rest_len = lens[8]
        self.n_words, self.n_postings, self.n_docs = k, p, d
        self._dw, self._tw = dw, tw
        ids = self._checked("ids", lens[0], crcs[0])
        tasks = self._checked("tasks", lens[1], crcs[1])
        try:
            names = ids.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise _bad("task ids are not UTF-8") from None
        if len(names) != t + 1 or names[-1]:
            raise _bad("task ids are not the head's count")
        entries: dict[str, JoinEntry] = {}
        bases: list[int] = []
        at = 0
        for i, (tid, row) in enumerate(zip(names, _TASK.iter_unpack(tasks), strict=False)):
            cov, hs, ts, lino, lsize, lm, lc, built, mcrc, n_docs, n_events, n_cards = row[:12]
            if not tid or tid in entries or n_docs > n_events:
                raise _bad("tasks are not distinct, or their counts are off")
            check = LogCheck(cov, hs, ts, lino, lsize, lm, lc, built)
            entries[tid] = JoinEntry(
                i,
                tid,
                at,
                check,
                mcrc,
                n_docs,
                n_events,
                n_cards,
                row[12],
                row[13],
                row[14],
                row[15],
                row[16:],
            )
            bases.append(at)
            at += n_docs
        if at != d:
            raise _bad("tasks' documents are not the head's count")
        self.entries = entries
        self._bases = np.array([*bases, d], dtype=np.int64)
        lengths = np.frombuffer(self._checked("doc_len", lens[7], crcs[7]), dtype="<u4")
        if lengths.size and int(lengths.max()) > MAX_QUANTITY:
            raise _bad("document length past 2**31-1")
        self._lengths: U32 = lengths.astype(np.uint32)
        if k and self._poff(k) != (0, p):
            raise _bad("postings are not the length their offsets say")

    def _checked(self, name: str, length: int, crc: int) -> bytes:
        off = self._at[_S[name]]
        data = bytes(self._buf[off : off + length])
        if zlib.crc32(data) != crc:
            raise _bad(f"section {name} fails its check")
        return data

    def kept(self, e: JoinEntry, name: str) -> bytes:
        """One section kept from a task's ``.mem``, checked by its CRC."""
        k = _REST.index(name)
        off, length, crc = e.rest[3 * k : 3 * k + 3]
        if off + length > self._rest_len:
            raise _bad(f"section {name} of task {e.id} lies outside the file")
        at = self._at[_S["rest"]] + off
        data = bytes(self._buf[at : at + length])
        if zlib.crc32(data) != crc:
            raise _bad(f"section {name} of task {e.id} fails its check")
        return data

    def _poff(self, i: int) -> tuple[int, int]:
        """(poff[0], poff[i]) when asked for k; otherwise word i's (start, end)."""
        at = self._at[_S["poff"]]
        if i == self.n_words:
            return (
                struct.unpack_from("<I", self._buf, at)[0],
                struct.unpack_from("<I", self._buf, at + 4 * i)[0],
            )
        pair: tuple[int, int] = _POFF_PAIR.unpack_from(self._buf, at + 4 * i)
        return pair

    def lengths(self, e: JoinEntry) -> U32:
        """A task's documents' weighted lengths."""
        return self._lengths[e.base : e.base + e.n_docs]

    def found(self, e: JoinEntry, keys: U64) -> tuple[list[int], list[int]]:
        """:meth:`MemIndex.found_keys` for one task: the positions in ``keys`` of the words it
        holds, and each one's index in the join. Worked out for every task at once, the first
        time a search asks with these keys."""
        memo = keys.tobytes()
        got = self._found.get(memo)
        if got is None:
            got = self._found[memo] = self._find_all(keys)
        qs, gs, starts = got
        a, b = starts[e.index], starts[e.index + 1]
        return qs[a:b], gs[a:b]

    def index_of(self, key: int) -> int | None:
        """The index of the word with this key, or None."""
        k = self.n_words
        if not k:
            return None
        arr = np.frombuffer(self._buf, dtype="<u8", count=k, offset=self._at[_S["keys"]])
        try:
            i = min(int(arr.searchsorted(np.uint64(key))), k - 1)
            hit = int(arr[i]) == key
        finally:
            del arr
        return i if hit else None

    def _find_all(self, keys: U64) -> tuple[list[int], list[int], list[int]]:
        """For every task, the positions in ``keys`` of the words it holds and their indices
        here: ``(positions, indices, starts)``, task i's being ``[starts[i]:starts[i + 1]]``."""
        t = len(self.entries)
        k = self.n_words
        if not k or not keys.size:
            return [], [], [0] * (t + 1)
        arr = np.frombuffer(self._buf, dtype="<u8", count=k, offset=self._at[_S["keys"]])
        try:
            at = np.minimum(arr.searchsorted(keys), k - 1)
            ok = arr.take(at) == keys
        finally:
            del arr
        qs = np.flatnonzero(ok)
        if not qs.size:
            return [], [], [0] * (t + 1)
        gs = at[qs]
        # Each found word's postings split by task: a task holds the word when its part is not
        # empty.
        held = np.diff(np.array([self._block(int(g))[2] for g in gs.tolist()]), axis=1) > 0
        qi, ti = np.nonzero(held)  # by word, then task
        order = np.argsort(ti, kind="stable")  # by task, then word
        qi, ti = qi[order], ti[order]
        starts = np.searchsorted(ti, np.arange(t + 1)).tolist()
        return qs[qi].tolist(), gs[qi].tolist(), starts

    def _block(self, g: int) -> tuple[list[int], list[int], list[int]]:
        """Word g's postings, checked, as lists, and where each task's part of them starts."""
        got = self._blocks.get(g)
        if got is not None:
            return got
        if not 0 <= g < self.n_words:
            raise _bad(f"has no word {g}")
        a, b = self._poff(g)
        if not a < b <= self.n_postings:
            raise _bad(f"entry of word {g} is out of bounds")
        n, dw, tw = b - a, self._dw, self._tw
        buf = self._buf
        docs = np.frombuffer(
            buf, dtype=_DOC_DTYPES[dw], count=n, offset=self._at[_S["docs"]] + a * dw
        ).astype(np.int64)
        tfs = np.frombuffer(
            buf, dtype=_TF_DTYPES[tw], count=n, offset=self._at[_S["tfs"]] + a * tw
        ).astype(np.int64)
        (check,) = _U16.unpack_from(buf, self._at[_S["bcheck"]] + 2 * g)
        (key,) = struct.unpack_from("<Q", buf, self._at[_S["keys"]] + 8 * g)
        if _block_check(docs, tfs, tw, n * (dw + tw)) ^ _key_fold(key) != check:
            raise _bad(f"postings of word {g} fail their check")
        if int(docs.max()) >= self.n_docs or int(tfs.max()) > MAX_QUANTITY:
            raise _bad("posting is out of range")
        if n > 1 and bool(np.any(docs[1:] <= docs[:-1])):
            raise _bad("postings are not in document order")
        starts: list[int] = np.searchsorted(docs, self._bases).tolist()
        got = (docs.tolist(), tfs.tolist(), starts)
        self._blocks[g] = got
        return got

    def postings(self, e: JoinEntry, g: int, base: int) -> tuple[list[int], list[int]]:
        """Word g's postings in one task, its documents numbered from ``base``."""
        docs, tfs, starts = self._block(g)
        s, t = starts[e.index], starts[e.index + 1]
        shift = base - e.base
        d = docs[s:t]
        return ([x + shift for x in d] if shift else d), tfs[s:t]


_REST_LENGTHS = {
    "doc_event": lambda m: 4 * m.n_docs,
    "ev_seq": lambda m: 8 * m.n_events,
    "ev_off": lambda m: 8 * m.n_events,
    "ev_len": lambda m: 4 * m.n_events,
    "ev_turn": lambda m: 4 * m.n_events,
    "ev_kind": lambda m: m.n_events,
    "ev_agent": lambda m: 2 * m.n_events,
}


class JoinedMem(MemIndex):
    """A task's ``.mem`` read from the join: the words, postings and lengths from the joined
    words, the events, names and cards from the sections kept from its ``.mem`` (read and
    checked by MemIndex's own code), its fold (to extend it) from both. Anything off in the join
    is :class:`JoinDamaged`, and the join is removed: the task is then read from its log."""

    def __init__(self, join: Join, entry: JoinEntry, *, owns: bool = False) -> None:
        self._join = join
        self._je = entry
        self._owns = owns
        self._buf = b""
        self.path = join.path
        self._names = None
        self._cards_raw = None
        self._events = None
        self._doc_events = None
        self._card_turns = []
        self.covered = entry.check.covered
        self.first_seq = entry.first_seq
        self.last_seq = entry.last_seq
        self.n_events = entry.n_events
        self.n_docs = entry.n_docs
        self.n_words = 0
        self.n_cards = entry.n_cards
        self.check = entry.check
        self.total_length = entry.total_length
        self.skipped = entry.skipped
        self.doc_width = 4

    def __repr__(self) -> str:
        return f"<JoinedMem {self._je.id}: {self.n_docs:,} documents>"

    def close(self) -> None:
        if self._owns:
            self._join.close()

    def _damaged(self, exc: JoinDamaged) -> JoinDamaged:
        self._join.discard()
        return exc

    def _section(self, name: str) -> bytes:
        try:
            data = self._join.kept(self._je, name)
            want = _REST_LENGTHS.get(name)
            if want is not None and len(data) != want(self):
                raise _bad(f"section {name} of task {self._je.id} is not its counts' length")
        except JoinDamaged as exc:
            raise self._damaged(exc) from None
        return data

    # -- the words, from the join -------------------------------------------------------------

    def found_keys(self, keys: U64) -> tuple[list[int], list[int]]:
        try:
            return self._join.found(self._je, keys)
        except JoinDamaged as exc:
            raise self._damaged(exc) from None

    def find_keys(self, keys: U64) -> npt.NDArray[np.int64]:
        out = np.full(keys.shape[0], -1, dtype=np.int64)
        hit, where = self.found_keys(keys)
        out[hit] = where
        return out

    def postings_many(
        self, wanted: Sequence[tuple[int, list[int], list[int]]], base: int
    ) -> list[int]:
        try:
            for g, docs, tfs in wanted:
                d, t = self._join.postings(self._je, g, base)
                docs.extend(d)
                tfs.extend(t)
        except JoinDamaged as exc:
            raise self._damaged(exc) from None
        return []

    def postings_at(self, i: int) -> tuple[U32, U32]:
        try:
            d, t = self._join.postings(self._je, i, 0)
        except JoinDamaged as exc:
            raise self._damaged(exc) from None
        return np.array(d, dtype=np.uint32), np.array(t, dtype=np.uint32)

    def postings(self, word: str, key: int | None = None) -> tuple[U32, U32]:
        i = self._join.index_of(word_key(word) if key is None else key)
        if i is None:
            empty = np.zeros(0, dtype=np.uint32)
            return empty, empty
        return self.postings_at(i)

    def lengths(self) -> U32:
        return self._join.lengths(self._je)

    def fold(self) -> Fold:
        """Everything the task's ``.mem`` held, as a fold to extend (MemIndex.fold's)."""
        try:
            keys, pair_word, pair_doc, pair_tf = self._join.task_words(self._je)
        except JoinDamaged as exc:
            raise self._damaged(exc) from None
        return fold_of(self, keys, pair_doc, pair_word, pair_tf)


def joined_mem(log_path: Path, st: os.stat_result) -> JoinedMem | None:
    """The ``.mem`` of a log of a tasks directory as its directory's join holds it, when the
    join holds that log (its ``.mem``'s check then decides, as for the file's); None otherwise.
    A join that does not read is removed."""
    name = log_path.name
    if not name.endswith(".jsonl"):
        return None
    try:
        join = Join.open(log_path.parent)
    except JoinDamaged as exc:
        log.info("%s", exc)
        _discard(log_path.parent)
        return None
    if join is None:
        return None
    e = join.entries.get(name[: -len(".jsonl")])
    if e is None or st.st_size < e.check.covered:
        join.close()
        return None
    return JoinedMem(join, e, owns=True)


def _discard(tasks_dir: Path) -> None:
    from nodwyn_retrieval.store.mem import LOCK_NAME, LOCK_SECONDS  # noqa: PLC0415

    path = join_path(tasks_dir)
    try:
        with file_lock(tasks_dir / LOCK_NAME, timeout=LOCK_SECONDS):
            path.unlink(missing_ok=True)
    except (OSError, TimeoutError) as exc:
        log.warning("cannot remove %s: %s", path, exc)
