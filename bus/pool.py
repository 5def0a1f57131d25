"""A process pool for CPU-bound work, with deadlines and the library's errors.

It wraps :class:`concurrent.futures.ProcessPoolExecutor` to add what the callers rely on:

* Nothing starts until the first :meth:`ProcessPool.run`: a search that never needs the pool never
  pays for processes.
* A deadline is kept on both sides. Work is handed to the executor only when a worker is free, so
  work still waiting at its deadline is never started; the worker also checks the deadline before it
  begins. The caller never waits past its deadline: work running then is left to finish, unseen.
* Errors come back as the library's, which pickle: a :class:`errors.RetrievalError` as itself,
  anything else as :class:`errors.WorkerError`, a dead worker as :class:`errors.WorkerCrashed`,
  after which the next run gets a fresh executor.

Functions sent to workers must be importable top-level functions (they travel by name).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Self, TypeVar, TypeVarTuple

from nodwyn_retrieval.errors import (
    ActorDead,
    BadInput,
    DeadlineExceeded,
    RetrievalError,
    WorkerCrashed,
    WorkerError,
)

__all__ = ["START_METHOD", "ProcessPool"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

START_METHOD = "forkserver" if sys.platform == "linux" else "spawn"
"""How workers start: never "fork", which copies the event loop's threads and locks mid-flight."""


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _call(fn: Callable[[*Ts], T], args: tuple[*Ts], not_after: float | None) -> T:
    """Run ``fn`` in a worker unless its deadline has passed; raise only errors that pickle.

    ``not_after`` is on the :func:`time.monotonic` clock, which every process shares.
    """
    if not_after is not None and time.monotonic() >= not_after:
        raise DeadlineExceeded(f"{_name(fn)} was not started before its deadline")
    try:
        return fn(*args)
    except RetrievalError:
        raise
    except BaseException as exc:
        # Any exception may fail to pickle (and one that fails to unpickle breaks the executor),
        # and a SystemExit must not end the caller: only the type and text cross back. The chained
        # original still shows in the remote traceback.
        raise WorkerError(f"{type(exc).__name__}: {exc}") from exc


class ProcessPool:
    """Runs top-level functions in worker processes; ``async with`` closes it.

    Once used, a pool belongs to the event loop that used it.
    """

    def __init__(self, max_workers: int | None = None, *, preload: Sequence[str] = ()) -> None:
        """``preload``: modules the fork server imports once, so that each worker starts with
        them loaded instead of importing them itself (numpy alone costs a worker half a second).
        """
        if max_workers is not None and max_workers < 1:
            raise BadInput(f"max_workers must be at least 1, got {max_workers}")
        self.max_workers = max_workers or os.cpu_count() or 1
        self.preload = tuple(preload)
        self._executor: ProcessPoolExecutor | None = None
        self._broken: list[ProcessPoolExecutor] = []  # replaced after a crash, joined by close()
        self._slots = asyncio.Semaphore(self.max_workers)  # held from submit until the work ends
        self._busy = 0
        self._closed = False

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts, deadline: float | None = None) -> T:
        """Return ``fn(*args)`` computed in a worker process.

        ``deadline`` is a ``loop.time()`` value. Work not started by then is not started, and the
        caller never waits past it: either way DeadlineExceeded.
        """
        loop = asyncio.get_running_loop()
        name = _name(fn)
        self._check_open()
        try:
            pickle.dumps(fn)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise BadInput(
                f"{name} cannot be sent to a worker process; pass an importable top-level"
                f" function ({exc})"
            ) from None
        if deadline is not None and loop.time() >= deadline:
            raise DeadlineExceeded(f"{name} was not started before its deadline")
        try:
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        except TimeoutError:
            raise DeadlineExceeded(f"{name} was not started before its deadline") from None
        try:
            self._check_open()
            executor, future = self._submit(fn, args, deadline, loop)
        except BaseException:
            self._slots.release()
            raise
        self._busy += 1
        future.add_done_callback(lambda _: self._work_done(loop))
        return await self._result(future, executor, name, deadline)

    async def _result(
        self, future: Future[T], executor: ProcessPoolExecutor, name: str, deadline: float | None
    ) -> T:
        """Wait for ``future`` until the deadline and map what it raises to the library's errors."""
        waiting = asyncio.timeout_at(deadline)
        try:
            async with waiting:
                return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            self._retire(executor)
            raise WorkerCrashed(f"a worker process died while running {name}") from None
        except TimeoutError as exc:
            if isinstance(exc, RetrievalError) or not waiting.expired():
                raise  # the worker's own DeadlineExceeded
            future.cancel()  # if it has not begun; if it has, its result is dropped
            raise DeadlineExceeded(f"{name} did not finish before its deadline") from None
        except RetrievalError:
            raise
        except Exception as exc:
            raise WorkerError(f"{type(exc).__name__}: {exc}") from exc
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if future.cancelled() and current is not None and not current.cancelling():
                raise ActorDead(f"the process pool closed before {name} started") from None
            raise

    def _submit(
        self,
        fn: Callable[[*Ts], T],
        args: tuple[*Ts],
        deadline: float | None,
        loop: asyncio.AbstractEventLoop,
    ) -> tuple[ProcessPoolExecutor, Future[T]]:
        not_after = None if deadline is None else time.monotonic() + (deadline - loop.time())
        executor = self._current_executor()
        try:
            return executor, executor.submit(_call, fn, args, not_after)
        except BrokenProcessPool:
            # It broke after the last run looked at it: replace it, once.
            self._retire(executor)
            executor = self._current_executor()
            return executor, executor.submit(_call, fn, args, not_after)

    def _current_executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context(START_METHOD)
            if self.preload and START_METHOD == "forkserver":
                context.set_forkserver_preload(list(self.preload))
            self._executor = ProcessPoolExecutor(self.max_workers, mp_context=context)
        return self._executor

    def _retire(self, executor: ProcessPoolExecutor) -> None:
        """Drop a broken executor so that the next run starts a fresh one."""
        if self._executor is executor:
            self._executor = None
            self._broken.append(executor)
            executor.shutdown(wait=False, cancel_futures=True)

    def _work_done(self, loop: asyncio.AbstractEventLoop) -> None:
        """Free a slot; called from the executor's thread when a submitted future ends."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to wake
            loop.call_soon_threadsafe(self._free_slot)

    def _free_slot(self) -> None:
        self._busy -= 1
        self._slots.release()

    def _check_open(self) -> None:
        if self._closed:
            raise ActorDead("the process pool is closed")

    async def close(self) -> None:
        """Cancel work not begun, wait for running work and the processes to end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        executors = [*self._broken, *([self._executor] if self._executor else [])]
        self._executor = None
        self._broken.clear()
        for executor in executors:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        if self._closed:
            state = "closed"
        elif self._executor is None:
            state = "not started"
        else:
            state = "started"
        return (
            f"<ProcessPool {state}, {START_METHOD}, max_workers={self.max_workers},"
            f" {self._busy} busy>"
        )
