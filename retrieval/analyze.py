"""A file's text to what the chunk store keeps of it: chunks and word counts (ADR 0050 §3, §6).

§3: "What the index stores is, per chunk, its line numbers and its words with their counts: no
text." A :class:`FileRecord` is exactly that, for one file, in flat numpy arrays (CSR by chunk), so
that thousands of them load without a Python object per posting (docs/architecture.md, the memory
target of 1.5x the text).

§6 counts a chunk's first line three times; the record keeps that line's counts apart (``first``,
also counted in ``body``) so that the weighting stays the ranking's business and a change of weight
needs no rebuild.

Format (``to_obj``/``from_obj``, wrapped by the store's codec with a magic and a version): a dict
with ``vocab`` (a list of str) and the six arrays as little-endian uint32 bytes. Within a chunk the
pairs are in ascending word id, which makes "distinct within a chunk" checkable in one pass.
Everything is derived (§4): anything off in a stored record is a :class:`errors.FormatError` whose
message ends in ": rebuild", and the caller rebuilds it from the file.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Final

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.errors import BadInput, FormatError
from nodwyn_retrieval.retrieval.blobs import BLOBS_VERSION, blank_blobs
from nodwyn_retrieval.retrieval.chunks import (
    CHUNKER_VERSION,
    DEFINED,
    _definitions_utf8,
    cut,
    declaration_offsets_utf8,
    pure_python,
)
from nodwyn_retrieval.retrieval.words import WORDS_VERSION, WordTable, encode, translate, word_table

try:  # built by `pip install .` where a C compiler is found; the Python path otherwise
    from nodwyn_retrieval.retrieval import _words_native
except ImportError:  # pragma: no cover - depends on how the package was installed
    _words_native = None  # type: ignore[assignment]
if pure_python():
    _words_native = None  # type: ignore[assignment]

__all__ = ["ANALYZE_VERSION", "NATIVE", "FileRecord", "analyze"]

NATIVE: Final[bool] = _words_native is not None
"""Whether :func:`analyze` runs its compiled pass: the extension was built at install, and the
environment variable ``NODWYN_RETRIEVAL_PURE_PYTHON`` is unset, empty or ``0``."""

ANALYZE_VERSION: Final[int] = (WORDS_VERSION * 1000 + CHUNKER_VERSION) * 100 + BLOBS_VERSION
"""Changes when the words, the chunks or the blobs change: part of the chunk store's key (§4)."""

_ARRAYS: Final = ("starts", "ends", "offsets", "word", "body", "first")
_KEYS: Final = frozenset(("vocab", *_ARRAYS))
_MAX_COUNT: Final = 2**31 - 1
"""Amendment 2026-10-16: counts are quantities of the text, read as numbers up to 2^31-1."""
_LE_U32: Final = np.dtype("<u4")

U32 = npt.NDArray[np.uint32]


def _frozen(values: npt.NDArray[np.int64] | npt.NDArray[np.uint32]) -> U32:
    """A read-only uint32 array of values, so that a frozen record cannot be changed through it."""
    array: U32 = np.asarray(values, dtype=np.uint32)
    array.flags.writeable = False
    return array


@dataclass(frozen=True, slots=True, eq=False)
class FileRecord:
    """What the chunk store keeps of one file: its chunks' line ranges and word counts, no text."""

    vocab: tuple[str, ...]
    """The file's distinct words; the arrays name them by index."""
    starts: U32
    """A chunk's first line, 1-based."""
    ends: U32
    """A chunk's last line, 1-based, inclusive."""
    offsets: U32
    """n_chunks + 1 entries: chunk i's pairs are ``offsets[i]:offsets[i + 1]``."""
    word: U32
    """A pair's word, an index into vocab; ascending, so distinct, within a chunk."""
    body: U32
    """The word's count in the chunk's lines, at least 1."""
    first: U32
    """Its count in the chunk's first line, which is also counted in body."""

    @property
    def n_chunks(self) -> int:
        """How many chunks the file was cut into."""
        return len(self.starts)

    def chunk_words(self, i: int) -> dict[str, tuple[int, int]]:
        """Chunk i's words as word → (count in the chunk, count in its first line)."""
        if not 0 <= i < self.n_chunks:
            raise BadInput(f"chunk {i} is out of range: the file has {self.n_chunks} chunks")
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return {
            self.vocab[w]: (b, f)
            for w, b, f in zip(
                self.word[lo:hi].tolist(),
                self.body[lo:hi].tolist(),
                self.first[lo:hi].tolist(),
                strict=True,
            )
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileRecord):
            return NotImplemented
        return self.vocab == other.vocab and all(
            np.array_equal(getattr(self, name), getattr(other, name)) for name in _ARRAYS
        )

    __hash__ = None  # type: ignore[assignment]  # equal by value, like a list: not hashable

    def __repr__(self) -> str:
        lines = int(self.ends[-1]) if self.n_chunks else 0
        return (
            f"FileRecord(chunks={self.n_chunks}, lines={lines}, words={len(self.vocab)},"
            f" pairs={len(self.word)})"
        )

    def to_obj(self) -> dict[str, object]:
        """A msgpack-ready dict: plain str list and the arrays as little-endian uint32 bytes."""
        obj: dict[str, object] = {"vocab": list(self.vocab)}
        for name in _ARRAYS:
            array: U32 = getattr(self, name)
            obj[name] = array.astype(_LE_U32, copy=False).tobytes()
        return obj

    @classmethod
    def from_obj(cls, obj: object) -> FileRecord:
        """The record a to_obj() dict holds, checked whole; FormatError on anything off.

        Every length is checked against the bytes that hold it before anything is built, and the
        arrays are read-only views of those bytes, so a corrupt record costs no allocation beyond
        its own size.
        """
        if not isinstance(obj, dict):
            raise _bad(f"a file record is a map, got {type(obj).__name__}")
        keys = set(obj)
        if keys != _KEYS:
            missing = sorted(map(str, _KEYS - keys))
            extra = sorted(map(repr, keys - _KEYS))
            raise _bad(f"a file record's keys are wrong (missing {missing}, unexpected {extra})")
        vocab = obj["vocab"]
        if not isinstance(vocab, list | tuple):
            raise _bad(f"vocab is a list, got {type(vocab).__name__}")
        # Each word's type by map and the empty word by the set: C loops, where a generator
        # over a big tree's 3.4 million words cost a reader more than decompressing them.
        if not set(map(type, vocab)) <= {str}:
            raise _bad("vocab holds something that is not a word")
        words = set(vocab)
        if "" in words:
            raise _bad("vocab holds something that is not a word")
        if len(words) != len(vocab):
            raise _bad("vocab holds a word twice")
        raw: dict[str, bytes] = {}
        for name in _ARRAYS:
            data = obj[name]
            if not isinstance(data, bytes | bytearray):
                raise _bad(f"{name} is bytes, got {type(data).__name__}")
            if len(data) % 4:
                raise _bad(f"{name} is {len(data)} bytes, not a whole number of uint32")
            raw[name] = bytes(data)
        n_chunks = len(raw["starts"]) // 4
        n_pairs = len(raw["word"]) // 4
        for name, want in (
            ("ends", n_chunks),
            ("offsets", n_chunks + 1),
            ("body", n_pairs),
            ("first", n_pairs),
        ):
            if len(raw[name]) // 4 != want:
                raise _bad(f"{name} has {len(raw[name]) // 4} entries, expected {want}")
        arrays: dict[str, U32] = {}
        for name in _ARRAYS:
            view: U32 = np.frombuffer(raw[name], dtype=_LE_U32).astype(np.uint32, copy=False)
            view.flags.writeable = False
            arrays[name] = view
        _check(len(vocab), **arrays)
        return cls(vocab=tuple(vocab), **arrays)


def _bad(what: str) -> FormatError:
    """The FormatError for a stored record: it is derived, so the answer is to rebuild it."""
    return FormatError(f"file record: {what}: rebuild")


def _check(
    n_vocab: int,
    *,
    starts: U32,
    ends: U32,
    offsets: U32,
    word: U32,
    body: U32,
    first: U32,
) -> None:
    """The invariants of a record whose lengths are already consistent; FormatError otherwise."""
    n_pairs = len(word)
    if int(offsets[0]) != 0 or int(offsets[-1]) != n_pairs:
        raise _bad(f"offsets run from {int(offsets[0])} to {int(offsets[-1])}, not 0 to {n_pairs}")
    steps = np.diff(offsets.astype(np.int64))
    if steps.size and int(steps.min()) < 0:
        raise _bad("offsets go backwards")
    if len(starts):
        if int(starts[0]) != 1:
            raise _bad(f"the first chunk starts at line {int(starts[0])}, not 1")
        if bool(np.any(starts > ends)):
            raise _bad("a chunk ends before it starts")
        if bool(np.any(starts[1:].astype(np.int64) != ends[:-1].astype(np.int64) + 1)):
            raise _bad("the chunks do not follow each other line by line")
    if n_pairs:
        if int(word.max()) >= n_vocab:
            raise _bad(f"a word id is {int(word.max())}, past the {n_vocab} words")
        if int(body.min()) < 1 or int(body.max()) > _MAX_COUNT:
            raise _bad(f"a count is out of range 1 to {_MAX_COUNT}")
        if bool(np.any(first > body)):
            raise _bad("a first line counts a word more often than its chunk")
        rising = np.diff(word.astype(np.int64)) > 0
        # A pair that begins a chunk may have any id; every other must exceed the one before.
        rising[offsets[1:-1][(offsets[1:-1] > 0) & (offsets[1:-1] < n_pairs)] - 1] = True
        if not bool(rising.all()):
            raise _bad("a chunk lists a word twice or out of order")


I64 = npt.NDArray[np.int64]


def _record(
    *, vocab: list[str], starts: I64, ends: I64, offsets: I64, word: I64, body: I64, first: I64
) -> FileRecord:
    return FileRecord(
        vocab=tuple(vocab),
        starts=_frozen(starts),
        ends=_frozen(ends),
        offsets=_frozen(offsets),
        word=_frozen(word),
        body=_frozen(body),
        first=_frozen(first),
    )


def _wordless(n_chunks: int, starts: I64, ends: I64) -> FileRecord:
    """The record of a text whose chunks hold no word (no text, blank lines, only ``__``)."""
    none = np.zeros(0, dtype=np.int64)
    offsets = np.zeros(n_chunks + 1, dtype=np.int64)
    return _record(
        vocab=[], starts=starts, ends=ends, offsets=offsets, word=none, body=none, first=none
    )


def _words_of(codes: I64, table: WordTable) -> tuple[I64 | None, I64]:
    """(which run, word id) for each word that the runs of the given codes give, in run order.

    ``which`` is None when each run gives exactly one word, its code: the common case, and then
    nothing is copied. The words of a run that gives several are read from the table's flat
    arrays (:meth:`retrieval.words.WordTable.multi_arrays`) by indexing, with no sort.
    """
    if not len(codes) or int(codes.min()) >= 0:
        return None, codes
    each = (codes >= 0).astype(np.int64)
    multi = np.flatnonzero(codes <= -2)
    if not len(multi):
        which = np.flatnonzero(each)
        return which, codes[which]
    flat_start, flat_len, flat = table.multi_arrays()
    k = -2 - codes[multi]
    each[multi] = flat_len[k]
    which = np.repeat(np.arange(len(codes)), each)
    word = codes[which]
    # Where each run's words begin in the output, and for a several-word run where they begin in
    # flat: the nth word of the run is flat[its start + n].
    begin = np.cumsum(each) - each
    base = np.zeros(len(codes), dtype=np.int64)
    base[multi] = flat_start[k] - begin[multi]
    in_multi = np.flatnonzero(codes[which] <= -2)
    word[in_multi] = flat[base[which[in_multi]] + in_multi]
    return which, word


class _Scratch(threading.local):
    """An array indexed by word id, reused from file to file; one per thread, never shared."""

    def __init__(self) -> None:
        self.array: I64 = np.zeros(0, dtype=np.int64)

    def at_least(self, size: int) -> I64:
        if len(self.array) < size:
            self.array = np.zeros(max(size, 2 * len(self.array), 1024), dtype=np.int64)
        return self.array


_scratch = _Scratch()


def _file_ids(word: I64, n_words: int) -> tuple[I64, I64]:
    """Each occurrence's word as a dense file id in order of first appearance, and the ids' words.

    Without a sort (np.unique was most of this step): an array indexed by the table's word ids
    holds each word's first occurrence, then its file id. What it held before does not matter:
    only this file's words' entries are read, and each is written first. It is this thread's, so
    two threads analysing at once never share it.
    """
    lut = _scratch.at_least(n_words)
    n = len(word)
    at = np.arange(n, dtype=np.int64)
    lut[word] = n
    np.minimum.at(lut, word, at)
    distinct = word[lut[word] == at]
    lut[distinct] = np.arange(len(distinct), dtype=np.int64)
    return lut[word], distinct


def _count_keys(keys: I64, n_keys: int) -> tuple[I64, I64]:
    """The distinct keys in ascending order and how often each occurs.

    Bins where the possible keys are few against the occurrences (most files), else a sort.
    """
    if n_keys <= 4 * len(keys) + 4096:
        bins = np.bincount(keys, minlength=n_keys)
        distinct = np.flatnonzero(bins)
        return distinct, bins[distinct]
    distinct, counts = np.unique(keys, return_counts=True)
    return distinct, counts


def _definition_ids(name: bytes, table: WordTable) -> tuple[int, ...]:
    """The table ids of the definition terms of a defined name's words (memoized in the table)."""
    got = table.defined.get(name)
    if got is None:
        ids: list[int] = []
        for run in translate(name).split():
            for i in table.ids(table[run]):
                term = DEFINED + table.words[i]
                j = table.word_id.setdefault(term, len(table.words))
                if j == len(table.words):
                    table.words.append(term)
                ids.append(j)
        got = table.defined[name] = tuple(dict.fromkeys(ids))
    return got


def analyze(text: str) -> FileRecord:
    """Cut text into chunks (§6) and count each chunk's words and its first line's words.

    The result is what counting :func:`retrieval.words.words` over each chunk of
    ``chunk_spans(split_lines(text))`` and over its first line gives, with ``vocab`` the file's
    distinct words in order of first appearance (the tests hold it to both). It is computed
    otherwise, because the first build of a repository is bound by this function: on the UTF-8
    bytes, in a few passes over the whole file, with no Python loop over lines, tokens or words.

    1. Lines are cut at the positions of newlines, declarations found by one regular expression
       (:func:`retrieval.chunks.declaration_offsets_utf8`), and :func:`retrieval.chunks.cut`
       makes the chunks.
    2. Each chunk's translated bytes are split into runs, and its first line's runs counted,
       which places every run in its chunk and says whether it is in the first line.
    3. One lookup a run in this thread's :class:`retrieval.words.WordTable` gives its words' ids,
       which become file ids in order of first appearance; counting each occurrence's
       (chunk, word) key gives the pairs, in ascending word id within a chunk.

    All three steps run in one compiled call (``Memo.record``, ``retrieval/_words_file.h``, after
    the definitions' lines and terms) when the package was installed with it, and otherwise in
    Python with numpy, ``bytes.split``, a C-level ``map`` over the table; the two give the same
    record (tests/test_words_native.py, tests/test_words_file.py). A run seen for
    the first time is expanded by the table (retrieval/words.py) on the Python path, and by the
    compiled pass's own copy of the rule when it is ASCII; both number its words into the same
    table the same way (tests/test_words_native_rule.py holds them to each other).
    """
    return _analyze(text, native=NATIVE)


def _analyze(text: str, *, native: bool) -> FileRecord:
    """:func:`analyze`, through the compiled pass or the Python one."""
    data = encode(text)
    size = len(data)
    if not size:
        return _wordless(0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if native and _words_native is not None:
        return _record_native(data, word_table())

    # 1. Lines and chunks. line_starts[i] is where line i begins; line_starts[n_lines] is the end.
    line_starts = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
    if data[-1] != 0x0A:
        line_starts = np.append(line_starts, size)
    line_starts = np.concatenate(([0], line_starts)).astype(np.int64, copy=False)
    n_lines = len(line_starts) - 1
    spans = cut(n_lines, np.searchsorted(line_starts, declaration_offsets_utf8(data)).tolist())
    n_chunks = len(spans)
    lows = np.fromiter((lo for lo, _ in spans), dtype=np.int64, count=n_chunks)
    starts = lows + 1
    ends = np.append(lows[1:], n_lines)
    # Base64, hex dumps, minified code: no words.
    tdata = translate(blank_blobs(data))
    bounds = line_starts[np.append(lows, n_lines)]
    first_ends = line_starts[lows + 1]
    table = word_table()
    return _pairs_python(
        data,
        tdata,
        table,
        bounds=bounds.tolist(),
        first_ends=first_ends.tolist(),
        starts=starts,
        ends=ends,
    )


def _record_native(data: bytes, table: WordTable) -> FileRecord:
    """:func:`analyze` of non-empty UTF-8 data in the compiled pass: one call (``Memo.record``)
    finds the lines and chunks, cuts and looks up the runs (of data itself: splitting the
    translated bytes cuts the same runs) and counts the pairs, after the definitions and their
    terms (``Memo.definition_terms``), and gives the record's arrays as uint32 bytes, which
    numpy reads without a copy and cannot change (bytes are immutable). The steps are those of
    the Python path below, which stays the reference (tests/test_words_file.py).

    The definition terms are looked up before the runs rather than after: the table may number
    its words in another order, which no record shows (a record names its words by string)."""
    memo = table.native
    if memo is None:
        memo = table.native = _words_native.Memo()
    def_at = def_counts = def_word = b""
    found = _definitions_utf8(data, native=True)
    if found:
        def_word, def_counts = memo.definition_terms(table, [name for _, name in found], DEFINED)
        def_at = array("q", [at for at, _ in found]).tobytes()
    got = memo.record(table, data, None, def_at, def_counts, def_word)
    if isinstance(got, int):  # the file may hold a blob: its runs are cut from it blanked, by
        # the shapes whose first looks (got's bits) found something
        got = memo.record(table, data, blank_blobs(data, got), def_at, def_counts, def_word)
    vocab, starts, ends, offsets, word, body, first = got
    return FileRecord(
        vocab=vocab,
        starts=np.frombuffer(starts, dtype=np.uint32),
        ends=np.frombuffer(ends, dtype=np.uint32),
        offsets=np.frombuffer(offsets, dtype=np.uint32),
        word=np.frombuffer(word, dtype=np.uint32),
        body=np.frombuffer(body, dtype=np.uint32),
        first=np.frombuffer(first, dtype=np.uint32),
    )


def _definitions(data: bytes, bounds: I64, table: WordTable) -> tuple[list[int], list[int]]:
    """What each chunk defines (chunks.definitions_utf8): each word of a defined name, counted
    once more as the definition term ">word" in the chunk of the name: (chunks, table ids). The
    Python path's; the compiled pass finds them with ``Memo.definition_terms``."""
    def_chunk: list[int] = []
    def_word: list[int] = []
    found = _definitions_utf8(data, native=False)
    if found:
        chunk_of = np.searchsorted(bounds[:-1], [at for at, _ in found], side="right").tolist()
        for c, (_, name) in zip(chunk_of, found, strict=True):
            ids = _definition_ids(name, table)
            def_word.extend(ids)
            def_chunk.extend([c - 1] * len(ids))
    return def_chunk, def_word


def _pairs_python(
    data: bytes,
    tdata: bytes,
    table: WordTable,
    *,
    bounds: list[int],
    first_ends: list[int],
    starts: I64,
    ends: I64,
) -> FileRecord:
    """Steps 2 and 3 of :func:`analyze` in Python (``bytes.split``, a map, numpy).

    Measured on sympy against the alternatives: a Counter per chunk, a dict of the file's runs
    and a sort to number the words were each slower; one split of the whole file, its runs placed
    by numpy over its bytes, was no faster (bench/analyze_bench.py).
    """
    n_chunks = len(starts)
    # 2. Runs, each chunk's split on its own so that its runs are known to be its, and counted in
    # its first line. A run never crosses a line.
    per_chunk = [tdata[a:b].split() for a, b in pairwise(bounds)]
    in_first = [len(tdata[a:b].split()) for a, b in zip(bounds[:-1], first_ends, strict=True)]
    sizes = np.fromiter(map(len, per_chunk), dtype=np.int64, count=n_chunks)
    runs = list(chain.from_iterable(per_chunk))
    n_runs = len(runs)
    run_chunk = np.repeat(np.arange(n_chunks, dtype=np.int64), sizes)
    first_end = np.cumsum(sizes) - sizes + np.array(in_first, dtype=np.int64)
    run_first = np.arange(n_runs) < first_end[run_chunk]

    # 3. Words and pairs. A run seen before is a dict lookup in C; a new one is expanded as it
    # comes (WordTable.__missing__).
    codes = np.fromiter(map(table.__getitem__, runs), dtype=np.int64, count=n_runs)
    which, table_word = _words_of(codes, table)
    if which is not None:
        run_chunk = run_chunk[which]
        run_first = run_first[which]
    # 4. The definition terms, after the runs.
    def_chunk, def_word = _definitions(data, np.asarray(bounds, dtype=np.int64), table)
    if def_word:
        table_word = np.concatenate((table_word, np.asarray(def_word, dtype=np.int64)))
        run_chunk = np.concatenate((run_chunk, np.asarray(def_chunk, dtype=np.int64)))
        run_first = np.concatenate((run_first, np.zeros(len(def_word), dtype=np.bool_)))
    if not len(table_word):
        return _wordless(n_chunks, starts, ends)
    word, distinct = _file_ids(table_word, len(table.words))
    vocab = list(map(table.words.__getitem__, distinct.tolist()))
    n_vocab = len(vocab)
    keys = run_chunk * n_vocab + word
    n_keys = n_chunks * n_vocab
    pair_keys, body = _count_keys(keys, n_keys)
    first_keys, first_counts = _count_keys(keys[run_first], n_keys)
    first = np.zeros(len(pair_keys), dtype=np.int64)
    first[np.searchsorted(pair_keys, first_keys)] = first_counts
    return _record(
        vocab=vocab,
        starts=starts,
        ends=ends,
        offsets=np.searchsorted(pair_keys // n_vocab, np.arange(n_chunks + 1)),
        word=pair_keys % n_vocab,
        body=body,
        first=first,
    )
