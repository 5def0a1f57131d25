"""The indexer's estimates of the work after its reads, and the share of the bound they leave (§5).

A call's reads stop early enough to leave time for what follows them: storing, rebuilding the
delta (at a cost a document the indexer measures on each rebuild of 512 documents or more, times
the slowdown measured as the call runs and a margin), the fixed work after any read and the work
that grows with what was read. Each estimate is made known here (a rate, a slowdown, a cost a
byte) and the indexer's event-loop clock moved ahead once some files are read, so that where
the reads stop is certain; what a caller sees is which files the call says read, and that the
next call reads the rest.
"""

from __future__ import annotations

import asyncio
import itertools
import types
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import _batches, indexer
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.guard import DefaultGuard

from tests.test_indexer_edges import (
    WORDS,
    N,
    Tree,
    body,
    change,
    costly,
    files,
    first_build,
    found,
    index,
    keys,
    name,
    read_paths,
    slowdown,
)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path, files())


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("docs", "step", "reads"),
    [(512, 60.0, False), (511, 60.0, True), (513, 60.0, False), (512, 6.0, True)],
)
async def test_a_rebuild_of_512_documents_or_more_sets_what_the_next_call_expects_to_pay(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    docs: int,
    step: float,
    reads: bool,
) -> None:
    """A delta of ``docs`` documents rebuilt in ``step`` CPU seconds. Measured (512 or more):
    60 s make 0.117 s a document, 90 s with the margin for the next call's delta, more than its
    bound: no read starts; 6 s make 9 s, and it reads. Not measured (511): the default rate,
    0.1 s for the delta, and it reads."""
    body = "def d{i}_{tag}():\n    return {i}\n"
    tree = Tree(tmp_path, {f"d{i:04}.py": body.format(i=i, tag="a") for i in range(docs + 1)})
    ticks = itertools.count()
    monkeypatch.setattr(indexer, "cpu_seconds", lambda: 1000.0 + step * next(ticks))
    async with tree.session() as actor:
        slowdown(monkeypatch, actor, 1.0)
        await index(actor, tree.stat(*tree.all()))  # a first build: no rebuild
        for i in range(docs):
            (tree.root / f"d{i:04}.py").write_text(body.format(i=i, tag="b"))
        # A delta of every file but the last (a delta of all would be merged into a new base).
        whole = await index(actor, tree.stat(*tree.all()[:docs]))
        assert actor.tree.delta.n_docs == docs
        assert len(read_paths(whole)) == docs
        (tree.root / "d0000.py").write_text(body.format(i=0, tag="c"))
        nxt = await index(actor, tree.stat("d0000.py"))
    assert read_paths(nxt) == (["d0000.py"] if reads else [])


# -- the estimate of a delta document's cost -----------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("rate", "cut"), [(2.0, True), (0.5, False)])
async def test_a_documents_cost_is_its_measured_rate_times_the_slowdown_and_the_margin(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, rate: float, cut: bool
) -> None:
    """At the 16th record 15 are loaded: 15 x rate x slowdown 2 x margin 1.5 against the 60 s left
    (2.0: 90 s, stopped; 0.5: 22.5 s, not). A rate divided by the slowdown, or by the margin,
    would not stop at 2.0 (22.5 s, 40 s); an estimate near three times as big would at 0.5."""
    target = await first_build(tree)
    tree.snap.unlink()
    async with tree.session() as actor:
        actor._apply_rate = rate
        monkeypatch.setattr(actor._contention, "factor", lambda: 2.0)
        done = await index(actor, (), dict(target))
    assert done.not_loaded == (tuple(name(i) for i in range(15, N)) if cut else ())


# -- the reads' share of the bound ----------------------------------------------------------------


class LoopClock:
    """The indexer's event-loop clock (``loop.time()``, the clock of a call's deadline), moved
    ``offset`` seconds ahead once a number of files are read; every other clock is left alone.
    The files are read one at a time, so that what is read before the jump is certain."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after: int, offset: float) -> None:
        self.offset = 0.0
        self.reads = 0
        clock = self

        class Loop:
            def __init__(self, real: asyncio.AbstractEventLoop) -> None:
                self.real = real

            def time(self) -> float:
                return self.real.time() + clock.offset

        shifted = types.SimpleNamespace(**vars(asyncio))
        shifted.get_running_loop = lambda: Loop(asyncio.get_running_loop())
        monkeypatch.setattr(indexer, "asyncio", shifted)
        monkeypatch.setattr(_batches, "asyncio", shifted)
        monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)
        real_read = _batches.read_file

        async def read(tree: Any, rel: str) -> bytes | None:
            data = await real_read(tree, rel)
            clock.reads += 1
            if clock.reads == after:
                clock.offset = offset
            return data

        monkeypatch.setattr(_batches, "read_file", read)


@pytest.mark.asyncio
@pytest.mark.parametrize(("offset", "handled"), [(55.0, 9), (47.0, N)])
async def test_reads_stop_at_85_percent_of_the_bound_and_the_next_call_reads_the_rest(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, offset: float, handled: int
) -> None:
    """Of 60 s, 51 are for the reads. 10 files are read, then the clock says 55 s (or 47 s) have
    passed: the 10th is read too late to be analysed and no other starts (or all go on, with 4 s
    for the 30 left)."""
    async with tree.session() as actor:
        slowdown(monkeypatch, actor, 1.0)
        LoopClock(monkeypatch, after=10, offset=offset)
        cut = await index(actor, tree.stat(*tree.all()))
        monkeypatch.undo()
        rest = await index(actor, tree.stat(*(p for p in tree.all() if p not in keys(cut))))
        hits = [await found(actor, WORDS[i]) for i in range(N)]
    assert read_paths(cut) == [name(i) for i in range(handled)]
    assert sorted(keys(cut)) == read_paths(cut)
    assert read_paths(rest) == [name(i) for i in range(handled, N)]
    assert hits == [[name(i)] for i in range(N)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("offset", "handled"), [(34.0, 3), (20.0, 12)])
async def test_reads_stop_early_enough_for_the_rebuild_and_the_fixed_work_after_them(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, offset: float, handled: int
) -> None:
    """A delta of 5 documents at 4 s each (20 s) to rebuild, and after the reads a fixed 10 s
    times the slowdown 4 (40 s) but at most 15% of the bound (9 s): the reads end 29 s before
    the deadline, at 31 s. The clock says 34 s after 3 reads: no 4th starts; 20 s: all do."""
    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        await index(actor, change(tree, range(N - 5, N), "v2"))  # a delta of 5 documents
        assert actor.tree.delta.n_docs == 5
        slowdown(monkeypatch, actor, 4.0)
        costly(monkeypatch, 4.0)
        monkeypatch.setattr(_batches, "POST_FIXED_SECONDS", 10.0)
        LoopClock(monkeypatch, after=3, offset=offset)
        cut = await index(actor, change(tree, range(12), "v3"))
    assert read_paths(cut) == [name(i) for i in range(handled)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("factor", "handled"), [(2.0, 3), (1.0, 5)])
async def test_reads_stop_when_the_work_after_them_grows_with_what_they_read(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, factor: float, handled: int
) -> None:
    """Each file of the first ten (of one size) is estimated to cost 25 s after the reads at a
    slowdown of 2 (its bytes x a cost a byte x the slowdown x the margin 1.5), 12.5 s at 1: of
    the 59.4 s (59.7 s) the reads may use, 2 files (4) leave room for one more, 3 (5) do not."""
    size = len(body(0).encode())
    assert all(len(body(i).encode()) == size for i in range(10))
    # A first build: its own cost a byte (the postings built as the batches arrive).
    monkeypatch.setattr(_batches, "BUILD_POST_SECONDS_PER_BYTE", 25.0 / (size * 2.0 * 1.5))
    async with tree.session() as actor:
        slowdown(monkeypatch, actor, factor)
        LoopClock(monkeypatch, after=N + 1, offset=0.0)  # one file at a time, no jump
        cut = await index(actor, tree.stat(*tree.all()))
    assert read_paths(cut) == [name(i) for i in range(handled)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("factor", "handled"), [(2.0, 3), (1.0, 5)])
async def test_an_update_of_an_indexed_tree_takes_its_own_cost_a_byte_after_the_reads(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, factor: float, handled: int
) -> None:
    """The same figures as above, for ten files changed in an indexed tree: such a call merges
    records after its reads (not a first build's postings), at its own cost a byte; the first
    build's cost is set so low that it would let every file be read."""
    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        changed = change(tree, range(10), "v2")
        size = len(body(0, "v2").encode())
        assert all(len(body(i, "v2").encode()) == size for i in range(10))
        monkeypatch.setattr(_batches, "POST_SECONDS_PER_BYTE", 25.0 / (size * 2.0 * 1.5))
        monkeypatch.setattr(_batches, "BUILD_POST_SECONDS_PER_BYTE", 1e-12)
        slowdown(monkeypatch, actor, factor)
        LoopClock(monkeypatch, after=N + 1, offset=0.0)
        cut = await index(actor, changed)
    assert read_paths(cut) == [name(i) for i in range(handled)]


@pytest.mark.asyncio
async def test_no_read_starts_when_rebuilding_the_records_just_loaded_would_fill_the_bound(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new session loads 5 records the snapshot lacks; at 20 s a document their rebuild (100 s)
    does not leave time for a read: none starts, and the next call reads them."""
    async with tree.session() as actor:
        first = await index(actor, tree.stat(*tree.all()))
        newer = keys(await index(actor, change(tree, range(5), "v2")))
    target = {**keys(first), **newer}
    stats = change(tree, range(10, 13), "v3")
    async with tree.session() as actor:
        costly(monkeypatch, 20.0)
        # The map of the manifest, without the files this refresh reads (as the refresher's).
        rereads = {st.path for st in stats}
        cut = await index(actor, stats, {p: k for p, k in target.items() if p not in rereads})
        monkeypatch.undo()
        rest = await index(actor, stats)
        hits = [await found(actor, WORDS[i]) for i in range(N)]
    assert (cut.found, cut.not_loaded, cut.missing) == ((), (), ())
    assert read_paths(rest) == [name(i) for i in range(10, 13)]
    assert hits == [[name(i)] for i in range(N)]


@pytest.mark.asyncio
async def test_applying_keeps_the_files_whose_delta_with_their_own_documents_fits(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 30 s a document and a part of 2 applied whatever the time: 3 records are stored (the
    4th would make 90 s), and of those the 3rd is cut (the delta with its document, 90 s, does
    not fit in 60 s; without it, 30 s would)."""
    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        monkeypatch.setattr(indexer, "MIN_APPLY_DOCS", 2)
        costly(monkeypatch, 30.0)
        stats = change(tree, range(10), "v2")
        cut = await index(actor, stats)
        monkeypatch.undo()
        rest = await index(actor, tuple(st for st in stats if st.path not in keys(cut)))
    assert read_paths(cut) == [name(0), name(1)]
    assert read_paths(rest) == [name(i) for i in range(2, 10)]


@pytest.mark.asyncio
async def test_the_pools_work_is_not_waited_for_past_the_reads_share_of_the_bound(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file goes to the pool in one batch once the last is decided (its worker reads them);
    the clock then says 55 s of 60 have passed (past the reads' 51): the batch is not waited
    for, and no file is read."""
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    tree.pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    real_check = DefaultGuard.check_read
    decided = 0

    async def check_read(self: DefaultGuard, path: str, size: int) -> Any:
        nonlocal decided
        got = await real_check(self, path, size)
        decided += 1
        if decided == N:  # the last file decided: the clock jumps before its batch is sent
            clock.offset = 55.0
        return got

    try:
        async with tree.session() as actor:
            slowdown(monkeypatch, actor, 1.0)
            clock = LoopClock(monkeypatch, after=N + 1, offset=0.0)
            monkeypatch.setattr(DefaultGuard, "check_read", check_read)
            cut = await index(actor, tree.stat(*tree.all()))
            monkeypatch.undo()
            rest = await index(actor, tree.stat(*tree.all()))
            hits = [await found(actor, WORDS[i]) for i in range(N)]
    finally:
        await tree.pool.close()
    assert cut.found == ()
    assert read_paths(rest) == tree.all()
    assert hits == [[name(i)] for i in range(N)]


def second_file_held(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> ProcessPool:
    """The tree's pool, one worker, whose batch of the second file alone waits until another
    batch has ended."""
    pool = tree.pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    real_run = pool.run
    let_go = asyncio.Event()

    async def run(fn: Any, paths: Any, *args: Any, **kw: Any) -> Any:
        if list(paths) == [name(1)]:
            await let_go.wait()
        try:
            return await real_run(fn, paths, *args, **kw)
        finally:
            let_go.set()

    monkeypatch.setattr(pool, "run", run)
    return pool


@pytest.mark.asyncio
async def test_the_pool_is_not_waited_for_once_what_it_returned_fills_the_work_after_the_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files, read in order, each a batch of its own for the pool. The first's bytes are
    priced at 100 s of work after the reads: once it is back the second is not waited for (it
    is let go only then), and is read by the next call."""
    tree = Tree(tmp_path, files(2))
    size = len(body(0).encode())
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 1)  # a batch a file
    # The first file's batch sent first (a batch is given until the time the call would wait for
    # it, and the second's is past with the first before it priced at 100 s).
    monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)
    # A first build: its own cost a byte.
    monkeypatch.setattr(_batches, "BUILD_POST_SECONDS_PER_BYTE", 100.0 / (size * 1.5))
    pool = second_file_held(tree, monkeypatch)
    try:
        async with tree.session() as actor:
            slowdown(monkeypatch, actor, 1.0)
            cut = await index(actor, tree.stat(*tree.all()))
            monkeypatch.undo()
            rest = await index(actor, tree.stat(*(p for p in tree.all() if p not in keys(cut))))
            hits = [await found(actor, WORDS[i]) for i in range(2)]
    finally:
        await pool.close()
    assert read_paths(cut) == [name(0)]
    assert read_paths(rest) == [name(1)]
    assert hits == [[name(0)], [name(1)]]
