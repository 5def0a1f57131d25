"""A search that shows a few files ranks them as a ranking of every file would.

``TreeIndex.rank`` scores by kind and by file name only the files whose score from their chunks
could still bring them among those shown (retrieval/tree_best.py, ``best_files``); these tests hold
it to ``rank_files(..., every_file=True)``, which scores every file, on trees where a file's
name or kind lifts it past files whose chunks score more, in a base and a delta, with priors
and name weights of every sign the ranking takes.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.kinds import KINDS
from nodwyn_retrieval.retrieval.tree import Ranking, TreeHit, TreeIndex, TreeSegment

WORDS = ["parser", "token", "lexer", "walrus", "heron", "grammar", "node", "visit"]
DIRS = ["src", "src/core", "tests", "docs", "examples", "vendor/lib", "api/v1", "api/v2"]
SUFFIXES = [".py", ".md", ".txt", ".lock", ".json"]


def _tree(n: int, seed: int) -> tuple[TreeIndex, list[str]]:
    rng = random.Random(seed)
    files: list[tuple[str, str, object]] = []
    paths: list[str] = []
    for i in range(n):
        name = "_".join(rng.sample(WORDS, rng.randint(1, 2))) + f"{i % 7}"
        path = f"{rng.choice(DIRS)}/{name}{rng.choice(SUFFIXES)}"
        if path in paths:
            continue
        paths.append(path)
        body = "\n".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
            for _ in range(rng.randint(1, 30))
        )
        files.append((path, f"k{i}", analyze(body + "\n")))
    return TreeIndex(TreeSegment.build(files)), paths  # type: ignore[arg-type]


def _queries(seed: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    out: list[dict[str, float]] = []
    for _ in range(25):
        words = rng.sample([*WORDS, "tests", "docs", "v1", "example"], rng.randint(1, 3))
        out.append({w: rng.choice([1.0, 0.5, 0.25]) for w in words})
    return out


def _every(index: TreeIndex, q: dict[str, float], k: int, ranking: Ranking) -> list[TreeHit]:
    return index.rank_files(q, k, ranking=ranking, every_file=True)[0]


RANKINGS = [
    Ranking(),
    Ranking(name=3.0, per_file=2),
    Ranking(priors={"code": 4.0, "test": 0.05, "doc": 0.01}),
    Ranking(name=0.0),
    Ranking(name=-0.5),  # a name that lowers: the factor's bound is below 1
    Ranking(name=-2.0),  # a name that turns a score negative
    Ranking(priors={"code": 1.0, "test": 0.0}),  # a kind that scores nothing
    # Negative both: a test file named by the query scores up to twice its chunks' score.
    Ranking(priors={"code": 1.0, "test": -1.0, "doc": -0.5}, name=-3.0),
    Ranking(priors=dict.fromkeys(KINDS, -1.0), name=0.5),  # every factor negative
]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_the_files_shown_are_those_of_a_ranking_of_every_file(ranking: Ranking) -> None:
    index, _ = _tree(400, seed=3)
    for q in _queries(5):
        for k in (1, 3, 8, 20, 150):
            assert index.rank(q, k, ranking=ranking) == _every(index, q, k, ranking), (q, k)


def test_a_file_its_name_lifts_from_far_down_the_chunks_order_is_shown() -> None:
    # 300 files whose chunks hold "walrus" more than the one named by it: its name (x1.5 at most)
    # lifts it to the top only if it is scored, though it is last by its chunks.
    body = analyze("walrus walrus heron\n" * 3)
    files = [(f"src/f{i:03d}.py", f"k{i}", body) for i in range(300)]
    files.append(("src/walrus.py", "kw", analyze("walrus heron heron heron\n")))
    index = TreeIndex(TreeSegment.build(files))
    q = {"walrus": 1.0}
    ranking = Ranking(name=40.0)
    every = _every(index, q, 5, ranking)
    assert every[0].path == "src/walrus.py"
    assert index.rank(q, 5, ranking=ranking) == every
    # By its chunks alone it is not among the first five: the same either way.
    plain = Ranking(name=0.0)
    assert "src/walrus.py" not in [h.path for h in index.rank(q, 5, ranking=plain)]
    assert index.rank(q, 5, ranking=plain) == _every(index, q, 5, plain)
    assert index.rank(q, 5) == _every(index, q, 5, Ranking())


def test_ties_across_a_part_boundary_go_to_the_earlier_file_either_way() -> None:
    # 200 files alike: every score ties, so the order is the files' own, in both rankings.
    files = [(f"lib/same{i:03d}.py", f"k{i}", analyze("grammar node\n")) for i in range(200)]
    index = TreeIndex(TreeSegment.build(files))
    for k in (1, 63, 64, 65, 130, 199, 200, 250):
        got = index.rank({"grammar": 1.0}, k)
        assert got == _every(index, {"grammar": 1.0}, k, Ranking())
        assert [h.path for h in got] == [f"lib/same{i:03d}.py" for i in range(min(k, 200))]


def test_a_delta_and_an_older_version_named_rank_as_a_ranking_of_every_file() -> None:
    index, paths = _tree(300, seed=11)
    rng = random.Random(2)
    changes = {p: (f"n{i}", analyze("parser parser lexer\n")) for i, p in enumerate(paths[:40])}
    changes.update(dict.fromkeys(rng.sample(paths[40:], 20)))  # type: ignore[arg-type]
    changes["api/v1/parser_old.py"] = ("old", analyze("parser grammar\n"))
    index.apply(changes)  # type: ignore[arg-type]
    assert index.delta.n_docs
    assert index.dirty
    for q in [{"parser": 1.0, "v1": 0.5}, {"lexer": 1.0}, *_queries(13)]:
        for k in (1, 4, 20):
            assert index.rank(q, k) == _every(index, q, k, Ranking()), (q, k)


def test_a_search_that_shows_a_few_files_computes_the_kinds_of_a_few() -> None:
    # As in a real tree: a query's words fill a few files and are mentioned once in many.
    filler = "\n".join(f"line {n} of the heron module" for n in range(40))
    files = [(f"src/m{i:04d}.py", f"k{i}", analyze(f"{filler}\nparser\n")) for i in range(1200)]
    dense = analyze("parser token parser\n" * 5)
    files += [(f"src/p{i:02d}.py", f"p{i}", dense) for i in range(30)]
    index = TreeIndex(TreeSegment.build(files))
    index.warm()
    q = {"parser": 1.0, "token": 0.5}
    hits = index.rank(q, 8)
    assert hits == _every(TreeIndex(index.base), q, 8, Ranking())
    known = int(np.count_nonzero(index._base_kinds >= 0))
    assert 0 < known < len(index.base.files) // 3, known
