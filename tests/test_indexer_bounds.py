"""The indexer's work after the reads stops at the deadline, and the next call finishes it (§5).

After a refresh's reads the indexer stores the records, applies them to the index (a rebuild of
the delta), merges the delta into a new base and writes the snapshot. On a big tree under load
each can take longer than what is left of the bound. Each stops at the deadline: a file whose
record was not stored or applied in time is not in the answer (``not_read``: read again by the
next refresh, its record already stored), a record a new session had no time to apply is said
as not seen yet, and the merge and the snapshot go on after the answer, taken by the next call
or the session's end. Nothing is lost and nothing is indexed twice.

The stop is made certain without timing: the indexer's clock (its module's ``time``) jumps an
hour while one phase runs, and a merge or a snapshot write is held by an event until the test
lets it go.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import indexer
from nodwyn_retrieval.actors.indexer import IndexerActor, load_snapshot
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.retrieval.tree import TreeIndex
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo, shifted_time

N = 40
_C = "bcdfghjklmnpqrtvwz"
# Words no stemmer takes one for another: a consonant pair between a fixed head and tail.
WORDS = [f"quok{_C[i // len(_C)]}{_C[i % len(_C)]}ix" for i in range(N)]


def files(n: int = N, tag: str = "") -> dict[str, str | bytes]:
    return {f"m{i:03}.py": f"def {WORDS[i]}():\n    return {i!r}  # {tag}\n" for i in range(n)}


class Clock:
    """The indexer's clock, made to jump an hour while one of its phases runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        self.jumps = 0
        self.monkeypatch = monkeypatch
        clock = self

        monkeypatch.setattr(indexer, "time", shifted_time(lambda: clock.offset))

    def during(self, name: str) -> None:
        """Jump while IndexerActor.<name> runs (every call of it from now on)."""
        real = getattr(IndexerActor, name)
        clock = self

        if asyncio.iscoroutinefunction(real):

            async def jumped_async(*a: Any, **kw: Any) -> Any:
                clock.offset, clock.jumps = 3600.0, clock.jumps + 1
                try:
                    return await real(*a, **kw)
                finally:
                    clock.offset = 0.0

            self.monkeypatch.setattr(IndexerActor, name, jumped_async)
            return

        def jumped(*a: Any, **kw: Any) -> Any:
            clock.offset, clock.jumps = 3600.0, clock.jumps + 1
            try:
                return real(*a, **kw)
            finally:
                clock.offset = 0.0

        self.monkeypatch.setattr(IndexerActor, name, jumped)

    def stop(self) -> None:
        self.monkeypatch.undo()


def settle_at_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call reaches its deadline as it begins to wait for the merge and the snapshot (a
    jump of the indexer's clock during the wait would move its deadline with it). A call
    without a bound is taken as one at its deadline too: only the session's end waits."""
    real = IndexerActor._settle

    async def at_deadline(self: IndexerActor, deadline: float | None) -> str | None:
        now = asyncio.get_running_loop().time()
        return await real(self, now if deadline is None else min(deadline, now))

    monkeypatch.setattr(IndexerActor, "_settle", at_deadline)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    # A part of at most 2 documents is applied whatever the time: the rest of a call is cut.
    monkeypatch.setattr(indexer, "MIN_APPLY_DOCS", 2)
    return Clock(monkeypatch)


async def open_engine(repo: Path, dirs: tuple[Path, Path], events: list[dict[str, Any]]) -> Engine:
    return await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1
    )


async def hits(engine: Engine, word: str) -> list[str]:
    out = await engine.index_search(word, "repo", limit=20)
    return [h["path"] for h in out.hits]


def stored(repo: Path, data: Path) -> dict[str, Any]:
    m = load_manifest(manifest_path(project_dirs(data, project_key(repo)).trees, repo))
    assert m is not None
    return dict(m.entries)


def snapshot_of(repo: Path, data: Path) -> Path:
    return manifest_path(project_dirs(data, project_key(repo)).trees, repo).with_suffix(".snap")


async def every_file_found_once(engine: Engine, n: int = N) -> None:
    for i in range(n):
        assert await hits(engine, WORDS[i]) == [f"m{i:03}.py"], WORDS[i]


def reads(events: list[dict[str, Any]]) -> list[int]:
    return [e["read"] for e in events if e["kind"] == "index.update"]


# -- storing and applying what was read ---------------------------------------------------------


# What a stopped call applied: the part of MIN_APPLY_DOCS (2) documents, one a file here. Storing
# looks before each record and stops past the part (3 stored, all applied); applying keeps the
# files whose delta fits (2). "estimate": no clock jumps, a document is estimated at 100 s.
APPLIED = {"_store_all": 3, "_fit": 2, "estimate_store": 3, "estimate_fit": 2}


@pytest.mark.asyncio
@pytest.mark.parametrize("phase", list(APPLIED))
async def test_an_update_stopped_after_its_reads_says_what_is_left_and_the_next_finishes(
    tmp_path: Path,
    dirs: tuple[Path, Path],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    phase: str,
) -> None:
    repo = make_repo(tmp_path / "repo", {**files(), "z.bin": b"\0one"})
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        first = (await engine.index_update()).summary  # a first build: the builder's
        (repo / "m000.py").write_text("def changed_once():\n    pass\n")
        for i in range(1, N):
            (repo / f"m{i:03}.py").write_text(f"def {WORDS[i]}():\n    return {i + 1!r}\n")
        (repo / "z.bin").write_bytes(b"\0two")  # read last: looked at past the stop
        if phase.startswith("estimate"):
            monkeypatch.setattr(IndexerActor, "_per_doc", lambda self: 100.0)
            if phase == "estimate_store":  # applying keeps what was stored
                monkeypatch.setattr(IndexerActor, "_fit", lambda self, ch, until: (ch, []))
        else:
            clock.during(phase)
        cut = (await engine.index_update()).summary
        clock.stop()
        rest = (await engine.index_update()).summary
        after = (await engine.index_update()).summary
        for i in range(1, N):
            assert await hits(engine, WORDS[i]) == [f"m{i:03}.py"]
        assert await hits(engine, "changed_once") == ["m000.py"]
        assert await hits(engine, WORDS[0]) == []
    assert clock.jumps == (0 if phase.startswith("estimate") else 1)
    assert (first["files"], first["read"], first["partial"]) == (N, N + 1, False)
    # The call answered with what it applied in time and says the rest was not read (the binary
    # file, which costs nothing to apply, was looked at all the same).
    applied = APPLIED[phase]
    assert (cut["read"], cut["not_read"]) == (applied + 1, N - applied)
    assert cut["skipped"]["binary"] == 1
    assert cut["partial"] is True
    assert cut["files"] == N
    # The next call read the rest, once each: no file lost, none read twice.
    assert (rest["read"], rest["not_read"], rest["partial"]) == (N - applied, 0, False)
    assert (after["read"], after["files"]) == (0, N)
    assert sum(reads(events)) == (N + 1) + (applied + 1) + (N - applied)


@pytest.mark.asyncio
async def test_a_new_session_with_records_to_apply_past_the_deadline_says_them_not_seen(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", files())
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
    snapshot_of(repo, dirs[0]).unlink()  # every record is loaded from the chunk store
    clock = Clock(monkeypatch)
    monkeypatch.setattr(indexer, "MIN_APPLY_DOCS", 2)
    later: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, later) as engine:
        clock.during("_fit")
        cut = await engine.index_search(WORDS[N - 1], "repo")
        clock.stop()
        went_on = await engine.index_search(WORDS[N - 1], "repo")
        up = (await engine.index_update()).summary
        await every_file_found_once(engine)
    # Loaded, not applied in time: said as not seen; the next search applied them, and no file
    # was read again for it.
    assert cut.header["partial"] is True
    assert cut.header["files"] <= 2
    assert cut.header["not_seen"] >= N - 2
    assert went_on.header["files"] == N
    assert (went_on.header["partial"], went_on.header["not_seen"]) == (False, 0)
    assert [h["path"] for h in went_on.hits] == [f"m{N - 1:03}.py"]
    assert (up["files"], up["read"], up["not_seen"]) == (N, 0, 0)
    assert sum(reads(later)) == 0


# -- the merge and the snapshot ------------------------------------------------------------------


class Held:
    """A merge (TreeIndex.compact in the indexer's thread) or a snapshot write held until let go."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.started = threading.Event()

    def hold(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def held(*a: Any, **kw: Any) -> Any:
            self.started.set()
            if not self.go.wait(30.0):  # pragma: no cover - the test lets it go
                raise RuntimeError("never let go")
            return real(*a, **kw)

        return held


def big_change(repo: Path, n: int, tag: str) -> None:
    for i in range(n):
        (repo / f"m{i:03}.py").write_text(f"def {WORDS[i]}():\n    return {tag!r}\n")


@pytest.mark.asyncio
async def test_a_merge_not_done_by_the_deadline_goes_on_and_a_later_call_takes_it(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", files())
    monkeypatch.setattr(TreeIndex, "COMPACT_DOCS", 4)  # this delta is merged
    events: list[dict[str, Any]] = []
    held = Held()
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
        snap = load_snapshot(snapshot_of(repo, dirs[0]))
        assert snap is not None
        big_change(repo, N // 2, "v2")  # half: the rest of the base stays, so a merge is due
        settle_at_deadline(monkeypatch)
        monkeypatch.setattr(indexer, "_compacted", held.hold(indexer._compacted))
        up = (await engine.index_update()).summary
        assert await asyncio.to_thread(held.started.wait, 10.0)  # goes on after the answer
        # The merge is held: the call answered all the same, every file indexed (in the delta).
        assert (up["files"], up["read"], up["not_read"], up["partial"]) == (N, N // 2, 0, False)
        await every_file_found_once(engine)
        # The snapshot is still the first build's: the merge that would replace it is not done.
        again = load_snapshot(snapshot_of(repo, dirs[0]))
        assert again is not None
        assert again.keys == snap.keys
        # A file changed while the merge runs: taken on when the merge's result is.
        (repo / "m001.py").write_text("def while_merging():\n    pass\n")
        mid = await hits(engine, "while_merging")
        held.go.set()
        monkeypatch.undo()
        await asyncio.sleep(0)
        up2 = (await engine.index_update()).summary
        assert await hits(engine, "while_merging") == ["m001.py"]
        assert await hits(engine, WORDS[1]) == []
        for i in (0, *range(2, N)):
            assert await hits(engine, WORDS[i]) == [f"m{i:03}.py"]
    assert mid == ["m001.py"]
    assert (up2["read"], up2["files"]) == (0, N)
    # The session's end wrote the merged index: a new session reads and loads nothing.
    final = load_snapshot(snapshot_of(repo, dirs[0]))
    assert final is not None
    assert set(final.files) == set(files())
    later: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, later) as engine:
        out = await engine.index_search("while_merging", "repo")
    assert [h["path"] for h in out.hits] == ["m001.py"]
    assert (out.header["not_seen"], out.header["partial"]) == (0, False)
    assert sum(reads(later)) == 0


@pytest.mark.asyncio
async def test_a_snapshot_not_written_by_the_deadline_is_written_after_the_answer(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", files())
    held = Held()
    monkeypatch.setattr(indexer, "write_atomic", held.hold(indexer.write_atomic))
    settle_at_deadline(monkeypatch)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        up = (await engine.index_update()).summary
        assert await asyncio.to_thread(held.started.wait, 10.0)  # goes on after the answer
        assert load_snapshot(snapshot_of(repo, dirs[0])) is None  # held: not written yet
        await every_file_found_once(engine)
        held.go.set()  # the session's end waits for it
    assert (up["files"], up["read"], up["saved"]) == (N, N, True)
    snap = load_snapshot(snapshot_of(repo, dirs[0]))
    assert snap is not None
    assert set(snap.files) == set(files())
    assert set(stored(repo, dirs[0])) == set(files())


# -- a process killed while the merge or the snapshot is under way ------------------------------

CHILD = r"""
import asyncio, json, sys, threading
from pathlib import Path
from nodwyn_retrieval.actors import indexer
from nodwyn_retrieval.retrieval.tree import TreeIndex
from nodwyn_retrieval.entry import Engine

args = json.loads(sys.argv[1])
marker = Path(args["marker"])
TreeIndex.COMPACT_DOCS = 4

def held(*a, **kw):
    marker.write_text("held")
    threading.Event().wait()  # never let go: the process is killed here

async def main():
    repo = Path(args["repo"])
    async with await Engine.open(repo, data_dir=args["data"], config_dir=args["config"],
                                 workers=1) as engine:
        await engine.index_update()
        for i in range(args["n"]):
            (repo / f"m{i:03}.py").write_text(f"def felled{args['words'][i]}():\n    pass\n")
        if args["what"] == "merge":
            indexer._compacted = held
            # The merge is past the deadline: not waited for.
            real = indexer.IndexerActor._settle
            async def settle(self, deadline):
                return await real(self, asyncio.get_running_loop().time() - 1.0)
            indexer.IndexerActor._settle = settle
        else:
            indexer.write_atomic = held
            indexer.SNAPSHOT_SECONDS_PER_POSTING = 1e9  # the write never fits: not waited for
        summary = (await engine.index_update()).summary
        print(json.dumps(summary), flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def run_and_kill(args: dict[str, Any], marker: Path) -> tuple[dict[str, Any], int]:
    """Run CHILD until its merge or snapshot write is held, then kill it: its update's summary
    and its exit status."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(args)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        summary = json.loads(proc.stdout.readline())
        end = time.monotonic() + 300
        while not marker.exists() and time.monotonic() < end:  # under way, and held
            time.sleep(0.05)
        assert marker.exists()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return summary, proc.returncode


@pytest.mark.asyncio
@pytest.mark.parametrize("what", ["merge", "snapshot"])
async def test_a_process_killed_while_its_merge_or_snapshot_goes_on_leaves_an_index_to_use(
    tmp_path: Path, dirs: tuple[Path, Path], what: str
) -> None:
    repo = make_repo(tmp_path / "repo", files())
    marker = tmp_path / "held"
    half = N // 2
    args = {"repo": str(repo), "data": str(dirs[0]), "config": str(dirs[1]),
            "marker": str(marker), "n": half, "what": what, "words": WORDS}  # fmt: skip
    summary, status = await asyncio.to_thread(run_and_kill, args, marker)
    assert status == -signal.SIGKILL
    # What the update said was done is done: every file read and indexed.
    assert (summary["files"], summary["read"], summary["partial"]) == (N, half, False)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        first = await engine.index_search(f"felled{WORDS[0]}", "repo")
        for i in range(N):
            word = f"felled{WORDS[i]}" if i < half else WORDS[i]
            assert await hits(engine, word) == [f"m{i:03}.py"], word
        up = (await engine.index_update()).summary
    # The next session started from the snapshot the first build left and the records the
    # killed one stored: nothing read again, nothing left.
    assert [h["path"] for h in first.hits] == ["m000.py"]
    assert (first.header["partial"], first.header["not_seen"]) == (False, 0)
    assert sum(reads(events)) == 0
    assert (up["files"], up["read"], up["not_seen"]) == (N, 0, 0)
