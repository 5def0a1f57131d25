"""A worker's own process settings: numpy's BLAS held to one thread unless the person chose its
threads, the preload frozen out of the cyclic collector, and cycles still freed over many
batches (the higher threshold does not let memory grow without bound)."""

from __future__ import annotations

import pytest
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.bus._worker import GC_THRESHOLD

from tests import _pool_workers as w


@pytest.mark.asyncio
async def test_a_worker_holds_blas_to_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    async with ProcessPool(max_workers=1) as pool:
        assert await pool.run(w.blas_env) == {"OPENBLAS_NUM_THREADS": "1", "GOTO_NUM_THREADS": None}


@pytest.mark.asyncio
async def test_a_worker_keeps_the_persons_blas_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("GOTO_NUM_THREADS", "3")
    async with ProcessPool(max_workers=1) as pool:
        assert await pool.run(w.blas_env) == {"OPENBLAS_NUM_THREADS": None, "GOTO_NUM_THREADS": "3"}


@pytest.mark.asyncio
async def test_a_worker_freezes_its_preload_and_collects_less_often() -> None:
    async with ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"]) as pool:
        threshold, frozen = await pool.run(w.gc_state)
    assert threshold == GC_THRESHOLD
    assert frozen > 10_000  # the preloaded modules' objects


@pytest.mark.asyncio
async def test_many_batches_of_cycles_do_not_grow_a_worker_without_bound() -> None:
    # 200 batches of 200 cycles of 64 KiB: 2.5 GiB were they never freed; the collector frees
    # them within a batch or the next, so the peak stays within a few batches' worth.
    async with ProcessPool(max_workers=1) as pool:
        first = await pool.run(w.make_cycles, 200)
        for _ in range(199):
            last = await pool.run(w.make_cycles, 200)
    assert last - first < 256 * 1024, (first, last)


def test_a_workers_preload_leaves_the_actors_runtime_and_the_locks_out() -> None:
    """What a build's worker imports as it starts (the pool's preload): the analysis, redaction,
    the no-link reads and the chunk store, not asyncio, the actors' runtime, filelock, the log's
    reader or the guard's decisions, which cost a new worker tens of milliseconds before its
    first batch; nor numpy.ma, which numpy imports at the first np.unique without counts."""
    import json
    import subprocess
    import sys

    code = (
        "import sys, json, tempfile; import numpy, nodwyn_retrieval.actors._work as w; "
        "w.analyze_packed([('a.py', b'def load_config(path):\\n    return path\\n')], "
        "tempfile.mkdtemp()); print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert "nodwyn_retrieval.guard.redact" in loaded
    assert "nodwyn_retrieval.store.chunkstore" in loaded
    for heavy in (
        "asyncio",
        "filelock",
        "nodwyn_retrieval.bus.actor",
        "nodwyn_retrieval.store.log",
        "nodwyn_retrieval.guard.guard",
        "numpy.ma",
    ):
        assert heavy not in loaded, heavy
