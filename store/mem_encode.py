"""Writing a ``.mem``: the encoding of a fold into the layout store.mem describes, and the build of
a log's events (or of what follows an open ``.mem``) into those bytes. Reading them is
:mod:`store.mem_format`'s."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.retrieval.analyze import NATIVE
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY
from nodwyn_retrieval.retrieval.events import EVENTS_VERSION
from nodwyn_retrieval.retrieval.words import WORDS_VERSION
from nodwyn_retrieval.store.codec import HEADER, encode
from nodwyn_retrieval.store.mem_fold import (
    _EV_DTYPES,
    I64,
    Fold,
    _spans,
    _sum_repeats,
    fold_events,
    merge_folds,
)
from nodwyn_retrieval.store.mem_format import (
    _BASE,
    _CRC,
    _HEAD,
    _SECTIONS,
    MAGIC,
    VERSION,
    MemIndex,
    _align,
    _block_checks,
)
from nodwyn_retrieval.store.mem_log import LogCheck, LoggedEvent

try:  # the compiled pass retrieval.analyze uses (NATIVE says whether it was built and wanted)
    from nodwyn_retrieval.retrieval import _words_native
except ImportError:  # pragma: no cover - depends on how the package was installed
    _words_native = None  # type: ignore[assignment]

__all__ = ["MemBuild", "build_mem"]


def _payload(obj: object) -> bytes:
    """obj as store.codec frames it, without the frame's header: a section read with
    :func:`_unframe`."""
    return encode(MAGIC, VERSION, obj)[HEADER.size :]


def _postings_sorted(word: I64, doc: I64, tf: I64, n_words: int, span: int) -> tuple[I64, I64]:
    """The postings' keys ``word * span + doc`` sorted, each once, with their counts added up
    (:func:`store.mem_fold._sum_repeats`). A fold's postings come in document order: with fewer
    than 65,536 words, a stable sort of the words alone (a radix sort of 16-bit integers) puts
    them in key order, at a third of the cost of sorting the keys."""
    if 0 < n_words <= 1 << 16 and word.size and bool(np.all(doc[1:] >= doc[:-1])):
        by_word = np.argsort(word.astype(np.uint16), kind="stable")
        keys = word[by_word] * span + doc[by_word]
        first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        return keys[first], np.add.reduceat(tf[by_word], first)
    return _sum_repeats(word * span + doc, tf)


def _postings_bytes(
    wr: I64, docs: I64, tfs: I64, *, counts: I64, width: I64, poff: I64, dw: int, native: bool
) -> bytes:
    """The postings section: postings sorted by word (``wr``), then document; each word's block
    its documents, ``dw`` bytes each, then its counts, ``width`` bytes each, little-endian, at
    ``poff``. By the compiled pass where it was built (``native``), else in numpy; the same
    bytes either way."""
    if native and _words_native is not None:
        return _words_native.postings_bytes(
            docs.tobytes(), tfs.tobytes(), counts.tobytes(), width.tobytes(), dw
        )
    out = np.zeros(int(poff[-1]), dtype=np.uint8)
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
    return out.tobytes()


def _encode(fold: Fold, check: LogCheck, skipped: int) -> bytes:
    """The bytes of a ``.mem`` holding fold (the layout of the module docstring)."""
    n_docs = fold.n_docs
    # Postings by (word in key order, document), repeats added up.
    order = np.argsort(fold.keys, kind="stable")
    rank = np.empty(order.shape[0], dtype=np.int64)
    rank[order] = np.arange(order.shape[0], dtype=np.int64)
    wr = rank[fold.pair_word] if fold.pair_word.size else fold.pair_word
    span = max(n_docs, 1)
    pkeys, tfs = _postings_sorted(wr, fold.pair_doc, fold.pair_tf, order.shape[0], span)
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
    postings = _postings_bytes(
        wr, docs, tfs, counts=counts, width=width, poff=poff, dw=dw, native=NATIVE
    )
    lengths = np.minimum(fold.doc_len, MAX_QUANTITY)
    frame = HEADER.pack(MAGIC, VERSION, 0)
    blobs: dict[str, bytes] = {
        "keys": keys.astype("<u8").tobytes(),
        "poff": poff.astype("<u4").tobytes(),
        "width": width.astype("<u1").tobytes(),
        "bcheck": _block_checks(docs, tfs, counts, width, block).astype("<u2").tobytes(),
        "postings": postings,
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
