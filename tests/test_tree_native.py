"""A first build's postings, compiled (retrieval/_tree_native.c) and in Python: the same segment.

The builder's vocabulary map, the finish's sort (``Segment.from_pairs``) and the stored form
(``Segment.to_obj``) are each held to their Python paths on generated postings (repeated pairs,
frequencies past the cap, gaps past 16 bits, words past ASCII and past 255 bytes, words with no
posting) and on a real tree's files, added in batches in and out of their order keys' order.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.retrieval import bm25, tree_build
from nodwyn_retrieval.retrieval.analyze import FileRecord, analyze
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY, Segment
from nodwyn_retrieval.retrieval.tree_build import TreeBuilder, TreeSegment, pairs_of

native = pytest.importorskip("nodwyn_retrieval.retrieval._tree_native")

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["alpha", "beta", "café", "z", "é", "\uffff", "𝔸x", "a" * 300, "ab", "a", "b" * 70]


def _same_segment(a: Segment, b: Segment) -> None:
    assert a.words == b.words
    for name in ("offsets", "docs", "tfs", "lengths"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name
    assert a.total_length == b.total_length
    assert a.to_obj() == b.to_obj_python() == b.to_obj()


def _pairs(rng: random.Random, n: int, n_words: int, n_docs: int, gap: int = 1) -> tuple:
    word = np.asarray([rng.randrange(n_words) for _ in range(n)], dtype=np.uint32)
    doc = np.asarray([rng.randrange(n_docs) * gap for _ in range(n)], dtype=np.uint32)
    tf = np.asarray(
        [rng.choice([1, 2, 15, 16, 17, 255, MAX_QUANTITY - 1, MAX_QUANTITY]) for _ in range(n)],
        dtype=np.uint32,
    )
    return doc, word, tf


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_sort_makes_the_python_paths_segment(seed: int) -> None:
    rng = random.Random(seed)
    n_words = rng.randrange(1, 40)
    words = [f"w{i}" for i in range(n_words)]
    gap = rng.choice([1, 1, 0xFFFE, 0xFFFF, 0x10000, 3_000_000])
    n_docs = rng.randrange(1, 60)
    doc, word, tf = _pairs(rng, rng.randrange(0, 400), n_words, n_docs, gap)
    total_docs = (n_docs - 1) * gap + 1
    got = Segment.from_pairs(words, total_docs, doc, word, tf)
    want = Segment.from_pairs_python(words, total_docs, doc, word, tf)
    _same_segment(got, want)


def test_the_compiled_sort_sums_repeated_pairs_and_caps_them_and_the_lengths() -> None:
    # The same (word, document) three times, out of order, the sum past the cap; a document
    # whose length is past the cap; a word with no posting (dropped, the others renumbered).
    doc = np.asarray([1, 0, 1, 1, 0, 2], dtype=np.uint32)
    word = np.asarray([2, 2, 2, 0, 0, 2], dtype=np.uint32)
    tf = np.asarray([MAX_QUANTITY, 5, MAX_QUANTITY, 7, 1, 3], dtype=np.uint32)
    words = ["zero", "never", "two"]
    got = Segment.from_pairs(words, 4, doc, word, tf)
    _same_segment(got, Segment.from_pairs_python(words, 4, doc, word, tf))
    assert got.words == ("zero", "two")
    assert got.docs.tolist() == [0, 1, 0, 1, 2]
    assert got.tfs.tolist() == [1, 7, 5, MAX_QUANTITY, 3]
    assert got.lengths.tolist() == [6, MAX_QUANTITY, 3, 0]


def test_the_compiled_sort_of_pairs_in_document_order_and_of_none() -> None:
    doc = np.asarray([0, 0, 1, 1, 1, 3], dtype=np.uint32)  # in order: the first sort skipped
    word = np.asarray([1, 0, 1, 1, 0, 1], dtype=np.uint32)
    tf = np.asarray([1, 2, 3, 4, 5, 6], dtype=np.uint32)
    got = Segment.from_pairs(["a", "b"], 4, doc, word, tf)
    _same_segment(got, Segment.from_pairs_python(["a", "b"], 4, doc, word, tf))
    assert got.docs.tolist() == [0, 1, 0, 1, 3]
    assert got.tfs.tolist() == [2, 5, 1, 7, 6]
    empty = np.zeros(0, dtype=np.uint32)
    none = Segment.from_pairs(["a"], 3, empty, empty, empty)
    _same_segment(none, Segment.from_pairs_python(["a"], 3, empty, empty, empty))
    assert none.n_words == 0
    assert none.lengths.tolist() == [0, 0, 0]


def test_the_compiled_sort_refuses_what_is_not_its_input() -> None:
    ok = np.asarray([0, 1], dtype=np.uint32)
    with pytest.raises(ValueError, match="past the end"):
        native.sort_postings(np.asarray([0, 2], dtype=np.uint32), ok, ok, 2, 2)
    with pytest.raises(ValueError, match="past the end"):
        native.sort_postings(ok, np.asarray([0, 2], dtype=np.uint32), ok, 2, 2)
    with pytest.raises(ValueError, match="differ in length"):
        native.sort_postings(ok, ok, np.asarray([1], dtype=np.uint32), 2, 2)
    with pytest.raises(TypeError, match="uint32"):
        native.sort_postings(ok.astype(np.int64), ok, ok, 2, 2)
    with pytest.raises(ValueError, match="counts"):
        native.sort_postings(ok, ok, ok, -1, 2)


@pytest.mark.parametrize("seed", range(30))
def test_the_compiled_stored_form_is_the_python_paths(seed: int) -> None:
    rng = random.Random(1000 + seed)
    words = rng.sample(WORDS, rng.randrange(1, len(WORDS) + 1)) + [
        f"{rng.choice('xyzé')}{i}" for i in range(rng.randrange(0, 300))
    ]
    rng.shuffle(words)
    gap = rng.choice([1, 0xFFFE, 0xFFFF, 0x10000])
    n_docs = rng.randrange(1, 80)
    doc, word, tf = _pairs(rng, rng.randrange(1, 3000), len(words), n_docs, gap)
    seg = Segment.from_pairs_python(words, (n_docs - 1) * gap + 1, doc, word, tf)
    assert seg.to_obj() == seg.to_obj_python()
    again = Segment.from_obj(seg.to_obj())
    assert again.to_obj() == seg.to_obj_python()


def test_the_compiled_vocabulary_order_is_by_bytes_past_the_first_eight() -> None:
    # The compiled sort compares each word's first eight bytes first: words that share them, that
    # end within them, that go on with NUL bytes (the head of the shorter word), or whose bytes
    # pass 0x7F (compared unsigned) are still in the order of their UTF-8 bytes.
    words = [
        "abcdefgh", "abcdefghi", "abcdefgg", "abcdefgh\0", "abcdefghz", "abc", "abc\0", "abc\0\0x",
        "ab", "a", "\0", "\0\0", "é", "e", "\x7f", "\x80", "ÿÿÿÿ", "abcdefg", "abcdefgé",
        "zzzzzzzz", "zzzzzzzzzzzzzzzzz", "zzzzzzzzzzzzzzzzy", "abcdefgh" * 9,
    ]  # fmt: skip
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(words)
        n = len(words)
        doc = np.arange(n, dtype=np.uint32)
        seg = Segment.from_pairs_python(
            list(words), n, doc, np.arange(n, dtype=np.uint32), np.ones(n, dtype=np.uint32)
        )
        obj = seg.to_obj()
        assert obj == seg.to_obj_python()
        stored = list(Segment.from_obj(obj).words)
        assert stored == sorted(words, key=lambda w: w.encode("utf-8"))


def _by_bytes(words: list[str]) -> list[int]:
    """The words' indices in their UTF-8 bytes' order, equal words in their own order."""
    return sorted(range(len(words)), key=lambda i: words[i].encode("utf-8"))


def _one_posting_each(words: list[str]) -> Segment:
    """The segment of distinct words, the i-th word in document i alone."""
    n = len(words)
    ids = np.arange(n, dtype=np.uint32)
    return Segment.from_pairs_python(words, n, ids, ids, np.ones(n, dtype=np.uint32))


@pytest.mark.parametrize("seed", range(10))
def test_the_vocabulary_order_is_the_stored_forms(seed: int) -> None:
    # vocab_order (sorted without the GIL, beside the postings' sort) gives the order the
    # stored form's own sort gives: by UTF-8 bytes past the first eight, equal words kept in
    # their order; pack_segment given it for the same tuple packs exactly what it packs without.
    rng = random.Random(500 + seed)
    words = [*WORDS, "abcdefgh", "abcdefgh\0", "abcdefghé", "\0", ""] + [
        f"{rng.choice(['abcdefgh', 'x', 'é'])}{rng.randrange(10**6)}" for _ in range(2000)
    ]
    rng.shuffle(words)
    order = native.vocab_order(words)
    assert np.frombuffer(order.indices(), dtype=np.int64).tolist() == _by_bytes(words)
    assert order.words == tuple(words)
    as_tuple = tuple(words)
    assert native.vocab_order(as_tuple).words is as_tuple  # a tuple is taken as it is
    assert native.vocab_order([]).indices() == b""
    seg = _one_posting_each(list(dict.fromkeys(words)))
    rest = (seg.offsets, seg.docs, seg.tfs)
    want = native.pack_segment(seg.words, *rest)
    assert native.pack_segment(seg.words, *rest, native.vocab_order(seg.words)) == want
    assert seg.to_obj() == seg.to_obj_python()


def test_an_order_of_other_words_is_not_used() -> None:
    # An order is used only for the very tuple it was made of: the same words in another tuple
    # or a list, or other words, are sorted again; what is not an order is refused.
    rng = random.Random(11)
    words = list(dict.fromkeys(f"w{rng.randrange(10**6)}" for _ in range(300)))
    seg = _one_posting_each(words)
    rest = (seg.offsets, seg.docs, seg.tfs)
    want = native.pack_segment(seg.words, *rest)
    shuffled = list(seg.words)
    rng.shuffle(shuffled)
    for other in (tuple(shuffled), (*seg.words, "zz"), tuple(reversed(seg.words))):
        order = native.vocab_order(other)
        assert native.pack_segment(seg.words, *rest, order) == want
        assert native.pack_segment(list(seg.words), *rest, order) == want
    same = native.vocab_order(seg.words)
    assert native.pack_segment(list(seg.words), *rest, same) == want  # a list: not that tuple
    for wrong in (b"", same.indices(), "order", 3):
        with pytest.raises(TypeError, match="vocab_order"):
            native.pack_segment(seg.words, *rest, wrong)
    with pytest.raises(TypeError, match="str"):
        native.vocab_order(["a", b"b"])
    with pytest.raises(TypeError):
        native.vocab_order(3)


def test_a_first_builds_vocabulary_is_sorted_beside_its_postings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A vocabulary of ORDER_BESIDE_WORDS words or more is sorted in a thread during the finish's
    # sort of the postings, and the stored form is the Python path's; a smaller one, or a sort
    # that failed, leaves the stored form to sort the words.
    rng = random.Random(5)
    vocab = [f"n{i}x{rng.randrange(10**6)}" for i in range(tree_build.ORDER_BESIDE_WORDS + 50)]
    recs = [(f"f{i}.py", analyze(" ".join(rng.sample(vocab, 400)))) for i in range(40)]
    items = [(i, p, r) for i, (p, r) in enumerate(recs)]
    batches = [items[i : i + 7] for i in range(0, len(items), 7)]
    threads: list[str] = []
    real = tree_build._order_native
    assert real is not None

    def order(words: tuple[str, ...]) -> Any:
        threads.append(threading.current_thread().name)
        return real(words)

    monkeypatch.setattr(tree_build, "_order_native", order)
    compiled = _build(monkeypatch, batches, compiled=True)
    assert threads == ["nodwyn-vocab-order"]
    kept = compiled.segment._order  # kept for the stored form, used once
    assert kept is not None
    assert kept.words is compiled.segment.words  # of the segment's own tuple
    python = _build(monkeypatch, batches, compiled=False)
    _same_segment(compiled.segment, python.segment)
    assert compiled.segment._order is None
    assert compiled.to_obj() == python.to_obj()

    def fails(words: tuple[str, ...]) -> Any:
        raise MemoryError

    monkeypatch.setattr(tree_build, "_order_native", fails)
    failed = _build(monkeypatch, batches, compiled=True)
    assert failed.segment._order is None
    assert failed.to_obj() == python.to_obj()
    monkeypatch.setattr(tree_build, "_order_native", order)

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as m:  # a process at its limit of threads: sorted by to_obj
        m.setattr(threading.Thread, "start", no_thread)
        unthreaded = _build(monkeypatch, batches, compiled=True)
    assert unthreaded.segment._order is None
    assert unthreaded.to_obj() == python.to_obj()
    small = _build(monkeypatch, batches[:1], compiled=True)
    assert len(small.segment.words) < tree_build.ORDER_BESIDE_WORDS
    assert threads == ["nodwyn-vocab-order"]  # not sorted beside: too few words
    assert small.to_obj() == _build(monkeypatch, batches[:1], compiled=False).to_obj()


def test_the_compiled_stored_form_widths_and_exceptions() -> None:
    # One word with 70,000 postings (its count in 4 bytes), one of 300 (2), one word of 300
    # bytes (lengths in 2 bytes); differences of exactly 0xFFFE, 0xFFFF and past; frequencies
    # of 0, 16 and 17; an odd number of postings (the last half byte).
    many = 70_000
    docs = np.concatenate(
        [
            np.arange(many, dtype=np.uint32),
            np.asarray([0, 0xFFFE, 2 * 0xFFFE + 1, 3 * 0xFFFF + 5, 3 * 0xFFFF + 6], np.uint32),
            np.arange(300, dtype=np.uint32) * 2,
        ]
    )
    tfs = np.ones(docs.shape[0], dtype=np.uint32)
    tfs[many : many + 5] = [0, 16, 17, 1, MAX_QUANTITY]
    offsets = np.asarray([0, many, many + 5, many + 305], dtype=np.int64)
    lengths = np.zeros(3 * 0xFFFF + 7, dtype=np.uint32)
    seg = Segment(["b" * 300, "é", "a"], offsets, docs, tfs, lengths)
    obj = seg.to_obj()
    assert obj == seg.to_obj_python()
    assert len(obj["counts"]) == 3 * 4
    assert len(obj["vocab_len"]) == 3 * 2
    assert obj["delta_exc_at"] != b""
    assert obj["tf_exc_at"] != b""
    assert Segment.from_obj(obj).postings("é")[0].tolist() == docs[many : many + 5].tolist()


def test_a_word_with_no_posting_is_stored_by_the_python_path() -> None:
    docs = np.asarray([0, 1], dtype=np.uint32)
    seg = Segment(
        ["a", "b", "c"],
        np.asarray([0, 1, 1, 2], dtype=np.int64),
        docs,
        np.asarray([1, 2], dtype=np.uint32),
        np.asarray([1, 2], dtype=np.uint32),
    )
    assert native.pack_segment(seg.words, seg.offsets, seg.docs, seg.tfs) is None
    assert seg.to_obj() == seg.to_obj_python()


def test_the_compiled_stored_form_refuses_what_is_not_a_segment() -> None:
    docs = np.asarray([0, 1], dtype=np.uint32)
    with pytest.raises(ValueError, match="partition"):
        native.pack_segment(["a"], np.asarray([0, 1], dtype=np.int64), docs, docs)
    with pytest.raises(TypeError, match="int64"):
        native.pack_segment(["a"], np.asarray([0, 2], dtype=np.int32), docs, docs)
    with pytest.raises(TypeError, match="str"):
        native.pack_segment([b"a"], np.asarray([0, 2], dtype=np.int64), docs, docs)


def test_the_compiled_word_map_gives_the_python_paths_numbers() -> None:
    rng = random.Random(7)
    ids: dict[str, int] = {}
    want: dict[str, int] = {}
    for _ in range(50):
        batch = list(dict.fromkeys(rng.choice(WORDS) + str(rng.randrange(60)) for _ in range(40)))
        got = np.frombuffer(native.map_words(ids, batch), dtype=np.uint32).tolist()
        n0 = len(want)
        new = [w for w in batch if w not in want]
        want.update(zip(new, range(n0, n0 + len(new)), strict=True))
        assert got == [want[w] for w in batch]
        assert ids == want
        assert list(ids) == list(want)
    with pytest.raises(TypeError):
        native.map_words(ids, ("a",))
    with pytest.raises(OverflowError):
        native.map_words({"a": 2**32}, ["a"])


def _records(n: int) -> list[tuple[str, object]]:
    """This checkout's own Python files: a real tree's files, analysed."""
    paths = sorted(p for p in (ROOT / "retrieval").glob("*.py"))[:n]
    return [(str(p.relative_to(ROOT)), analyze(p.read_text("utf-8"))) for p in paths]


def _build(
    monkeypatch: pytest.MonkeyPatch, batches: list[list[tuple[int, str, object]]], compiled: bool
) -> TreeSegment:
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(tree_build, "_map_native", None)
            m.setattr(tree_build, "_pairs_native", None)
            m.setattr(tree_build, "_sort_native", None)
            m.setattr(tree_build, "_order_native", None)
            m.setattr(bm25, "_sort_native", None)
            m.setattr(bm25, "_pack_native", None)
        b = TreeBuilder()
        for batch in batches:
            b.add([(o, p, f"k{o}") for o, p, _ in batch], pairs_of([(p, r) for _, p, r in batch]))
        return b.finish()


@pytest.mark.parametrize("shuffled", [False, True])
def test_a_real_trees_build_is_the_same_both_ways(
    monkeypatch: pytest.MonkeyPatch, shuffled: bool
) -> None:
    recs = _records(14)
    items = [(i, p, r) for i, (p, r) in enumerate(recs)]
    batches = [items[i : i + 3] for i in range(0, len(items), 3)]
    if shuffled:  # the batches out of their order keys' order: the finish renumbers documents
        random.Random(3).shuffle(batches)
    compiled = _build(monkeypatch, batches, compiled=True)
    python = _build(monkeypatch, batches, compiled=False)
    assert compiled.files == python.files
    _same_segment(compiled.segment, python.segment)
    assert compiled.to_obj() == python.to_obj()
    one = TreeSegment.build([(p, f"k{i}", r) for i, (p, r) in enumerate(recs)])
    assert one.to_obj() == compiled.to_obj()
    assert compiled.segment.postings("segment")[0].size > 0


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize(
    "shape",
    [
        "whole",  # whole batches out of turn
        "stretches",  # a batch holding two stretches of the tree, others between them
        "costly_cuts",  # a batch of stretches the cutting of which costs more: renumbered
        "own_order",  # a batch whose files are out of their own order: renumbered
        "repeated",  # a key given twice: the finish's stable sort decides
    ],
)
def test_batches_out_of_turn_are_cut_and_put_in_order_or_renumbered(
    monkeypatch: pytest.MonkeyPatch, compiled: bool, shape: str
) -> None:
    recs = _records(16)
    items = [(i, p, r) for i, (p, r) in enumerate(recs)]
    if shape == "whole":
        batches = [items[8:12], items[0:4], items[12:16], items[4:8]]
    elif shape == "stretches":
        batches = [items[4:5] + items[15:16], items[0:4], items[5:15]]
    elif shape == "costly_cuts":
        batches = [items[0:16:2], items[1:16:2]]
    elif shape == "own_order":
        batches = [items[4:8], [items[2], items[0], items[1], items[3]], items[8:16]]
    else:
        batches = [items[4:8], [(3, p, r) for _, p, r in items[0:4]], items[8:16]]
    seen: list[bool] = []
    real = bm25._sort_native

    def sort(*args: Any) -> Any:
        seen.append(len(args) > 5 and args[5] is not None)  # a renumbering given
        return real(*args)

    if compiled:
        monkeypatch.setattr(tree_build, "_sort_native", sort)
        monkeypatch.setattr(bm25, "_sort_native", sort)
    got = _build(monkeypatch, batches, compiled=compiled)
    renumbered = seen[-1] if seen else None  # the last call is the finish's
    # In key order; among equal keys ("repeated") the stable sort keeps the batches' order.
    flat = sorted((t for batch in batches for t in batch), key=lambda t: t[0])
    want = TreeSegment.build([(p, f"k{o}", r) for o, p, r in flat])
    # The same segment as the files built in their order (its words numbered as they came).
    assert got.files == want.files
    assert got.to_obj() == want.to_obj()
    if compiled:  # by word alone once the pieces are in order
        assert renumbered is (shape in ("costly_cuts", "own_order", "repeated"))


def test_the_environment_turns_the_compiled_paths_off() -> None:
    code = (
        "from nodwyn_retrieval.retrieval import bm25, tree_build; "
        "print(bm25._sort_native, bm25._pack_native, tree_build._map_native)"
    )
    for pure, want in (("1", "None None None"), ("0", None)):
        env = {**os.environ, "NODWYN_RETRIEVAL_PURE_PYTHON": pure}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        if want is not None:
            assert out == want
        else:
            assert "None" not in out


@pytest.mark.parametrize("seed", range(20))
def test_the_compiled_sort_renumbers_documents_as_the_python_path_does(seed: int) -> None:
    rng = random.Random(500 + seed)
    n_words, n_docs = rng.randrange(1, 30), rng.randrange(1, 50)
    doc, word, tf = _pairs(rng, rng.randrange(0, 300), n_words, n_docs)
    renumber = np.asarray(rng.sample(range(n_docs), n_docs), dtype=np.uint32)
    words = [f"w{i}" for i in range(n_words)]
    counts, docs, tfs, lengths = native.sort_postings(word, doc, tf, n_words, n_docs, renumber)
    got = Segment.from_sorted(
        words,
        np.frombuffer(counts, dtype=np.int64),
        np.frombuffer(docs, dtype=np.uint32),
        np.frombuffer(tfs, dtype=np.uint32),
        np.frombuffer(lengths, dtype=np.uint32),
    )
    _same_segment(got, Segment.from_pairs_python(words, n_docs, renumber[doc], word, tf))


def test_the_compiled_sort_refuses_a_renumbering_that_is_not_one() -> None:
    ok = np.asarray([0, 1], dtype=np.uint32)
    with pytest.raises(ValueError, match="each document"):
        native.sort_postings(ok, ok, ok, 2, 2, np.asarray([0], dtype=np.uint32))
    with pytest.raises(ValueError, match="past the end"):
        native.sort_postings(ok, ok, ok, 2, 2, np.asarray([0, 2], dtype=np.uint32))
    with pytest.raises(TypeError, match="uint32"):
        native.sort_postings(ok, ok, ok, 2, 2, np.asarray([0, 1], dtype=np.int64))


def test_runs_of_documents_that_overlap_a_little_are_put_in_order_and_a_lot_sorted_again() -> None:
    # Two pieces whose documents interleave at their edges (a few moves), then pieces given
    # backwards (past the budget of moves: sorted by document first); both as the Python path.
    for docs in ([0, 1, 2, 5, 3, 4, 6, 7], list(range(40, 0, -1))):
        doc = np.asarray(docs, dtype=np.uint32)
        word = np.zeros(doc.shape[0], dtype=np.uint32)
        tf = np.arange(1, doc.shape[0] + 1, dtype=np.uint32)
        got = Segment.from_pairs(["a"], 41, doc, word, tf)
        _same_segment(got, Segment.from_pairs_python(["a"], 41, doc, word, tf))
        assert got.docs.tolist() == sorted(docs)


def _same_pairs(a: tree_build.Pairs, b: tree_build.Pairs) -> None:
    assert a.words == b.words
    for name in ("n_chunks", "doc", "word", "tf", "starts", "ends"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name


def _record(rng: random.Random, vocab: list[str], n_chunks: int) -> FileRecord:
    """A record of n_chunks chunks over vocab, its counts up to past the cap."""
    offsets, word, body, first = [0], [], [], []
    for _ in range(n_chunks):
        held = sorted(rng.sample(range(len(vocab)), rng.randrange(0, len(vocab) + 1)))
        word += held
        for _ in held:
            b = rng.choice([1, 2, 7, 300, MAX_QUANTITY - 1, MAX_QUANTITY])
            body.append(b)
            first.append(rng.choice([0, 0, 1, b]))
        offsets.append(len(word))
    u = lambda xs: np.asarray(xs, dtype=np.uint32)  # noqa: E731
    lines = u(range(1, n_chunks + 1))
    return FileRecord(tuple(vocab), lines, lines, u(offsets), u(word), u(body), u(first))


@pytest.mark.parametrize("seed", range(25))
def test_the_compiled_pairs_of_a_batch_are_the_python_paths(seed: int) -> None:
    rng = random.Random(2000 + seed)
    files = []
    for f in range(rng.randrange(0, 8)):
        vocab = rng.sample([*WORDS, "pkg", "mod", "py", "tree", "x1"], rng.randrange(0, 9))
        path = rng.choice(["pkg/mod.py", "tree/x1/tree.py", f"a{f}/b.md", "README", "é/ñ.rs"])
        files.append((path, _record(rng, vocab, rng.randrange(0, 4) if vocab else 0)))
    _same_pairs(tree_build.pairs_of(files), tree_build.pairs_of_python(files))


def test_the_compiled_pairs_of_a_real_trees_batches_are_the_python_paths() -> None:
    recs = _records(30)
    for i in range(0, len(recs), 7):
        batch = recs[i : i + 7]
        _same_pairs(tree_build.pairs_of(batch), tree_build.pairs_of_python(batch))
    pairs = tree_build.pairs_of(recs[:2])
    # A path's word counts three times in every chunk: it is in the batch's pairs.
    tree_id = pairs.words.index("retrieval")
    n_docs = int(pairs.n_chunks.sum())
    assert n_docs > 2
    assert set(pairs.doc[pairs.word == tree_id].tolist()) == set(range(n_docs))
    assert 3 in pairs.tf[pairs.word == tree_id].tolist()


def test_the_compiled_pairs_refuse_a_record_that_does_not_hold_together() -> None:
    u = lambda xs: np.asarray(xs, dtype=np.uint32)  # noqa: E731
    ok = FileRecord(("a",), u([1]), u([1]), u([0, 1]), u([0]), u([1]), u([0]))
    assert native.pairs_arrays([ok], [{}], 3, 3)[0] == ["a"]
    bad_offsets = FileRecord(("a",), u([1]), u([1]), u([0, 2]), u([0]), u([1]), u([0]))
    back = FileRecord(("a",), u([1, 2]), u([1, 2]), u([0, 2, 1]), u([0]), u([1]), u([0]))
    past = FileRecord(("a",), u([1]), u([1]), u([0, 1]), u([1]), u([1]), u([0]))
    for rec, match in ((bad_offsets, "do not match"), (back, "go back"), (past, "past its")):
        with pytest.raises(ValueError, match=match):
            native.pairs_arrays([rec], [{}], 3, 3)
    with pytest.raises(ValueError, match="for each record"):
        native.pairs_arrays([ok], [], 3, 3)
    with pytest.raises(TypeError, match="dict"):
        native.pairs_arrays([ok], [["a"]], 3, 3)
