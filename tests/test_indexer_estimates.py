"""The indexer's estimate of what rebuilding its delta costs, measured as it works (§5).

Each call stops its reads early enough to rebuild the delta before its deadline, at a cost a
document the indexer measures on each rebuild of 512 documents or more (CPU time, whatever else
runs). The CPU clock is made to advance a fixed amount a rebuild, so that the rate it measures is
known; what a caller sees is whether the next call has time to read anything.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from nodwyn_retrieval.actors import indexer

from tests.test_indexer_edges import Tree, index, read_paths, slowdown


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("files", "step", "reads"),
    [(512, 60.0, False), (511, 60.0, True), (513, 60.0, False), (512, 6.0, True)],
)
async def test_a_rebuild_of_512_documents_or_more_sets_what_the_next_call_expects_to_pay(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: int,
    step: float,
    reads: bool,
) -> None:
    """A delta of ``files`` documents rebuilt in ``step`` CPU seconds. Measured (512 or more):
    60 s make 0.117 s a document, 90 s with the margin for the next call's delta, more than its
    bound: no read starts; 6 s make 9 s, and it reads. Not measured (511): the default rate,
    0.1 s for the delta, and it reads."""
    body = "def d{i}_{tag}():\n    return {i}\n"
    tree = Tree(tmp_path, {f"d{i:04}.py": body.format(i=i, tag="a") for i in range(files + 1)})
    ticks = itertools.count()
    monkeypatch.setattr(indexer, "cpu_seconds", lambda: 1000.0 + step * next(ticks))
    async with tree.session() as actor:
        slowdown(monkeypatch, actor, 1.0)
        await index(actor, tree.stat(*tree.all()))  # a first build: no rebuild
        for i in range(files):
            (tree.root / f"d{i:04}.py").write_text(body.format(i=i, tag="b"))
        # A delta of every file but the last (a delta of all would be merged into a new base).
        whole = await index(actor, tree.stat(*tree.all()[:files]))
        assert actor.tree.delta.n_docs == files
        assert len(read_paths(whole)) == files
        (tree.root / "d0000.py").write_text(body.format(i=0, tag="c"))
        nxt = await index(actor, tree.stat("d0000.py"))
    assert read_paths(nxt) == (["d0000.py"] if reads else [])
