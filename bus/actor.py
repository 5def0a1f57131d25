"""The actor runtime: a bounded mailbox per actor, ``tell`` and ``ask``, the failure rules, stop.

The failure rules are coded once, here, so no actor has to remember them:

* An exception raised while handling an ``ask`` goes back to the asker; the actor keeps running.
* An exception raised while handling a ``tell`` has no one to go back to: it is logged (logger
  ``"nodwyn_retrieval.bus"``, beneath the library's own), the actor's :meth:`Actor.on_failure`
  hook runs, and the actor is restarted (a fresh :meth:`Actor.on_start`, the same
  :class:`ActorRef`) or stopped, as declared at spawn. Past
  ``max_restarts`` restarts within ``restart_window`` seconds it is stopped.
* An exception in :meth:`Actor.on_start` is handled like a failing ``tell``, except that it is never
  restarted: a start that fails once will fail again.
* Once an actor has stopped, every ``ask`` still queued, and every message sent after, fails with
  :class:`errors.ActorDead`.

Each actor handles its messages strictly one at a time, in the order they arrived, in one asyncio
task that :meth:`ActorSystem.stop` ends: no task outlives the system that started it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Literal, Self, TypeVar

from nodwyn_retrieval.errors import ActorDead, BadInput, DeadlineExceeded

R = TypeVar("R")

__all__ = ["Actor", "ActorRef", "ActorSystem", "RestartPolicy"]

logger = logging.getLogger("nodwyn_retrieval.bus")

RestartPolicy = Literal["restart", "stop"]
"""What happens to an actor after a failing ``tell``: restart it, or stop it."""


class Actor:
    """Subclass and implement :meth:`handle`; spawn instances with :meth:`ActorSystem.spawn`.

    The runtime calls every method from the actor's own task, one at a time, so an actor's state
    needs no lock. A restart reuses the same instance: :meth:`on_start` must (re)build whatever
    state a failure may have left half-done, and :meth:`on_failure` must release what
    :meth:`on_start` acquired, because after a failure :meth:`on_stop` is not called.
    """

    mailbox_size: ClassVar[int] = 1024
    """How many messages may wait; a sender beyond it waits for space (back-pressure)."""

    async def handle(self, message: object) -> object:
        """Handle one message; the return value is the answer to an ``ask``."""
        raise NotImplementedError(f"{type(self).__name__} must implement handle()")

    async def on_start(self) -> None:
        """Run before the first message, and again on every restart."""

    async def on_stop(self) -> None:
        """Run once on an orderly stop, after the message being handled has finished."""

    def on_failure(self, exc: BaseException) -> None:
        """Run after a failing ``tell`` (or ``on_start``), before the restart or the stop."""


@dataclass(frozen=True, slots=True)
class _Envelope:
    """A message in a mailbox."""

    message: object
    """What the sender sent, handed to :meth:`Actor.handle` unchanged."""
    reply: asyncio.Future[object] | None
    """Where the answer of an ``ask`` goes; ``None`` for a ``tell``."""


class _Cell:
    """One spawned actor: its mailbox, its task, its restart budget. Private to the runtime."""

    def __init__(
        self,
        actor: Actor,
        name: str,
        restart: RestartPolicy,
        max_restarts: int,
        restart_window: float,
    ) -> None:
        self.actor = actor
        self.name = name
        self.restart = restart
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self.mailbox: asyncio.Queue[_Envelope] = asyncio.Queue(maxsize=actor.mailbox_size)
        self.closed = False  # no new message is accepted; set once, never cleared
        self.idle = False  # the task waits for a message and may be cancelled without harm
        self.restarts: deque[float] = deque()
        self.started = asyncio.Event()  # the first on_start has ended, well or not
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"actor {name}")

    def dead(self) -> ActorDead:
        return ActorDead(f"actor {self.name!r} is stopped")

    def check_open(self) -> None:
        if self.closed:
            raise self.dead()

    async def post(self, envelope: _Envelope) -> None:
        """Queue a message, waiting for space when the mailbox is full."""
        self.check_open()
        await self.mailbox.put(envelope)
        if self.closed:
            # The actor stopped while we waited for space: nobody will take what we queued.
            self.fail_queued()
            if envelope.reply is None:
                raise self.dead()

    def fail_queued(self) -> None:
        """Empty the mailbox, failing every ``ask`` in it with ActorDead.

        Each message taken out wakes one sender waiting for space, whose ``post`` then sees the
        actor closed and calls this again: no sender is left waiting on a dead mailbox.
        """
        while not self.mailbox.empty():
            self.settle(self.mailbox.get_nowait(), error=self.dead())

    @staticmethod
    def settle(
        envelope: _Envelope, *, result: object = None, error: BaseException | None = None
    ) -> None:
        """Answer an ``ask`` unless the asker has given up (its future is cancelled)."""
        if envelope.reply is None or envelope.reply.done():
            return
        if error is None:
            envelope.reply.set_result(result)
        else:
            envelope.reply.set_exception(error)

    async def stop(self) -> None:
        """Close the mailbox, let the message in hand finish, and wait for the task to end."""
        self.closed = True
        if self.task is asyncio.current_task():
            return  # an actor stopping itself: its loop ends after the current message
        if self.idle:
            self.task.cancel()  # nothing in hand; the queued messages stay in the mailbox
        try:
            await self.task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # our caller is cancelled (and so, through the await, is the actor)
            # The actor's task itself was cancelled: it has ended, which is all stop wants.

    async def _run(self) -> None:
        orderly = False  # whether the actor ends by stop() rather than by a failure
        envelope: _Envelope | None = None
        try:
            orderly = await self._start()
            self.started.set()
            while orderly and not self.closed:
                self.idle = True
                try:
                    envelope = await self.mailbox.get()
                finally:
                    self.idle = False
                orderly = await self._handle(envelope)
                envelope = None
        except asyncio.CancelledError:
            if envelope is None and orderly:
                # stop() cancelled the loop while it waited for a message: an orderly end.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            else:
                orderly = False
                if envelope is not None:
                    kind = type(envelope.message).__name__
                    logger.error("actor %r was cancelled while handling %s", self.name, kind)
                raise
        finally:
            self.closed = True
            self.started.set()
            if envelope is not None:
                self.settle(envelope, error=self.dead())
            self.fail_queued()
            if orderly:
                await self._call_on_stop()

    async def _start(self) -> bool:
        """Run on_start; on failure run the failure hook and say the actor must stop."""
        try:
            await self.actor.on_start()
        except Exception as exc:
            logger.error("actor %r failed to start; stopping it", self.name, exc_info=exc)
            self._call_on_failure(exc)
            self.closed = True
            self.fail_queued()
            return False
        return True

    async def _handle(self, envelope: _Envelope) -> bool:
        """Handle one message by the failure rules; return whether the actor goes on."""
        if envelope.reply is not None and envelope.reply.done():
            return True  # the asker gave up before we began: the work is not started
        try:
            result = await self.actor.handle(envelope.message)
        except Exception as exc:  # noqa: BLE001 - the failure rules: an ask's error goes back
            if envelope.reply is not None:
                self.settle(envelope, error=exc)
                return True
            return await self._tell_failed(envelope.message, exc)
        self.settle(envelope, result=result)
        return True

    async def _tell_failed(self, message: object, exc: Exception) -> bool:
        kind = type(message).__name__
        logger.error("actor %r failed handling %s", self.name, kind, exc_info=exc)
        self._call_on_failure(exc)
        if self.restart == "restart" and not self.closed:
            now = asyncio.get_running_loop().time()
            while self.restarts and now - self.restarts[0] > self.restart_window:
                self.restarts.popleft()
            if len(self.restarts) < self.max_restarts:
                self.restarts.append(now)
                logger.warning(
                    "actor %r restarting (%d of %d within %g s)",
                    self.name,
                    len(self.restarts),
                    self.max_restarts,
                    self.restart_window,
                )
                return await self._start()
            logger.error(
                "actor %r failed %d times within %g s; stopping it",
                self.name,
                self.max_restarts + 1,
                self.restart_window,
            )
        self.closed = True
        return False

    def _call_on_failure(self, exc: BaseException) -> None:
        try:
            self.actor.on_failure(exc)
        except Exception as hook_exc:
            logger.error("actor %r: on_failure raised", self.name, exc_info=hook_exc)

    async def _call_on_stop(self) -> None:
        try:
            await self.actor.on_stop()
        except Exception as exc:
            logger.error("actor %r: on_stop raised", self.name, exc_info=exc)


class ActorRef:
    """The only way to reach a spawned actor: send it messages. It stays valid across restarts."""

    __slots__ = ("_cell",)

    def __init__(self, cell: _Cell) -> None:
        self._cell = cell

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def is_alive(self) -> bool:
        """Whether the actor still accepts messages."""
        return not self._cell.closed

    async def tell(self, message: object) -> None:
        """Send a one-way message; waits while the mailbox is full. ActorDead once stopped."""
        await self._cell.post(_Envelope(message, None))

    async def ask(
        self,
        message: object,
        timeout: float | None = None,  # noqa: ASYNC109 - the contract; it also bounds queueing
    ) -> object:
        """Send a message and return the actor's answer, or raise what its handler raised.

        ``timeout`` (seconds) covers waiting for mailbox space as well as the answer. On expiry it
        raises DeadlineExceeded; a message the actor has not begun by then is never handled.
        """
        if timeout is not None and not timeout > 0:
            raise BadInput(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await self._cell.post(_Envelope(message, reply))
                return await reply
        except TimeoutError:
            if not deadline.expired():
                raise  # the handler's own TimeoutError, going back to the asker
            raise DeadlineExceeded(
                f"actor {self.name!r} did not answer {type(message).__name__} within {timeout:g} s"
            ) from None

    async def ask_as(
        self,
        message: object,
        kind: type[R],
        timeout: float | None = None,  # noqa: ASYNC109 - as ask's
    ) -> R:
        """:meth:`ask`, checking that the answer is a ``kind``: the asker gets a typed value."""
        answer = await self.ask(message, timeout)
        if not isinstance(answer, kind):
            raise TypeError(
                f"actor {self.name!r} answered {type(message).__name__} with "
                f"{type(answer).__name__}, not {kind.__name__}"
            )
        return answer

    def __repr__(self) -> str:
        state = "alive" if self.is_alive else "stopped"
        return f"<ActorRef {self.name!r} {state}, {self._cell.mailbox.qsize()} queued>"


class ActorSystem:
    """Spawns actors and stops them all, newest first. Also an async context manager.

    Spawn from inside the running event loop: each actor is a task of that loop.
    """

    def __init__(self) -> None:
        self._cells: list[_Cell] = []
        self._stopped = False

    def spawn(
        self,
        actor: Actor,
        *,
        name: str,
        restart: RestartPolicy = "stop",
        max_restarts: int = 3,
        restart_window: float = 10.0,
    ) -> ActorRef:
        """Start ``actor`` under ``name``; messages sent at once wait for its on_start."""
        if self._stopped:
            raise ActorDead(f"the actor system is stopped; cannot spawn {name!r}")
        if not name:
            raise BadInput("an actor's name must not be empty")
        if restart not in ("restart", "stop"):
            raise BadInput(f"restart must be 'restart' or 'stop', got {restart!r}")
        if max_restarts < 0:
            raise BadInput(f"max_restarts must be 0 or more, got {max_restarts}")
        if not restart_window > 0:
            raise BadInput(
                f"restart_window must be a positive number of seconds, got {restart_window!r}"
            )
        for cell in self._cells:
            if cell.name == name and not cell.closed:
                raise BadInput(f"an actor named {name!r} is already running")
            if cell.actor is actor and not cell.closed:
                raise BadInput(f"this {type(actor).__name__} is already running as {cell.name!r}")
        cell = _Cell(actor, name, restart, max_restarts, restart_window)
        self._cells.append(cell)
        return ActorRef(cell)

    async def started(self) -> None:
        """Wait until every actor spawned so far has run its first on_start (or failed it)."""
        for cell in self._cells:
            await cell.started.wait()

    async def stop(self) -> None:
        """Stop every actor, in reverse spawn order; returns when all their tasks have ended."""
        self._stopped = True
        for cell in reversed(self._cells):
            await cell.stop()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        alive = sum(not cell.closed for cell in self._cells)
        return f"<ActorSystem {state}, {alive} of {len(self._cells)} actors alive>"
