"""A tree's segment built piece by piece as a first build's batches arrive (retrieval/tree.py's
TreeBuilder): whatever order the pieces come in, it holds and ranks what a segment built at once
of the same files in their order does."""

from __future__ import annotations

import numpy as np
import pytest
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.tree import TreeBuilder, TreeIndex, TreeSegment, pairs_of

LONG = "\n".join(f"plain line {n} of wombat" for n in range(1, 121)) + "\n"  # two chunks

FILES = [  # (order key, path, text), in order
    ("a/first.py", "def wombat_first():\n    return 1\n"),
    ("a/long.txt", LONG),
    ("b/empty.txt", ""),
    ("b/notes.md", "wombat notes\nand numbat\n"),
    ("c/long2.txt", LONG.replace("wombat", "numbat")),
    ("c/zeta.py", "numbat = wombat\n"),
]


def built_in_pieces(pieces: list[list[int]]) -> TreeSegment:
    builder = TreeBuilder()
    for piece in pieces:
        files = [(i, FILES[i][0], f"k{i}") for i in piece]
        builder.add(files, pairs_of([(FILES[i][0], analyze(FILES[i][1])) for i in piece]))
    return builder.finish()


def ranked(seg: TreeSegment, words: list[str]) -> list[tuple[str, int, int, float]]:
    return [(h.path, h.start, h.end, round(h.score, 9)) for h in TreeIndex(seg).search(words, 20)]


@pytest.mark.parametrize(
    "pieces",
    [
        [[0, 1, 2, 3, 4, 5]],
        [[0, 1], [2, 3], [4, 5]],
        [[4, 5], [0, 1, 2], [3]],
        [[5], [3, 1], [4, 2, 0]],
    ],
    ids=["one", "in-order", "out-of-order", "shuffled"],
)
def test_a_segment_built_in_pieces_holds_and_ranks_as_one_built_at_once(
    pieces: list[list[int]],
) -> None:
    at_once = TreeSegment.build([(p, f"k{i}", analyze(t)) for i, (p, t) in enumerate(FILES)])
    seg = built_in_pieces(pieces)
    assert seg.files == tuple(p for p, _ in FILES)
    assert seg.keys == tuple(f"k{i}" for i in range(len(FILES)))
    assert seg.file_docs.tolist() == at_once.file_docs.tolist() == [0, 1, 3, 3, 4, 6, 7]
    assert seg.starts.tolist() == at_once.starts.tolist()
    assert seg.ends.tolist() == at_once.ends.tolist()
    assert seg.n_docs == at_once.n_docs == 7
    for words in (["wombat"], ["numbat"], ["plain", "line"], ["first"], ["zeta"], ["notes"]):
        assert ranked(seg, words) == ranked(at_once, words), words
    # Every chunk's own words: line 81's "81" is only in the second chunk of each long file.
    assert [(p, s) for p, s, _, _ in ranked(seg, ["81"])] == [
        ("a/long.txt", 81),
        ("c/long2.txt", 81),
    ]
    back = TreeSegment.from_obj(seg.to_obj())
    assert ranked(back, ["wombat"]) == ranked(at_once, ["wombat"])


def test_a_builder_given_nothing_makes_an_empty_segment() -> None:
    seg = TreeBuilder().finish()
    assert (seg.files, seg.n_docs, seg.file_docs.tolist()) == ((), 0, [0])
    assert TreeIndex(seg).search(["wombat"], 5) == []
    assert np.asarray(seg.starts).size == 0


def test_a_piece_whose_files_and_postings_disagree_is_refused() -> None:
    builder = TreeBuilder()
    with pytest.raises(ValueError, match="2 files for the postings of 1"):
        builder.add([(0, "a.py", "k0"), (1, "b.py", "k1")], pairs_of([("a.py", analyze("x\n"))]))
