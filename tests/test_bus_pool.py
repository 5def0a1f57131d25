"""The process pool: lazy start, deadlines, errors that cross back, crash recovery, close.

Real worker processes throughout; the functions they run live in tests/_pool_workers.py.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.bus.pool import _call
from nodwyn_retrieval.errors import (
    ActorDead,
    BadInput,
    DeadlineExceeded,
    WorkerCrashed,
    WorkerError,
)

from tests import _pool_workers as w


@pytest_asyncio.fixture
async def pool() -> AsyncIterator[ProcessPool]:
    """A one-worker pool, closed after the test so that no process outlives it."""
    async with ProcessPool(max_workers=1) as pool:
        yield pool


async def until_busy(pool: ProcessPool) -> None:
    """Let a run just started as a task reach its worker."""
    for _ in range(10):
        await asyncio.sleep(0)
    assert repr(pool).endswith(" 1 busy>")


# --- starting ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_pool_starts_no_process_until_used(pool: ProcessPool) -> None:
    assert repr(pool) == "<ProcessPool not started, max_workers=1, 0 busy>"
    assert pool.pids == ()
    assert await pool.run(w.square, 7) == 49
    assert len(pool.pids) == 1
    assert pool.pids == (await pool.run(w.worker_pid),)  # the same worker serves again
    assert repr(pool) == "<ProcessPool started, max_workers=1, 0 busy>"


@pytest.mark.asyncio
async def test_work_runs_in_another_process(pool: ProcessPool) -> None:
    assert await pool.run(w.worker_pid) != os.getpid()


@pytest.mark.asyncio
async def test_a_worker_runs_the_librarys_entry_point_not_the_callers_script(
    pool: ProcessPool,
) -> None:
    main = await pool.run(w.main_module)
    assert main == ("__main__", None)  # the -c program, with no file to run again
    with pytest.raises(BadInput, match=r"is defined in the running script"):
        await pool.run(w.defined_in_main())


@pytest.mark.asyncio
async def test_a_worker_sees_the_callers_import_path(pool: ProcessPool) -> None:
    assert await pool.run(w.import_path) == [os.getcwd() if p == "" else p for p in sys.path]


@pytest.mark.asyncio
async def test_what_a_worker_prints_does_not_break_its_answers(pool: ProcessPool) -> None:
    assert await pool.run(w.print_and_square, 9) == 81
    assert await pool.run(w.square, 2) == 4


def test_the_default_is_one_worker_per_cpu() -> None:
    assert ProcessPool().max_workers == (os.cpu_count() or 1)


def test_max_workers_must_be_at_least_one() -> None:
    with pytest.raises(BadInput, match=r"^max_workers must be at least 1, got 0$"):
        ProcessPool(max_workers=0)


@pytest.mark.asyncio
async def test_a_function_that_cannot_travel_is_refused_before_any_process_starts(
    pool: ProcessPool,
) -> None:
    def local(x: int) -> int:
        return x

    with pytest.raises(
        BadInput,
        match=(
            r"^test_a_function_that_cannot_travel_is_refused_before_any_process_starts"
            r"\.<locals>\.local cannot be sent to a worker process; pass an importable"
            r" top-level function \(.+\)$"
        ),
    ):
        await pool.run(local, 1)
    assert repr(pool).startswith("<ProcessPool not started,")


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_library_error_in_a_worker_comes_back_as_itself(pool: ProcessPool) -> None:
    with pytest.raises(BadInput, match=r"^no such scope$") as raised:
        await pool.run(w.raise_bad_input, "no such scope")
    assert type(raised.value) is BadInput


@pytest.mark.asyncio
async def test_any_other_error_in_a_worker_comes_back_as_worker_error(pool: ProcessPool) -> None:
    with pytest.raises(WorkerError, match=r"^ValueError: bad value$") as raised:
        await pool.run(w.raise_value_error, "bad value")
    assert type(raised.value) is WorkerError


@pytest.mark.asyncio
async def test_an_error_that_cannot_pickle_still_comes_back_as_worker_error(
    pool: ProcessPool,
) -> None:
    with pytest.raises(WorkerError, match=r"^_Unpicklable: needs two$"):
        await pool.run(w.raise_unpicklable)
    assert await pool.run(w.square, 3) == 9  # and the pool was not broken by it


@pytest.mark.asyncio
async def test_a_sys_exit_in_a_worker_comes_back_as_worker_error(pool: ProcessPool) -> None:
    with pytest.raises(WorkerError, match=r"^SystemExit: 4$"):
        await pool.run(w.call_sys_exit)
    assert await pool.run(w.square, 3) == 9


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "death",
    [
        w.exit_abruptly,
        pytest.param(
            w.kill_self,
            marks=pytest.mark.skipif(sys.platform == "win32", reason="no SIGKILL on Windows"),
        ),
    ],
)
async def test_a_worker_that_dies_raises_worker_crashed_and_the_pool_recovers(
    pool: ProcessPool, death: object
) -> None:
    name = getattr(death, "__name__", "")
    with pytest.raises(WorkerCrashed, match=rf"^a worker process died while running {name}$"):
        await pool.run(death)  # type: ignore[arg-type]
    assert await pool.run(w.square, 5) == 25


# --- deadlines ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_work_not_started_by_the_deadline_is_not_started(
    pool: ProcessPool, tmp_path: Path
) -> None:
    release, marker = tmp_path / "release", tmp_path / "marker"
    blocker = asyncio.create_task(pool.run(w.wait_for, str(release)))
    await until_busy(pool)
    deadline = asyncio.get_running_loop().time() + 0.1
    with pytest.raises(DeadlineExceeded, match=r"^mark was not started before its deadline$"):
        await pool.run(w.mark, str(marker), deadline=deadline)
    release.touch()
    assert await blocker == "released"
    assert await pool.run(w.square, 2) == 4  # the only worker is past anything queued before
    assert not marker.exists()


@pytest.mark.asyncio
async def test_a_deadline_already_passed_starts_nothing(pool: ProcessPool, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    deadline = asyncio.get_running_loop().time() - 1
    with pytest.raises(DeadlineExceeded, match=r"^mark was not started before its deadline$"):
        await pool.run(w.mark, str(marker), deadline=deadline)
    assert repr(pool).startswith("<ProcessPool not started,")
    assert not marker.exists()


@pytest.mark.asyncio
async def test_the_caller_does_not_wait_for_running_work_past_its_deadline(
    pool: ProcessPool, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    await pool.run(w.square, 1)  # a worker is up, so the work begins well before its deadline
    deadline = asyncio.get_running_loop().time() + 0.2
    with pytest.raises(DeadlineExceeded, match=r"^wait_for did not finish before its deadline$"):
        await pool.run(w.wait_for, str(release), deadline=deadline)
    release.touch()
    assert await pool.run(w.square, 6) == 36


def test_a_worker_does_not_begin_work_whose_deadline_passed_while_queued(tmp_path: Path) -> None:
    # The worker's half of the rule, run in this process: the executor may have queued the work
    # for a worker before its deadline, and the worker still refuses to begin it late.
    marker = tmp_path / "marker"
    with pytest.raises(DeadlineExceeded, match=r"^mark was not started before its deadline$"):
        _call(w.mark, (str(marker),), time.monotonic() - 1)
    assert not marker.exists()
    assert _call(w.mark, (str(marker),), time.monotonic() + 60) == "marked"


# --- closing -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_close_is_idempotent_and_later_runs_fail() -> None:
    pool = ProcessPool(max_workers=1)
    assert await pool.run(w.square, 4) == 16
    await pool.close()
    await pool.close()
    assert repr(pool) == "<ProcessPool closed, max_workers=1, 0 busy>"
    with pytest.raises(ActorDead, match=r"^the process pool is closed$"):
        await pool.run(w.square, 4)


@pytest.mark.asyncio
async def test_no_worker_process_outlives_close() -> None:
    async with ProcessPool(max_workers=2) as pool:
        await asyncio.gather(pool.run(w.wait_a_little), pool.run(w.wait_a_little))
        pids = pool.pids
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):  # ended and reaped
            os.kill(pid, 0)


@pytest.mark.asyncio
async def test_the_repr_shows_the_live_state(tmp_path: Path) -> None:
    release = tmp_path / "release"
    pool = ProcessPool(max_workers=2)
    assert repr(pool) == "<ProcessPool not started, max_workers=2, 0 busy>"
    blocker = asyncio.create_task(pool.run(w.wait_for, str(release)))
    await until_busy(pool)
    assert repr(pool) == "<ProcessPool started, max_workers=2, 1 busy>"
    release.touch()
    await blocker
    await pool.close()
    assert repr(pool) == "<ProcessPool closed, max_workers=2, 0 busy>"


# --- work queued ahead in a busy worker ------------------------------------------------------


@pytest.mark.asyncio
async def test_with_ahead_a_busy_worker_is_sent_the_next_work_and_answers_each_in_order(
    tmp_path: Path,
) -> None:
    """One worker, one piece ahead: while it is held by the first work, the second is already
    in its pipe (two in flight, where without ahead the second waits here), and every answer
    goes to its own caller."""
    release = tmp_path / "release"
    async with ProcessPool(max_workers=1, ahead=1) as pool:
        first = asyncio.create_task(pool.run(w.wait_for, str(release)))
        await until_busy(pool)
        second = asyncio.create_task(pool.run(w.square, 7))
        for _ in range(200):
            if sum(x.inflight for x in pool._workers) == 2:
                break
            await asyncio.sleep(0.01)
        assert sum(x.inflight for x in pool._workers) == 2
        assert not second.done()  # it waits in the pipe behind the first
        release.touch()
        assert await first == "released"
        assert await second == 49
        got = await asyncio.gather(*(pool.run(w.square, i) for i in range(30)))
        assert got == [i * i for i in range(30)]
        assert len(pool.pids) == 1
    async with ProcessPool(max_workers=1) as pool:  # without ahead: the second waits here
        release.unlink()
        first = asyncio.create_task(pool.run(w.wait_for, str(release)))
        await until_busy(pool)
        second = asyncio.create_task(pool.run(w.square, 7))
        await asyncio.sleep(0.3)
        assert sum(x.inflight for x in pool._workers) == 1
        release.touch()
        assert (await first, await second) == ("released", 49)


@pytest.mark.asyncio
async def test_with_ahead_a_worker_that_dies_fails_the_work_queued_behind_it_and_the_pool_recovers(
) -> None:
    async with ProcessPool(max_workers=1, ahead=1) as pool:
        await pool.run(w.square, 1)
        got = await asyncio.gather(
            pool.run(w.kill_self), pool.run(w.square, 3), return_exceptions=True
        )
        assert [type(g) for g in got] == [WorkerCrashed, WorkerCrashed]
        assert await pool.run(w.square, 5) == 25


def test_ahead_must_be_at_least_zero() -> None:
    with pytest.raises(BadInput, match="ahead must be at least 0"):
        ProcessPool(1, ahead=-1)
