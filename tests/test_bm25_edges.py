"""A BM25 segment at its edges: what a build keeps, its counts, the quantity cap of 2**31-1, a
single document, and its stored form refused for each way it can be off behind a good checksum
(retrieval/bm25.py, docs/store-format.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval import bm25
from nodwyn_retrieval.retrieval.bm25 import Part, Segment, SegmentBuilder, search_all


def build(*docs: dict[str, int]) -> Segment:
    b = SegmentBuilder()
    for i, d in enumerate(docs):
        assert b.add(d) == i  # each document's number, in the order added
    return b.build()


def test_a_word_counted_zero_times_is_no_posting() -> None:
    seg = build({"a": 1, "b": 0}, {"a": 2})
    assert seg.words == ("a",)
    assert seg.n_words == 1
    assert seg.postings("b")[0].size == 0
    assert (seg.n_docs, seg.n_postings) == (2, 2)
    assert seg.lengths.tolist() == [1, 2]


def test_a_word_without_postings_leaves_the_vocabulary_and_the_rest_keep_their_order() -> None:
    seg = Segment.from_pairs(
        ["a", "b", "c"], 2, np.array([0, 1, 1]), np.array([0, 2, 0]), np.array([1, 2, 3])
    )
    assert seg.words == ("a", "c")
    assert seg.postings("a")[0].tolist() == [0, 1]
    assert seg.postings("a")[1].tolist() == [1, 3]
    assert seg.postings("c")[1].tolist() == [2]


def test_the_counts_the_size_and_the_name_of_a_segment() -> None:
    seg = build({"a": 1, "b": 2}, {"a": 3, "c": 1})
    assert (seg.n_docs, seg.n_words, seg.n_postings) == (2, 3, 4)
    assert repr(seg) == "<Segment docs=2 words=3 postings=4>"
    # offsets (4 x 8 bytes), docs and tfs (4 x 4 each), lengths (2 x 4): a built one holds no blob
    assert seg.nbytes() == 32 + 16 + 16 + 8
    loaded = Segment.from_obj(seg.to_obj())
    assert (loaded.n_docs, loaded.n_words, loaded.n_postings) == (2, 3, 4)
    assert loaded.nbytes() > seg.nbytes()  # its sorted vocabulary and offsets are held too


def test_a_quantity_is_capped_at_2_to_the_31_minus_1() -> None:
    seg = build({"a": 2**40}, {"a": 2**31 - 1}, {"a": 7})
    assert seg.postings("a")[1].tolist() == [2_147_483_647, 2_147_483_647, 7]
    assert seg.lengths.tolist() == [2_147_483_647, 2_147_483_647, 7]
    back = Segment.from_obj(seg.to_obj())
    assert back.postings("a")[1].tolist() == [2_147_483_647, 2_147_483_647, 7]


def test_values_at_the_packing_widths_round_trip() -> None:
    # Doc gaps of 0xFFFE, 0xFFFF and 0x10000, frequencies of 0xFE, 0xFF and 0x100.
    n = 1 + 0xFFFE + 0xFFFF + 0x10000
    docs = np.array([0, 0xFFFE, 0xFFFE + 0xFFFF, n - 1])
    seg = Segment.from_pairs(
        ["w"], n, docs, np.zeros(4, dtype=np.int64), np.array([1, 0xFE, 0xFF, 0x100])
    )
    back = Segment.from_obj(seg.to_obj())
    assert back.postings("w")[0].tolist() == docs.tolist()
    assert back.postings("w")[1].tolist() == [1, 0xFE, 0xFF, 0x100]


def test_one_document_alone_is_found() -> None:
    seg = build({"solo": 2})
    (hit,) = search_all([Part(seg)], ["solo"], 5)
    # N 1, df 1: idf ln(1 + 0.5/1.5); tf 2 at the average length: 2 * 2.2 / (2 + 1.2)
    assert hit.score == pytest.approx(math.log(1 + 0.5 / 1.5) * 4.4 / 3.2, rel=1e-12)
    assert search_all([Part(build())], ["solo"], 5) == []
    assert search_all([Part(seg)], ["solo"], 0) == []


def test_an_empty_segment_round_trips() -> None:
    back = Segment.from_obj(build().to_obj())
    assert (back.n_docs, back.n_words, back.n_postings) == (0, 0, 0)


# -- the stored form, changed behind a checksum made to agree ----------------------------------


def stored() -> dict[str, Any]:
    return build({"a": 1, "b": 300}, {"a": 2}, {"c": 1}).to_obj()


def resealed(**changes: Any) -> dict[str, Any]:
    obj = stored()
    obj.update(changes)
    obj["crc"] = bm25._crc(obj)
    return obj


def u4(*v: int) -> bytes:
    return np.asarray(v, dtype="<u4").tobytes()


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (resealed(n_words=-1), "segment vocabulary count is not a count"),
        (resealed(n_words=True), "segment vocabulary count is not a count"),
        (resealed(n_words="3"), "segment vocabulary count is not a count"),
        (resealed(n_words=2), "segment arrays do not match each other"),
        (resealed(n_words=0), "segment arrays do not match each other"),
        (resealed(tf=b"\x01\x02\x03"), "segment arrays do not match each other"),
        (resealed(tf=b"\x01"), "segment arrays do not match each other"),
        (resealed(vocab_len=b"\x01\x02"), "segment arrays do not match each other"),
        (resealed(vocab_len=b"\x01\x00\x02"), "segment vocabulary offsets are not a partition"),
        (resealed(vocab_len=b"\x01\x01\x02"), "segment vocabulary offsets are not a partition"),
        (resealed(vocab_len=b"\x01\x01\x00"), "segment vocabulary offsets are not a partition"),
        (resealed(counts=b"\x02\x00\x02"), "segment offsets are not a partition of the postings"),
        (resealed(counts=b"\x02\x01\x02"), "segment offsets are not a partition of the postings"),
        (resealed(counts=u4(2, 1, 0)), "segment offsets are not a partition of the postings"),
        (resealed(counts=u4(2, 1)), "segment arrays do not match each other"),
        (resealed(counts=b"\x02\x00\x01\x00\x01"), "segment arrays do not match each other"),
        (resealed(counts=b"\x02\x00\x01\x00\x01\x00\x00"), "segment array length is not"),
        (resealed(tf_exc_at=u4(4), tf_exc=u4(9)), "segment exception names a posting past the end"),
        (resealed(delta_exc_at=u4(4), delta_exc=u4(9)), "segment exception names a posting past"),
        (resealed(lengths=u4(1, 2)), "segment posting names a document past the end"),
        (resealed(lengths=u4(1, 2, 2**31)), "segment quantity past 2\\*\\*31-1"),
        (resealed(tf_exc=u4(2**31)), "segment quantity past 2\\*\\*31-1"),
    ],
)
def test_a_stored_segment_that_is_off_is_refused(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(FormatError, match=rf"^{message}.*: rebuild$"):
        Segment.from_obj(obj)


def test_the_stored_sample_decodes_as_it_was_built() -> None:
    obj = stored()
    back = Segment.from_obj(obj)
    assert back.words == ("a", "b", "c")
    assert back.postings("b")[1].tolist() == [300]
    assert back.lengths.tolist() == [301, 2, 1]
    ok = resealed(lengths=u4(301, 2, 2**31 - 1))
    assert Segment.from_obj(ok).lengths.tolist() == [301, 2, 2_147_483_647]


def test_repeated_pairs_add_up_and_no_input_array_is_changed() -> None:
    doc = np.array([1, 0, 1, 0, 1], dtype=np.int64)
    word = np.array([0, 1, 0, 1, 2], dtype=np.int64)
    tf = np.array([2, 3, bm25.MAX_QUANTITY, 4, 5], dtype=np.int64)
    kept = (doc.copy(), word.copy(), tf.copy())
    seg = Segment.from_pairs(["a", "b", "c", "unused"], 2, doc, word, tf, ids={"a": 0})
    assert seg.words == ("a", "b", "c")
    assert [seg.word_id(w) for w in ("a", "b", "c", "unused")] == [0, 1, 2, None]
    assert seg.postings("a")[0].tolist() == [1]
    assert seg.postings("a")[1].tolist() == [bm25.MAX_QUANTITY]
    assert seg.postings("b")[0].tolist() == [0]
    assert seg.postings("b")[1].tolist() == [7]
    assert seg.lengths.tolist() == [7, bm25.MAX_QUANTITY]
    for a, b in zip((doc, word, tf), kept, strict=True):
        assert np.array_equal(a, b)


def test_a_word_map_that_does_not_match_the_words_is_not_kept() -> None:
    doc = np.array([0, 0, 1], dtype=np.int64)
    word = np.array([0, 1, 1], dtype=np.int64)
    tf = np.array([1, 2, 3], dtype=np.int64)
    seg = Segment.from_pairs(["a", "b"], 2, doc, word, tf, ids={"a": 0})
    assert [seg.word_id(w) for w in ("a", "b", "c")] == [0, 1, None]
    assert seg.postings("b")[0].tolist() == [0, 1]
    given = {"a": 0, "b": 1}
    assert Segment.from_pairs(["a", "b"], 2, doc, word, tf, ids=given).word_id("b") == 1
