"""A tree segment and how a first build makes one: the chunks of a list of files as BM25
documents (:class:`TreeSegment`), the postings a worker sends for a batch of files
(:class:`Pairs`, :func:`pairs_of`), and the session's builder that joins the batches' postings
into one segment as they arrive (:class:`TreeBuilder`).

The builder's vocabulary map and the final sort of the postings have a compiled path
(``retrieval/_tree_native.c``, built by ``pip install .`` where a C compiler is found); without it,
or with ``NODWYN_RETRIEVAL_PURE_PYTHON`` set, the Python path makes the same segment (held to each
other by tests/test_tree_native.py).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.analyze import FileRecord
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY, Segment
from nodwyn_retrieval.retrieval.chunks import pure_python
from nodwyn_retrieval.retrieval.words import stem, word_counts, words

if TYPE_CHECKING:
    from nodwyn_retrieval.retrieval._tree_native import VocabOrder

__all__ = [
    "FIRST_LINE_WEIGHT",
    "PATH_WEIGHT",
    "Pairs",
    "TreeBuilder",
    "TreeSegment",
    "pairs_of",
]

# §6: the path's words and the chunk's first line count three times. The first line's words are
# already counted once as part of the chunk's lines, so they are added twice more.
PATH_WEIGHT = 3
FIRST_LINE_WEIGHT = 3

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
_NO_FILES: I64 = np.zeros(0, dtype=np.int64)

try:  # built by `pip install .` where a C compiler is found; the Python path otherwise
    from nodwyn_retrieval.retrieval._tree_native import map_words as _map_words
    from nodwyn_retrieval.retrieval._tree_native import pairs_arrays as _pairs_arrays
    from nodwyn_retrieval.retrieval._tree_native import sort_postings as _sort_postings
    from nodwyn_retrieval.retrieval._tree_native import vocab_order as _vocab_order
except ImportError:  # pragma: no cover - depends on how the package was installed
    _map_words = _sort_postings = _pairs_arrays = _vocab_order = None  # type: ignore[assignment]
_map_native: Callable[[dict[str, int], list[str]], bytes] | None = (
    None if pure_python() else _map_words
)
_pairs_native: Callable[..., tuple[list[str], bytes, bytes, bytes]] | None = (
    None if pure_python() else _pairs_arrays
)
_sort_native: Callable[..., tuple[bytes, bytes, bytes, bytes]] | None = (
    None if pure_python() else _sort_postings
)
_order_native: Callable[[tuple[str, ...]], VocabOrder] | None = (
    None if pure_python() else _vocab_order
)

ORDER_BESIDE_WORDS = 4096
"""A vocabulary this big or bigger is put in its stored order in a thread beside the postings'
sort (:func:`_order_beside`); a smaller one sorts in less time than a thread takes to start."""


def _order_beside(words: tuple[str, ...]) -> Callable[[], VocabOrder | None]:
    """The stored order of the tuple words (the compiled ``vocab_order``) begun in a thread, to
    go on beside the caller's postings' sort on the other core (both let go of the GIL; the
    segment made of that very tuple then packs its stored form without sorting). The function
    returned waits for it: None for a small vocabulary, or when the sort failed
    (``Segment.to_obj`` then sorts the words)."""
    if _order_native is None or len(words) < ORDER_BESIDE_WORDS:
        return lambda: None
    sort = _order_native
    got: list[VocabOrder] = []

    def run() -> None:
        with contextlib.suppress(Exception):  # (MemoryError: the stored form sorts them itself)
            got.append(sort(words))

    thread = threading.Thread(target=run, name="nodwyn-vocab-order", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (a process at its limit): the stored form sorts
        return lambda: None

    def wait() -> VocabOrder | None:
        thread.join()
        return got[0] if got else None

    return wait


@functools.lru_cache(maxsize=1 << 16)
def _name_stems(name: str) -> tuple[str, ...]:
    """The stems of the words of a file name, its extension left out, each once: many files of a
    tree share a name (``__init__.py``, ``index.js``), and a name's words cost microseconds."""
    base = name.split(".", 1)[0] if not name.startswith(".") else name
    return tuple(dict.fromkeys(stem(w) for w in words(base)))


class TreeSegment:
    """A segment of chunk documents with the files they come from.

    File i's documents are ``file_docs[i]:file_docs[i+1]``; ``starts`` and ``ends`` give each
    document's lines.
    """

    __slots__ = ("_file_of_doc", "_name_stems", "_names", "ends", "file_docs", "files", "keys",
                 "segment", "starts")  # fmt: skip

    def __init__(  # noqa: PLR0917 - the parts of a segment, always passed in this order
        self,
        segment: Segment,
        files: Sequence[str],
        keys: Sequence[str],
        file_docs: I64,
        starts: U32,
        ends: U32,
    ) -> None:
        self.segment = segment
        self.files: tuple[str, ...] = tuple(files)
        self.keys: tuple[str, ...] = tuple(keys)
        self.file_docs = file_docs
        self.starts = starts
        self.ends = ends
        self._file_of_doc: I64 | None = None
        self._names: dict[str, I64] | None = None
        self._name_stems: dict[int, tuple[str, ...]] = {}

    def name_stems(self, f: int) -> tuple[str, ...]:
        """The stems of the words of file f's name (its extension left out), each once, in the
        order they come (computed when first asked)."""
        got = self._name_stems.get(f)
        if got is None:
            got = self._name_stems[f] = _name_stems(self.files[f].rsplit("/", 1)[-1])
        return got

    def files_named(self, stem_word: str) -> I64:
        """The files whose name (its extension left out) holds a word of this stem."""
        if self._names is None:
            named: dict[str, list[int]] = {}
            for f in range(len(self.files)):
                for w in self.name_stems(f):
                    named.setdefault(w, []).append(f)
            self._names = {w: np.asarray(fs, dtype=np.int64) for w, fs in named.items()}
        return self._names.get(stem_word, _NO_FILES)

    @property
    def n_docs(self) -> int:
        return self.segment.n_docs

    def file_of_doc(self) -> I64:
        if self._file_of_doc is None:
            self._file_of_doc = np.repeat(
                np.arange(len(self.files), dtype=np.int64), np.diff(self.file_docs)
            )
        return self._file_of_doc

    def __repr__(self) -> str:
        return f"<TreeSegment files={len(self.files)} docs={self.n_docs}>"

    @classmethod
    def build(cls, files: Iterable[tuple[str, str, FileRecord]]) -> TreeSegment:
        """Index (path, content key, record) triples; a file's chunks become documents in order.

        The vocabularies of all files are mapped to one in a single pass at C speed
        (``dict.fromkeys`` and ``map``): a first build maps about a million file-local words.
        """
        items = list(files)
        builder = TreeBuilder()
        builder.add(
            [(i, p, k) for i, (p, k, _) in enumerate(items)],
            pairs_of([(p, r) for p, _, r in items]),
        )
        return builder.finish()

    def to_obj(self) -> dict[str, Any]:
        return {
            "segment": self.segment.to_obj(),
            "files": "\0".join(self.files).encode("utf-8", "surrogateescape"),
            "keys": "\0".join(self.keys).encode("ascii"),
            "n_files": len(self.files),
            "file_docs": self.file_docs.astype("<i8").tobytes(),
            "starts": self.starts.astype("<u4").tobytes(),
            "ends": self.ends.astype("<u4").tobytes(),
        }

    @classmethod
    def from_obj(cls, obj: object) -> TreeSegment:
        """Decode what :meth:`to_obj` made, checking it whole: FormatError otherwise."""
        if not isinstance(obj, Mapping):
            raise FormatError("tree segment is not a map: rebuild")
        try:
            seg = Segment.from_obj(obj["segment"])
            files_b, keys_b, n_files = obj["files"], obj["keys"], obj["n_files"]
            fd_b, st_b, en_b = obj["file_docs"], obj["starts"], obj["ends"]
        except KeyError as e:
            raise FormatError(f"tree segment lacks {e.args[0]!r}: rebuild") from None
        if not (
            isinstance(files_b, bytes)
            and isinstance(keys_b, bytes)
            and isinstance(n_files, int)
            and all(isinstance(x, bytes) for x in (fd_b, st_b, en_b))
        ):
            raise FormatError("tree segment field has the wrong type: rebuild")
        if len(fd_b) % 8 or len(st_b) % 4 or len(en_b) % 4:
            raise FormatError("tree segment array length is not whole: rebuild")
        try:
            files = files_b.decode("utf-8", "surrogateescape").split("\0") if n_files else []
            keys = keys_b.decode("ascii").split("\0") if n_files else []
        except UnicodeDecodeError:
            raise FormatError("tree segment keys are not ASCII: rebuild") from None
        file_docs = np.frombuffer(fd_b, dtype="<i8").astype(np.int64)
        starts = np.frombuffer(st_b, dtype="<u4").astype(np.uint32)
        ends = np.frombuffer(en_b, dtype="<u4").astype(np.uint32)
        if len(files) != n_files or len(keys) != n_files or file_docs.shape[0] != n_files + 1:
            raise FormatError("tree segment file table does not match: rebuild")
        if file_docs[0] != 0 or file_docs[-1] != seg.n_docs or np.any(np.diff(file_docs) < 0):
            raise FormatError("tree segment file offsets do not cover its documents: rebuild")
        if starts.shape[0] != seg.n_docs or ends.shape[0] != seg.n_docs:
            raise FormatError("tree segment line table does not match: rebuild")
        return cls(seg, files, keys, file_docs, starts, ends)


@dataclass(frozen=True, slots=True, eq=False)
class Pairs:
    """The postings of some files before they are a segment: what a worker sends for a batch.

    Flat arrays and one vocabulary for all the files, rather than a record a file (a Python
    string a word of every file): a segment is built from these with one concatenation.
    """

    words: list[str]
    """The files' distinct words (the chunks' and the paths'); ``word`` indexes it."""
    n_chunks: I64
    """Each file's number of chunks (its documents), in the order the files were given."""
    doc: U32
    """A pair's document, numbered across the files from 0."""
    word: U32
    """A pair's word, an index into words."""
    tf: U32
    """Its weighted frequency (§6: the first line three times, the path's words three times),
    at most 2**31-1."""
    starts: U32
    """Each document's first line."""
    ends: U32
    """Each document's last line."""

    @property
    def n_docs(self) -> int:
        return len(self.starts)


def pairs_of(files: Sequence[tuple[str, FileRecord]]) -> Pairs:
    """The weighted postings of (path, record) pairs, a file's chunks in order, files in order.

    The compiled path makes the vocabulary and the pairs in one pass over the records (the
    Python path, :func:`pairs_of_python`, makes a few numpy arrays a file); the same Pairs."""
    if _pairs_native is None:
        return pairs_of_python(files)
    recs = [r for _, r in files]
    path_counts = [word_counts(p) for p, _ in files]
    words, doc_b, word_b, tf_b = _pairs_native(recs, path_counts, FIRST_LINE_WEIGHT, PATH_WEIGHT)
    starts = [r.starts for r in recs if r.n_chunks]
    ends = [r.ends for r in recs if r.n_chunks]
    return Pairs(
        words,
        np.asarray([r.n_chunks for r in recs], dtype=np.int64),
        np.frombuffer(doc_b, dtype=np.uint32),
        np.frombuffer(word_b, dtype=np.uint32),
        np.frombuffer(tf_b, dtype=np.uint32),
        _u32(np.concatenate(starts) if starts else _NO_FILES),
        _u32(np.concatenate(ends) if ends else _NO_FILES),
    )


def pairs_of_python(files: Sequence[tuple[str, FileRecord]]) -> Pairs:
    """The Python path of :func:`pairs_of`, which the compiled one is held to."""
    recs = [r for _, r in files]
    path_counts = [word_counts(p) for p, _ in files]
    all_words: list[str] = []
    vocab_off: list[int] = []
    for rec, pc in zip(recs, path_counts, strict=True):
        vocab_off.append(len(all_words))
        all_words.extend(rec.vocab)
        all_words.extend(pc)
    ids = {w: i for i, w in enumerate(dict.fromkeys(all_words))}
    gid = np.fromiter(map(ids.__getitem__, all_words), np.int64, len(all_words))
    n_per_file = np.asarray([r.n_chunks for r in recs], dtype=np.int64)
    pd: list[I64] = []
    pw: list[I64] = []
    pt: list[I64] = []
    base = 0
    for f, rec in enumerate(recs):
        n = int(n_per_file[f])
        if n == 0:
            continue
        off = vocab_off[f]
        pd.append(base + np.repeat(np.arange(n, dtype=np.int64), np.diff(rec.offsets)))
        pw.append(gid[off + rec.word.astype(np.int64)])
        pt.append(rec.body.astype(np.int64) + (FIRST_LINE_WEIGHT - 1) * rec.first.astype(np.int64))
        pc = path_counts[f]
        if pc:
            # §6: the path's words count three times, in every chunk of the file.
            k = len(pc)
            path_ids = gid[off + len(rec.vocab) : off + len(rec.vocab) + k]
            path_tf = PATH_WEIGHT * np.fromiter(pc.values(), np.int64, k)
            pd.append(base + np.repeat(np.arange(n, dtype=np.int64), k))
            pw.append(np.tile(path_ids, n))
            pt.append(np.tile(path_tf, n))
        base += n
    starts = [r.starts for r in recs if r.n_chunks]
    ends = [r.ends for r in recs if r.n_chunks]
    tf = np.concatenate(pt) if pt else _NO_FILES
    # Capped before the sum of a word's pairs in a document, which is capped again: the same
    # result, since every count is positive, and it fits 32 bits on the way.
    return Pairs(
        list(ids),
        n_per_file,
        _u32(np.concatenate(pd) if pd else _NO_FILES),
        _u32(np.concatenate(pw) if pw else _NO_FILES),
        _u32(np.minimum(tf, MAX_QUANTITY)),
        _u32(np.concatenate(starts) if starts else _NO_FILES),
        _u32(np.concatenate(ends) if ends else _NO_FILES),
    )


def _u32(a: npt.NDArray[Any]) -> U32:
    return a.astype(np.uint32)


_PIECES = ("_n_chunks", "_doc", "_word", "_tf", "_starts", "_ends")
"""The lists of a :class:`TreeBuilder` that hold one entry a piece added."""


class TreeBuilder:
    """A tree segment built piece by piece as the files' postings arrive (:class:`Pairs`).

    Each piece's words are given their numbers in the whole vocabulary, and its postings are
    sorted, when it is added, so the work left for :meth:`finish` is one concatenation and a
    merge of sorted runs. Files are given
    with an order key each; the segment holds them in that order whatever order the pieces came
    in, so it equals the segment :meth:`TreeSegment.build` makes of the files in that order.

    ``cpu`` is the CPU time the calls to :meth:`add` took (in the calling thread) and ``n_pairs``
    the postings they added: what this process measures of its own speed at the same kind of
    work as :meth:`finish`'s (a caller estimates the finish from them before it is made).
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._files: list[tuple[int, str, str]] = []  # (order, path, key)
        self._n_chunks: list[I64] = []
        self._doc: list[U32] = []
        self._word: list[U32] = []
        self._tf: list[U32] = []
        self._starts: list[U32] = []
        self._ends: list[U32] = []
        self.n_docs = 0
        self.n_pairs = 0
        self.cpu = 0.0
        self._spent = False

    def __len__(self) -> int:
        return len(self._files)

    def add(self, files: Sequence[tuple[int, str, str]], pairs: Pairs) -> None:
        """Add files (order, path, content key) whose postings are pairs, in pairs' order."""
        if self._spent:
            raise ValueError("this tree segment is already finished: start a new TreeBuilder")
        if len(files) != len(pairs.n_chunks):
            raise ValueError(f"{len(files)} files for the postings of {len(pairs.n_chunks)}")
        t = time.thread_time()
        ids = self._ids
        if _map_native is not None and _sort_native is not None:
            # One lookup a word; the batch's pairs sorted by its own word numbers, then document,
            # a path's word that is also in a chunk's lines summed (two counting sorts over a
            # batch's few thousand documents and words, cache-sized): each word's documents are
            # then in order in the batch, which is what lets the finish's compiled sort order
            # the whole tree's postings in one counting sort by word (Segment.from_pairs).
            batch_words = pairs.words if isinstance(pairs.words, list) else list(pairs.words)
            gid32 = np.frombuffer(_map_native(ids, batch_words), dtype=np.uint32)
            counts_b, docs_b, tfs_b, _ = _sort_native(
                pairs.word, pairs.doc, pairs.tf, len(batch_words), pairs.n_docs
            )
            counts = np.frombuffer(counts_b, dtype=np.int64)
            doc = np.frombuffer(docs_b, dtype=np.uint32) + np.uint32(self.n_docs)
            word = np.repeat(gid32, counts)
            tf = np.frombuffer(tfs_b, dtype=np.uint32)
        else:
            n0 = len(ids)
            new = [w for w in pairs.words if w not in ids]
            ids.update(zip(new, range(n0, n0 + len(new)), strict=True))
            gid = np.fromiter(map(ids.__getitem__, pairs.words), np.int64, len(pairs.words))
            word64 = gid[pairs.word]
            doc64 = pairs.doc.astype(np.int64)
            # Sorted here by word and document, while the other pieces are still being made:
            # the final sort (Segment.from_pairs) then meets sorted runs, which it merges in a
            # fraction of the time of a sort. The runs stay sorted through finish's renumbering
            # when a piece's files come in their order keys' order.
            by = np.argsort(word64 * max(pairs.n_docs, 1) + doc64, kind="stable")
            doc = _u32(doc64[by] + self.n_docs)  # 32 bits while they wait: half the memory
            word = _u32(word64[by])
            tf = pairs.tf[by]
        self._files.extend(files)
        self._n_chunks.append(pairs.n_chunks)
        self._doc.append(doc)
        self._word.append(word)
        self._tf.append(tf)
        self._starts.append(pairs.starts)
        self._ends.append(pairs.ends)
        self.n_docs += pairs.n_docs
        self.n_pairs += len(pairs.doc)  # as given: what the add's CPU is priced by
        self.cpu += time.thread_time() - t

    def _pieces_in_order(self) -> None:
        """The pieces cut and put in their files' order, when each piece's order keys ascend (a
        first build's batches, which come back from two workers out of turn, a batch sometimes
        holding two stretches of the tree). Each piece is cut where a file of another piece
        falls between two of its own (a cut's postings are those of its documents, still sorted
        by word and document), and each cut's documents are numbered again by a shift. The
        finish's sort then meets the files in order and sorts the postings by word alone, rather
        than by document first (a pass over every posting, and a copy of them). Pieces whose
        keys do not ascend, or whose cuts would cost more than half a pass over all the
        postings, are left as they are: the finish renumbers their documents."""
        n = len(self._doc)
        if n < 2:
            return
        keys = [o for o, _, _ in self._files]
        rank = {key: r for r, key in enumerate(sorted(keys))}
        if len(rank) != len(keys):
            return  # a key given twice: the finish's stable sort decides
        # (piece, its first and last file + 1, its first and last document + 1), a stretch each;
        # each stretch's first key's rank, each piece's first file and first document
        cuts: list[tuple[int, int, int, int, int]] = []
        first_rank: list[int] = []
        file_at: list[int] = []
        doc_at: list[int] = []
        split: set[int] = set()  # the pieces cut in more than one stretch
        masked = 0  # postings looked at to cut pieces
        at = docs = 0
        for k in range(n):
            size = len(self._n_chunks[k])
            ranks = [rank[key] for key in keys[at : at + size]]
            if any(y <= x for x, y in itertools.pairwise(ranks)):
                return  # a piece out of its own order: renumbered by the finish
            first_doc = np.zeros(size + 1, dtype=np.int64)
            np.cumsum(self._n_chunks[k], out=first_doc[1:])
            lo, before = 0, len(cuts)
            for i in range(1, size + 1):
                if i == size or ranks[i] != ranks[i - 1] + 1:
                    cuts.append((k, lo, i, int(first_doc[lo]), int(first_doc[i])))
                    first_rank.append(ranks[lo])
                    lo = i
            if len(cuts) - before > 1:  # a pass over the piece's postings a cut
                split.add(k)
                masked += (len(cuts) - before) * len(self._doc[k])
            file_at.append(at)
            doc_at.append(docs)
            at += size
            docs += len(self._starts[k])  # a piece's documents: one start each
        if masked * 2 > sum(len(d) for d in self._doc):
            return  # the renumbering's one pass costs less
        order = sorted(range(len(cuts)), key=first_rank.__getitem__)
        if order == list(range(len(cuts))):
            return
        pieces: dict[str, list[Any]] = {name: [] for name in _PIECES}
        files: list[tuple[int, str, str]] = []
        new_base = 0
        for c in order:
            k, f_lo, f_hi, d_lo, d_hi = cuts[c]
            doc, word, tf = self._doc[k], self._word[k], self._tf[k]
            base = doc_at[k]
            if k in split:  # the cut's own postings, in their order
                keep = (doc >= np.uint32(base + d_lo)) & (doc < np.uint32(base + d_hi))
                doc, word, tf = doc[keep], word[keep], tf[keep]
            shift = np.uint32((new_base - base - d_lo) % 2**32)  # uint32 arithmetic wraps
            if doc.flags.writeable:
                doc += shift  # in place: no new pages for a copy
            else:
                doc = doc + shift
            pieces["_doc"].append(doc)
            pieces["_word"].append(word)
            pieces["_tf"].append(tf)
            pieces["_n_chunks"].append(self._n_chunks[k][f_lo:f_hi])
            pieces["_starts"].append(self._starts[k][d_lo:d_hi])
            pieces["_ends"].append(self._ends[k][d_lo:d_hi])
            files.extend(self._files[file_at[k] + f_lo : file_at[k] + f_hi])
            new_base += d_hi - d_lo
        self._files = files
        for name, got in pieces.items():
            setattr(self, name, got)

    def finish(self) -> TreeSegment:
        """The segment of every file added, in their order keys' order (once: the builder hands
        its vocabulary to the segment)."""
        if self._spent:
            raise ValueError("this tree segment is already finished: start a new TreeBuilder")
        self._pieces_in_order()
        files = self._files
        counts = np.concatenate(self._n_chunks) if self._n_chunks else _NO_FILES
        starts = np.concatenate(self._starts) if self._starts else np.zeros(0, np.uint32)
        ends = np.concatenate(self._ends) if self._ends else np.zeros(0, np.uint32)
        doc: npt.NDArray[Any] = np.concatenate(self._doc) if self._doc else _NO_FILES
        word = np.concatenate(self._word) if self._word else _NO_FILES
        tf = np.concatenate(self._tf) if self._tf else _NO_FILES
        # The pieces are let go once joined: the segment's sort and sums below are the build's
        # peak of memory, and the pieces would be a third copy of the postings beside them.
        self._n_chunks, self._starts, self._ends = [], [], []
        self._doc, self._word, self._tf = [], [], []
        order = sorted(range(len(files)), key=lambda i: files[i][0])
        renumber: U32 | None = None
        if order != list(range(len(files))):
            # Renumber the documents so that the files follow their order keys.
            o = np.asarray(order, dtype=np.int64)
            first = np.zeros(len(files) + 1, dtype=np.int64)
            np.cumsum(counts, out=first[1:])
            new_counts = counts[o]
            new_first = np.zeros(len(files) + 1, dtype=np.int64)
            np.cumsum(new_counts, out=new_first[1:])
            # The document at old position first[o[j]] + r moves to new_first[j] + r.
            old_docs = np.repeat(first[:-1][o] - new_first[:-1], new_counts) + np.arange(
                self.n_docs, dtype=np.int64
            )
            new_of_old = np.empty(self.n_docs, dtype=np.uint32)  # the pieces' width
            new_of_old[old_docs] = np.arange(self.n_docs, dtype=np.int64)
            # The compiled sort reads each document's new number as it sorts the pairs by document
            # (the pieces' runs, interleaved once renumbered, need that pass anyway).
            renumber = new_of_old
            starts, ends = starts[old_docs], ends[old_docs]
            counts = new_counts
            files = [files[i] for i in order]
        file_docs = np.zeros(len(files) + 1, dtype=np.int64)
        np.cumsum(counts, out=file_docs[1:])
        # The vocabulary's map is handed to the segment (not made again): the builder is spent.
        ids, self._ids = self._ids, {}
        self._spent = True
        vocab = tuple(ids)  # the segment's own tuple, which the order beside is made for
        if _sort_native is not None and all(a.dtype == np.uint32 for a in (doc, word, tf)):
            pending = _order_beside(vocab)  # on the other core, beside the sort below
            try:
                counts_b, docs_b, tfs_b, lengths_b = _sort_native(
                    word, doc, tf, len(ids), self.n_docs, renumber
                )
            finally:
                vocab_order = pending()
            segment = Segment.from_sorted(
                vocab,
                np.frombuffer(counts_b, dtype=np.int64),
                np.frombuffer(docs_b, dtype=np.uint32),
                np.frombuffer(tfs_b, dtype=np.uint32),
                np.frombuffer(lengths_b, dtype=np.uint32),
                ids=ids,
                vocab_order=vocab_order,
            )
        else:
            if renumber is not None:
                doc = renumber[doc]
            segment = Segment.from_pairs(vocab, self.n_docs, doc, word, tf, ids=ids)
        return TreeSegment(
            segment,
            [p for _, p, _ in files],
            [k for _, _, k in files],
            file_docs,
            starts.astype(np.uint32),
            ends.astype(np.uint32),
        )
