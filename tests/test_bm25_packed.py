"""A loaded segment keeps its postings packed as stored and unpacks a word's when it is asked
(retrieval/bm25.py, ``_Packed``): every word's postings, the whole arrays and the scores are those
of the segment that was stored, and what the whole unpacking used to refuse is still refused when
the segment is loaded, before any word is asked."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval import bm25
from nodwyn_retrieval.retrieval.bm25 import Part, Segment, count_matching, search_all


def _random_segment(seed: int) -> Segment:
    rng = np.random.default_rng(seed)
    n_docs = 300_000  # gaps past 16 bits: differences stored as exceptions
    words = [f"w{i:03d}" for i in range(120)]
    doc: list[np.ndarray[Any, Any]] = []
    word: list[np.ndarray[Any, Any]] = []
    for w in range(len(words)):
        k = int(rng.integers(1, 400))
        d = np.sort(rng.choice(n_docs, size=k, replace=False))
        doc.append(d)
        word.append(np.full(k, w))
    docs, wids = np.concatenate(doc), np.concatenate(word)
    # past 4 bits (16 and up), past 8 bits too
    tfs = rng.choice([1, 2, 3, 14, 15, 16, 17, 254, 255, 256, 70_000], size=docs.size)
    return Segment.from_pairs(words, n_docs, docs, wids, tfs)


def test_every_words_postings_unpacked_alone_are_the_stored_ones() -> None:
    built = _random_segment(3)
    obj = built.to_obj()
    assert np.frombuffer(obj["delta_exc_at"], "<u4").size, "the sample has 16-bit exceptions"
    assert np.frombuffer(obj["tf_exc_at"], "<u4").size, "and 8-bit ones"
    loaded = Segment.from_obj(obj)
    assert loaded.n_postings == built.n_postings
    for w in built.words:
        d, t = loaded.postings(w)
        bd, bt = built.postings(w)
        assert d.dtype == np.uint32
        assert t.dtype == np.uint32
        assert d.tolist() == bd.tolist(), w
        assert t.tolist() == bt.tolist(), w
        assert loaded.postings(w)[0] is d  # kept: asked again, not unpacked again
    first = loaded.postings(built.words[0])[0]
    assert loaded.postings(built.words[1])[0] is not first
    assert loaded.postings(built.words[0])[0] is first  # kept beside the others asked since
    # The whole arrays, unpacked at once, are the same; and so is each word after that.
    assert loaded.docs.tolist() == built.docs.tolist()
    assert loaded.tfs.tolist() == built.tfs.tolist()
    for w in built.words[::7]:
        assert loaded.postings(w)[0].tolist() == built.postings(w)[0].tolist()
    assert loaded.postings("absent")[0].size == 0


def test_a_loaded_segment_scores_as_the_stored_one_before_and_after_unpacking() -> None:
    built = _random_segment(5)
    loaded = Segment.from_obj(built.to_obj())
    queries = [["w001", "w017"], ["w050"], ["w003", "w004", "w099", "absent"]]
    for q in queries:
        assert search_all([Part(loaded)], q, 30) == search_all([Part(built)], q, 30)
        assert count_matching([Part(loaded)], q) == count_matching([Part(built)], q)
    again = Segment.from_obj(built.to_obj())
    assert again.docs.size == built.docs.size  # unpacked whole first
    for q in queries:
        assert search_all([Part(again)], q, 30) == search_all([Part(built)], q, 30)


def _sealed(**changes: Any) -> dict[str, Any]:
    obj = Segment.from_pairs(
        ["a", "b"], 6, np.array([1, 5, 0]), np.array([0, 0, 1]), np.array([1, 1, 1])
    ).to_obj()
    obj.update(changes)
    obj["crc"] = bm25._crc(obj)
    return obj


def u4(*v: int) -> bytes:
    return np.asarray(v, dtype="<u4").tobytes()


def test_the_small_sample_is_well_formed() -> None:
    back = Segment.from_obj(_sealed())
    assert back.postings("a")[0].tolist() == [1, 5]
    assert back.postings("b")[0].tolist() == [0]


def test_a_words_documents_that_wrap_around_32_bits_are_refused() -> None:
    # "a": first 5, then a difference of 2**32 - 4: modulo 2**32 it is document 1, below the six
    # documents, but it is not ascending: the exact sum names a document past the end.
    obj = _sealed(first=u4(5, 0), delta_exc_at=u4(1), delta_exc=u4(2**32 - 4))
    with pytest.raises(FormatError, match=r"^segment posting names a document past the end"):
        Segment.from_obj(obj)


@pytest.mark.parametrize(
    "changes",
    [
        {"delta_exc_at": u4(1, 1), "delta_exc": u4(3, 3)},
        {"tf_exc_at": u4(2, 0), "tf_exc": u4(300, 300)},
        {"tf_exc_at": u4(2, 2), "tf_exc": u4(300, 301)},
    ],
)
def test_exceptions_out_of_posting_order_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(FormatError, match=r"^segment exceptions are not in posting order"):
        Segment.from_obj(_sealed(**changes))


def test_an_exception_at_a_words_first_posting_is_its_first_document_still() -> None:
    # A word's first document is stored apart ("first"): a difference given there counts for
    # nothing, when a word is unpacked alone as when all are.
    obj = _sealed(delta_exc_at=u4(2), delta_exc=u4(70_000))
    one = Segment.from_obj(obj)
    assert one.postings("b")[0].tolist() == [0]
    assert Segment.from_obj(obj).docs.tolist() == [1, 5, 0]
    big = _sealed(delta_exc_at=u4(0), delta_exc=u4(3))
    assert Segment.from_obj(big).postings("a")[0].tolist() == [1, 5]
    assert Segment.from_obj(big).docs.tolist() == [1, 5, 0]


def test_a_loaded_segment_holds_the_built_ones_arrays_and_its_sorted_vocabulary() -> None:
    built = _random_segment(9)
    obj = built.to_obj()
    loaded = Segment.from_obj(obj)
    packed = sum(len(obj[k]) for k in ("first", "delta", "tf", "delta_exc", "tf_exc"))
    packed += 2 * len(obj["delta_exc_at"]) + 2 * len(obj["tf_exc_at"])  # positions in 64 bits
    vocab = len(obj["vocab"]) + 8 * (obj["n_words"] + 1)  # offsets in 64 bits
    assert loaded.nbytes() == built.offsets.nbytes + built.lengths.nbytes + packed + vocab
    loaded.docs  # noqa: B018 - unpacked whole: the arrays are what is held now
    assert loaded.nbytes() == built.nbytes() + vocab


def test_frequencies_are_stored_two_a_byte_with_the_large_ones_beside() -> None:
    tfs = [1, 16, 17, 15, 2]
    seg = Segment.from_pairs(["a"], 9, np.arange(5), np.zeros(5, dtype=np.int64), np.array(tfs))
    obj = seg.to_obj()
    assert len(obj["tf"]) == 3  # five half bytes
    assert np.frombuffer(obj["tf_exc_at"], dtype="<u4").tolist() == [2]  # only 17 is past 4 bits
    back = Segment.from_obj(obj)
    assert back.postings("a")[1].tolist() == tfs
    assert Segment.from_obj(obj).tfs.tolist() == tfs  # unpacked whole


def test_a_stray_last_half_byte_is_refused() -> None:
    tf = bytearray(_sealed()["tf"])  # three postings: the last byte's high half is unused
    tf[-1] |= 0x10
    with pytest.raises(FormatError, match=r"stray last half byte: rebuild$"):
        Segment.from_obj(_sealed(tf=bytes(tf)))


def test_a_word_past_255_bytes_has_its_length_in_two_bytes() -> None:
    words = ["x" * 300, "b"]
    seg = Segment.from_pairs(words, 3, np.array([0, 2]), np.array([0, 1]), np.array([1, 1]))
    obj = seg.to_obj()
    assert len(obj["vocab_len"]) == 4
    back = Segment.from_obj(obj)
    assert back.postings("x" * 300)[0].tolist() == [0]
    assert back.postings("b")[0].tolist() == [2]
    with pytest.raises(FormatError, match=r"do not match each other: rebuild$"):
        Segment.from_obj(_sealed(vocab_len=b"\x01\x00\x01"))  # neither one nor two bytes a word


@pytest.mark.parametrize(
    ("n", "width"), [(3, 1), (255, 1), (256, 2), (300, 2), (65_535, 2), (65_536, 4), (70_000, 4)]
)
def test_each_words_number_of_postings_is_stored_in_the_fewest_bytes(n: int, width: int) -> None:
    seg = Segment.from_pairs(
        ["a", "b"], n + 1, np.append(np.arange(n), n), np.append(np.zeros(n), 1), np.ones(n + 1)
    )
    obj = seg.to_obj()
    assert len(obj["counts"]) == 2 * width
    back = Segment.from_obj(obj)
    assert back.postings("a")[0].tolist() == list(range(n))
    assert back.postings("b")[0].tolist() == [n]


@pytest.mark.parametrize(("length", "width"), [(255, 1), (256, 2)])
def test_a_words_length_takes_one_byte_up_to_255(length: int, width: int) -> None:
    words = ["x" * length, "y"]
    seg = Segment.from_pairs(words, 2, np.array([0, 1]), np.array([0, 1]), np.array([1, 1]))
    obj = seg.to_obj()
    assert len(obj["vocab_len"]) == 2 * width
    assert Segment.from_obj(obj).postings("x" * length)[0].tolist() == [0]


def test_a_frequency_of_zero_is_kept_beside_the_half_bytes() -> None:
    seg = Segment.from_pairs(
        ["a"], 3, np.arange(3), np.zeros(3, dtype=np.int64), np.array([0, 1, 2])
    )
    obj = seg.to_obj()
    assert np.frombuffer(obj["tf_exc_at"], dtype="<u4").tolist() == [0]
    assert Segment.from_obj(obj).postings("a")[1].tolist() == [0, 1, 2]
