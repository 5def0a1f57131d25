"""A process pool for CPU-bound work, with deadlines and the library's errors.

The workers are processes of the library's own: each runs :mod:`nodwyn_retrieval.bus._worker`,
started with the interpreter of this process and its ``sys.path``, and takes one piece of work
at a time over a pipe. They are not started by :mod:`multiprocessing`, whose spawn and fork-server
children run the caller's ``__main__`` again as ``__mp_main__``: a user's script without
``if __name__ == "__main__":`` would run its own top level once more in every worker. Here the
caller's script is never imported in a worker.

What the callers rely on:

* Nothing starts until the first :meth:`ProcessPool.run`, or :meth:`ProcessPool.start` for a
  caller that knows work is coming: a search that never needs the pool never pays for processes.
  A worker is started when work finds none idle, up to ``max_workers``, and stays up for the next;
  ``preload`` names modules each worker imports once as it starts.
* A deadline is kept on both sides. Work is handed to a worker only when one is free (or, with
  ``ahead``, when one has fewer than that many pieces queued behind the one it runs), so work
  still waiting here at its deadline is never started; the worker also checks the deadline
  before it begins, so neither is work queued in its pipe. The caller never waits past its
  deadline: work running then is left to finish, unseen.
* Errors come back as the library's, which pickle: a :class:`errors.RetrievalError` as itself,
  anything else as :class:`errors.WorkerError`, a dead worker as :class:`errors.WorkerCrashed`;
  the next run starts a fresh worker in its place.

Functions sent to workers must be top-level functions of importable modules (they travel by
name); a function of the running script itself is refused before anything starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self, TypeVar, TypeVarTuple

from nodwyn_retrieval.bus._worker import HEADER, _call, _name, frame
from nodwyn_retrieval.errors import (
    ActorDead,
    BadInput,
    DeadlineExceeded,
    RetrievalError,
    WorkerCrashed,
    WorkerError,
)

__all__ = ["ProcessPool", "_call"]  # _call: the worker's half of the deadline rule

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# A worker's answer can be megabytes (a batch's records): read it in large pieces.
_READ_LIMIT = 1 << 24
# How long a worker may take to leave once its input is closed, before it is killed.
_STOP_GRACE = 5.0


class _Crashed(Exception):
    """The worker's pipe closed mid-exchange: the process died."""


class _Worker:
    """One worker process and its pipe."""

    __slots__ = ("_turn", "broken", "inflight", "proc")

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.inflight = 0  # requests sent and not answered yet
        self.broken = False  # an exchange failed: what is read next may be any request's
        self._turn: asyncio.Future[None] | None = None  # done once the last request's answer is

    async def exchange(self, payload: bytes) -> bytes:
        """Send one request and return the answer's body. Requests sent while others are
        unanswered queue in the worker's pipe; their answers come, and are read, in order."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        if stdin is None or stdout is None:  # pragma: no cover - always piped
            raise _Crashed
        before, mine = self._turn, asyncio.get_running_loop().create_future()
        self._turn = mine
        self.inflight += 1
        try:
            stdin.write(frame(payload))  # (written at once, in the order of the calls)
            await stdin.drain()
            if before is not None:
                await before
            if self.broken:
                raise _Crashed
            head = await stdout.readexactly(HEADER)
            return await stdout.readexactly(int.from_bytes(head, "little"))
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            self.broken = True
            raise _Crashed from e
        except BaseException:
            self.broken = True  # cut off mid-exchange: the next answer read may be this one's
            raise
        finally:
            self.inflight -= 1
            if not mine.done():
                mine.set_result(None)

    async def stop(self, grace: float = _STOP_GRACE) -> None:
        """Close its input (it leaves when idle), and kill it if it has not left after grace."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except TimeoutError:
            if self.proc.returncode is None:
                self.proc.kill()
            await self.proc.wait()


def _bootstrap(preload: Sequence[str]) -> str:
    """The worker's ``-c`` program: this process's ``sys.path``, then the library's entry point."""
    # As multiprocessing's spawn does, the current directory ("") is fixed to where it is now.
    cwd = os.getcwd()
    path = [cwd if p == "" else p for p in sys.path]
    return (
        f"import sys; sys.path[:] = {path!r}; "
        f"from nodwyn_retrieval.bus._worker import main; main({list(preload)!r})"
    )


_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
"""What numpy's OpenBLAS reads for its threads; set by the person, it is left as it is."""


def _worker_env() -> dict[str, str] | None:
    """The workers' environment: this process's, with numpy's BLAS held to one thread unless the
    person chose its threads (None: this process's as it is). A worker does no linear algebra;
    OpenBLAS's own threads would spin at its import and take the cores from the work."""
    if any(os.environ.get(name) for name in _BLAS_THREADS):
        return None
    return {**os.environ, _BLAS_THREADS[0]: "1"}


class ProcessPool:
    """Runs top-level functions in worker processes; ``async with`` closes it.

    Once used, a pool belongs to the event loop that used it.
    """

    def __init__(
        self, max_workers: int | None = None, *, preload: Sequence[str] = (), ahead: int = 0
    ) -> None:
        """``preload``: modules each worker imports as it starts, before its first work, so that
        the first work does not pay for them (numpy alone costs a worker a good part of a second).
        ``ahead``: how many pieces of work may wait in a busy worker's pipe behind the one it
        runs, so that it begins the next as soon as it is done instead of waiting for this
        process to read its answer and send more (a build's batches: docs/benchmarks.md).
        """
        if max_workers is not None and max_workers < 1:
            raise BadInput(f"max_workers must be at least 1, got {max_workers}")
        if ahead < 0:
            raise BadInput(f"ahead must be at least 0, got {ahead}")
        self.max_workers = max_workers or os.cpu_count() or 1
        self.preload = tuple(preload)
        self.ahead = ahead
        self._idle: list[_Worker] = []
        self._workers: set[_Worker] = set()
        self._running: set[asyncio.Task[bytes]] = set()
        # Held from the hand-over to the end: one a worker, and those that may wait behind it.
        self._slots = asyncio.Semaphore(self.max_workers * (1 + ahead))
        self._busy = 0
        self._started = False
        self._closed = False
        self._starting: asyncio.Future[None] | None = None  # start()'s spawns under way

    @property
    def pids(self) -> tuple[int, ...]:
        """The process ids of the workers up now."""
        return tuple(sorted(w.proc.pid for w in self._workers))

    async def start(self) -> None:
        """Start every worker not up yet (up to ``max_workers``), idle, before any work: their start
        (the interpreter and the modules to preload, a few tenths of a second each) is then made
        while the caller does something else, and the first work finds them ready. Returns once
        the processes are created, not once they have imported what they preload. Does nothing
        on a closed pool; a process that cannot be created now is left to the first run."""
        if self._closed:
            return
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self._start_idle())
        await asyncio.shield(self._starting)

    async def _start_idle(self) -> None:
        try:
            while not self._closed and len(self._workers) < self.max_workers:
                self._idle.append(await self._start())
        except OSError:
            return  # (too many processes or files now): the first run tries again, and says so

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts, deadline: float | None = None) -> T:
        """Return ``fn(*args)`` computed in a worker process.

        ``deadline`` is a ``loop.time()`` value. Work not started by then is not started, and the
        caller never waits past it: either way DeadlineExceeded.
        """
        loop = asyncio.get_running_loop()
        name = _name(fn)
        self._check_open()
        if getattr(fn, "__module__", None) in ("__main__", "__mp_main__"):
            raise BadInput(
                f"{name} is defined in the running script, which worker processes do not import;"
                " pass a top-level function of an importable module"
            )
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
            not_after = None if deadline is None else time.monotonic() + (deadline - loop.time())
            try:
                payload = pickle.dumps((fn, args, not_after), pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001 - any failure to pickle is the caller's
                raise BadInput(
                    f"the arguments of {name} cannot be sent to a worker process"
                    f" ({type(exc).__name__}: {exc})"
                ) from None
        except BaseException:
            self._slots.release()
            raise
        self._busy += 1
        task = loop.create_task(self._work(payload))
        self._running.add(task)
        task.add_done_callback(self._work_done)
        waiting = asyncio.timeout_at(deadline)
        try:
            async with waiting:
                # Shielded: a caller that stops waiting (its deadline, a cancel) leaves the work
                # to finish, and its worker to come back idle.
                body = await asyncio.shield(task)
        except TimeoutError:
            if not waiting.expired():  # pragma: no cover - the work raises no TimeoutError
                raise
            raise DeadlineExceeded(f"{name} did not finish before its deadline") from None
        except _Crashed:
            raise WorkerCrashed(f"a worker process died while running {name}") from None
        return self._unpack(body, name)  # type: ignore[return-value]

    async def _work(self, payload: bytes) -> bytes:
        """Hand the request to an idle worker (started if none is) and return its answer."""
        if not self._idle and self._starting is not None and not self._starting.done():
            await asyncio.shield(self._starting)  # a worker start() is creating: not one more
        if self._idle:
            worker = self._idle.pop()
        elif len(self._workers) < self.max_workers:
            worker = await self._start()
        else:  # every worker busy (ahead): queued behind the one with the least in hand
            worker = min(self._workers, key=lambda w: w.inflight)
        try:
            body = await worker.exchange(payload)
        except BaseException:
            # Dead, or cut off mid-frame: it cannot serve again.
            self._workers.discard(worker)
            await asyncio.shield(worker.stop(grace=0))
            raise
        if not worker.inflight and worker in self._workers:
            self._idle.append(worker)
        return body

    async def _start(self) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _bootstrap(self.preload),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=_READ_LIMIT,
            env=_worker_env(),
        )
        worker = _Worker(proc)
        self._workers.add(worker)
        self._started = True
        return worker

    def _work_done(self, task: asyncio.Task[bytes]) -> None:
        self._running.discard(task)
        self._busy -= 1
        self._slots.release()
        if not task.cancelled():
            task.exception()  # seen here when the caller stopped waiting for it

    @staticmethod
    def _unpack(body: bytes, name: str) -> object:
        try:
            ok, value = pickle.loads(body)  # noqa: S301 - our own worker's answer
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be rebuilt
            raise WorkerError(
                f"the answer of {name} cannot be read: {type(exc).__name__}: {exc}"
            ) from None
        if ok:
            return value
        if isinstance(value, RetrievalError):
            raise value
        raise WorkerError(f"{type(value).__name__}: {value}")

    def _check_open(self) -> None:
        if self._closed:
            raise ActorDead("the process pool is closed")

    async def close(self) -> None:
        """Start no more work, wait for running work and the processes to end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._starting is not None:
            await asyncio.gather(self._starting, return_exceptions=True)
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        workers = list(self._workers)
        self._workers.clear()
        self._idle.clear()
        await asyncio.gather(*(w.stop() for w in workers))

    def abandon(self) -> None:
        """Let the workers go when the event loop that started them has ended and :meth:`close`
        can no longer be awaited: no more work is started, and each worker's input is closed, so
        it leaves as it does at :meth:`close` (at once when idle, else once its work is done)."""
        self._closed = True
        workers = list(self._workers)
        self._workers.clear()
        self._idle.clear()
        for w in workers:
            stdin = w.proc.stdin
            pipe = stdin.transport.get_extra_info("pipe") if stdin is not None else None
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

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
        elif not self._started:
            state = "not started"
        else:
            state = "started"
        return f"<ProcessPool {state}, max_workers={self.max_workers}, {self._busy} busy>"
