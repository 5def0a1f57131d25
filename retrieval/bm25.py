"""BM25 over compact postings, and several indexes ranked as one collection (§6, §9).

A :class:`Segment` is an immutable inverted index: a vocabulary, and per word the documents that
hold it with the word's weighted frequency there, all in numpy arrays (no Python object per
posting: a tree of 128 MiB of text holds tens of millions of postings). Field weights are applied
before a document enters a segment: a document's frequency of a word is its weighted count over
its fields, and its length is the sum of those, so BM25 here is BM25F with one saturation.

:func:`search_all` ranks documents of several segments as if they were one: the number of documents,
their average length and each word's document frequency are summed over all the segments, counting
only the documents each part marks live. Lengths and frequencies are integers and their sums are
exact, so a split collection scores every document exactly as one index holding them all would.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.bm25_packed import (
    _ARRAYS,
    _FIELDS,
    _TF_NIBBLE,
    _array,
    _crc,
    _nibbles,
    _Packed,
    _width,
)
from nodwyn_retrieval.retrieval.chunks import pure_python

if TYPE_CHECKING:
    from nodwyn_retrieval.retrieval._tree_native import VocabOrder

__all__ = [
    "K1",
    "B",
    "Hit",
    "Part",
    "Scored",
    "Segment",
    "SegmentBuilder",
    "count_matching",
    "idf",
    "merge_segments",
    "score_parts",
    "search_all",
]

K1 = 1.2
B = 0.75
# A weighted frequency or a length is a quantity of the text, not a size (amendment 2026-10-16):
# it is read as a number up to 2**31-1, the width the postings store.
MAX_QUANTITY = 2**31 - 1
_FOUND_LIMIT = 4096
"""A loaded segment remembers this many words looked up (a session asks for the same words
again and again), then starts again."""

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

try:  # built by `pip install .` where a C compiler is found; the Python path otherwise
    from nodwyn_retrieval.retrieval._tree_native import sort_postings as _sort_native
except ImportError:  # pragma: no cover - depends on how the package was installed
    _sort_native = None  # type: ignore[assignment]
try:  # the same extension's stored form, which writes little-endian bytes whatever the host
    from nodwyn_retrieval.retrieval._tree_native import pack_segment as _pack_native
except ImportError:  # pragma: no cover - depends on how the package was installed
    _pack_native = None  # type: ignore[assignment]
if pure_python():
    _sort_native = _pack_native = None  # type: ignore[assignment]


def idf(n_docs: int, df: int) -> float:
    """BM25's inverse document frequency, in the form that never goes negative (Lucene's)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class Segment:
    """An immutable BM25 inverted index over documents numbered 0 to n_docs-1 in the order added.

    ``offsets[w]:offsets[w+1]`` slices ``docs`` (ascending) and ``tfs`` for the word with id ``w``;
    ``lengths[d]`` is document d's weighted length.

    A segment built in memory keeps its vocabulary in a dict. One decoded from its stored form
    keeps it as one sorted blob of UTF-8 words and their offsets, and finds a word by binary
    search: a search needs a handful of words, and building a dict of a large tree's 150,000
    words would cost more than the rest of loading it. For the same reason a decoded segment
    keeps its postings as they are stored (:class:`_Packed`, checked whole when decoded) and
    unpacks a word's when it is first asked, and all of them when ``docs`` or ``tfs`` is.
    """

    __slots__ = ("_blob", "_docs", "_found", "_ids", "_order", "_packed", "_pos", "_pos_list",
                 "_tfs", "_unpacked", "_words", "lengths", "offsets", "total_length")  # fmt: skip

    def __init__(
        self,
        words: Sequence[str] | None,
        offsets: I64,
        docs: U32 | None,
        tfs: U32 | None,
        lengths: U32,
        *,
        sorted_vocab: tuple[bytes, I64] | None = None,
        packed: _Packed | None = None,
        ids: dict[str, int] | None = None,
        vocab_order: VocabOrder | None = None,
    ) -> None:
        self._words: tuple[str, ...] | None = None if words is None else tuple(words)
        self._ids: dict[str, int] | None = ids
        # The words' stored order when the caller sorted them already (vocab_order, beside the
        # postings' sort): to_obj's compiled pack uses it, once, if it is this very tuple's.
        self._order = vocab_order
        self._blob = b""
        self._pos = np.zeros(0, dtype=np.int64)
        self._pos_list: memoryview | None = None
        self._found: dict[str, int | None] = {}
        if self._words is not None:
            if ids is None or len(ids) != len(self._words):
                self._ids = {w: i for i, w in enumerate(self._words)}
        elif sorted_vocab is not None:
            self._blob, self._pos = sorted_vocab
        else:
            raise ValueError("a segment needs its words or its sorted vocabulary")
        if (docs is None or tfs is None) and packed is None:
            raise ValueError("a segment needs its postings or their packed form")
        self.offsets = offsets
        self._docs = docs
        self._tfs = tfs
        self._packed = packed
        self._unpacked: dict[int, tuple[U32, U32]] = {}
        self.lengths = lengths
        self.total_length = int(lengths.sum(dtype=np.int64))

    @property
    def docs(self) -> U32:
        """Every posting's document, word after word (unpacked whole when first asked)."""
        return self._arrays()[0]

    @property
    def tfs(self) -> U32:
        """Every posting's weighted frequency, as ``docs`` is ordered."""
        return self._arrays()[1]

    def _arrays(self) -> tuple[U32, U32]:
        docs, tfs = self._docs, self._tfs
        if docs is None or tfs is None:
            packed = self._packed
            if packed is None:  # pragma: no cover - __init__ refuses a segment with neither
                raise ValueError("a segment needs its postings or their packed form")
            docs, tfs = packed.unpack(self.offsets)
            self._docs, self._tfs = docs, tfs
        return docs, tfs

    @property
    def n_docs(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def n_postings(self) -> int:
        return int(self.offsets[-1]) if self.offsets.shape[0] else 0

    @property
    def n_words(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def words(self) -> tuple[str, ...]:
        """The vocabulary in word-id order (decoded on first use for a loaded segment)."""
        if self._words is None:
            blob, pos = self._blob, self._pos.tolist()
            self._words = tuple(
                blob[pos[i] : pos[i + 1]].decode("utf-8") for i in range(len(pos) - 1)
            )
        return self._words

    def word_id(self, word: str) -> int | None:
        if self._ids is not None:
            return self._ids.get(word)
        memo = self._found
        got = memo.get(word, -1)
        if got != -1:
            return got
        if len(memo) >= _FOUND_LIMIT:
            memo.clear()
        got = memo[word] = self._search_word(word)
        return got

    def _search_word(self, word: str) -> int | None:
        """A word's id in the sorted vocabulary, by binary search."""
        key = word.encode("utf-8")
        blob, pos = self._blob, self._offsets_list()
        lo, hi = 0, len(pos) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            w = blob[pos[mid] : pos[mid + 1]]
            if w < key:
                lo = mid + 1
            elif w > key:
                hi = mid
            else:
                return mid
        return None

    def _offsets_list(self) -> Sequence[int]:
        """The sorted vocabulary's offsets, read as Python ints (a binary search indexes them ~17
        times a word): a view of the array, whose items are read several times faster than an
        array's and which costs nothing to make (a list of a large tree's 150,000 offsets took
        5 to 10 ms of a new session's first search)."""
        got = self._pos_list
        if got is None:
            got = self._pos_list = np.ascontiguousarray(self._pos, dtype=np.int64).data
        return got

    def with_prefix(self, prefix: str, most: int) -> list[str] | None:
        """The vocabulary's words that begin with prefix, when the vocabulary is sorted (a
        loaded segment) and they are at most ``most``; None otherwise (ask word by word)."""
        if self._ids is not None:
            return None
        key = prefix.encode("utf-8")
        blob, pos = self._blob, self._offsets_list()
        n = len(pos) - 1
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if blob[pos[mid] : pos[mid + 1]] < key:
                lo = mid + 1
            else:
                hi = mid
        out: list[str] = []
        for i in range(lo, n):
            w = blob[pos[i] : pos[i + 1]]
            if not w.startswith(key):
                break
            if len(out) == most:
                return None
            out.append(w.decode("utf-8"))
        return out

    def postings(self, word: str) -> tuple[U32, U32]:
        """The documents holding word (ascending) and its weighted frequency in each."""
        w = self.word_id(word)
        if w is None:
            empty = np.zeros(0, dtype=np.uint32)
            return empty, empty
        a, b = int(self.offsets[w]), int(self.offsets[w + 1])
        packed = self._packed
        if packed is None or (self._docs is not None and self._tfs is not None):
            docs, tfs = self._arrays()
            return docs[a:b], tfs[a:b]
        unpacked = self._unpacked
        got = unpacked.get(w)
        if got is None:
            if len(unpacked) >= _FOUND_LIMIT:
                unpacked.clear()
            got = unpacked[w] = packed.word(w, a, b)
        return got

    def nbytes(self) -> int:
        """Bytes held by the arrays (a built segment's vocabulary strings not counted)."""
        held = self._packed.nbytes() if self._packed is not None else 0
        if self._docs is not None and self._tfs is not None:
            held = self._docs.nbytes + self._tfs.nbytes
        return int(
            self.offsets.nbytes + held + self.lengths.nbytes + len(self._blob) + self._pos.nbytes
        )

    def __repr__(self) -> str:
        return f"<Segment docs={self.n_docs} words={self.n_words} postings={self.n_postings}>"

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def empty(cls) -> Segment:
        z = np.zeros(0, dtype=np.uint32)
        return cls((), np.zeros(1, dtype=np.int64), z, z, z)

    @classmethod
    def from_pairs(
        cls,
        words: Sequence[str],
        n_docs: int,
        pair_doc: npt.NDArray[np.integer[Any]],
        pair_word: npt.NDArray[np.integer[Any]],
        pair_tf: npt.NDArray[np.integer[Any]],
        *,
        ids: dict[str, int] | None = None,
    ) -> Segment:
        """Build from (doc, word id, weighted frequency) triples; repeated (doc, word) pairs add up.

        Word ids index ``words``; a word with no posting is dropped from the vocabulary. ``ids``,
        when the caller holds it, is ``words``' map (each word to its index) handed over: the
        segment keeps it as its own when no word is dropped rather than making it again.
        """
        n_words = len(words)
        if _sort_native is not None and all(
            a.dtype == np.uint32 for a in (pair_doc, pair_word, pair_tf)
        ):
            counts_b, docs_b, tfs_b, lengths_b = _sort_native(
                np.ascontiguousarray(pair_word),
                np.ascontiguousarray(pair_doc),
                np.ascontiguousarray(pair_tf),
                n_words,
                n_docs,
            )
            return cls.from_sorted(
                words,
                np.frombuffer(counts_b, dtype=np.int64),
                np.frombuffer(docs_b, dtype=np.uint32),
                np.frombuffer(tfs_b, dtype=np.uint32),
                np.frombuffer(lengths_b, dtype=np.uint32),
                ids=ids,
            )
        return cls.from_pairs_python(words, n_docs, pair_doc, pair_word, pair_tf, ids=ids)

    @classmethod
    def from_pairs_python(
        cls,
        words: Sequence[str],
        n_docs: int,
        pair_doc: npt.NDArray[np.integer[Any]],
        pair_word: npt.NDArray[np.integer[Any]],
        pair_tf: npt.NDArray[np.integer[Any]],
        *,
        ids: dict[str, int] | None = None,
    ) -> Segment:
        """The Python path of :meth:`from_pairs` (a stable sort of the pairs' keys, then sums),
        which the compiled one (two counting sorts) is held to."""
        n_words = len(words)
        n = max(n_docs, 1)
        if len(pair_doc):
            # One 64-bit array at a time beside the pairs (this is a build's peak of memory): the
            # key made in place, the frequencies widened after their gather, not before.
            key = np.asarray(pair_word, dtype=np.int64) * n
            key += np.asarray(pair_doc, dtype=np.int64)
            order = np.argsort(key, kind="stable")
            key = key[order]
            tf = np.asarray(pair_tf)[order].astype(np.int64)
            del order
            starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
            if starts.size != key.size:  # a repeated (word, document) pair: summed
                tf = np.add.reduceat(tf, starts)
                key = key[starts]
            del starts
            wid = key // n
            key -= wid * n
            doc = key
        else:
            doc = np.zeros(0, dtype=np.int64)
            wid = np.zeros(0, dtype=np.int64)
            tf = np.zeros(0, dtype=np.int64)
        np.minimum(tf, MAX_QUANTITY, out=tf)
        summed = np.bincount(doc, weights=tf, minlength=n_docs)
        lengths: U32 = np.minimum(np.rint(summed), MAX_QUANTITY).astype(np.uint32)
        counts = np.bincount(wid, minlength=n_words)
        return cls.from_sorted(
            words, counts, doc.astype(np.uint32), tf.astype(np.uint32), lengths, ids=ids
        )

    @classmethod
    def from_sorted(
        cls,
        words: Sequence[str],
        counts: I64,
        docs: U32,
        tfs: U32,
        lengths: U32,
        *,
        ids: dict[str, int] | None = None,
        vocab_order: VocabOrder | None = None,
    ) -> Segment:
        """The segment of postings already ordered by word then document, ``counts`` each
        word's number of them, no (word, document) twice (what :meth:`from_pairs` makes before
        it builds): a word with none is dropped, the others keeping their relative order.
        ``vocab_order``, the stored order of the tuple ``words`` when the caller has it
        (``vocab_order`` of the compiled module), is kept for :meth:`to_obj`; it is of no use
        once a word is dropped (another tuple), and then let go."""
        n_words = len(words)
        used = np.flatnonzero(counts)
        if used.size != n_words:
            # Renumber the words that have postings, keeping their relative order.
            counts = counts[used]
            words = [words[int(i)] for i in used]
            ids = vocab_order = None
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(words, offsets, docs, tfs, lengths, ids=ids, vocab_order=vocab_order)

    # -- the stored form (the caller frames and stores the object) ---------------------------

    def to_obj(self) -> dict[str, Any]:
        """The segment with its vocabulary sorted and its postings packed (docs/store-format.md).

        Within a word, documents are stored as differences from the one before in 16 bits, and
        frequencies less one in 4 (two a byte); the rare value that does not fit is stored beside
        them. About two and a half bytes a posting instead of eight. The vocabulary's words are
        given by their lengths, and each word's number of postings, in the fewest bytes (1, 2 or
        4) that hold every one. A CRC-32 covers it all: a flipped bit is a rebuild, never a wrong
        answer.
        """
        packed = None
        if _pack_native is not None:
            order, self._order = self._order, None
            packed = _pack_native(
                self.words, self.offsets.astype(np.int64, copy=False), self.docs, self.tfs, order
            )
        if packed is None:
            return self.to_obj_python()
        vocab, vocab_len, counts, first, delta, d_at, d_exc, tf, t_at, t_exc = packed
        body: dict[str, Any] = {
            "n_words": self.n_words,
            "vocab": vocab,
            "vocab_len": vocab_len,
            "counts": counts,
            "first": first,
            "delta": delta,
            "delta_exc_at": d_at,
            "delta_exc": d_exc,
            "tf": tf,
            "tf_exc_at": t_at,
            "tf_exc": t_exc,
            "lengths": self.lengths.astype("<u4").tobytes(),
        }
        body["crc"] = _crc(body)
        return body

    def to_obj_python(self) -> dict[str, Any]:
        """The Python path of :meth:`to_obj`, which the compiled one is held to (and which
        answers for a segment with a word of no posting)."""
        encoded = [w.encode("utf-8") for w in self.words]
        order = sorted(range(len(encoded)), key=encoded.__getitem__)
        counts = np.diff(self.offsets)
        if order != list(range(len(order))):
            o = np.asarray(order, dtype=np.int64)
            new_counts = counts[o]
            new_offsets = np.zeros(len(order) + 1, dtype=np.int64)
            np.cumsum(new_counts, out=new_offsets[1:])
            gather = np.repeat(self.offsets[:-1][o] - new_offsets[:-1], new_counts)
            gather += np.arange(int(new_offsets[-1]), dtype=np.int64)
            offsets, docs, tfs = new_offsets, self.docs[gather], self.tfs[gather]
        else:
            offsets, docs, tfs = self.offsets, self.docs, self.tfs
        blob = b"".join(encoded[i] for i in order)
        lens = np.fromiter((len(encoded[i]) for i in order), dtype=np.int64, count=len(order))
        lens_type = "<u1" if not lens.size or lens.max() <= 0xFF else "<u2"
        counts_of = np.diff(offsets)
        starts = offsets[:-1]
        d = docs.astype(np.int64)
        delta = np.zeros_like(d)
        delta[1:] = d[1:] - d[:-1]
        delta[starts] = 0
        first = d[starts] if d.size else np.zeros(0, dtype=np.int64)
        d_exc = np.flatnonzero(delta >= 0xFFFF)
        t_exc = np.flatnonzero((tfs > _TF_NIBBLE) | (tfs < 1))
        body = {
            "n_words": len(order),
            "vocab": blob,
            "vocab_len": lens.astype(lens_type).tobytes(),
            "counts": counts_of.astype(_width(counts_of)).tobytes(),
            "first": first.astype("<u4").tobytes(),
            "delta": np.minimum(delta, 0xFFFF).astype("<u2").tobytes(),
            "delta_exc_at": d_exc.astype("<u4").tobytes(),
            "delta_exc": delta[d_exc].astype("<u4").tobytes(),
            "tf": _nibbles(tfs),
            "tf_exc_at": t_exc.astype("<u4").tobytes(),
            "tf_exc": tfs[t_exc].astype("<u4").tobytes(),
            "lengths": self.lengths.astype("<u4").tobytes(),
        }
        body["crc"] = _crc(body)
        return body

    @classmethod
    def from_obj(cls, obj: object) -> Segment:
        """Decode what :meth:`to_obj` made, checking every length and index (FormatError)."""
        if not isinstance(obj, Mapping):
            raise FormatError("segment is not a map: rebuild")
        missing = [k for k in _FIELDS if k not in obj]
        if missing:
            raise FormatError(f"segment lacks {missing[0]!r}: rebuild")
        n_words = obj["n_words"]
        if not isinstance(n_words, int) or isinstance(n_words, bool) or n_words < 0:
            raise FormatError("segment vocabulary count is not a count: rebuild")
        if not all(isinstance(obj[k], bytes) for k in _ARRAYS):
            raise FormatError("segment arrays have the wrong type: rebuild")
        if obj["crc"] != _crc(obj):
            raise FormatError("segment checksum does not match: rebuild")
        try:
            lens_b: bytes = obj["vocab_len"]
            lens = _array(lens_b, "<u2" if n_words and len(lens_b) == 2 * n_words else "<u1")
            counts_b: bytes = obj["counts"]
            counts_w = len(counts_b) // n_words if n_words else 1
            counts_in = _array(counts_b, f"<u{counts_w if counts_w in (1, 2, 4) else 1}")
            first = _array(obj["first"], "<u4")
            delta = _array(obj["delta"], "<u2")
            d_at, d_val = _array(obj["delta_exc_at"], "<u4"), _array(obj["delta_exc"], "<u4")
            tf4 = _array(obj["tf"], "<u1")
            t_at, t_val = _array(obj["tf_exc_at"], "<u4"), _array(obj["tf_exc"], "<u4")
            lengths = _array(obj["lengths"], "<u4").astype(np.uint32)
        except ValueError:
            raise FormatError(
                "segment array length is not a whole number of items: rebuild"
            ) from None
        blob: bytes = obj["vocab"]
        n = int(delta.shape[0])
        if (
            lens.shape[0] != n_words
            or counts_in.shape[0] != n_words
            or first.shape[0] != n_words
            or tf4.shape[0] != (n + 1) // 2
            or d_at.shape != d_val.shape
            or t_at.shape != t_val.shape
        ):
            raise FormatError("segment arrays do not match each other: rebuild")
        if n % 2 and tf4[-1] >> 4:
            raise FormatError("segment frequencies have a stray last half byte: rebuild")
        pos = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lens, out=pos[1:])
        if pos[-1] != len(blob) or (n_words and int(lens.min()) == 0):
            raise FormatError("segment vocabulary offsets are not a partition: rebuild")
        offsets = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(counts_in, out=offsets[1:])
        if offsets[-1] != n or (n_words and int(counts_in.min()) == 0):
            raise FormatError("segment offsets are not a partition of the postings: rebuild")
        if (d_at.size and int(d_at.max()) >= n) or (t_at.size and int(t_at.max()) >= n):
            raise FormatError("segment exception names a posting past the end: rebuild")
        d_at64, t_at64 = d_at.astype(np.int64), t_at.astype(np.int64)
        if np.any(np.diff(d_at64) <= 0) or np.any(np.diff(t_at64) <= 0):
            raise FormatError("segment exceptions are not in posting order: rebuild")
        packed = _Packed(first, delta, d_at64, d_val, tf4, t_at64, t_val)
        n_docs = int(lengths.shape[0])
        if n and int(packed.last_docs(offsets).max()) >= n_docs:
            raise FormatError("segment posting names a document past the end: rebuild")
        # A frequency is at most 255 but where an exception gives it.
        if np.any(t_val > MAX_QUANTITY) or np.any(lengths > MAX_QUANTITY):
            raise FormatError("segment quantity past 2**31-1: rebuild")
        return cls(None, offsets, None, None, lengths, sorted_vocab=(blob, pos), packed=packed)


class SegmentBuilder:
    """Adds documents one at a time (the conversation's events); :meth:`build` makes the segment."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._doc: list[int] = []
        self._word: list[int] = []
        self._tf: list[int] = []
        self.n_docs = 0

    def add(self, counts: Mapping[str, int]) -> int:
        """Add a document given its weighted word counts; return its number."""
        d = self.n_docs
        ids = self._ids
        for w, c in counts.items():
            if c > 0:
                self._doc.append(d)
                self._word.append(ids.setdefault(w, len(ids)))
                self._tf.append(c)
        self.n_docs += 1
        return d

    def build(self) -> Segment:
        return Segment.from_pairs(
            list(self._ids),
            self.n_docs,
            np.asarray(self._doc, dtype=np.int64),
            np.asarray(self._word, dtype=np.int64),
            np.asarray(self._tf, dtype=np.int64),
        )


def merge_segments(parts: Sequence[tuple[Segment, Mask | None]]) -> tuple[Segment, list[I64]]:
    """One segment holding the live documents of each part, in order.

    Returns the segment and, per part, the new number of each of its documents (-1 where the
    document was not live), so the caller can carry its per-document data along.
    """
    words: dict[str, int] = {}
    docs_out: list[I64] = []
    word_out: list[I64] = []
    tf_out: list[I64] = []
    remaps: list[I64] = []
    base = 0
    for seg, live in parts:
        keep = np.ones(seg.n_docs, dtype=np.bool_) if live is None else live
        remap = np.full(seg.n_docs, -1, dtype=np.int64)
        remap[keep] = base + np.arange(int(keep.sum()))
        remaps.append(remap)
        wmap = np.fromiter(
            (words.setdefault(w, len(words)) for w in seg.words),
            dtype=np.int64,
            count=len(seg.words),
        )
        pw = np.repeat(np.arange(len(seg.words)), np.diff(seg.offsets))
        pd = remap[seg.docs.astype(np.int64)]
        ok = pd >= 0
        docs_out.append(pd[ok])
        word_out.append(wmap[pw[ok]] if len(seg.words) else pw[ok])
        tf_out.append(seg.tfs[ok].astype(np.int64))
        base += int(keep.sum())
    merged = Segment.from_pairs(
        list(words),
        base,
        np.concatenate(docs_out) if docs_out else np.zeros(0, np.int64),
        np.concatenate(word_out) if word_out else np.zeros(0, np.int64),
        np.concatenate(tf_out) if tf_out else np.zeros(0, np.int64),
    )
    return merged, remaps


@dataclass(frozen=True, slots=True)
class Part:
    """One segment taking part in a search."""

    segment: Segment
    """The postings."""
    live: Mask | None = None
    """Documents that exist (None: all). Others count in no statistic and are never returned."""
    allow: Mask | None = None
    """Documents that may be returned (a path filter); None: all live ones. Statistics ignore it."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked document."""

    part: int
    """The index of its part in the search's list."""
    doc: int
    """Its number in that part's segment."""
    score: float
    """Its BM25 score."""


@dataclass(frozen=True, slots=True)
class Scored:
    """The documents of one part that match a query, with their scores (no order)."""

    part: int
    """The index of the part in the search's list."""
    docs: I64
    """Matching documents that are live and allowed, ascending."""
    scores: F64
    """Their BM25 scores, above 0."""


def score_parts(
    parts: Sequence[Part],
    query_words: Iterable[str] | Mapping[str, float],
) -> list[Scored]:
    """Every live, allowed document of each part that matches, scored as one collection.

    query_words is a list of words, or a map of each word to its weight (a query's word that
    counts twice adds its BM25 term twice). Statistics (document count, average length, document
    frequencies) are over the live documents of every part together, so the scores equal those of
    one segment holding them all.
    """
    if isinstance(query_words, Mapping):
        weights = {w: float(q) for w, q in query_words.items() if q > 0}
    else:
        weights = dict.fromkeys(query_words, 1.0)
    qwords = list(weights)
    if not qwords or not parts:
        return []
    n_docs = 0
    total = 0
    for p in parts:
        if p.live is None:
            n_docs += p.segment.n_docs
            total += p.segment.total_length
        else:
            n_docs += int(np.count_nonzero(p.live))
            total += int(p.segment.lengths[p.live].sum(dtype=np.int64))
    if n_docs == 0:
        return []
    avgdl = total / n_docs if total else 1.0
    # Postings per word per part, live ones only; document frequencies summed over parts.
    found: list[list[tuple[U32, U32]]] = []
    dfs: list[int] = []
    for w in qwords:
        per_part: list[tuple[U32, U32]] = []
        df = 0
        for p in parts:
            docs, tfs = p.segment.postings(w)
            if p.live is not None and docs.size:
                keep = p.live[docs]
                docs, tfs = docs[keep], tfs[keep]
            per_part.append((docs, tfs))
            df += int(docs.size)
        found.append(per_part)
        dfs.append(df)
    out: list[Scored] = []
    for pi, p in enumerate(parts):
        seg = p.segment
        touched = [found[wi][pi] for wi in range(len(qwords))]
        if not any(d.size for d, _ in touched):
            continue
        scores = np.zeros(seg.n_docs, dtype=np.float64)
        norm = K1 * (1.0 - B + B * seg.lengths.astype(np.float64) / avgdl)
        for wi, (docs, tfs) in enumerate(touched):
            if not docs.size:
                continue
            w_idf = idf(n_docs, dfs[wi]) * weights[qwords[wi]]
            tf = tfs.astype(np.float64)
            scores[docs] += w_idf * tf * (K1 + 1.0) / (tf + norm[docs])
        hit = scores > 0.0
        if p.allow is not None:
            hit &= p.allow
        if p.live is not None:
            hit &= p.live
        idx = np.flatnonzero(hit)
        if idx.size:
            out.append(Scored(pi, idx.astype(np.int64), scores[idx]))
    return out


def search_all(
    parts: Sequence[Part], query_words: Iterable[str] | Mapping[str, float], limit: int
) -> list[Hit]:
    """Rank the documents of all parts as one collection; ties go to the earlier part, then doc.

    Statistics (document count, average length, document frequencies) are over the live documents
    of every part together, so the scores equal those of one segment holding them all
    (:func:`score_parts`, whose query_words this takes).
    """
    if limit <= 0:
        return []
    cand_part: list[I64] = []
    cand_doc: list[I64] = []
    cand_score: list[F64] = []
    for sc in score_parts(parts, query_words):
        idx, scores = sc.docs, sc.scores
        if idx.size > limit:
            top = np.argpartition(-scores, limit - 1)[:limit]
            # Keep every document tied with the last one kept, so ties resolve by order added.
            keep = scores >= scores[top].min()
            idx, scores = idx[keep], scores[keep]
        cand_part.append(np.full(idx.size, sc.part, dtype=np.int64))
        cand_doc.append(idx)
        cand_score.append(scores)
    if not cand_doc:
        return []
    cp = np.concatenate(cand_part)
    cd = np.concatenate(cand_doc)
    cs = np.concatenate(cand_score)
    order = np.lexsort((cd, cp, -cs))[:limit]
    return [Hit(int(cp[i]), int(cd[i]), float(cs[i])) for i in order]


def count_matching(parts: Sequence[Part], query_words: Iterable[str]) -> int:
    """How many documents of the parts hold at least one of the words: the documents
    :func:`search_all` would score, live and allowed ones only."""
    words = list(dict.fromkeys(query_words))
    total = 0
    for p in parts:
        seg = p.segment
        if not seg.n_docs or not words:
            continue
        hit = np.zeros(seg.n_docs, dtype=bool)
        for w in words:
            docs, _ = seg.postings(w)
            if docs.size:
                hit[docs] = True
        if p.allow is not None:
            hit &= p.allow
        if p.live is not None:
            hit &= p.live
        total += int(np.count_nonzero(hit))
    return total
