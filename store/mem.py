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
search finds each of its words by one binary search of ``keys`` in the mapped file; extending a
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

When the log has grown by whole turns, the ``.mem`` is extended to cover them from its own
postings and the new events, without reading the log's beginning again. It is written atomically
(store.atomic) under a lock in the log's directory (``.mem.lock``); a writer that finds, under the
lock, a ``.mem`` matching the log and covering as much leaves it.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import mmap
import os
import stat
import struct
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, count, pairwise
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from filelock import Timeout
from nodwyn_retrieval.errors import FormatError, NotFound, StoreError
from nodwyn_retrieval.guard.redact import redact
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY, Segment, SegmentBuilder
from nodwyn_retrieval.retrieval.events import (
    EVENTS_VERSION,
    Card,
    CardMaker,
    Memo,
    agent_of,
    event_counts,
    event_fields,
    kind_of,
    turn_of,
)
from nodwyn_retrieval.retrieval.words import WORDS_VERSION, runs, word_table
from nodwyn_retrieval.store.atomic import file_lock, store_error, write_atomic
from nodwyn_retrieval.store.codec import HEADER, decode, encode
from nodwyn_retrieval.store.log import event_of

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
    "word_key",
    "word_keys",
]

log = logging.getLogger("store.mem")

MAGIC = b"NRME"
VERSION = 1
HEAD_BYTES = 4096
"""The check hashes the covered bytes' first this many bytes..."""
TAIL_BYTES = 64 * 1024
"""...and their last this many: a rewrite or a cut of the log shows in one or the other."""
RACY_NS = 2_000_000_000
"""A log whose change time is within this of the build is hashed at every check (module doc)."""
LOCK_NAME = ".mem.lock"
"""The lock every writer of a ``.mem`` in one directory takes (store.atomic.file_lock)."""
LOCK_SECONDS = 30.0
READ_WHOLE = 256 * 1024
"""A ``.mem`` up to this size is read whole; a bigger one is mapped (:meth:`MemIndex.open`)."""

_SECTIONS = (
    "keys",
    "poff",
    "width",
    "bcheck",
    "postings",
    "doc_len",
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
_S = {name: i for i, name in enumerate(_SECTIONS)}
_EV_DTYPES = {
    "ev_seq": "<u8",
    "ev_off": "<u8",
    "ev_len": "<u4",
    "ev_turn": "<u4",
    "ev_kind": "<u1",
    "ev_agent": "<u2",
}
_HEAD = struct.Struct(
    "<"
    "Q"  # covered: the log bytes it covers
    "Q"  # first_seq
    "Q"  # last_seq
    "Q"  # events
    "Q"  # docs
    "Q"  # words
    "Q"  # cards
    "Q"  # total_length
    "Q"  # skipped: lines of the log that are not events
    "B7x"  # doc_width: 2 or 4
    "Q"  # log_ino
    "Q"  # log_size
    "q"  # log_mtime_ns
    "q"  # log_ctime_ns
    "q"  # built_ns
    "32s"  # head_sha
    "32s"  # tail_sha
    "I"  # WORDS_VERSION
    "I" + "QQI" * len(_SECTIONS)  # EVENTS_VERSION
)
_CRC = struct.Struct("<I")
_BASE = HEADER.size + _CRC.size + _HEAD.size
_ALIGN = 8
_TF_DTYPES: dict[int, str] = {1: "<u1", 2: "<u2", 4: "<u4"}
_TF_CODES = {1: "B", 2: "H", 4: "I"}
_SMALL_BLOCK = 48
"""Up to this many postings a block is read and checked with plain integers."""
_MAX_LINE = 1 << 30
_LITTLE = sys.byteorder == "little"
"""Keys are stored little-endian: on such a machine they are searched as native integers."""

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


def mem_path(log_path: Path) -> Path:
    """``<task-id>.mem`` beside ``<task-id>.jsonl`` (any other name: the name with ``.mem``)."""
    return Path(_mem_file(os.fspath(log_path)))


def _mem_file(log_path: str) -> str:
    return log_path[: -len(".jsonl")] + ".mem" if log_path.endswith(".jsonl") else log_path + ".mem"


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MIX1 = 0xFF51AFD7ED558CCD
_MIX2 = 0xC4CEB9FE1A85EC53
_M64 = (1 << 64) - 1


def word_key(word: str) -> int:
    """A word's key in a ``.mem``: FNV-1a over its UTF-8 bytes, then murmur3's finaliser so that
    every bit of the key depends on every byte. :func:`word_keys` for many words at once."""
    h = _FNV_OFFSET
    for b in word.encode("utf-8", "surrogatepass"):
        h = ((h ^ b) * _FNV_PRIME) & _M64
    h ^= h >> 33
    h = (h * _MIX1) & _M64
    h ^= h >> 33
    h = (h * _MIX2) & _M64
    return h ^ (h >> 33)


def word_keys(words: Sequence[str]) -> U64:
    """:func:`word_key` of each word, computed a byte position at a time for all of them."""
    data = [w.encode("utf-8", "surrogatepass") for w in words]
    n = len(data)
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=n)
    flat = np.frombuffer(b"".join(data), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(_FNV_PRIME)
    for j in range(int(lengths.max()) if n else 0):
        live = np.flatnonzero(lengths > j)
        h[live] = (h[live] ^ flat[starts[live] + j].astype(np.uint64)) * prime
    s33 = np.uint64(33)
    h ^= h >> s33
    h *= np.uint64(_MIX1)
    h ^= h >> s33
    h *= np.uint64(_MIX2)
    h ^= h >> s33
    return h


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _bad(what: str) -> FormatError:
    return FormatError(f".mem {what}: rebuild")


# -- reading the log ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event of a log and where its line lies."""

    event: dict[str, Any]
    """The event as the line holds it."""
    offset: int
    """The byte offset of its line in the log."""
    length: int
    """The line's length in bytes, without its newline."""


def parse_lines(data: bytes, base: int, after_seq: int) -> tuple[list[LoggedEvent], int, int]:
    """The events of ``data``, the log's bytes from offset ``base``, as store.log.read_log reads
    them: complete lines only (a torn last line waits to be completed), a line that is not an
    event, or whose seq is not above the one before (or ``after_seq``), skipped and counted.

    Returns the events, the offset just past the last complete line, and the count skipped.
    """
    events: list[LoggedEvent] = []
    skipped = 0
    last = after_seq
    pos = 0
    end = data.rfind(b"\n") + 1
    find = data.find
    while pos < end:
        nl = find(b"\n", pos)
        event = event_of(data[pos:nl])
        if event is None or event["seq"] <= last:
            skipped += 1
        else:
            last = event["seq"]
            events.append(LoggedEvent(event, base + pos, nl - pos))
        pos = nl + 1
    return events, base + end, skipped


def covered_end(events: Sequence[LoggedEvent], start: int) -> tuple[int, int]:
    """``(offset just past the last turn.end's line, how many events up to it)``; ``(start, 0)``
    when none closes a turn: the ``.mem`` covers whole turns only (LOG-FORMAT.md)."""
    for i in range(len(events) - 1, -1, -1):
        le = events[i]
        if le.event.get("kind") == "turn.end":
            return le.offset + le.length + 1, i + 1
    return start, 0


class LogCheck(NamedTuple):
    """What a ``.mem`` keeps to know its log still holds what it was built from. (A named tuple:
    one is made for every ``.mem`` a search opens.)"""

    covered: int
    """The log bytes it covers."""
    head_sha: bytes
    """SHA-256 of the covered bytes' first :data:`HEAD_BYTES`."""
    tail_sha: bytes
    """SHA-256 of the covered bytes' last :data:`TAIL_BYTES`."""
    ino: int
    """The log's inode at the build."""
    size: int
    """Its size at the build."""
    mtime_ns: int
    """Its modification time at the build."""
    ctime_ns: int
    """Its change time at the build."""
    built_ns: int
    """When the build read it."""

    @classmethod
    def of(cls, f: Any, covered: int, st: os.stat_result) -> LogCheck:
        """The check of the open log f, covered up to ``covered``, as ``st`` found it."""
        head, tail = _log_hashes(f, covered)
        return cls(
            covered,
            head,
            tail,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            time.time_ns(),
        )

    def unchanged(self, st: os.stat_result) -> bool:
        """Whether ``stat`` alone shows the log as it was built from: the same inode, size and
        times, the change time older than the build by more than :data:`RACY_NS`."""
        return (
            st.st_ino == self.ino
            and st.st_size == self.size
            and st.st_mtime_ns == self.mtime_ns
            and st.st_ctime_ns == self.ctime_ns
            and self.ctime_ns < self.built_ns - RACY_NS
        )

    def hashes_match(self, f: Any) -> bool:
        """Whether the open log f holds, at the covered bytes' ends, what it was built from."""
        if os.fstat(f.fileno()).st_size < self.covered:
            return False
        return _log_hashes(f, self.covered) == (self.head_sha, self.tail_sha)

    def holds(self, f: Any) -> bool:
        """Whether the open log f still holds, up to :attr:`covered`, what this was made of."""
        return self.unchanged(os.fstat(f.fileno())) or self.hashes_match(f)


def _digest(f: Any, start: int, end: int) -> bytes:
    """SHA-256 of the bytes start:end of the open file f (pread: no shared position)."""
    if end <= start:
        return hashlib.sha256(b"").digest()
    data = os.pread(f.fileno(), end - start, start)
    if len(data) != end - start:
        return b""
    return hashlib.sha256(data).digest()


def _log_hashes(f: Any, covered: int) -> tuple[bytes, bytes]:
    return (
        _digest(f, 0, min(HEAD_BYTES, covered)),
        _digest(f, max(0, covered - TAIL_BYTES), covered),
    )


# -- folding events ------------------------------------------------------------------------------


@dataclass(slots=True)
class Fold:
    """Events folded into the arrays a ``.mem`` is encoded from. Documents are the ranked events,
    numbered in log order; ``(doc, word)`` pairs may repeat, and repeats add up when encoded."""

    keys: U64
    """The words' keys (:func:`word_key`); ``pair_word`` indexes it."""
    pair_doc: I64
    """Each posting's document."""
    pair_word: I64
    """Each posting's word."""
    pair_tf: I64
    """Each posting's weighted count."""
    doc_len: I64
    """Each document's weighted length."""
    doc_event: I64
    """Each document's event, an index into the ``ev`` arrays."""
    ev: dict[str, npt.NDArray[Any]]
    """The event arrays, by section name (``ev_seq``, ...)."""
    kinds: list[str]
    """The kinds ``ev_kind`` indexes."""
    agents: list[str]
    """The agents ``ev_agent`` indexes."""
    cards: list[Card]
    """The turns' cards."""

    @property
    def n_docs(self) -> int:
        return int(self.doc_len.shape[0])

    @property
    def n_events(self) -> int:
        return int(self.ev["ev_seq"].shape[0])


def _index(table: dict[str, int], name: str, limit: int) -> int:
    i = table.get(name)
    if i is None:
        if len(table) >= limit:
            # Past 255 kinds or 65,535 agents a log is not what this format is for; the rest
            # share the last name, which only labels results.
            return limit - 1
        i = table[name] = len(table)
    return i


def _spans(lengths: I64) -> tuple[I64, I64]:
    """For groups of the given lengths laid end to end: each item's group, and its place in it."""
    total = int(lengths.sum())
    group = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    return group, np.arange(total, dtype=np.int64) - starts[group]


def _sum_repeats(keys: I64, values: I64) -> tuple[I64, I64]:
    """keys sorted, each once, with the values of its repeats added up."""
    srt = np.argsort(keys, kind="stable")
    keys, values = keys[srt], values[srt]
    if keys.size:
        first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        values = np.add.reduceat(values, first)
        keys = keys[first]
    return keys, values


def fold_events(events: Sequence[LoggedEvent]) -> Fold:
    """Fold events (in log order) into arrays: every event's place, the ranked ones' words.

    The words are those of :func:`retrieval.events.event_counts`, found for the whole batch at
    once: each distinct text (a file read again is one text) is redacted and cut into runs, every
    distinct run of the batch goes through the word splitter's table once, and the (text, word)
    counts are spread to the documents that hold each text, with its weight, in numpy. A text's
    counts are its runs' words, each counted once per occurrence of its run, which is what
    ``word_counts`` adds up one run at a time; a word two runs of one text give is listed twice
    here and added up when the postings are sorted (:func:`_encode`).
    """
    kinds: dict[str, int] = {}
    agents: dict[str, int] = {}
    cards = CardMaker()
    ev_seq: list[int] = []
    ev_off: list[int] = []
    ev_len: list[int] = []
    ev_turn: list[int] = []
    ev_kind: list[int] = []
    ev_agent: list[int] = []
    doc_event: list[int] = []
    texts: dict[str, int] = {}
    f_doc: list[int] = []
    f_text: list[int] = []
    f_weight: list[int] = []
    for e, le in enumerate(events):
        event = le.event
        ev_seq.append(event["seq"])
        ev_off.append(le.offset)
        ev_len.append(le.length)
        ev_turn.append(min(turn_of(event), 2**32 - 1))
        ev_kind.append(_index(kinds, kind_of(event), 255))
        ev_agent.append(_index(agents, agent_of(event), 65535))
        cards.add(event)
        fields = event_fields(event)
        if fields is None:
            continue
        d = len(doc_event)
        doc_event.append(e)
        for text, weight in fields:
            f_doc.append(d)
            f_text.append(texts.setdefault(text, len(texts)))
            f_weight.append(weight)
    n_docs = len(doc_event)

    # Each distinct text's distinct runs and how often each occurs, in text order.
    run_index: defaultdict[bytes, int] = defaultdict(count().__next__)
    occ_runs: list[int] = []
    occ_counts: list[int] = []
    occ_len: list[int] = []
    for text in texts:
        found = Counter(runs(redact(text).text)) if text else Counter[bytes]()
        occ_len.append(len(found))
        occ_runs.extend(map(run_index.__getitem__, found))
        occ_counts.extend(found.values())
    # Every distinct run's words, through this thread's table (its ids hold for this call).
    table = word_table()
    shared = list(map(table.ids, map(table.__getitem__, run_index)))
    word_index: defaultdict[int, int] = defaultdict(count().__next__)
    flat = np.fromiter(map(word_index.__getitem__, chain.from_iterable(shared)), dtype=np.int64)
    words = list(map(table.words.__getitem__, word_index))
    # Words become keys; two words sharing one (module doc) become one.
    keys, key_of = np.unique(word_keys(words), return_inverse=True)
    flat = key_of.astype(np.int64)[flat] if flat.size else flat
    per_run = np.fromiter(map(len, shared), dtype=np.int64, count=len(shared))
    occ = np.asarray(occ_runs, dtype=np.int64)
    occ_n = np.asarray(occ_counts, dtype=np.int64)
    t_len = np.asarray(occ_len, dtype=np.int64)

    # (text, run, count) to (text, word, count), still in text order.
    if bool(np.all(per_run == 1)):
        t_word, tcounts = flat[occ], occ_n
    else:
        first_word = np.cumsum(per_run) - per_run
        lens = per_run[occ]
        w_run, nth = _spans(lens)
        t_word = flat[first_word[occ][w_run] + nth]
        tcounts = occ_n[w_run]
        occ_text, _ = _spans(t_len)
        t_len = np.bincount(occ_text, weights=lens, minlength=len(texts)).astype(np.int64)
    t_start = np.cumsum(t_len) - t_len

    # Each document's texts, weighted.
    fd = np.asarray(f_doc, dtype=np.int64)
    ft = np.asarray(f_text, dtype=np.int64)
    fw = np.asarray(f_weight, dtype=np.int64)
    item, place = _spans(t_len[ft])
    src = t_start[ft][item] + place
    pair_doc = fd[item]
    pair_tf = tcounts[src] * fw[item]
    doc_len = np.bincount(pair_doc, weights=pair_tf, minlength=n_docs)
    return Fold(
        keys=keys,
        pair_doc=pair_doc,
        pair_word=t_word[src],
        pair_tf=pair_tf,
        doc_len=np.minimum(np.rint(doc_len), MAX_QUANTITY).astype(np.int64),
        doc_event=np.asarray(doc_event, dtype=np.int64),
        ev={
            name: np.asarray(values, dtype=_EV_DTYPES[name])
            for name, values in (
                ("ev_seq", ev_seq),
                ("ev_off", ev_off),
                ("ev_len", ev_len),
                ("ev_turn", ev_turn),
                ("ev_kind", ev_kind),
                ("ev_agent", ev_agent),
            )
        },
        kinds=list(kinds),
        agents=list(agents),
        cards=cards.cards(),
    )


def merge_cards(old: Sequence[Card], new: Sequence[Card]) -> list[Card]:
    """The cards of a log's beginning and of what follows it, as one list by turn; a turn in both
    (a log that went on with a turn after closing it) is one card."""
    by_turn: dict[int, Card] = {c.turn: c for c in old}
    for c in new:
        o = by_turn.get(c.turn)
        if o is None:
            by_turn[c.turn] = c
            continue
        by_turn[c.turn] = Card(
            turn=c.turn,
            first=min(o.first, c.first),
            last=max(o.last, c.last),
            start=o.start or c.start,
            line=o.line or c.line,
            calls=o.calls + c.calls,
            events=o.events + c.events,
            compactions=o.compactions + c.compactions,
            whole=o.whole or c.whole,
        )
    return [by_turn[t] for t in sorted(by_turn)]


def merge_folds(a: Fold, b: Fold) -> Fold:
    """One fold holding a's documents and events, then b's (which come after them in the log)."""
    keys, inverse = np.unique(np.concatenate([a.keys, b.keys]), return_inverse=True)
    amap, bmap = inverse[: a.keys.shape[0]], inverse[a.keys.shape[0] :]
    kinds = {k: i for i, k in enumerate(a.kinds)}
    kmap = np.asarray([_index(kinds, k, 255) for k in b.kinds] or [0], dtype=np.int64)
    agents = {g: i for i, g in enumerate(a.agents)}
    gmap = np.asarray([_index(agents, g, 65535) for g in b.agents] or [0], dtype=np.int64)
    ev: dict[str, npt.NDArray[Any]] = {}
    for name, dtype in _EV_DTYPES.items():
        right = np.asarray(b.ev[name])
        if name == "ev_kind":
            right = kmap[right.astype(np.int64)]
        elif name == "ev_agent":
            right = gmap[right.astype(np.int64)]
        ev[name] = np.concatenate([np.asarray(a.ev[name]).astype(dtype), right.astype(dtype)])
    return Fold(
        keys=keys.astype(np.uint64),
        pair_doc=np.concatenate([a.pair_doc, b.pair_doc + a.n_docs]),
        pair_word=np.concatenate([amap[a.pair_word], bmap[b.pair_word]]),
        pair_tf=np.concatenate([a.pair_tf, b.pair_tf]),
        doc_len=np.concatenate([a.doc_len, b.doc_len]),
        doc_event=np.concatenate([a.doc_event, b.doc_event + a.n_events]),
        ev=ev,
        kinds=list(kinds),
        agents=list(agents),
        cards=merge_cards(a.cards, b.cards),
    )


# -- encoding ------------------------------------------------------------------------------------

# A block's check: sums of its documents and its position-weighted frequencies, with its width and
# size, multiplied by odd constants modulo 2**32 and folded to 16 bits. Computed for every word at
# once with numpy when writing and for the few words a search reads when reading; a changed byte
# changes a sum, so a damaged block is found with a chance of 65,535 in 65,536. (A CRC a word would
# cost a Python call per word when writing.)
_MASK32 = 0xFFFFFFFF
_M_DOC = 0x165667B1
_M_TF = 0xC2B2AE3D
_M_WIDTH = 0x9E3779B1
_M_SIZE = 0x85EBCA77


def _fold16(h: int) -> int:
    return (h ^ (h >> 16)) & 0xFFFF


def _block_check(docs: npt.NDArray[Any], tfs: npt.NDArray[Any], width: int, size: int) -> int:
    """The check of one postings block: :func:`_block_checks` for one word. The sums are taken
    modulo 2**64 as there, and only their low 32 bits are used."""
    n = docs.shape[0]
    sd = (int(docs.sum(dtype=np.uint64)) + n) & _MASK32
    st = int(np.dot(tfs.astype(np.uint64), np.arange(1, n + 1, dtype=np.uint64)))
    st = (st + n * (n + 1) // 2) & _MASK32
    return _fold16((sd * _M_DOC + st * _M_TF + width * _M_WIDTH + size * _M_SIZE) & _MASK32)


def _block_checks(docs: I64, tfs: I64, counts: I64, width: I64, block: I64) -> npt.NDArray[Any]:
    """Every word's block check; postings sorted by word, ``counts`` of them each."""
    v = counts.shape[0]
    if not v:
        return np.zeros(0, dtype=np.uint16)
    m = np.uint64(_MASK32)
    starts = np.cumsum(counts) - counts
    _, place = _spans(counts)
    pos = (place + 1).astype(np.uint64)
    sd: U64 = np.add.reduceat(docs.astype(np.uint64) + np.uint64(1), starts)
    st: U64 = np.add.reduceat((tfs.astype(np.uint64) + np.uint64(1)) * pos, starts)
    h = (sd * np.uint64(_M_DOC) + st * np.uint64(_M_TF)) & m
    h = (h + width.astype(np.uint64) * np.uint64(_M_WIDTH)) & m
    h = (h + block.astype(np.uint64) * np.uint64(_M_SIZE)) & m
    out: npt.NDArray[Any] = ((h ^ (h >> np.uint64(16))) & np.uint64(0xFFFF)).astype(np.uint16)
    return out


def _payload(obj: object) -> bytes:
    """obj as store.codec frames it, without the frame's header: a section read with
    :func:`_unframe`."""
    return encode(MAGIC, VERSION, obj)[HEADER.size :]


def _unframe(data: bytes) -> object:
    """A section written by :func:`_payload`, through store.codec's bounded decoding."""
    return decode(MAGIC, VERSION, HEADER.pack(MAGIC, VERSION, 0) + data)


def _encode(fold: Fold, check: LogCheck, skipped: int) -> bytes:
    """The bytes of a ``.mem`` holding fold (the layout of the module docstring)."""
    n_docs = fold.n_docs
    # Postings by (word in key order, document), repeats added up.
    order = np.argsort(fold.keys, kind="stable")
    rank = np.empty(order.shape[0], dtype=np.int64)
    rank[order] = np.arange(order.shape[0], dtype=np.int64)
    wr = rank[fold.pair_word] if fold.pair_word.size else fold.pair_word
    span = max(n_docs, 1)
    pkeys, tfs = _sum_repeats(wr * span + fold.pair_doc, fold.pair_tf)
    np.minimum(tfs, MAX_QUANTITY, out=tfs)
    wr = pkeys // span
    docs = pkeys - wr * span
    # A word with no posting left (its only text was empty) leaves the vocabulary.
    present = np.bincount(wr, minlength=order.shape[0]) > 0
    keys = fold.keys[order][present]
    if not bool(np.all(present)):
        remap = np.cumsum(present) - 1
        wr = remap[wr]
    n_words = int(keys.shape[0])
    counts = np.bincount(wr, minlength=n_words).astype(np.int64)
    starts = np.cumsum(counts) - counts
    maxtf = np.maximum.reduceat(tfs, starts) if docs.size else np.zeros(0, dtype=np.int64)
    width = np.where(maxtf < 256, 1, np.where(maxtf < 65536, 2, 4)).astype(np.int64)
    dw = 2 if n_docs <= 65536 else 4
    block = counts * (dw + width)
    poff = np.zeros(n_words + 1, dtype=np.int64)
    np.cumsum(block, out=poff[1:])
    total = int(poff[-1])
    if total >= 2**32:
        raise StoreError("a .mem's postings would pass 4 GiB: not written")
    out = np.zeros(total, dtype=np.uint8)
    if docs.size:
        _, rel = _spans(counts)
        pos = poff[wr] + rel * dw
        for k in range(dw):
            out[pos + k] = (docs >> (8 * k)) & 0xFF
        tw = width[wr]
        pos = poff[wr] + counts[wr] * dw + rel * tw
        for k in range(4):
            m = tw > k
            out[pos[m] + k] = (tfs[m] >> (8 * k)) & 0xFF
    lengths = np.minimum(fold.doc_len, MAX_QUANTITY)
    frame = HEADER.pack(MAGIC, VERSION, 0)
    blobs: dict[str, bytes] = {
        "keys": keys.astype("<u8").tobytes(),
        "poff": poff.astype("<u4").tobytes(),
        "width": width.astype("<u1").tobytes(),
        "bcheck": _block_checks(docs, tfs, counts, width, block).astype("<u2").tobytes(),
        "postings": out.tobytes(),
        "doc_len": lengths.astype("<u4").tobytes(),
        "doc_event": fold.doc_event.astype("<u4").tobytes(),
        **{k: np.ascontiguousarray(fold.ev[k], dtype=dt).tobytes() for k, dt in _EV_DTYPES.items()},
        "names": _payload({"kinds": fold.kinds, "agents": fold.agents}),
        "cards": _payload([c.to_obj() for c in fold.cards]),
    }
    table: list[int] = []
    parts: list[bytes] = []
    at = 0
    for name in _SECTIONS:
        data = blobs[name]
        table.extend((at, len(data), zlib.crc32(data)))
        parts.append(data)
        pad = _align(at + len(data)) - (at + len(data))
        parts.append(b"\0" * pad)
        at += len(data) + pad
    seq = fold.ev["ev_seq"]
    head = _HEAD.pack(
        check.covered,
        int(seq[0]) if seq.shape[0] else 0,
        int(seq[-1]) if seq.shape[0] else 0,
        fold.n_events,
        n_docs,
        n_words,
        len(fold.cards),
        int(lengths.sum()),
        skipped,
        dw,
        check.ino,
        check.size,
        check.mtime_ns,
        check.ctime_ns,
        check.built_ns,
        check.head_sha,
        check.tail_sha,
        WORDS_VERSION,
        EVENTS_VERSION,
        *table,
    )
    gap = b"\0" * (_align(_BASE) - _BASE)
    return b"".join([frame, _CRC.pack(zlib.crc32(head)), head, gap, *parts])


@dataclass(frozen=True, slots=True)
class MemBuild:
    """A ``.mem``'s bytes and what they cover."""

    data: bytes
    """The file's bytes."""
    covered: int
    """The log bytes it covers."""
    events: int
    """Events it holds."""
    docs: int
    """Ranked events it holds."""


def build_mem(
    events: Sequence[LoggedEvent],
    *,
    check: LogCheck,
    skipped: int = 0,
    base: MemIndex | None = None,
) -> MemBuild:
    """The ``.mem`` of ``events``, the log's events up to ``check.covered`` in order.

    With ``base``, an open ``.mem`` of the same log's beginning, the result holds its documents,
    events and cards first and ``events`` (those after ``base.covered``) after them: the log's
    beginning is not read again. FormatError when ``base`` turns out damaged.
    """
    fold = fold_events(events)
    if base is not None:
        fold = merge_folds(base.fold(), fold)
        skipped += base.skipped
    return MemBuild(_encode(fold, check, skipped), check.covered, fold.n_events, fold.n_docs)


# -- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventArrays:
    """Every event a ``.mem`` covers: its seq, where its line lies, its turn, kind and agent."""

    seq: U64
    """Seqs, ascending."""
    off: U64
    """Each line's byte offset in the log."""
    length: U32
    """Each line's length without its newline."""
    turn: U32
    """Each event's turn."""
    kind: npt.NDArray[np.uint8]
    """Each event's kind, an index into :attr:`MemIndex.kinds`."""
    agent: npt.NDArray[np.uint16]
    """Each event's agent, an index into :attr:`MemIndex.agents`."""

    def find(self, seq: int) -> int | None:
        """The index of the event with this seq, or None."""
        if seq < 0 or seq >= 2**64:
            return None
        i = int(np.searchsorted(self.seq, np.uint64(seq)))
        if i < self.seq.shape[0] and int(self.seq[i]) == seq:
            return i
        return None


class MemIndex:
    """An open ``.mem``: its fixed head read and checked, its sections located and bounded,
    nothing else read.

    Backed by a read-only memory map of the file (or by bytes): :meth:`close` it, or use it as a
    context manager. Every method raises :class:`errors.FormatError` for anything off about the
    file, and nothing else.
    """

    def __init__(self, buf: mmap.mmap | bytes, *, path: Path | str | None = None) -> None:
        self._buf = buf
        self.path = path
        self._names: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self._cards_raw: list[Any] | None = None
        self._card_turns: list[int] = []
        try:
            self._parse_head()
        except FormatError:
            self.close()
            raise

    @classmethod
    def open(cls, path: Path | str) -> MemIndex:
        """Read or map the ``.mem`` at path. FileNotFoundError when there is none; FormatError
        when it is empty, unreadable or not one."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _bad(f"cannot be read ({exc})") from None
        try:
            size = os.fstat(fd).st_size
            if size < _BASE:
                raise _bad(f"of {size} bytes is shorter than its head")
            # Mapping a file costs more than reading a small one whole (more system calls and
            # page faults against one read); a big one is mapped, and only what a search reads
            # is ever paged in.
            buf: mmap.mmap | bytes
            if size <= READ_WHOLE:
                buf = os.read(fd, size)
                while len(buf) < size:
                    more = os.read(fd, size - len(buf))
                    if not more:
                        raise _bad("was cut while it was read")
                    buf += more
            else:
                buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except FormatError:
            raise
        except (OSError, ValueError) as exc:
            raise _bad(f"cannot be read ({exc})") from None
        finally:
            os.close(fd)
        return cls(buf, path=path)

    @classmethod
    def from_bytes(cls, data: bytes) -> MemIndex:
        return cls(data)

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap) and not self._buf.closed:
            self._buf.close()

    def __enter__(self) -> MemIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<MemIndex {self.path} covers {self.covered:,} bytes: {self.n_events:,} events, "
            f"{self.n_docs:,} ranked, {self.n_words:,} words>"
        )

    # -- the head ---------------------------------------------------------------------------

    def _parse_head(self) -> None:
        buf = self._buf
        size = len(buf)
        if size < _BASE:
            raise _bad(f"of {size} bytes is shorter than its head")
        magic, version, flags = HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise _bad(f"is not a .mem (magic {bytes(magic)!r})")
        if version != VERSION:
            raise _bad(f"format version {version} is not {VERSION}")
        if flags:
            raise _bad(f"has unknown flags 0x{flags:04x}")
        (crc,) = _CRC.unpack_from(buf, HEADER.size)
        head = buf[HEADER.size + _CRC.size : _BASE]
        if zlib.crc32(head) != crc:
            raise _bad("head fails its check")
        f = _HEAD.unpack(head)
        self.covered: int = f[0]
        self.first_seq: int = f[1]
        self.last_seq: int = f[2]
        self.n_events: int = f[3]
        self.n_docs: int = f[4]
        self.n_words: int = f[5]
        self.n_cards: int = f[6]
        self.total_length: int = f[7]
        self.skipped: int = f[8]
        self.doc_width: int = f[9]
        ino, lsize, mtime, ctime, built, head_sha, tail_sha = f[10:17]
        self.check = LogCheck(self.covered, head_sha, tail_sha, ino, lsize, mtime, ctime, built)
        words_version, events_version = f[17:19]
        if (words_version, events_version) != (WORDS_VERSION, EVENTS_VERSION):
            raise _bad(
                f"words and events versions {words_version}, {events_version} are not this "
                f"program's {WORDS_VERSION}, {EVENTS_VERSION}"
            )
        if self.doc_width not in (2, 4) or (self.doc_width == 2 and self.n_docs > 65536):
            raise _bad("document width is not 2 or 4")
        if self.n_docs > self.n_events or self.n_events > size or self.n_words > size:
            raise _bad("counts pass what the file could hold")
        base = _align(_BASE)
        table: tuple[int, ...] = f[19:]
        offs, lens = table[0::3], table[1::3]
        v, d, e = self.n_words, self.n_docs, self.n_events
        want: tuple[int, ...] = (8 * v, 4 * (v + 1), v, 2 * v, lens[4], 4 * d, 4 * d)
        want += (8 * e, 8 * e, 4 * e, 4 * e, e, 2 * e, lens[13], lens[14])
        if lens != want:
            raise _bad("sections are not the lengths their counts say")
        if max(o + n for o, n in zip(offs, lens, strict=True)) + base > size:
            raise _bad("a section lies outside the file")
        self._sec = [(base + o, n, c) for o, n, c in zip(offs, lens, table[2::3], strict=True)]
        if self.n_words and self._u32("poff", v) != self._sec[_S["postings"]][1]:
            raise _bad("postings are not the length their offsets say")

    # -- sections ---------------------------------------------------------------------------

    def _section(self, name: str) -> bytes:
        """A section's bytes, checked against its CRC."""
        off, length, crc = self._sec[_S[name]]
        data = bytes(self._buf[off : off + length])
        if zlib.crc32(data) != crc:
            raise _bad(f"section {name} fails its check")
        return data

    def _u32(self, name: str, i: int) -> int:
        value: int = struct.unpack_from("<I", self._buf, self._sec[_S[name]][0] + 4 * i)[0]
        return value

    def _find(self, key: int) -> int | None:
        """The index of the word with this key, by binary search of the stored keys."""
        v = self.n_words
        if not v:
            return None
        off = self._sec[_S["keys"]][0]
        view = memoryview(self._buf)[off : off + 8 * v]
        try:
            if _LITTLE:
                keys = view.cast("Q")
                i = bisect.bisect_left(keys, key)
                hit = i < v and keys[i] == key
                keys.release()
            else:
                arr = np.frombuffer(view, dtype="<u8")
                i = int(np.searchsorted(arr, np.uint64(key)))
                hit = i < v and int(arr[i]) == key
                del arr
        finally:
            view.release()  # the map cannot close while a view of it is held
        return i if hit else None

    def postings(self, word: str, key: int | None = None) -> tuple[U32, U32]:
        """The documents holding word (ascending) and its weighted frequency in each, checked.
        ``key`` is the word's :func:`word_key`, when the caller has it already."""
        empty = np.zeros(0, dtype=np.uint32)
        i = self._find(word_key(word) if key is None else key)
        if i is None:
            return empty, empty
        buf = self._buf
        p_at = self._sec[_S["poff"]][0] + 4 * i
        pa, pb = struct.unpack_from("<II", buf, p_at)
        width = buf[self._sec[_S["width"]][0] + i]
        (check,) = struct.unpack_from("<H", buf, self._sec[_S["bcheck"]][0] + 2 * i)
        dtype = _TF_DTYPES.get(width)
        dw = self.doc_width
        if dtype is None or not pa < pb <= self._sec[_S["postings"]][1]:
            raise _bad(f"entry of word {i} is out of bounds")
        n, rest = divmod(pb - pa, dw + width)
        if rest:
            raise _bad("postings block is not a whole number of postings")
        p0 = self._sec[_S["postings"]][0] + pa
        if n <= _SMALL_BLOCK:
            # A few postings: plain integers cost less than numpy's calls.
            dl = struct.unpack_from(f"<{n}{'H' if dw == 2 else 'I'}", buf, p0)
            tl = struct.unpack_from(f"<{n}{_TF_CODES[width]}", buf, p0 + n * dw)
            sd = sum(dl) + n
            st = sum(t * j for j, t in enumerate(tl, 1)) + n * (n + 1) // 2
            h = (sd * _M_DOC + st * _M_TF + width * _M_WIDTH + (pb - pa) * _M_SIZE) & _MASK32
            if _fold16(h) != check:
                raise _bad(f"postings of word {i} fail their check")
            if max(dl) >= self.n_docs or max(tl) > MAX_QUANTITY:
                raise _bad("posting is out of range")
            return np.array(dl, dtype=np.uint32), np.array(tl, dtype=np.uint32)
        block = bytes(buf[p0 : p0 + (pb - pa)])
        docs = np.frombuffer(block, dtype="<u2" if dw == 2 else "<u4", count=n).astype(np.uint32)
        tfs = np.frombuffer(block, dtype=dtype, count=n, offset=n * dw).astype(np.uint32)
        if _block_check(docs, tfs, width, pb - pa) != check:
            raise _bad(f"postings of word {i} fail their check")
        if int(docs.max()) >= self.n_docs or (width == 4 and int(tfs.max()) > MAX_QUANTITY):
            raise _bad("posting is out of range")
        return docs, tfs

    def lengths(self) -> U32:
        """Each document's weighted length."""
        arr = np.frombuffer(self._section("doc_len"), dtype="<u4").astype(np.uint32)
        if arr.size and int(arr.max()) > MAX_QUANTITY:
            raise _bad("document length past 2**31-1")
        return arr

    def doc_events(self) -> U32:
        """Each document's event, an index into :meth:`events`."""
        arr = np.frombuffer(self._section("doc_event"), dtype="<u4").astype(np.uint32)
        if arr.size and (int(arr.max()) >= self.n_events or bool(np.any(arr[1:] <= arr[:-1]))):
            raise _bad("documents do not name events in order")
        return arr

    def segment(self, words: Iterable[str], keys: Mapping[str, int] | None = None) -> Segment:
        """A segment holding only ``words``' postings and every document's length: what
        :func:`retrieval.bm25.search_all` needs to score them exactly as the whole index would.
        ``keys`` maps the words to their keys, computed once for a search of many logs."""
        found: list[str] = []
        d_parts: list[U32] = []
        t_parts: list[U32] = []
        for w in dict.fromkeys(words):
            docs, tfs = self.postings(w, keys.get(w) if keys is not None else None)
            if docs.size:
                found.append(w)
                d_parts.append(docs)
                t_parts.append(tfs)
        offsets = np.zeros(len(found) + 1, dtype=np.int64)
        np.cumsum([d.size for d in d_parts], out=offsets[1:])
        z = np.zeros(0, dtype=np.uint32)
        return Segment(
            found,
            offsets,
            np.concatenate(d_parts) if d_parts else z,
            np.concatenate(t_parts) if t_parts else z,
            self.lengths(),
        )

    def _names_of(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if self._names is None:
            obj = _unframe(self._section("names"))
            if not isinstance(obj, dict):
                raise _bad("names are not a map")
            kinds, agents = obj.get("kinds"), obj.get("agents")
            if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
                raise _bad("kinds are not names")
            if not isinstance(agents, list) or not all(isinstance(a, str) for a in agents):
                raise _bad("agents are not names")
            self._names = (tuple(kinds), tuple(agents))
        return self._names

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds the event arrays name."""
        return self._names_of()[0]

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents the event arrays name."""
        return self._names_of()[1]

    def events(self) -> EventArrays:
        """Every covered event's seq, line, turn, kind and agent, checked."""
        ev = EventArrays(
            seq=np.frombuffer(self._section("ev_seq"), dtype="<u8").astype(np.uint64),
            off=np.frombuffer(self._section("ev_off"), dtype="<u8").astype(np.uint64),
            length=np.frombuffer(self._section("ev_len"), dtype="<u4").astype(np.uint32),
            turn=np.frombuffer(self._section("ev_turn"), dtype="<u4").astype(np.uint32),
            kind=np.frombuffer(self._section("ev_kind"), dtype="<u1").astype(np.uint8),
            agent=np.frombuffer(self._section("ev_agent"), dtype="<u2").astype(np.uint16),
        )
        if self.n_events:
            if (
                bool(np.any(ev.seq[1:] <= ev.seq[:-1]))
                or int(ev.seq[0]) != self.first_seq
                or int(ev.seq[-1]) != self.last_seq
            ):
                raise _bad("event seqs are not ascending")
            if int(ev.length.max()) > _MAX_LINE or int(ev.off.max()) >= self.covered:
                raise _bad("event line lies past what it covers")
            ends = ev.off + ev.length.astype(np.uint64)
            if int(ends.max()) >= self.covered:
                raise _bad("event line lies past what it covers")
            if int(ev.kind.max()) >= max(len(self.kinds), 1):
                raise _bad("event kind is not named")
            if int(ev.agent.max()) >= max(len(self.agents), 1):
                raise _bad("event agent is not named")
        return ev

    def _raw_cards(self) -> list[Any]:
        if self._cards_raw is None:
            obj = _unframe(self._section("cards"))
            if not isinstance(obj, list) or len(obj) != self.n_cards:
                raise _bad("cards are not a list of the head's length")
            turns = [c[0] if isinstance(c, list) and c and type(c[0]) is int else -1 for c in obj]
            if any(t < 0 for t in turns) or any(a >= b for a, b in pairwise(turns)):
                raise _bad("cards are not in turn order")
            self._cards_raw = obj
            self._card_turns = turns
        return self._cards_raw

    def cards(self) -> list[Card]:
        """The turns' cards, in turn order."""
        try:
            return [Card.from_obj(c) for c in self._raw_cards()]
        except ValueError as exc:
            raise _bad(f"card is not one ({exc})") from None

    def card(self, turn: int) -> Card | None:
        """The card of one turn, or None when this ``.mem`` holds none for it."""
        raw = self._raw_cards()
        i = bisect.bisect_left(self._card_turns, turn)
        if i == len(raw) or self._card_turns[i] != turn:
            return None
        try:
            return Card.from_obj(raw[i])
        except ValueError as exc:
            raise _bad(f"card is not one ({exc})") from None

    def fold(self) -> Fold:
        """Everything this ``.mem`` holds, as a fold to extend: each section checked."""
        keys = np.frombuffer(self._section("keys"), dtype="<u8").astype(np.uint64)
        poff = np.frombuffer(self._section("poff"), dtype="<u4").astype(np.int64)
        width = np.frombuffer(self._section("width"), dtype="<u1").astype(np.int64)
        bcheck = np.frombuffer(self._section("bcheck"), dtype="<u2").astype(np.int64)
        post = np.frombuffer(self._section("postings"), dtype=np.uint8)
        v = self.n_words
        block = np.diff(poff)
        if v and (
            int(poff[0]) != 0
            or int(poff[-1]) != post.size
            or bool(np.any(block <= 0))
            or not bool(np.all(np.isin(width, (1, 2, 4))))
            or bool(np.any(keys[1:] <= keys[:-1]))
        ):
            raise _bad("word entries are not a partition of the postings")
        dw = self.doc_width
        counts, rest = np.divmod(block, dw + width)
        if bool(np.any(rest != 0)):
            raise _bad("postings block is not a whole number of postings")
        wid, rel = _spans(counts)
        pos = poff[:-1][wid] + rel * dw
        docs = np.zeros(wid.shape[0], dtype=np.int64)
        for k in range(dw):
            docs |= post[pos + k].astype(np.int64) << (8 * k)
        tw = width[wid]
        pos = poff[:-1][wid] + counts[wid] * dw + rel * tw
        tfs = np.zeros(wid.shape[0], dtype=np.int64)
        for k in range(4):
            m = tw > k
            tfs[m] |= post[pos[m] + k].astype(np.int64) << (8 * k)
        if docs.size and (int(docs.max()) >= self.n_docs or int(tfs.max()) > MAX_QUANTITY):
            raise _bad("posting names a document past the end")
        if not np.array_equal(_block_checks(docs, tfs, counts, width, block), bcheck):
            raise _bad("postings fail their checks")
        ev = self.events()
        return Fold(
            keys=keys,
            pair_doc=docs,
            pair_word=wid,
            pair_tf=tfs,
            doc_len=self.lengths().astype(np.int64),
            doc_event=self.doc_events().astype(np.int64),
            ev={
                "ev_seq": ev.seq,
                "ev_off": ev.off,
                "ev_len": ev.length,
                "ev_turn": ev.turn,
                "ev_kind": ev.kind,
                "ev_agent": ev.agent,
            },
            kinds=list(self.kinds),
            agents=list(self.agents),
            cards=self.cards(),
        )

    def matches(self, f: Any) -> bool:
        """Whether the open log f still holds what this was built from (:class:`LogCheck`)."""
        return self.check.holds(f)


def postings_of(mem: MemIndex) -> dict[int, dict[int, int]]:
    """Every word's postings as ``{key: {doc: frequency}}``: for tests and inspection."""
    fold = mem.fold()
    out: dict[int, dict[int, int]] = {}
    pairs = zip(fold.pair_word.tolist(), fold.pair_doc.tolist(), fold.pair_tf.tolist(), strict=True)
    for w, d, t in pairs:
        out.setdefault(int(fold.keys[w]), {})[d] = t
    return out


# -- a log as a search sees it -------------------------------------------------------------------


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
    _file: Any = None

    @classmethod
    def open(
        cls, log_path: Path, *, write: bool = True, st: os.stat_result | None = None
    ) -> LogView:
        """Check the log's ``.mem`` against it, rebuild or extend it as needed (written when
        ``write``), and fold the events after it. NotFound when there is no log. ``st`` is the
        log's ``stat`` when the caller has just taken it."""
        view = cls(Path(log_path))
        if st is None:
            try:
                st = os.stat(view.path)
            except FileNotFoundError:
                raise NotFound(f"no log at {view.path}") from None
            except OSError as exc:
                raise store_error("reading", view.path, exc) from exc
        if stat.S_ISDIR(st.st_mode):
            raise NotFound(f"no log at {view.path}: it is a directory")
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
                self._file = open(self.path, "rb")  # noqa: SIM115  closed by close()
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
            return None, "missing"
        except FormatError as exc:
            log.info("%s: %s", mpath, exc)
            return None, str(exc)
        try:
            ok = mem.check.unchanged(st) or mem.check.hashes_match(self._log())
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
        mpath = _mem_file(os.fspath(self.path))
        mem, why = (None, damaged) if damaged is not None else self._checked(mpath, st)
        start = mem.covered if mem is not None else 0
        after = mem.last_seq if mem is not None else 0
        events: list[LoggedEvent] = []
        skipped = 0
        if mem is None or st.st_size != start or not mem.check.unchanged(st):
            f = self._log()
            st = os.fstat(f.fileno())
            data = os.pread(f.fileno(), st.st_size - start, start) if st.st_size > start else b""
            events, _end, skipped = parse_lines(data, start, after)
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
            _remove(Path(mpath))
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
        event = event_of(line) if len(line) == length else None
        if event is None or event["seq"] != seq:
            raise FormatError(f"{self.path} no longer holds seq {seq} where its .mem says: rebuild")
        return event


def _remove(path: Path) -> None:
    try:
        with file_lock(path.parent / LOCK_NAME, timeout=LOCK_SECONDS):
            path.unlink(missing_ok=True)
    except (OSError, Timeout) as exc:
        log.warning("cannot remove %s: %s", path, exc)


def read_fields(mem: MemIndex) -> Mapping[str, int]:
    """The head's counts, for status and tests."""
    return {
        "covered": mem.covered,
        "events": mem.n_events,
        "docs": mem.n_docs,
        "words": mem.n_words,
        "cards": mem.n_cards,
        "total_length": mem.total_length,
    }
