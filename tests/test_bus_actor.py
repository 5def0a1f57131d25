"""The actor runtime: one test per rule of the mailbox, the failure rules and stop."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import pytest
from nodwyn_retrieval.bus import Actor, ActorRef, ActorSystem
from nodwyn_retrieval.errors import ActorDead, BadInput, DeadlineExceeded

# --- messages ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Echo:
    """Answer with ``value``."""

    value: object


@dataclass(frozen=True, slots=True)
class Fail:
    """Raise ValueError(text)."""

    text: str


@dataclass(frozen=True, slots=True)
class Note:
    """Log the begin and end of ``text``, yielding to the loop in between to invite interleaving."""

    text: str


@dataclass(frozen=True, slots=True)
class Hold:
    """Set ``started``, then wait for ``release``: keeps the actor busy until the test says."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True, slots=True)
class RaiseTimeout:
    """Raise a plain TimeoutError of the handler's own."""


# --- actors ------------------------------------------------------------------------------------


class Recorder(Actor):
    """Does what each message says and records its life in ``log``."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.log = [] if log is None else log
        self.failures: list[BaseException] = []

    async def on_start(self) -> None:
        self.log.append("start")

    async def on_stop(self) -> None:
        self.log.append("stop")

    def on_failure(self, exc: BaseException) -> None:
        self.failures.append(exc)
        self.log.append("failure")

    async def handle(self, message: object) -> object:
        match message:
            case Echo(value):
                return value
            case Fail(text):
                raise ValueError(text)
            case Note(text):
                self.log.append(f"begin {text}")
                for _ in range(3):
                    await asyncio.sleep(0)
                self.log.append(f"end {text}")
                return None
            case Hold(started, release):
                started.set()
                await release.wait()
                self.log.append("released")
                return "released"
            case RaiseTimeout():
                raise TimeoutError("slow disk")
        raise AssertionError(f"unexpected message {message!r}")


class SmallMailbox(Recorder):
    mailbox_size = 2


class FailingStart(Recorder):
    async def on_start(self) -> None:
        await super().on_start()
        raise OSError("no such directory")


async def hold(ref: ActorRef) -> Hold:
    """Make the actor busy with a Hold and return it once the actor is inside it."""
    message = Hold()
    await ref.tell(message)
    await message.started.wait()
    return message


async def settle() -> None:
    """Let every ready task run until it blocks."""
    for _ in range(10):
        await asyncio.sleep(0)


# --- ask and tell ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_ask_returns_the_handlers_answer() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder(), name="worker")
        assert await ref.ask(Echo(42)) == 42


@pytest.mark.asyncio
async def test_messages_are_handled_one_at_a_time_in_order() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker")
        for n in range(4):
            await ref.tell(Note(str(n)))
        await ref.ask(Echo(None))
    handled = [entry for entry in actor.log if entry.startswith(("begin", "end"))]
    assert handled == [f"{step} {n}" for n in range(4) for step in ("begin", "end")]


@pytest.mark.asyncio
async def test_the_mailbox_is_bounded() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(SmallMailbox(), name="worker")
        held = await hold(ref)
        await ref.tell(Echo(1))
        await ref.tell(Echo(2))
        third = asyncio.create_task(ref.tell(Echo(3)))
        await settle()
        assert not third.done()  # the sender waits for space
        assert repr(ref) == "<ActorRef 'worker' alive, 2 queued>"
        held.release.set()
        await third
        assert await ref.ask(Echo("after")) == "after"


@pytest.mark.asyncio
async def test_started_waits_for_every_on_start() -> None:
    gate = asyncio.Event()

    class SlowStart(Recorder):
        async def on_start(self) -> None:
            await gate.wait()
            await super().on_start()

    actors = [SlowStart(), FailingStart(), Recorder()]
    async with ActorSystem() as system:
        for n, actor in enumerate(actors):
            system.spawn(actor, name=f"actor {n}")
        waiting = asyncio.create_task(system.started())
        await settle()
        assert not waiting.done()
        gate.set()
        await waiting
        assert [actor.log[0] for actor in actors] == ["start", "start", "start"]


@pytest.mark.asyncio
async def test_messages_sent_before_on_start_finishes_wait_for_it() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker")
        await ref.tell(Note("early"))
        await ref.ask(Echo(None))
    assert actor.log[:3] == ["start", "begin early", "end early"]


# --- the failure rules -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_error_in_an_ask_goes_back_to_the_asker() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker")
        with pytest.raises(ValueError, match=r"^bad input$"):
            await ref.ask(Fail("bad input"))
        assert ref.is_alive
        assert await ref.ask(Echo("still here")) == "still here"
    assert actor.failures == []  # an ask's error is the asker's to handle, not a failure


@pytest.mark.asyncio
async def test_a_failing_tell_is_logged_and_runs_on_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="nodwyn_retrieval")
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker")
        await ref.tell(Fail("broken"))
        await settle()
    assert [str(exc) for exc in actor.failures] == ["broken"]
    failed = [r for r in caplog.records if r.getMessage() == "actor 'worker' failed handling Fail"]
    assert len(failed) == 1
    assert failed[0].name == "nodwyn_retrieval.bus"  # beneath the library's one logger
    assert failed[0].exc_info is not None


@pytest.mark.asyncio
async def test_a_failing_tell_stops_the_actor_by_default() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker")
        await ref.tell(Fail("broken"))
        with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
            await ref.ask(Echo(1))
        assert not ref.is_alive
    assert actor.log == ["start", "failure"]  # on_failure stood in for on_stop


@pytest.mark.asyncio
async def test_a_failing_tell_restarts_the_actor_when_declared() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker", restart="restart")
        await ref.tell(Fail("broken"))
        assert await ref.ask(Echo("same ref")) == "same ref"
        assert ref.is_alive
    assert actor.log == ["start", "failure", "start", "stop"]


@pytest.mark.asyncio
async def test_an_actor_failing_past_its_restart_budget_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="nodwyn_retrieval")
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(
            actor, name="worker", restart="restart", max_restarts=2, restart_window=3600
        )
        for n in range(3):
            await ref.tell(Fail(f"broken {n}"))
        with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
            await ref.ask(Echo(1))
    assert actor.log == ["start", "failure", "start", "failure", "start", "failure"]
    messages = [r.getMessage() for r in caplog.records]
    assert "actor 'worker' failed 3 times within 3600 s; stopping it" in messages


@pytest.mark.asyncio
async def test_restarts_older_than_the_window_do_not_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(asyncio.get_running_loop(), "time", lambda: now[0])
    async with ActorSystem() as system:
        ref = system.spawn(
            Recorder(), name="worker", restart="restart", max_restarts=1, restart_window=10
        )
        await ref.tell(Fail("at 0 s"))
        await ref.ask(Echo(None))
        now[0] = 11.0  # the first restart has left the window
        await ref.tell(Fail("at 11 s"))
        assert await ref.ask(Echo("alive")) == "alive"
        now[0] = 12.0  # the second one has not
        await ref.tell(Fail("at 12 s"))
        with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
            await ref.ask(Echo(None))


@pytest.mark.asyncio
async def test_a_failing_on_start_stops_the_actor() -> None:
    actor = FailingStart()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker", restart="restart")
        with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
            await ref.ask(Echo(1))
        assert not ref.is_alive
    assert [type(exc) for exc in actor.failures] == [OSError]
    assert actor.log == ["start", "failure"]


@pytest.mark.asyncio
async def test_an_ask_past_its_timeout_raises_deadline_exceeded() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder(), name="worker")
        message = Hold()
        with pytest.raises(
            DeadlineExceeded, match=r"^actor 'worker' did not answer Hold within 0.05 s$"
        ):
            await ref.ask(message, timeout=0.05)
        message.release.set()


@pytest.mark.asyncio
async def test_an_ask_that_timed_out_before_it_began_is_never_handled() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="worker")
        held = await hold(ref)
        with pytest.raises(DeadlineExceeded):
            await ref.ask(Note("late"), timeout=0.05)
        held.release.set()
        await ref.ask(Echo(None))
    assert "begin late" not in actor.log


@pytest.mark.asyncio
async def test_a_handlers_own_timeout_error_is_not_taken_for_the_asks() -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder(), name="worker")
        with pytest.raises(TimeoutError, match=r"^slow disk$") as raised:
            await ref.ask(RaiseTimeout(), timeout=60)
        assert type(raised.value) is TimeoutError


# --- stop --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_asks_queued_at_stop_fail_with_actor_dead() -> None:
    system = ActorSystem()
    ref = system.spawn(Recorder(), name="worker")
    held = await hold(ref)
    queued = [asyncio.create_task(ref.ask(Echo(n))) for n in range(2)]
    await settle()
    stopping = asyncio.create_task(system.stop())
    await settle()
    held.release.set()
    await stopping
    for ask in queued:
        with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
            await ask


@pytest.mark.asyncio
async def test_messages_sent_after_stop_fail_with_actor_dead() -> None:
    system = ActorSystem()
    ref = system.spawn(Recorder(), name="worker")
    await system.stop()
    with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
        await ref.ask(Echo(1))
    with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
        await ref.tell(Echo(1))


@pytest.mark.asyncio
async def test_a_sender_waiting_for_space_fails_when_the_actor_stops() -> None:
    system = ActorSystem()
    ref = system.spawn(SmallMailbox(), name="worker")
    held = await hold(ref)
    await ref.tell(Echo(1))
    await ref.tell(Echo(2))
    waiting = [asyncio.create_task(ref.tell(Echo(3))), asyncio.create_task(ref.ask(Echo(4)))]
    await settle()
    stopping = asyncio.create_task(system.stop())
    await settle()
    held.release.set()
    await stopping
    for sender in waiting:
        with pytest.raises(ActorDead, match=r"^actor 'worker' is stopped$"):
            await sender


@pytest.mark.asyncio
async def test_stop_lets_the_message_in_hand_finish_then_runs_on_stop() -> None:
    actor = Recorder()
    system = ActorSystem()
    ref = system.spawn(actor, name="worker")
    held = await hold(ref)
    stopping = asyncio.create_task(system.stop())
    await settle()
    assert not stopping.done()
    assert not ref.is_alive  # closed to new messages at once
    held.release.set()
    await stopping
    assert actor.log == ["start", "released", "stop"]


@pytest.mark.asyncio
async def test_actors_stop_in_reverse_spawn_order() -> None:
    log: list[str] = []

    class Named(Recorder):
        def __init__(self, name: str) -> None:
            super().__init__(log)
            self.name = name

        async def on_stop(self) -> None:
            log.append(f"stop {self.name}")

    async with ActorSystem() as system:
        for name in ("store", "indexer", "engine"):
            await system.spawn(Named(name), name=name).ask(Echo(None))
    assert [entry for entry in log if entry.startswith("stop")] == [
        "stop engine",
        "stop indexer",
        "stop store",
    ]


@pytest.mark.asyncio
async def test_no_task_outlives_the_stop() -> None:
    before = asyncio.all_tasks()
    system = ActorSystem()
    refs = [system.spawn(Recorder(), name=f"actor {n}") for n in range(3)]
    held = await hold(refs[0])
    queued = asyncio.create_task(refs[0].ask(Echo(1)))
    await refs[1].tell(Note("idle after this"))
    await settle()
    stopping = asyncio.create_task(system.stop())
    await settle()
    held.release.set()
    await stopping
    with pytest.raises(ActorDead):
        await queued
    assert asyncio.all_tasks() == before


@pytest.mark.asyncio
async def test_an_actor_can_stop_its_own_system_from_a_handler() -> None:
    class Stopper(Recorder):
        def __init__(self, system: ActorSystem) -> None:
            super().__init__()
            self.system = system

        async def handle(self, message: object) -> object:
            await self.system.stop()
            return "stopping"

    before = asyncio.all_tasks()
    system = ActorSystem()
    actor = Stopper(system)
    ref = system.spawn(actor, name="worker")
    assert await ref.ask(Echo(None)) == "stopping"
    await system.stop()
    assert asyncio.all_tasks() == before
    assert actor.log == ["start", "stop"]


@pytest.mark.asyncio
async def test_spawning_on_a_stopped_system_fails() -> None:
    system = ActorSystem()
    await system.stop()
    with pytest.raises(ActorDead, match=r"^the actor system is stopped; cannot spawn 'late'$"):
        system.spawn(Recorder(), name="late")


# --- checks and state --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, r"^an actor's name must not be empty$"),
        (
            {"name": "a", "restart": "sometimes"},
            r"^restart must be 'restart' or 'stop', got 'sometimes'$",
        ),
        ({"name": "a", "max_restarts": -1}, r"^max_restarts must be 0 or more, got -1$"),
        (
            {"name": "a", "restart_window": 0},
            r"^restart_window must be a positive number of seconds, got 0$",
        ),
        ({"name": "worker"}, r"^an actor named 'worker' is already running$"),
    ],
)
async def test_spawn_says_exactly_what_was_wrong(kwargs: dict[str, object], message: str) -> None:
    async with ActorSystem() as system:
        system.spawn(Recorder(), name="worker")
        with pytest.raises(BadInput, match=message):
            system.spawn(Recorder(), **kwargs)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_same_actor_cannot_run_twice() -> None:
    actor = Recorder()
    async with ActorSystem() as system:
        system.spawn(actor, name="first")
        with pytest.raises(BadInput, match=r"^this Recorder is already running as 'first'$"):
            system.spawn(actor, name="second")


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [0, -1.5])
async def test_an_ask_timeout_must_be_positive(bad: float) -> None:
    async with ActorSystem() as system:
        ref = system.spawn(Recorder(), name="worker")
        with pytest.raises(
            BadInput,
            match=rf"^timeout must be a positive number of seconds or None, got {bad}$",
        ):
            await ref.ask(Echo(1), timeout=bad)


@pytest.mark.asyncio
async def test_the_repr_shows_the_live_state() -> None:
    system = ActorSystem()
    ref = system.spawn(Recorder(), name="worker")
    assert repr(ref) == "<ActorRef 'worker' alive, 0 queued>"
    assert repr(system) == "<ActorSystem running, 1 of 1 actors alive>"
    held = await hold(ref)
    await ref.tell(Echo(1))
    await ref.tell(Echo(2))
    assert repr(ref) == "<ActorRef 'worker' alive, 2 queued>"
    held.release.set()
    await system.stop()
    assert repr(ref) == "<ActorRef 'worker' stopped, 0 queued>"
    assert repr(system) == "<ActorSystem stopped, 0 of 1 actors alive>"
