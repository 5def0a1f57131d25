"""A first build's start and end: workers started before the first batch, the last batches
smaller, and the work after the reads priced from what the build measured of itself.

Real worker processes and real repositories throughout (tests/support.py ``make_repo``).
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import os
import shutil
import subprocess
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import _batches, indexer
from nodwyn_retrieval.actors._work import analyze_batch, analyze_packed
from nodwyn_retrieval.actors.indexer import listed_files
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.bus.pool import _call
from nodwyn_retrieval.errors import DeadlineExceeded
from nodwyn_retrieval.retrieval import tree_build as treemod
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.tree import TreeBuilder, pairs_of
from nodwyn_retrieval.store.chunkstore import ChunkStore

from tests.support import make_repo
from tests.test_indexer_edges import (
    WORDS,
    N,
    Tree,
    body,
    files,
    found,
    index,
    keys,
    name,
    read_paths,
    slowdown,
)
from tests.test_indexer_estimates import LoopClock, second_file_held

# Through sys.modules, not the package's attribute: a run that reloads the tests' modules (the
# mutation runner) pickles the workers' functions by their module's name.
w = importlib.import_module("tests._pool_workers")

# -- the pool's start before any work ---------------------------------------------------------


@pytest.mark.asyncio
async def test_start_brings_every_worker_up_idle_and_the_first_work_takes_one() -> None:
    async with ProcessPool(max_workers=2) as pool:
        assert pool.pids == ()
        await pool.start()
        up = pool.pids
        assert len(up) == 2
        assert repr(pool) == "<ProcessPool started, max_workers=2, 0 busy>"
        await pool.start()  # nothing more to start
        assert pool.pids == up
        # Two works at once: each on one of the workers started, none started beside them.
        a, b = await asyncio.gather(pool.run(w.slow_pid, 0.3), pool.run(w.slow_pid, 0.3))
        assert sorted((a, b)) == list(up)
        assert pool.pids == up


@pytest.mark.asyncio
async def test_work_asked_while_start_creates_the_workers_makes_no_more_of_them() -> None:
    async with ProcessPool(max_workers=2) as pool:
        starting = asyncio.ensure_future(pool.start())
        await asyncio.sleep(0)  # start() has begun creating the first
        got = await asyncio.gather(pool.run(w.slow_pid, 0.2), pool.run(w.slow_pid, 0.2))
        await starting
        assert len(pool.pids) == 2
        assert sorted(got) == list(pool.pids)


@pytest.mark.asyncio
async def test_a_closed_pool_starts_nothing_and_close_ends_the_workers_started() -> None:
    pool = ProcessPool(max_workers=1)
    await pool.start()
    (pid,) = pool.pids
    await pool.close()
    assert pool.pids == ()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    await pool.start()
    assert pool.pids == ()


# -- the indexer starts them at the open, for a big tree never indexed ------------------------


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_the_git_index_says_how_many_files_it_lists(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {f"f{i}.py": f"x = {i}\n" for i in range(7)})
    assert listed_files(root) == 7
    # A worktree's .git is a file naming its git directory, which has its own index.
    _git(root, "worktree", "add", "-q", str(tmp_path / "wt"))
    assert listed_files(tmp_path / "wt") == 7
    plain = tmp_path / "plain"
    plain.mkdir()
    assert listed_files(plain) == 0
    (plain / ".git").write_text("not a pointer\n")
    assert listed_files(plain) == 0
    (plain / ".git").write_text("gitdir: nowhere\n")
    assert listed_files(plain) == 0
    odd = tmp_path / "odd"
    (odd / ".git").mkdir(parents=True)
    (odd / ".git" / "index").write_bytes(b"XXXX\x00\x00\x00\x02\x00\x00\x00\x09")
    assert listed_files(odd) == 0
    (odd / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x02\x00\x01\x07")  # cut short
    assert listed_files(odd) == 0
    (odd / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x02\x00\x00\x01\x02")
    assert listed_files(odd) == 258


def test_a_git_index_that_is_a_fifo_or_a_huge_git_file_is_not_waited_on(tmp_path: Path) -> None:
    """A tree's .git and index are not trusted: a FIFO is not opened for a read that would wait
    for a writer, and a .git file is read only as far as its pointer could go."""
    fifo_repo = tmp_path / "fifo"
    (fifo_repo / ".git").mkdir(parents=True)
    os.mkfifo(fifo_repo / ".git" / "index")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.mkfifo(elsewhere / "index")
    pointed = tmp_path / "pointed"
    pointed.mkdir()
    (pointed / ".git").write_text(f"gitdir: {elsewhere}\n")
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / ".git").write_bytes(b"gitdir: " + b"x" * 5_000_000)
    got: list[int] = []
    t = threading.Thread(
        target=lambda: got.extend(listed_files(r) for r in (fifo_repo, pointed, huge)), daemon=True
    )
    t.start()
    t.join(20)
    assert not t.is_alive(), "listed_files waited on a FIFO"
    assert got == [0, 0, 0]


async def _pids_at_open(tree: Tree) -> tuple[int, ...]:
    """The pool's workers once a session of the tree has opened, before any call."""
    pool = tree.pool = ProcessPool(max_workers=2)
    try:
        async with tree.session() as actor:
            assert actor._early is not None
            await actor._early
            return pool.pids
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_big_tree_never_indexed_has_its_workers_started_at_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = Tree(tmp_path, files(12))
    monkeypatch.setattr(indexer, "EARLY_POOL_FILES", 12)
    assert len(await _pids_at_open(tree)) == 2
    monkeypatch.setattr(indexer, "EARLY_POOL_FILES", 13)  # one file fewer than that: not
    assert await _pids_at_open(tree) == ()


@pytest.mark.asyncio
async def test_a_tree_with_a_snapshot_starts_no_worker_at_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = Tree(tmp_path, files(12))
    async with tree.session() as actor:
        done = await index(actor, tree.stat(*tree.all()))
    assert tree.snap.exists()
    monkeypatch.setattr(indexer, "EARLY_POOL_FILES", 1)
    assert await _pids_at_open(tree) == ()
    assert len(keys(done)) == 12


# -- the last batches -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_last_batches_are_smaller_and_every_file_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 files of one size, batches of at most 8 files and at least 1: the batches' sizes never
    grow, the last ones hold less than the first, and the files they hold are the tree's."""
    tree = Tree(tmp_path, files())
    size = len(body(0).encode())
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 8 * size)
    monkeypatch.setattr(_batches, "MIN_BATCH_BYTES", size)
    monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)  # read in order: certain batches
    pool = tree.pool = ProcessPool(max_workers=2, preload=["nodwyn_retrieval.actors._work"])
    sent: list[list[str]] = []
    real_run = pool.run

    async def run(fn: Any, paths: Any, *args: Any, **kw: Any) -> Any:
        sent.append(list(paths))
        return await real_run(fn, paths, *args, **kw)

    monkeypatch.setattr(pool, "run", run)
    try:
        async with tree.session() as actor:
            done = await index(actor, tree.stat(*tree.all()))
            hits = [await found(actor, WORDS[i]) for i in range(0, 40, 7)]
    finally:
        await pool.close()
    sizes = [len(b) for b in sent]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] == 8
    assert sizes[-1] == 1
    # Each holds at most a quarter of the files still to read once it is sent (two workers), and
    # the one that reached it: 8, 6, 5, 4, 3, ... rather than 8, 8, 8, 8 and a tail.
    left = [len(tree.all()) - sum(sizes[: k + 1]) for k in range(len(sizes))]
    assert all(n <= 1 + rest / 4 for n, rest in zip(sizes[1:], left[1:], strict=True))
    assert sorted(p for b in sent for p in b) == tree.all()
    assert read_paths(done) == tree.all()
    assert hits == [[name(i)] for i in range(0, 40, 7)]


# -- the work after the reads, priced from the build's own adds ------------------------------


async def _two_batches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    finish_per_add: float,
    *,
    per_byte: float = 1e-12,
    factor: float = 1.0,
    cores: int = 2,
    add_cpu: float | None = None,
    min_pairs: int = 1,
) -> tuple[list[str], list[str]]:
    """Two files, a batch each; the second is let go to its worker once the first is back. The
    constant cost a byte is so low that it would let both be read: only what the build measured
    of its first batch (times finish_per_add) can stop the second. (With finish_per_add 0, the
    constant ``per_byte`` alone, on ``cores`` cores, at a slowdown of ``factor``.)"""
    tree = Tree(tmp_path, files(2))
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 1)
    monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)  # the first file's batch sent first
    monkeypatch.setattr(_batches, "BUILD_POST_SECONDS_PER_BYTE", per_byte)
    monkeypatch.setattr(_batches, "MIN_MEASURED_PAIRS", min_pairs if finish_per_add else 1 << 40)
    monkeypatch.setattr(_batches, "FINISH_PER_ADD", finish_per_add)
    monkeypatch.setattr(_batches, "cpu_count", lambda: cores)
    if add_cpu is not None:  # each add of the builder takes add_cpu seconds of CPU, exactly
        ticks = itertools.count(step=add_cpu)
        monkeypatch.setattr(treemod, "time", types.SimpleNamespace(thread_time=lambda: next(ticks)))
    pool = second_file_held(tree, monkeypatch)
    try:
        async with tree.session() as actor:
            slowdown(monkeypatch, actor, factor)
            cut = await index(actor, tree.stat(*tree.all()))
            monkeypatch.undo()
            rest = await index(actor, tree.stat(*(p for p in tree.all() if p not in keys(cut))))
    finally:
        await pool.close()
    return read_paths(cut), read_paths(rest)


@pytest.mark.asyncio
async def test_a_first_builds_measured_cost_stops_the_wait_once_it_fills_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch's add took some microseconds of CPU: priced a billion times that a byte
    analysed, its finish fills the 60 s: the second batch is not waited for, the next call
    reads it."""
    assert await _two_batches(tmp_path, monkeypatch, 1e9) == ([name(0)], [name(1)])


@pytest.mark.asyncio
async def test_a_first_builds_measured_cost_lets_both_batches_in_when_it_is_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await _two_batches(tmp_path, monkeypatch, 1e-3) == ([name(0), name(1)], [])


@pytest.mark.asyncio
@pytest.mark.parametrize(("finish_per_add", "cut"), [(15.0, False), (25.0, True)])
async def test_a_first_builds_finish_is_priced_at_its_adds_cpu_times_the_ratio_and_the_margin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finish_per_add: float, cut: bool
) -> None:
    """The first batch's add took 2 s of CPU for its bytes, so the finish of what was analysed
    is priced at 2 s x the ratio x the margin 1.5 (slowdown 1): 45 s fits in the 59.7 s and the
    second batch is waited for, 75 s does not."""
    # The first batch's postings are just enough for its own cost to be used.
    first = len(pairs_of([(name(0), analyze(body(0)))]).doc)
    got = await _two_batches(tmp_path, monkeypatch, finish_per_add, add_cpu=2.0, min_pairs=first)
    assert got == (([name(0)], [name(1)]) if cut else ([name(0), name(1)], []))


@pytest.mark.asyncio
@pytest.mark.parametrize(("cores", "cut"), [(1, False), (2, True)])
async def test_a_first_builds_finish_is_priced_without_the_cores_its_own_workers_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int, cut: bool
) -> None:
    """The first file's bytes priced at 40 s at a slowdown of 1 (with the margin): measured at 2
    while the one worker ran, the finish's slowdown is 2 less that worker's share of the cores,
    1 on one core (40 s: the second batch is waited for) and 1.5 on two (60 s: it is not)."""
    size = len(body(0).encode())
    got = await _two_batches(
        tmp_path, monkeypatch, 0.0, per_byte=40.0 / (size * 1.5), factor=2.0, cores=cores
    )
    assert got == (([name(0)], [name(1)]) if cut else ([name(0), name(1)], []))


@pytest.mark.asyncio
async def test_the_builder_says_what_its_adds_cost_and_how_many_postings_they_added(
    tmp_path: Path,
) -> None:
    tree = Tree(tmp_path, files(3))
    seen: list[tuple[float, int, int]] = []
    real_built = indexer._built

    def built(builder: Any) -> Any:
        seen.append((builder.cpu, builder.n_pairs, builder.n_docs))
        return real_built(builder)

    mp = pytest.MonkeyPatch()
    mp.setattr(indexer, "_built", built)
    try:
        async with tree.session() as actor:
            await index(actor, tree.stat(*tree.all()))
            postings = actor.tree.base.segment.n_postings
    finally:
        mp.undo()
    ((cpu, pairs, docs),) = seen
    assert cpu > 0.0
    assert docs == 3
    assert pairs >= postings > 0  # repeated (document, word) pairs are summed by the finish


def test_the_builders_cpu_is_its_adds_own_and_its_postings_those_they_added() -> None:
    texts = [f"def {w}_{i}(x):\n    return x + {i}\n" * (i + 1) for i, w in enumerate(WORDS)]
    recs = [(name(i), analyze(t)) for i, t in enumerate(texts)]
    builder = TreeBuilder()
    spent = 0.0
    added = 0
    for a in range(0, len(recs), 10):
        piece = recs[a : a + 10]
        pairs = pairs_of(piece)
        t = time.thread_time()
        builder.add([(a + j, p, f"k{a + j}") for j, (p, _) in enumerate(piece)], pairs)
        spent += time.thread_time() - t
        added += len(pairs.doc)
        assert builder.n_pairs == added
    assert 0.0 < builder.cpu <= spent
    assert builder.n_pairs >= builder.finish().segment.n_postings


# -- the reads ahead of the pool, and the slowdown looked at as they go ---------------------------


@pytest.mark.asyncio
async def test_the_reads_wait_for_the_pool_once_they_are_far_enough_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch a file, three files' bytes ahead at most: while the first batch is held in the
    pool, four files are sent to it to be read (the held one and three queued) and no more;
    once it is back every file is read and indexed."""
    tree = Tree(tmp_path, files())
    size = len(body(0).encode())
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", size)
    monkeypatch.setattr(_batches, "MIN_BATCH_BYTES", 1)
    monkeypatch.setattr(_batches, "READ_AHEAD_BYTES", 3 * size)
    monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)
    reads = 0  # files handed to the pool, each to be read by its worker
    pool = tree.pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    real_run = pool.run
    gate = asyncio.Event()
    at_release: list[int] = []

    async def release() -> None:
        for _ in range(200):  # until the reads have gone as far as they may
            if reads >= 4:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        at_release.append(reads)
        gate.set()

    async def run(fn: Any, paths: Any, *args: Any, **kw: Any) -> Any:
        nonlocal reads
        reads += len(paths)
        if not gate.is_set() and not at_release and not releasing:
            releasing.append(asyncio.ensure_future(release()))
        await gate.wait()  # every batch held until the reads are seen to wait
        return await real_run(fn, paths, *args, **kw)

    releasing: list[asyncio.Future[None]] = []
    monkeypatch.setattr(pool, "run", run)
    try:
        async with tree.session() as actor:
            done = await index(actor, tree.stat(*tree.all()))
            hits = [await found(actor, WORDS[i]) for i in (0, 20, 39)]
    finally:
        await pool.close()
    assert at_release == [4]
    assert read_paths(done) == tree.all()
    assert hits == [[name(0)], [name(20)], [name(39)]]


@pytest.mark.asyncio
async def test_a_slowdown_that_grows_while_the_reads_go_on_stops_them(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first build read a file at a time, each file priced at 1 s after the reads at the
    slowdown of the call's start (1): a second later (the clock moved after 5 reads) the slowdown
    measured is 100, and no other file is read; the next call reads the rest."""
    size = len(body(0).encode())
    monkeypatch.setattr(_batches, "BUILD_POST_SECONDS_PER_BYTE", 1.0 / (size * 1.5))
    factors = iter([1.0])  # the call's start; then 100 whenever it is looked at
    async with tree.session() as actor:
        monkeypatch.setattr(actor._contention, "factor", lambda: next(factors, 100.0))
        LoopClock(monkeypatch, after=5, offset=1.0)
        cut = await index(actor, tree.stat(*tree.all()))
        monkeypatch.undo()
        rest = await index(actor, tree.stat(*(p for p in tree.all() if p not in keys(cut))))
    assert read_paths(cut) == [name(i) for i in range(5)]
    assert read_paths(rest) == [name(i) for i in range(5, N)]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path, files())


# -- a batch the call no longer waits for stops in its worker --------------------------------------


@pytest.mark.asyncio
async def test_work_that_looks_at_its_deadline_stops_there_and_frees_its_worker() -> None:
    async with ProcessPool(max_workers=1) as pool:
        await pool.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(DeadlineExceeded):
            await pool.run(w.steps_until_deadline, 60.0, deadline=t0 + 0.5)
        # The same worker takes the next work once the first stopped, not after its 60 s.
        assert await pool.run(w.worker_pid) == pool.pids[0]
        assert loop.time() - t0 < 20.0
        assert await pool.run(w.steps_until_deadline, 0.05) > 0  # no deadline: runs to its end


def test_a_batch_past_its_deadline_stops_between_files_and_keeps_what_it_stored(
    tmp_path: Path,
) -> None:
    items = [(f"f{i}.py", body(i % N, f"v{i}").encode()) for i in range(3000)]
    chunks = tmp_path / "chunks"
    # Without a deadline (in the session's own process) every file is analysed; the first call
    # warms what a first file pays once, and the next are timed warm, so that the runs below
    # reach their deadline within the batch (a cold first call's time would overprice it, and so
    # would one slowed by the machine: the fastest of three is taken).
    assert len(analyze_batch(items[:50], str(chunks))) == 50
    times = []
    for lo in (50, 100, 150):
        t = time.monotonic()
        assert len(analyze_batch(items[lo : lo + 50], str(chunks))) == 50
        times.append(time.monotonic() - t)
    whole = min(times) / 50 * len(items)  # about what the whole batch takes, warm
    shutil.rmtree(chunks)
    for fn in (analyze_batch, analyze_packed):
        with pytest.raises(DeadlineExceeded, match="stopped at its deadline"):
            _call(fn, (items, str(chunks)), time.monotonic() + whole / 8)
        # The records of the files done before the deadline are in the store (one pack).
        stored = sum(1 for _ in ChunkStore(chunks).iter_entries())
        assert 0 < stored < len(items)
        shutil.rmtree(chunks)


@pytest.mark.asyncio
async def test_each_batch_is_given_the_time_past_which_the_call_would_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files, a batch each, each priced at 20 s after the reads. Of the 60 s, the reads have
    51 and what follows them keeps 0.3 s: the first batch, with nothing before it, is given the
    reads' 51 s; the second, with the first before it, until 59.7 - 20 s."""
    tree = Tree(tmp_path, files(2))
    size = len(body(0).encode())
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 1)
    monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)
    monkeypatch.setattr(_batches, "BUILD_POST_SECONDS_PER_BYTE", 20.0 / (size * 1.5))
    pool = tree.pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    real_run = pool.run
    given: list[float] = []

    async def run(fn: Any, paths: Any, *args: Any, deadline: float, **kw: Any) -> Any:
        given.append(deadline)
        return await real_run(fn, paths, *args, deadline=deadline, **kw)

    monkeypatch.setattr(pool, "run", run)
    try:
        async with tree.session() as actor:
            slowdown(monkeypatch, actor, 1.0)
            t0 = asyncio.get_running_loop().time()
            done = await index(actor, tree.stat(*tree.all()))
    finally:
        await pool.close()
    assert read_paths(done) == tree.all()
    first, second = given
    assert first - t0 == pytest.approx(51.0, abs=0.5)
    assert second - t0 == pytest.approx(39.7, abs=0.5)
