"""The indexer's reads at their edges (actors/_batches.py), called as the indexer calls them.

Each test reads a real repository's files through the real guard, with a real process pool where
the pool matters, and looks at what a caller sees: the files analysed and where, the files said
not read and why, what was read before the deadline.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import _batches
from nodwyn_retrieval.actors._batches import read_and_analyze
from nodwyn_retrieval.actors._work import Analyzed, Contention
from nodwyn_retrieval.actors.messages import FileStat, TreeFound
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.guard import default_guard

from tests.support import make_repo


def _files(n: int) -> dict[str, str | bytes]:
    return {f"m{i:03}.py": f"def helper_{i}():\n    return {i}\n" for i in range(n)}


def _stats(root: Path) -> list[FileStat]:
    out = []
    for p in sorted(q for q in root.iterdir() if q.is_file()):
        st = os.lstat(p)
        out.append(FileStat(p.name, st.st_size, st.st_mtime_ns, st.st_ino))
    return out


async def _read(
    tmp_path: Path,
    root: Path,
    stats: list[FileStat],
    pool: ProcessPool | None,
    seconds: float = 60.0,
) -> tuple[list[tuple[FileStat, Analyzed, bytes]], list[TreeFound]]:
    found: list[TreeFound] = []
    deadline = asyncio.get_running_loop().time() + seconds
    got = await read_and_analyze(
        stats, deadline, found,
        root=root, guard=default_guard(root, data_dir=tmp_path / "data").without_asking(),
        pool=pool, chunks_dir=str(tmp_path / "chunks"), contention=Contention(lambda: 1.0),
    )  # fmt: skip
    return got, found


@pytest.mark.asyncio
@pytest.mark.parametrize(("above", "pooled"), [(0, True), (1, False)])
async def test_a_refresh_of_exactly_the_pool_threshold_is_analysed_in_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, above: int, pooled: bool
) -> None:
    """The threshold is the smallest refresh sent to the pool: at it, the workers analyse the
    files; one byte short of it (the threshold a byte more than the files), this process does."""
    root = make_repo(tmp_path / "repo", _files(6))
    stats = _stats(root)
    total = sum(st.size for st in stats)
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", total + above)
    pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    try:
        got, found = await _read(tmp_path, root, stats, pool)
        assert bool(pool.pids) is pooled
    finally:
        await pool.close()
    assert found == []
    assert [st.path for st, _, _ in got] == [st.path for st in stats]
    assert all(a.skip is None and a.key for _, a, _ in got)


@pytest.mark.asyncio
async def test_a_file_the_guard_denies_is_said_refused_and_not_analysed(tmp_path: Path) -> None:
    """A denied file (a denylist pattern) is a refusal, not a question nobody was asked: it is
    said ``refused``, and only the others are analysed."""
    root = make_repo(tmp_path / "repo", _files(3))
    stats = _stats(root)
    found: list[TreeFound] = []
    guard = default_guard(root, data_dir=tmp_path / "data", deny=["m001.py"]).without_asking()
    got = await read_and_analyze(
        stats, asyncio.get_running_loop().time() + 60.0, found,
        root=root, guard=guard, pool=None, chunks_dir=str(tmp_path / "chunks"),
        contention=Contention(lambda: 1.0),
    )  # fmt: skip
    assert [(f.stat.path, f.key, f.skip) for f in found] == [("m001.py", None, "refused")]
    assert [st.path for st, _, _ in got] == ["m000.py", "m002.py"]


def _held_pool(monkeypatch: pytest.MonkeyPatch, until: dict[str, float]) -> ProcessPool:
    """A pool of one worker whose batch of each file named is sent only at its loop time."""
    pool = ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"])
    real_run = pool.run

    async def run(fn: Any, paths: Any, *args: Any, **kw: Any) -> Any:
        at = max(until.get(p, 0.0) for p in paths)
        await asyncio.sleep(max(0.0, at - asyncio.get_running_loop().time()))
        return await real_run(fn, paths, *args, **kw)

    monkeypatch.setattr(pool, "run", run)
    return pool


def _nothing_after_the_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work after the reads priced at nothing, a batch a file: the reads' wait for the pool
    ends at the deadline itself."""
    for constant in ("POST_FIXED_SECONDS", "POST_SHARE", "POST_SECONDS_PER_BYTE",
                     "BUILD_POST_SECONDS_PER_BYTE"):  # fmt: skip
        monkeypatch.setattr(_batches, constant, 0.0)
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 1)


@pytest.mark.asyncio
async def test_a_batch_back_in_the_last_second_before_the_deadline_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads wait for the pool up to the deadline, not short of it: of two batches, the
    first back 0.9 s before the deadline and the second 0.4 s before it, both files are
    analysed; none is left for the next refresh."""
    root = make_repo(tmp_path / "repo", _files(2))
    stats = _stats(root)
    _nothing_after_the_reads(monkeypatch)
    seconds = 3.0
    start = asyncio.get_running_loop().time()
    pool = _held_pool(
        monkeypatch, {"m000.py": start + seconds - 0.9, "m001.py": start + seconds - 0.4}
    )
    try:
        await pool.start()  # the worker ready, so a batch takes milliseconds once sent
        got, found = await _read(tmp_path, root, stats, pool, seconds)
    finally:
        await pool.close()
    assert found == []
    assert [st.path for st, _, _ in got] == ["m000.py", "m001.py"]


@pytest.mark.asyncio
async def test_the_reads_wait_for_the_pool_no_longer_than_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that would come back 0.8 s past the deadline is not waited for: the call answers
    at the deadline, its file not analysed (read by the next refresh)."""
    root = make_repo(tmp_path / "repo", _files(1))
    stats = _stats(root)
    _nothing_after_the_reads(monkeypatch)
    seconds = 2.0
    loop = asyncio.get_running_loop()
    start = loop.time()
    pool = _held_pool(monkeypatch, {"m000.py": start + seconds + 0.8})
    try:
        got, _ = await _read(tmp_path, root, stats, pool, seconds)
        ended = loop.time() - start
    finally:
        await pool.close()
    assert got == []
    assert ended < seconds + 0.4, ended
