"""A tree's segment and index at their edges: the path's words in every chunk of every file, the
count of live chunks, the snapshot, and a stored segment refused for each way it can be off."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.tree import Ranking, TreeIndex, TreeSegment

LONG = "\n".join(f"plain line {n}" for n in range(1, 121)) + "\n"  # 120 lines: chunks 1-80, 81-120


def build(files: dict[str, str]) -> TreeSegment:
    return TreeSegment.build([(p, f"k{i}", analyze(t)) for i, (p, t) in enumerate(files.items())])


def test_a_paths_words_count_in_every_chunk_of_a_file_after_others() -> None:
    seg = build({"a/first.txt": "x\n", "zorilla/notes.txt": LONG})
    hits = TreeIndex(seg).search(["zorilla"], 10)
    assert sorted((h.path, h.start, h.end) for h in hits) == [
        ("zorilla/notes.txt", 1, 80),
        ("zorilla/notes.txt", 81, 120),
    ]


def test_a_word_twice_in_the_path_counts_six_times() -> None:
    # docs/docs.txt: "docs" twice in the path, 3 each: tf 6; length 3 (y) + 6 + 3 (txt) = 12.
    # other/b.txt: length 3 (y) + 3 + 3 + 3 = 12; "docs" in one chunk of two: idf ln 2.
    index = TreeIndex(build({"docs/docs.txt": "y\n", "other/b.txt": "y\n"}))
    got = {h.path: h.score for h in index.search(["docs"], 5)}
    assert got == {"docs/docs.txt": pytest.approx(math.log(2) * 6 * 2.2 / (6 + 1.2), rel=1e-12)}


def test_the_live_chunks_are_counted_across_base_and_delta() -> None:
    index = TreeIndex(build({"a.txt": LONG, "b.txt": "b\n", "c.txt": "c\n"}))
    assert index.n_docs == 4
    index.apply({"b.txt": ("k9", analyze(LONG)), "d.txt": ("k8", analyze("d\n"))})
    assert index.dirty
    assert index.n_docs == 6  # a: 2, c: 1, b now 2, d: 1
    index.apply({"a.txt": None})
    assert index.n_docs == 4
    snap = index.snapshot()
    assert not index.dirty
    assert snap is index.base
    assert sorted(snap.files) == ["b.txt", "c.txt", "d.txt"]
    assert snap.n_docs == 4
    assert repr(snap) == "<TreeSegment files=3 docs=4>"
    assert repr(index).startswith("<TreeIndex ")


def stored() -> dict[str, Any]:
    return build({"a.txt": LONG, "b.txt": "b\n"}).to_obj()


def with_(**changes: Any) -> dict[str, Any]:
    obj = stored()
    obj.update(changes)
    return obj


def i8(*values: int) -> bytes:
    return np.asarray(values, dtype="<i8").tobytes()


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([1, 2], "tree segment is not a map"),
        ({k: v for k, v in stored().items() if k != "keys"}, "tree segment lacks 'keys'"),
        (with_(files="a.txt\0b.txt"), "tree segment field has the wrong type"),
        (with_(keys="k0\0k1"), "tree segment field has the wrong type"),
        (with_(n_files="2"), "tree segment field has the wrong type"),
        (with_(file_docs=[0, 2, 3]), "tree segment field has the wrong type"),
        (with_(starts=[1, 81, 1]), "tree segment field has the wrong type"),
        (with_(ends=[80, 120, 1]), "tree segment field has the wrong type"),
        (with_(file_docs=i8(0, 2, 3) + b"\0"), "tree segment array length is not whole"),
        (with_(starts=stored()["starts"] + b"\0"), "tree segment array length is not whole"),
        (with_(ends=stored()["ends"][:-1]), "tree segment array length is not whole"),
        (with_(keys=b"k\xff\0k1"), "tree segment keys are not ASCII"),
        (with_(files=b"a.txt"), "tree segment file table does not match"),
        (with_(keys=b"k0"), "tree segment file table does not match"),
        (with_(file_docs=i8(0, 3)), "tree segment file table does not match"),
        (with_(file_docs=i8(1, 2, 3)), "tree segment file offsets do not cover its documents"),
        (with_(file_docs=i8(0, 2, 4)), "tree segment file offsets do not cover its documents"),
        (with_(file_docs=i8(0, 4, 3)), "tree segment file offsets do not cover its documents"),
        (with_(starts=stored()["starts"][:-4]), "tree segment line table does not match"),
        (with_(ends=stored()["ends"] + b"\0\0\0\0"), "tree segment line table does not match"),
    ],
)
def test_a_stored_segment_that_is_off_is_refused(obj: object, message: str) -> None:
    with pytest.raises(FormatError, match=rf"^{message}: rebuild$"):
        TreeSegment.from_obj(obj)


def test_a_stored_segment_round_trips() -> None:
    back = TreeSegment.from_obj(stored())
    assert list(back.files) == ["a.txt", "b.txt"]
    assert list(back.keys) == ["k0", "k1"]
    assert back.file_docs.tolist() == [0, 2, 3]
    assert back.starts.tolist() == [1, 81, 1]
    assert back.ends.tolist() == [80, 120, 1]
    empty = TreeSegment.from_obj(TreeSegment.build(()).to_obj())
    assert (list(empty.files), empty.n_docs) == ([], 0)


def test_an_empty_file_takes_no_chunk_and_round_trips() -> None:
    seg = build({"a.txt": "a\n", "empty.txt": "", "b.txt": "b\n"})
    back = TreeSegment.from_obj(seg.to_obj())
    assert back.file_docs.tolist() == [0, 1, 1, 2]
    assert [h.path for h in TreeIndex(back).search(["b"], 5)] == ["b.txt"]


def test_a_file_named_by_the_whole_query_outranks_one_named_by_half_of_it() -> None:
    # The same words in both paths (alpha, beta, txt); "alpha_beta" also counts as a word of its
    # own, so its text scores a little less (about 1/1.05). Its name holds all of the query's
    # weight (lifted by 1 + 0.5), the other's name half of it (by 1 + 0.5 * sqrt(1/2)).
    index = TreeIndex(build({"beta/alpha.txt": "notes\n", "alpha_beta.txt": "notes\n"}))
    query = {"alpha": 1.0, "beta": 1.0}
    plain = Ranking(name=0.0)
    text = {h.path: h.score for h in index.rank_files(query, 10, ranking=plain)[0]}
    assert 1.0 < text["beta/alpha.txt"] / text["alpha_beta.txt"] < (1.5 / (1 + 0.5 * 0.5**0.5))
    assert index.rank_files(query, 10, ranking=plain)[1] == ["beta/alpha.txt", "alpha_beta.txt"]
    assert index.rank_files(query, 10)[1] == ["alpha_beta.txt", "beta/alpha.txt"]


def test_a_search_for_no_result_or_no_word_answers_nothing_and_lists_no_file() -> None:
    index = TreeIndex(build({"a/wombat.txt": "wombat\n", "b/notes.txt": "wombat here\n"}))
    assert index.rank_files({"wombat": 1.0}, 0) == ([], [])
    assert index.rank_files({"wombat": 1.0}, -1) == ([], [])
    assert index.rank_files({}, 5) == ([], [])
    assert index.rank({"wombat": 1.0}, 0) == []
    assert len(index.rank_files({"wombat": 1.0}, 1)[1]) == 2  # one shown, both listed


def test_a_files_second_chunk_is_shown_beside_its_best_only_at_0_8_of_it() -> None:
    # A file of two chunks, the second scoring about 0.67 of the first (at any query weight).
    text = "wombat\n" * 81 + "other\n" * 79
    index = TreeIndex(build({"a/two.txt": text, "b/far.txt": "plain\n"}))
    for weight in (0.25, 1.0, 4.0):
        every = index.rank_files({"wombat": weight}, 10, ranking=Ranking(per_file=2, more=0.0))
        best, second = (h.score for h in every[0])
        assert 0.6 < second / best < 0.75
        near = index.rank_files({"wombat": weight}, 10, ranking=Ranking(per_file=2))[0]
        assert [(h.path, h.start) for h in near] == [("a/two.txt", 1)]
        low = index.rank_files({"wombat": weight}, 10, ranking=Ranking(per_file=2, more=0.6))[0]
        assert [(h.path, h.start) for h in low] == [("a/two.txt", 1), ("a/two.txt", 81)]


def test_a_files_chunk_scoring_as_its_best_is_shown_at_a_bound_of_the_best_itself() -> None:
    # Two chunks of the same words (lines 1-80, 81-160): the same score, at the bound exactly.
    index = TreeIndex(build({"a/two.txt": "wombat\n" * 160, "b/far.txt": "plain\n"}))
    hits = index.rank_files({"wombat": 1.0}, 10, ranking=Ranking(per_file=2, more=1.0))[0]
    assert [(h.path, h.start) for h in hits] == [("a/two.txt", 1), ("a/two.txt", 81)]
    assert hits[0].score == hits[1].score
