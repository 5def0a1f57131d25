"""The indexer's edges, as the refresher (its one caller) sees them: what it answers an IndexFiles
with (the files read, the records not loaded, the store's error), what a search finds, and the
snapshot on disk a new session loads.

Written for survivors of a mutation run (docs/reliability.md, "Mutation testing"). The actor is
driven directly, with real files, a real chunk store and the real guard, so that each count is
exact: how many records a stopped call loaded, how many files it says read, whether the snapshot
was written before the answer or after it. A deadline is passed without timing: the indexer's
clock (its module's ``time``) jumps an hour while one of its phases runs, or a document's cost is
estimated at 100 s. The estimates themselves, and the reads' share of the bound, are in
tests/test_indexer_estimates.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import _batches, indexer
from nodwyn_retrieval.actors.indexer import IndexerActor, load_snapshot
from nodwyn_retrieval.actors.messages import (
    FileStat,
    IndexedFiles,
    IndexFiles,
    SaveSnapshot,
    SearchTree,
    TreeSearched,
)
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.guard import CheckResult, default_guard
from nodwyn_retrieval.guard.budget import Budget
from nodwyn_retrieval.retrieval.tree import TreeIndex
from nodwyn_retrieval.store.chunkstore import ChunkStore

from tests.support import make_repo, shifted_time

N = 40
_C = "bcdfghjklmnpqrtvwz"
# Words no stemmer takes one for another: a consonant pair between a fixed head and tail.
WORDS = [f"vorp{_C[i // len(_C)]}{_C[i % len(_C)]}ul" for i in range(N)]


def body(i: int, tag: str = "") -> str:
    return f"def {WORDS[i]}():\n    return {i!r}  # {tag}\n"


def files(n: int = N, tag: str = "") -> dict[str, str | bytes]:
    return {f"m{i:03}.py": body(i, tag) for i in range(n)}


def name(i: int) -> str:
    return f"m{i:03}.py"


class Tree:
    """A repository, the chunk store and the snapshot path of one indexer, and its sessions."""

    def __init__(self, tmp_path: Path, contents: dict[str, str | bytes]) -> None:
        self.root = make_repo(tmp_path / "repo", contents)
        self.chunks = tmp_path / "chunks"
        self.snap = tmp_path / "tree.snap"
        self.data = tmp_path / "data"
        self.pool: ProcessPool | None = None
        self.checkers: list[Any] = []
        self.budget: Budget | None = None

    def stat(self, *paths: str) -> tuple[FileStat, ...]:
        out = []
        for p in sorted(paths):
            st = os.lstat(self.root / p)
            out.append(FileStat(p, st.st_size, st.st_mtime_ns, st.st_ino))
        return tuple(out)

    def all(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.root))
            for p in self.root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(self.root).parts
        )

    @asynccontextmanager
    async def session(self) -> Any:
        actor = IndexerActor(
            self.root, ChunkStore(self.chunks),
            default_guard(
                self.root, data_dir=self.data, checkers=self.checkers, budget=self.budget
            ),
            self.pool, self.snap,
        )  # fmt: skip
        await actor.on_start()
        try:
            yield actor
        finally:
            await actor.on_stop()


async def index(
    actor: IndexerActor,
    read: tuple[FileStat, ...],
    target: dict[str, str] | None = None,
    seconds: float = 60.0,
    drop: tuple[str, ...] = (),
) -> IndexedFiles:
    deadline = asyncio.get_running_loop().time() + seconds
    out = await actor.handle(IndexFiles(target, read, deadline, drop))
    assert isinstance(out, IndexedFiles)
    return out


async def found(actor: IndexerActor, word: str) -> list[str]:
    out = await actor.handle(SearchTree(word, 20))
    assert isinstance(out, TreeSearched)
    return [r.path for r in out.results]  # type: ignore[attr-defined]


def keys(done: IndexedFiles) -> dict[str, str]:
    return {f.stat.path: f.key for f in done.found if f.key is not None}


def read_paths(done: IndexedFiles) -> list[str]:
    return sorted(f.stat.path for f in done.found)


class Clock:
    """The indexer's clock, made to jump an hour while one of its phases runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        self.jumps = 0
        self.monkeypatch = monkeypatch
        monkeypatch.setattr(indexer, "time", shifted_time(lambda: self.offset))

    def during(self, phase: str) -> None:
        real = getattr(IndexerActor, phase)

        def jumped(*a: Any, **kw: Any) -> Any:
            self.offset, self.jumps = 3600.0, self.jumps + 1
            try:
                return real(*a, **kw)
            finally:
                self.offset = 0.0

        self.monkeypatch.setattr(IndexerActor, phase, jumped)


def costly(monkeypatch: pytest.MonkeyPatch, seconds: float = 100.0) -> None:
    """Every document of the delta estimated to cost ``seconds`` to rebuild."""
    monkeypatch.setattr(IndexerActor, "_per_doc", lambda self: seconds)


class Held:
    """A function run in the indexer's thread (a merge, a snapshot write) held until let go."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.started = threading.Event()
        self.calls = 0

    def hold(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def held(*a: Any, **kw: Any) -> Any:
            self.calls += 1
            self.started.set()
            if not self.go.wait(30.0):  # pragma: no cover - the test lets it go
                raise RuntimeError("never let go")
            return real(*a, **kw)

        return held


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path, files())


async def first_build(tree: Tree) -> dict[str, str]:
    """A first session's build of the whole tree: its keys, and the snapshot it leaves."""
    async with tree.session() as actor:
        done = await index(actor, tree.stat(*tree.all()))
    assert load_snapshot(tree.snap) is not None
    return keys(done)


# -- what the actor is ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_indexer_shows_its_root_and_its_index(tree: Tree) -> None:
    async with tree.session() as actor:
        empty = repr(actor)
        await index(actor, tree.stat(*tree.all()))
        built = repr(actor)
    assert empty.startswith(f"<IndexerActor root={str(tree.root)!r} ")
    assert built != empty
    assert repr(actor.tree) in built


# -- a new session's records, loaded from the store ----------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["clock", "estimate"])
async def test_a_new_session_stopped_while_loading_says_which_records_it_did_not_load(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    target = await first_build(tree)
    tree.snap.unlink()  # every record is loaded from the chunk store
    async with tree.session() as actor:
        if how == "clock":
            clock = Clock(monkeypatch)
            clock.during("_sync")
        else:
            costly(monkeypatch)
        cut = await index(actor, (), dict(target))
        monkeypatch.undo()
        cut_hits = [await found(actor, WORDS[i]) for i in (0, 15, N - 1)]
        rest = await index(actor, (), dict(target))
        for i in range(N):
            assert await found(actor, WORDS[i]) == [name(i)], WORDS[i]
        again = await index(actor, (), dict(target))
    # The clock is looked at every 16 records: 15 loaded, the rest said not loaded, in order.
    assert cut.not_loaded == tuple(name(i) for i in range(15, N))
    assert (cut.found, cut.missing, cut.store_error) == ((), (), None)
    assert cut_hits == [[name(0)], [], []]
    # The next call loads the rest, and none twice; then nothing is left.
    assert (rest.not_loaded, rest.missing) == ((), ())
    assert (again.not_loaded, again.missing) == ((), ())


@pytest.mark.asyncio
async def test_a_new_session_with_time_loads_every_record_and_forgets_what_the_map_dropped(
    tree: Tree,
) -> None:
    target = await first_build(tree)
    tree.snap.unlink()
    async with tree.session() as actor:
        done = await index(actor, (), dict(target))
        hits = [await found(actor, WORDS[i]) for i in range(N)]
        # A map without two files: they leave the index.
        smaller = {p: k for p, k in target.items() if p not in (name(3), name(30))}
        less = await index(actor, (), smaller)
        gone = [await found(actor, WORDS[i]) for i in (3, 30)]
        kept = await found(actor, WORDS[4])
    assert (done.not_loaded, done.missing, done.found) == ((), (), ())
    assert hits == [[name(i)] for i in range(N)]
    assert (less.not_loaded, less.missing) == ((), ())
    assert gone == [[], []]
    assert kept == [name(4)]


@pytest.mark.asyncio
async def test_a_damaged_record_is_counted_rebuilt_by_the_call_that_met_it_and_no_other(
    tree: Tree,
) -> None:
    target = await first_build(tree)
    tree.snap.unlink()
    ChunkStore(tree.chunks).path(target[name(7)]).write_bytes(b"not a record")
    async with tree.session() as actor:
        met = await index(actor, (), dict(target))
        again = await index(actor, tree.stat(name(7)))  # read again, as the refresher does
        after = await index(actor, (), dict(target))
        hits = await found(actor, WORDS[7])
    assert (met.missing, met.rebuilt) == ((name(7),), 1)
    assert (read_paths(again), again.rebuilt) == ([name(7)], 0)
    assert (after.missing, after.rebuilt) == ((), 0)
    assert hits == [name(7)]


# -- the snapshot: written before the answer when it fits, after it otherwise ---------------------


def snapshot_keys(tree: Tree) -> dict[str, str]:
    snap = load_snapshot(tree.snap)
    assert snap is not None
    return dict(zip(snap.files, snap.keys, strict=True))


def settle_at_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call reaches its deadline as it begins to wait for the merge and the snapshot."""
    real = IndexerActor._settle

    async def at_deadline(self: IndexerActor, deadline: float | None) -> str | None:
        now = asyncio.get_running_loop().time()
        return await real(self, now if deadline is None else min(deadline, now))

    monkeypatch.setattr(IndexerActor, "_settle", at_deadline)


@pytest.mark.asyncio
async def test_a_first_build_answers_with_its_snapshot_written_when_the_write_fits(
    tree: Tree,
) -> None:
    async with tree.session() as actor:
        done = await index(actor, tree.stat(*tree.all()))
        # No await between the answer and this look: a write left for after it is not done.
        on_disk = snapshot_keys(tree) if tree.snap.exists() else None
    assert done.store_error is None
    assert on_disk == keys(done)


@pytest.mark.asyncio
async def test_a_snapshot_that_would_not_fit_is_written_after_the_answer(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexer, "SNAPSHOT_SECONDS_PER_POSTING", 1e9)  # never fits
    async with tree.session() as actor:
        done = await index(actor, tree.stat(*tree.all()))
        at_answer = tree.snap.exists()
        hits = await found(actor, WORDS[7])
    assert at_answer is False
    assert hits == [name(7)]
    # The session's end waited for it.
    assert snapshot_keys(tree) == keys(done)


@pytest.mark.asyncio
@pytest.mark.parametrize(("factor", "waited"), [(1.0, True), (4.0, False)])
async def test_a_snapshot_is_waited_for_when_its_cost_times_the_slowdown_fits(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, factor: float, waited: bool
) -> None:
    """Its postings priced at 20 s in all: 20 s at a slowdown of 1 fit in the 60 s left, 80 s
    at 4 do not (the write goes on after the answer)."""
    await first_build(tree)
    snap = load_snapshot(tree.snap)
    assert snap is not None
    tree.snap.unlink()
    monkeypatch.setattr(indexer, "SNAPSHOT_SECONDS_PER_POSTING", 20.0 / snap.segment.n_postings)
    async with tree.session() as actor:
        slowdown(monkeypatch, actor, factor)
        await index(actor, tree.stat(*tree.all()))
        at_answer = tree.snap.exists()
    assert at_answer is waited
    assert tree.snap.exists()


@pytest.mark.asyncio
async def test_a_snapshot_that_cannot_be_written_is_said_and_the_index_still_answers(
    tmp_path: Path,
) -> None:
    tree = Tree(tmp_path, files(8))
    async with tree.session() as actor:
        await found(actor, WORDS[5])  # the session's loading (no snapshot yet) is done
        # A directory where the snapshot goes, made after the loading (which would have taken
        # it for damage and removed it): no file can replace it.
        tree.snap.mkdir()
        done = await index(actor, tree.stat(*tree.all()))
        hits = await found(actor, WORDS[5])
        saved = await actor.handle(SaveSnapshot(None))
        (tree.root / name(2)).write_text("def newly_written():\n    pass\n")
        again = await index(actor, tree.stat(name(2)))
        tree.snap.rmdir()
        fixed = await actor.handle(SaveSnapshot(None))
    assert done.store_error is not None
    assert str(tree.snap) in done.store_error
    assert hits == [name(5)]
    # Said once by the call that waited for it; a later write that fails says it again.
    assert isinstance(saved, str)
    assert str(tree.snap) in saved
    assert again.store_error is not None
    assert fixed is None
    assert set(snapshot_keys(tree)) == set(tree.all())


# -- a merge under way at the session's end -------------------------------------------------------


def change(tree: Tree, rng: range, tag: str) -> tuple[FileStat, ...]:
    for i in rng:
        (tree.root / name(i)).write_text(body(i, tag))
    return tree.stat(*(name(i) for i in rng))


@pytest.mark.asyncio
async def test_a_merge_under_way_at_the_end_is_written_with_the_changes_made_since(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 4)  # a delta of 10 is merged
    held = Held()
    async with tree.session() as actor:
        first = await index(actor, tree.stat(*tree.all()))
        settle_at_deadline(monkeypatch)
        monkeypatch.setattr(indexer, "_compacted", held.hold(indexer._compacted))
        merging = await index(actor, change(tree, range(10), "v2"))
        assert await asyncio.to_thread(held.started.wait, 10.0)
        since = await index(actor, change(tree, range(10, 11), "v3"))
        assert snapshot_keys(tree) == keys(first)  # the merge is held: the first build's
        held.go.set()
    # The end took the merge, the change made since with it, and wrote its base.
    on_disk = snapshot_keys(tree)
    assert held.calls == 1
    assert {p: on_disk[p] for p in keys(merging)} == keys(merging)
    assert on_disk[name(10)] == keys(first)[name(10)] != keys(since)[name(10)]
    assert {p: on_disk[p] for p in map(name, range(11, N))} == {
        p: keys(first)[p] for p in map(name, range(11, N))
    }


# -- a chunk store that cannot be written ---------------------------------------------------------


def unwritable(tree: Tree) -> None:
    """The chunk store's directory is a file: every record's write fails (as on a full disk)."""
    tree.chunks.write_text("not a directory\n")


@pytest.mark.asyncio
@pytest.mark.parametrize("pooled", [False, True])
async def test_a_build_whose_records_cannot_be_stored_says_the_first_error_and_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    tree = Tree(tmp_path, files(12))
    unwritable(tree)
    if pooled:
        monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)  # every batch goes to the worker
        tree.pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    try:
        async with tree.session() as actor:
            done = await index(actor, tree.stat(*tree.all()))
            hits = [await found(actor, WORDS[i]) for i in range(12)]
            # A later update (records made one a file, not packed into a build) says it too.
            later = await index(actor, change(tree, range(4, 7), "v2"))
            later_hits = [await found(actor, WORDS[i]) for i in range(12)]
    finally:
        if tree.pool is not None:
            await tree.pool.close()
    assert read_paths(done) == tree.all()
    assert len(keys(done)) == 12
    assert hits == later_hits == [[name(i)] for i in range(12)]
    # The error said is the first pack's: "<reason> writing <its path>".
    for call in (done, later):
        assert call.store_error is not None
        assert re.search(
            rf" writing {re.escape(str(tree.chunks))}/packs/[0-9a-f]{{16}}-[0-9a-f]{{12}}\.ckp$",
            call.store_error,
        ), call.store_error
    assert read_paths(later) == [name(4), name(5), name(6)]


@pytest.mark.asyncio
async def test_an_indexer_without_a_pool_analyses_a_big_batch_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)  # a batch past the pool's threshold
    tree = Tree(tmp_path, files(6))
    async with tree.session() as actor:
        done = await index(actor, tree.stat(*tree.all()))
        hits = [await found(actor, WORDS[i]) for i in range(6)]
    assert sorted(keys(done)) == tree.all()
    assert hits == [[name(i)] for i in range(6)]


# -- a merge done while a call waits: taken, and its snapshot written before the answer ----------


@pytest.mark.asyncio
async def test_an_update_whose_merge_is_done_in_time_answers_with_the_merged_snapshot(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 4)
    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        merged = await index(actor, change(tree, range(10), "v2"))
        at_answer = snapshot_keys(tree)
        hits = await found(actor, WORDS[3])
    # Waited for: the merge's base is on disk when the call answers, and a new session loads it.
    assert {p: at_answer[p] for p in keys(merged)} == keys(merged)
    assert set(at_answer) == set(tree.all())
    assert hits == [name(3)]


@pytest.mark.asyncio
async def test_a_merge_done_while_a_later_call_waits_is_taken_with_the_changes_made_since(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 4)
    held = Held()
    async with tree.session() as actor:
        first = await index(actor, tree.stat(*tree.all()))
        real_settle = IndexerActor._settle
        settle_at_deadline(monkeypatch)
        monkeypatch.setattr(indexer, "_compacted", held.hold(indexer._compacted))
        merging = await index(actor, change(tree, range(10), "v2"))
        assert await asyncio.to_thread(held.started.wait, 10.0)

        async def let_go(self: IndexerActor, deadline: float | None) -> str | None:
            held.go.set()  # the merge ends while this call waits for it
            return await real_settle(self, deadline)

        monkeypatch.setattr(IndexerActor, "_settle", let_go)
        since = await index(actor, change(tree, range(10, 11), "v3"))
        at_answer = snapshot_keys(tree)
        hits = [await found(actor, WORDS[i]) for i in range(N)]
    assert {p: at_answer[p] for p in keys(merging)} == keys(merging)
    # The change made since is in the index (the delta), not in the merged base on disk.
    assert at_answer[name(10)] == keys(first)[name(10)] != keys(since)[name(10)]
    assert hits == [[name(i)] for i in range(N)]
    assert held.calls == 1


def slowdown(monkeypatch: pytest.MonkeyPatch, actor: IndexerActor, factor: float) -> None:
    monkeypatch.setattr(actor._contention, "factor", lambda: factor)


# -- when a delta is merged ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_delta_is_merged_once_it_holds_more_than_the_merge_threshold(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 5)  # above a tenth of the base (40 docs)
    async with tree.session() as actor:
        first = await index(actor, tree.stat(*tree.all()))
        five = await index(actor, change(tree, range(5), "v2"))
        assert actor.tree.delta.n_docs == 5
        at_five = snapshot_keys(tree)
        six = await index(actor, change(tree, range(5, 6), "v2"))
        at_six = snapshot_keys(tree)
        delta_after = actor.tree.delta.n_docs
    assert at_five == keys(first)  # 5 is not more than 5: not merged, the snapshot unchanged
    assert at_six == {**keys(first), **keys(five), **keys(six)}
    assert delta_after == 0


@pytest.mark.asyncio
async def test_a_merge_that_fails_loses_nothing_and_the_next_changes_are_applied(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 4)

    def fails(view: TreeIndex) -> TreeIndex:
        raise MemoryError("no room to merge")

    async with tree.session() as actor:
        first = await index(actor, tree.stat(*tree.all()))
        monkeypatch.setattr(indexer, "_compacted", fails)
        merging = await index(actor, change(tree, range(10), "v2"))
        (tree.root / name(20)).write_text("def after_a_failed_merge():\n    pass\n")
        after = await index(actor, tree.stat(name(20)))
        hits = [await found(actor, w) for w in ("after_a_failed_merge", WORDS[20], WORDS[3])]
    assert read_paths(merging) == [name(i) for i in range(10)]
    assert read_paths(after) == [name(20)]
    assert hits == [[name(20)], [], [name(3)]]
    assert "merging the index failed: MemoryError('no room to merge')" in caplog.text
    assert snapshot_keys(tree) == keys(first)  # nothing merged: the first build's base stays


# -- a search --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_search_passes_over_files_gone_since_and_shows_at_most_its_limit(
    tmp_path: Path,
) -> None:
    # The word once in a file of 1 to 10 lines: the shorter, the better it ranks.
    tree = Tree(tmp_path, {f"g{i}.py": "wombat = 1\n" + "x = 1\n" * i for i in range(10)})
    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        whole = await actor.handle(SearchTree("wombat", 20))
        assert isinstance(whole, TreeSearched)
        order = [r.path for r in whole.results]  # type: ignore[attr-defined]
        for p in order[:5]:
            (tree.root / p).unlink()  # gone since the index was made: not refreshed here
        out = await actor.handle(SearchTree("wombat", 2))
        three = await actor.handle(SearchTree("wombat", 3))
    assert sorted(order) == [f"g{i}.py" for i in range(10)]
    assert isinstance(out, TreeSearched)
    assert isinstance(three, TreeSearched)
    # 2 x 2 + 4 = 8 looked at: the 5 gone are said, the next 2 shown.
    assert [r.path for r in out.results] == order[5:7]  # type: ignore[attr-defined]
    assert out.gone == tuple(order[:5])
    assert (out.files, out.matched) == (10, 10)
    assert [r.path for r in three.results] == order[5:8]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_search_under_a_budget_charges_what_it_reads_and_nothing_for_a_file_gone(
    tmp_path: Path,
) -> None:
    contents: dict[str, str | bytes] = {f"q{i}.py": f"quoll = {i}\n" for i in range(3)}
    tree = Tree(tmp_path, contents)
    tree.budget = Budget(bytes=1000)
    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        used = tree.budget.bytes_used  # the build's reads
        (tree.root / "q1.py").unlink()
        out = await actor.handle(SearchTree("quoll", 5))
    assert isinstance(out, TreeSearched)
    assert sorted(r.path for r in out.results) == ["q0.py", "q2.py"]  # type: ignore[attr-defined]
    assert out.gone == ("q1.py",)
    assert tree.budget.bytes_used - used == 2 * len("quoll = 0\n")


# -- what a read finds ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_file_of_exactly_1_mib_is_indexed_and_one_byte_more_is_too_large(
    tmp_path: Path,
) -> None:
    line = "numbat = 1\n"
    whole = line * (indexer.MAX_FILE_BYTES // len(line))
    whole += "#" * (indexer.MAX_FILE_BYTES - len(whole) - 1) + "\n"
    assert len(whole) == indexer.MAX_FILE_BYTES == 1 << 20
    tree = Tree(tmp_path, {"at.txt": whole, "past.txt": whole + "\n"})
    async with tree.session() as actor:
        done = await index(actor, tree.stat(*tree.all()))
        hits = await found(actor, "numbat")
    assert {f.stat.path: f.skip for f in done.found} == {"at.txt": None, "past.txt": "too_large"}
    assert hits == ["at.txt"]


@pytest.mark.asyncio
async def test_files_under_a_root_that_cannot_be_opened_are_said_gone(tree: Tree) -> None:
    stats = tree.stat(*tree.all())
    async with tree.session() as actor:
        tree.root.rename(tree.root.with_name("moved"))
        done = await index(actor, stats)
    assert [(f.stat.path, f.key, f.skip) for f in done.found] == [
        (st.path, None, "gone") for st in stats
    ]


@pytest.mark.asyncio
async def test_a_read_held_in_the_guard_past_the_deadline_is_left_and_the_call_answers(
    tree: Tree,
) -> None:
    """A checker that answers for one file only when let go: the call does not wait for it past
    the reads' share of a 2 s bound; the file is not read, and the next call reads it."""
    let_go = asyncio.Event()

    async def slow(rel: str, size: int) -> CheckResult:
        if rel == name(5):
            await let_go.wait()
        return CheckResult.allow()

    tree.checkers.append(slow)
    async with tree.session() as actor:
        cut = await asyncio.wait_for(index(actor, tree.stat(*tree.all()), seconds=2.0), 60.0)
        let_go.set()
        rest = await index(actor, tree.stat(*(p for p in tree.all() if p not in keys(cut))))
        hits = [await found(actor, WORDS[i]) for i in range(N)]
    assert name(5) not in read_paths(cut)
    assert name(5) in read_paths(rest)
    assert sorted(read_paths(cut) + read_paths(rest)) == tree.all()
    assert hits == [[name(i)] for i in range(N)]


@pytest.mark.asyncio
async def test_a_merge_that_failed_while_no_call_waited_leaves_the_next_changes_applied(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 4)
    held = Held()

    def fails(view: TreeIndex) -> TreeIndex:
        raise MemoryError("no room to merge")

    async with tree.session() as actor:
        await index(actor, tree.stat(*tree.all()))
        settle_at_deadline(monkeypatch)  # the merge is left to go on after the answer
        monkeypatch.setattr(indexer, "_compacted", held.hold(fails))
        await index(actor, change(tree, range(10), "v2"))
        held.go.set()
        assert actor._compacting is not None
        await asyncio.wait({actor._compacting})  # failed, and no call has looked at it yet
        (tree.root / name(20)).write_text("def after_a_failed_merge():\n    pass\n")
        after = await index(actor, tree.stat(name(20)))
        hits = [await found(actor, w) for w in ("after_a_failed_merge", WORDS[20], WORDS[3])]
    assert read_paths(after) == [name(20)]
    assert hits == [[name(20)], [], [name(3)]]
