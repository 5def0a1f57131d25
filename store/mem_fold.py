"""Folding a log's events into a ``.mem``'s postings: word keys, the fold of events into
postings and cards, and the merge of two folds (see store.mem)."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.guard.redact import redact
from nodwyn_retrieval.retrieval.analyze import NATIVE
from nodwyn_retrieval.retrieval.blobs import blank_blobs
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY
from nodwyn_retrieval.retrieval.events import (
    Card,
    CardMaker,
    agent_of,
    event_fields,
    kind_of,
    turn_of,
    word_runs,
)
from nodwyn_retrieval.retrieval.words import WordTable, encode, translate, word_table
from nodwyn_retrieval.store.mem_log import LoggedEvent

if TYPE_CHECKING:
    from nodwyn_retrieval.retrieval._words_native import Memo

try:  # the compiled pass retrieval.analyze uses (NATIVE says whether it was built and wanted)
    from nodwyn_retrieval.retrieval import _words_native
except ImportError:  # pragma: no cover - depends on how the package was installed
    _words_native = None  # type: ignore[assignment]

_EV_DTYPES = {
    "ev_seq": "<u8",
    "ev_off": "<u8",
    "ev_len": "<u4",
    "ev_turn": "<u4",
    "ev_kind": "<u1",
    "ev_agent": "<u2",
}

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


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


_local = threading.local()


def _table_keys(table: WordTable) -> U64:
    """The key of each word of this thread's word table, by its id: a word is hashed once for
    all the logs a thread folds (a project's logs share most of their words), not once a log.
    The table only ever appends words, and is replaced, not cleared (retrieval.words)."""
    got: tuple[WordTable, U64] | None = getattr(_local, "keys", None)
    keys = got[1] if got is not None and got[0] is table else np.zeros(0, dtype=np.uint64)
    done = keys.shape[0]
    if done < len(table.words):
        keys = np.concatenate([keys, word_keys(table.words[done:])])
    _local.keys = (table, keys)
    return keys


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
    return group, np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)


_PACK_BITS = 31
"""A key below 2**32 and a value below 2**31 are sorted as one integer: (key << 31) | value."""


def _sum_repeats(keys: I64, values: I64) -> tuple[I64, I64]:
    """keys sorted, each once, with the values of its repeats added up."""
    if not keys.size:
        return keys, values
    lo, hi = int(min(keys.min(), values.min())), int(keys.max())
    if lo >= 0 and hi < 1 << 32 and int(values.max()) < 1 << _PACK_BITS:
        # One sort of packed integers costs less than an argsort and two gathers.
        packed = np.sort((keys << _PACK_BITS) | values)
        keys, values = packed >> _PACK_BITS, packed & ((1 << _PACK_BITS) - 1)
    else:
        srt = np.argsort(keys, kind="stable")
        keys, values = keys[srt], values[srt]
    if keys.size:
        first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        values = np.add.reduceat(values, first)
        keys = keys[first]
    return keys, values


TextWords = tuple[U64, I64, I64, I64]
"""The words of a batch's distinct texts: the words' keys (sorted, each once), then for each
text in order its (word, count) pairs laid end to end, as indices into the keys and counts, and
how many pairs each text has. A text may list one word twice (two of its runs give it): the
counts add up when the postings are encoded."""


def _text_words_python(texts: list[str], table: WordTable) -> TextWords:
    """:data:`TextWords` in Python: each text's runs counted (``Counter``), every distinct run
    of the batch looked up in the table once, and the runs' words spread in numpy."""
    # Each distinct text's distinct runs and how often each occurs, in text order.
    run_index: defaultdict[bytes, int] = defaultdict(count().__next__)
    occ_runs: list[int] = []
    occ_counts: list[int] = []
    occ_len: list[int] = []
    for text in texts:
        found = Counter(word_runs(redact(text).text)) if text else Counter[bytes]()
        occ_len.append(len(found))
        occ_runs.extend(map(run_index.__getitem__, found))
        occ_counts.extend(found.values())
    # Every distinct run's words, through this thread's table (its ids hold for this call).
    codes = np.fromiter(map(table.__getitem__, run_index), dtype=np.int64, count=len(run_index))
    # A code is a word id, NO_WORDS, or -2 - k for the several words multi[k] (retrieval.words):
    # each run's word ids laid end to end, by indexing the table's arrays.
    m_start, m_size, m_flat = table.multi_arrays()
    several = codes <= -2
    per_run = (codes >= 0).astype(np.int64)
    per_run[several] = m_size[-2 - codes[several]]
    w_of, nth = _spans(per_run)
    flat_ids = codes[w_of]
    part = flat_ids <= -2
    flat_ids[part] = m_flat[m_start[-2 - flat_ids[part]] + nth[part]]
    # Words become keys (each word hashed once for the thread's table); two words sharing one
    # (module doc) become one.
    keys, flat = np.unique(_table_keys(table)[flat_ids], return_inverse=True)
    flat = flat.astype(np.int64).reshape(-1)
    occ = np.asarray(occ_runs, dtype=np.int64)
    occ_n = np.asarray(occ_counts, dtype=np.int64)
    t_len = np.asarray(occ_len, dtype=np.int64)

    # (text, run, count) to (text, word, count), still in text order.
    if bool(np.all(per_run == 1)):
        return keys, flat[occ], occ_n, t_len
    first_word = np.cumsum(per_run) - per_run
    lens = per_run[occ]
    w_run, nth = _spans(lens)
    occ_text, _ = _spans(t_len)
    t_len = np.bincount(occ_text, weights=lens, minlength=len(texts)).astype(np.int64)
    return keys, flat[first_word[occ][w_run] + nth], occ_n[w_run], t_len


def _text_words_native(
    texts: list[str], table: WordTable, memo: Memo, blob_hints: Callable[[bytes, bytes], bytes]
) -> TextWords:
    """:data:`TextWords` by the compiled pass of retrieval.analyze: the texts, redacted and laid
    end to end with a space after each, are one buffer; one call (``blob_hints``) says which may
    hold a blob, and those are blanked as :func:`retrieval.events.word_runs` blanks them; one
    call (``Memo.count_texts``) cuts every text's runs, looks each up (in the pass's memo, else
    the table, which expands a run it has not seen) and counts each text's words. memo: the
    pass's memo of this table (``table.native``); blob_hints: the pass's ``blob_hints``."""
    parts = [encode(redact(t).text) if t else b"" for t in texts]
    n = len(parts)
    bounds = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=n) + 1, out=bounds[1:])
    parts.append(b"")
    data = b" ".join(parts)
    # Blobs blanked where the pass's first looks say a text may hold one (most texts hold none):
    # blank_blobs decides (a text's span holds the space after it, which may only make one more
    # text looked at). Blanking keeps every byte's place, so the bounds hold.
    hints = np.flatnonzero(np.frombuffer(blob_hints(data, bounds.tobytes()), dtype=np.uint8))
    buf: bytearray | None = None
    for i, at in zip(hints.tolist(), bounds[hints].tolist(), strict=True):
        blanked = blank_blobs(parts[i])
        if blanked is not parts[i]:  # (it is the text itself when it holds no blob: most)
            if buf is None:
                buf = bytearray(data)  # the buffer copied once, and only when a blob is found
            buf[at : at + len(parts[i])] = blanked
    if buf is not None:
        data = bytes(buf)
    distinct, offsets, word, counts = memo.count_texts(table, translate(data), bounds.tobytes())
    ids = np.frombuffer(distinct, dtype=np.int64)
    keys, inverse = np.unique(_table_keys(table)[ids], return_inverse=True)
    t_word = inverse.astype(np.int64).reshape(-1)[np.frombuffer(word, dtype=np.int64)]
    off = np.frombuffer(offsets, dtype=np.int64)
    t_len = off[1:] - off[:-1]
    return keys, t_word, np.frombuffer(counts, dtype=np.int64), t_len


def fold_events(events: Sequence[LoggedEvent], *, native: bool = NATIVE) -> Fold:
    """Fold events (in log order) into arrays: every event's place, the ranked ones' words.

    The words are those of :func:`retrieval.events.event_counts`, found for the whole batch at
    once: each distinct text (a file read again is one text) is redacted, its blobs blanked, and
    its words counted, by the compiled pass for all the texts in one call (``native``, the
    default where it was built: :func:`_text_words_native`) or in Python
    (:func:`_text_words_python`); the two give the same ``.mem``. The (text, word) counts are
    spread to the documents that hold each text, with its weight, in numpy. A text's counts are
    its runs' words, each counted once per occurrence of its run, which is what ``word_counts``
    adds up one run at a time; a word listed twice for a document is added up when the postings
    are sorted (:func:`_encode`).
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

    table = word_table()
    if native and _words_native is not None:
        memo = table.native
        if memo is None:
            memo = table.native = _words_native.Memo()
        keys, t_word, tcounts, t_len = _text_words_native(
            list(texts), table, memo, _words_native.blob_hints
        )
    else:
        keys, t_word, tcounts, t_len = _text_words_python(list(texts), table)
    t_start = np.cumsum(t_len) - t_len

    # Each document's texts, weighted.
    fd = np.asarray(f_doc, dtype=np.int64)
    ft = np.asarray(f_text, dtype=np.int64)
    fw = np.asarray(f_weight, dtype=np.int64)
    # Each (document, text) pair's words laid end to end: a value of the pair repeated once a
    # word (np.repeat, a copy, not a gather by index).
    lens = t_len[ft]
    _, place = _spans(lens)
    src = np.repeat(t_start[ft], lens) + place
    pair_doc = np.repeat(fd, lens)
    pair_tf = tcounts[src] * np.repeat(fw, lens)
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
