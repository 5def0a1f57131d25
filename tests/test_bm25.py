"""BM25 segments: the formula, ties, filters, several segments as one, merging and decoding."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.bm25 import (
    K1,
    B,
    Part,
    Segment,
    SegmentBuilder,
    _crc,
    merge_segments,
    search_all,
)

Doc = dict[str, int]


def reference_scores(docs: list[Doc], query: list[str]) -> list[float]:
    """BM25 written out plainly, one document at a time, as a textbook gives it."""
    n = len(docs)
    lengths = [sum(d.values()) for d in docs]
    avgdl = (sum(lengths) / n) if n and sum(lengths) else 1.0
    out = []
    for d, dl in zip(docs, lengths, strict=True):
        s = 0.0
        for w in dict.fromkeys(query):
            df = sum(1 for x in docs if x.get(w, 0) > 0)
            tf = d.get(w, 0)
            if tf == 0:
                continue
            w_idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += w_idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))
        out.append(s)
    return out


def build(docs: list[Doc]) -> Segment:
    b = SegmentBuilder()
    for d in docs:
        b.add(d)
    return b.build()


VOCAB = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
docs_strategy = st.lists(
    st.dictionaries(st.sampled_from(VOCAB), st.integers(min_value=1, max_value=9), max_size=5),
    min_size=1,
    max_size=25,
)
query_strategy = st.lists(st.sampled_from([*VOCAB, "absent"]), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(docs=docs_strategy, query=query_strategy)
def test_scores_equal_the_plain_formula(docs: list[Doc], query: list[str]) -> None:
    seg = build(docs)
    ref = reference_scores(docs, query)
    hits = search_all([Part(seg)], query, limit=len(docs))
    got = {h.doc: h.score for h in hits}
    for i, r in enumerate(ref):
        if r > 0:
            assert got[i] == pytest.approx(r, rel=1e-12)
        else:
            assert i not in got


@settings(max_examples=150, deadline=None)
@given(docs=docs_strategy, query=query_strategy, cuts=st.lists(st.integers(0, 25), max_size=3))
def test_several_segments_rank_exactly_as_one(
    docs: list[Doc], query: list[str], cuts: list[int]
) -> None:
    bounds = sorted({0, len(docs), *(min(c, len(docs)) for c in cuts)})
    pieces = [docs[a:b] for a, b in itertools.pairwise(bounds)]
    parts = [Part(build(p)) for p in pieces]
    one = search_all([Part(build(docs))], query, limit=len(docs))
    split = search_all(parts, query, limit=len(docs))
    starts = np.cumsum([0] + [len(p) for p in pieces])
    flat = [(int(starts[h.part]) + h.doc, h.score) for h in split]
    assert flat == [(h.doc, h.score) for h in one]


def test_ties_go_to_the_document_added_first() -> None:
    seg = build([{"x": 1}, {"y": 1}, {"x": 1}, {"x": 1}])
    hits = search_all([Part(seg)], ["x"], limit=2)
    assert [h.doc for h in hits] == [0, 2]
    assert hits[0].score == hits[1].score


def test_ties_across_segments_go_to_the_segment_added_first() -> None:
    a, b = build([{"x": 1}, {"y": 1}]), build([{"x": 1}, {"y": 1}])
    hits = search_all([Part(b), Part(a)], ["x"], limit=1)
    assert (hits[0].part, hits[0].doc) == (0, 0)


def test_a_rare_word_outranks_a_common_one() -> None:
    seg = build([{"common": 1}, {"common": 1}, {"common": 1, "rare": 1}, {"common": 2}])
    hits = search_all([Part(seg)], ["common", "rare"], limit=4)
    assert hits[0].doc == 2


def test_allow_filters_results_but_not_statistics() -> None:
    docs: list[Doc] = [{"x": 1}, {"x": 1, "y": 1}, {"y": 3}]
    seg = build(docs)
    allow = np.array([False, True, False])
    filtered = search_all([Part(seg, allow=allow)], ["x", "y"], limit=5)
    whole = search_all([Part(seg)], ["x", "y"], limit=5)
    assert [h.doc for h in filtered] == [1]
    assert filtered[0].score == next(h.score for h in whole if h.doc == 1)


def test_documents_not_live_count_nowhere() -> None:
    docs: list[Doc] = [{"x": 1}, {"x": 1, "y": 1}, {"y": 3}]
    live = np.array([True, False, True])
    masked = search_all([Part(build(docs), live=live)], ["x", "y"], limit=5)
    without = search_all([Part(build([docs[0], docs[2]]))], ["x", "y"], limit=5)
    assert [(h.doc, h.score) for h in masked] == [({0: 0, 1: 2}[h.doc], h.score) for h in without]


def test_no_match_and_edge_limits() -> None:
    seg = build([{"x": 1}])
    assert search_all([Part(seg)], ["nothing"], limit=5) == []
    assert search_all([Part(seg)], ["x"], limit=0) == []
    assert search_all([], ["x"], limit=3) == []
    assert search_all([Part(Segment.empty())], ["x"], limit=3) == []


def test_a_limit_smaller_than_the_matches_keeps_the_best() -> None:
    docs = [{"x": i + 1, "pad": 10} for i in range(50)]
    hits = search_all([Part(build(docs))], ["x"], limit=3)
    assert [h.doc for h in hits] == [49, 48, 47]


def test_merging_keeps_live_documents_in_order_with_equal_scores() -> None:
    a_docs: list[Doc] = [{"x": 1}, {"x": 2, "y": 1}, {"z": 1}]
    b_docs: list[Doc] = [{"y": 2}, {"x": 1, "z": 4}]
    live = np.array([True, False, True])
    merged, remaps = merge_segments([(build(a_docs), live), (build(b_docs), None)])
    assert remaps[0].tolist() == [0, -1, 1]
    assert remaps[1].tolist() == [2, 3]
    expect = build([a_docs[0], a_docs[2], *b_docs])
    q = ["x", "y", "z"]
    assert [(h.doc, h.score) for h in search_all([Part(merged)], q, 10)] == [
        (h.doc, h.score) for h in search_all([Part(expect)], q, 10)
    ]


def test_a_segment_round_trips_through_its_object_form() -> None:
    seg = build([{"x": 1, "ü": 2, "b": 300}, {}, {"y": 5, "x": 70000}, {"x": 1}])
    back = Segment.from_obj(seg.to_obj())
    assert sorted(back.words) == sorted(seg.words)
    assert back.lengths.tolist() == seg.lengths.tolist()
    for w in [*seg.words, "absent"]:
        assert [a.tolist() for a in back.postings(w)] == [a.tolist() for a in seg.postings(w)]
    q = ["ü", "x", "b", "y"]
    assert search_all([Part(back)], q, 4) == search_all([Part(seg)], q, 4)


def test_a_stored_segment_is_smaller_than_its_arrays() -> None:
    seg = build([{f"w{i % 97}": 1 + i % 3 for i in range(j, j + 40)} for j in range(500)])
    obj = seg.to_obj()
    stored = sum(len(v) for v in obj.values() if isinstance(v, bytes))
    assert stored < 0.5 * seg.nbytes()
    assert Segment.from_obj(obj).n_postings == seg.n_postings


def test_large_gaps_and_frequencies_survive_the_packing() -> None:
    docs: list[Doc] = [{} for _ in range(70_000)]
    docs[3] = {"rare": 1000}
    docs[69_999] = {"rare": 2, "common": 1}
    seg = build(docs)
    back = Segment.from_obj(seg.to_obj())
    assert back.postings("rare")[0].tolist() == [3, 69_999]
    assert back.postings("rare")[1].tolist() == [1000, 2]


def resealed(obj: dict[str, object]) -> dict[str, object]:
    obj["crc"] = _crc(obj)
    return obj


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o.pop("delta"), r"^segment lacks 'delta': rebuild$"),
        (
            lambda o: o.update(tf=b"\x09" + o["tf"][1:]),
            r"^segment checksum does not match: rebuild$",
        ),
        (
            lambda o: resealed({**o, "n_words": 99}),
            r"^segment arrays do not match each other: rebuild$",
        ),
        (
            lambda o: resealed({**o, "delta": o["delta"] + b"\x01"}),
            r"^segment array length is not a whole .*: rebuild$",
        ),
        (
            lambda o: resealed({**o, "first": (10**6).to_bytes(4, "little") * 2}),
            r"^segment posting names a document past the end: rebuild$",
        ),
        (
            lambda o: resealed({**o, "counts": b"\x00\x03"}),  # a word with no posting
            r"^segment offsets are not a partition of the postings: rebuild$",
        ),
        (
            lambda o: resealed(
                {**o, "tf_exc_at": (99).to_bytes(4, "little"), "tf_exc": (5).to_bytes(4, "little")}
            ),
            r"^segment exception names a posting past the end: rebuild$",
        ),
    ],
    ids=["missing", "bit-flip", "count", "length", "past-end", "offsets", "exception"],
)
def test_a_damaged_segment_asks_to_be_rebuilt(mutate: object, message: str) -> None:
    obj = build([{"x": 1, "y": 1}, {"y": 2}]).to_obj()
    changed = mutate(obj)  # type: ignore[operator]
    with pytest.raises(FormatError, match=message):
        Segment.from_obj(changed if isinstance(changed, dict) else obj)


def test_postings_are_arrays_not_objects() -> None:
    seg = build([{f"w{i % 97}": 1 + i % 3 for i in range(j, j + 40)} for j in range(500)])
    assert isinstance(seg.docs, np.ndarray)
    assert seg.docs.dtype == np.uint32
    assert seg.tfs.dtype == np.uint32
    # Eight bytes a posting and an offset a word: nothing per posting but the arrays.
    assert seg.nbytes() <= 8 * seg.n_postings + 8 * (len(seg.words) + 1) + 4 * seg.n_docs


def test_a_weighted_query_word_adds_its_term_that_many_times() -> None:
    from nodwyn_retrieval.retrieval.bm25 import score_parts

    b = SegmentBuilder()
    b.add({"alpha": 2, "beta": 1})
    b.add({"beta": 3})
    b.add({"gamma": 1})
    seg = b.build()
    one = {s.part: dict(zip(s.docs.tolist(), s.scores.tolist(), strict=True))
           for s in score_parts([Part(seg)], ["alpha", "beta"])}  # fmt: skip
    two = {s.part: dict(zip(s.docs.tolist(), s.scores.tolist(), strict=True))
           for s in score_parts([Part(seg)], {"alpha": 2.0, "beta": 1.0})}  # fmt: skip
    alpha_only = score_parts([Part(seg)], {"alpha": 1.0})[0]
    a0 = float(alpha_only.scores[0])
    assert two[0][0] == pytest.approx(one[0][0] + a0)
    assert two[0][1] == pytest.approx(one[0][1])
    assert 2 not in one[0]
    assert search_all([Part(seg)], {"alpha": 2.0, "beta": 1.0}, 1)[0].doc == 0


def test_a_loaded_vocabulary_lists_the_words_of_a_prefix() -> None:
    b = SegmentBuilder()
    b.add({"audit": 1, "audits": 1, "auditing": 1, "augment": 1, "zeta": 1})
    built = b.build()
    assert built.with_prefix("audit", 10) is None  # a built vocabulary is not sorted
    seg = Segment.from_obj(built.to_obj())
    assert seg.with_prefix("audit", 10) == ["audit", "auditing", "audits"]
    assert seg.with_prefix("audit", 2) is None  # more than asked for
    assert seg.with_prefix("zz", 10) == []
    assert seg.word_id("audits") is not None
    assert seg.word_id("audi") is None
