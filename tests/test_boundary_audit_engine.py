"""The boundary audit: an Engine in the event loop of the agent loop that embeds it.

An engine's actors are tasks of the loop it was opened in and its workers are processes of this
one. A close cut short, a call from another loop (another thread's, or after ``asyncio.run``
ended the engine's), a call after the close: each is answered at once, by an error of the
library's that says what happened, and no worker process or task is left behind."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from pathlib import Path

import pytest
from nodwyn_retrieval import ActorDead, Engine, EngineClosed, WrongLoop
from nodwyn_retrieval.guard.decision import CheckResult, Verdict

from tests.support import make_repo, small_repo


def _worker_children() -> list[int]:
    """The pool's worker processes this process has, alive (zombies not counted)."""
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == me and fields[0] != "Z" and b"nodwyn_retrieval.bus._worker" in cmdline:
            found.append(int(pid))
    return found


def _pool_tree(tmp_path: Path) -> Path:
    """A tree of about 3 MiB: enough for a first build to hand its reads to the worker pool."""
    body = "".join(f"def petrel_{j}(x):\n    return x * {j} + albatross\n" for j in range(1500))
    return make_repo(tmp_path / "repo", {f"m/f{i}.py": body for i in range(50)})


async def _open(root: Path, tmp_path: Path) -> Engine:
    return await Engine.open(
        root, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", workers=1
    )


@pytest.mark.asyncio
async def test_a_close_cut_short_is_finished_and_leaves_no_worker(tmp_path: Path) -> None:
    """A close cancelled while an update is in hand (a loop's own timeout around its shutdown):
    the close goes on, the next one waits for it, and no worker process or task is left."""
    reading, release = asyncio.Event(), asyncio.Event()

    async def held(path: str, size: int) -> CheckResult:
        # The guard's checker of the second update's one read: it holds that update in hand.
        if path == "m/f0.py" and not release.is_set():
            reading.set()
            await release.wait()
        return CheckResult(Verdict.ALLOW)

    root = _pool_tree(tmp_path)
    engine = await Engine.open(
        root, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", workers=1,
        checkers=[held],
    )  # fmt: skip
    release.set()
    await engine.index_update()  # the first build starts the pool's worker, which stays up
    assert _worker_children(), "the build was to start a worker process"
    release.clear()
    (root / "m/f0.py").write_text("def petrel():\n    return 'changed'\n")
    update = asyncio.create_task(engine.index_update())
    await reading.wait()
    # A close that took no notice of its cancel would wait here for the held read: the read is
    # let go after a while all the same, so that such a close fails this test instead of hanging.
    asyncio.get_running_loop().call_later(30, release.set)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):
            await engine.close()
    release.set()
    await engine.close()  # waits for the first close, which went on
    with contextlib.suppress(ActorDead):  # the update's last steps meet the stopped actors
        await update
    assert _worker_children() == []
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    with pytest.raises(EngineClosed, match="closed"):
        await engine.index_search("albatross", scope="repo")
    with pytest.raises(EngineClosed, match="closed"):
        await engine.call_tool("index-search", {"query": "albatross", "scope": "repo"})


def test_a_call_from_another_threads_loop_is_refused_at_once(tmp_path: Path) -> None:
    """The engine's loop runs in a thread of its own; a call made in another loop would wait
    for ever (its messages are for the other loop's tasks): it is refused instead."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        engine = asyncio.run_coroutine_threadsafe(
            _open(small_repo(tmp_path), tmp_path), loop
        ).result(120)

        async def elsewhere() -> None:
            async with asyncio.timeout(60):  # the old code waited here for ever
                await engine.index_search("albatross", scope="repo")

        with pytest.raises(WrongLoop, match="run_coroutine_threadsafe"):
            asyncio.run(elsewhere())
        with pytest.raises(WrongLoop):
            asyncio.run(engine.close())
        # In its own loop the engine answers as ever, and closes.
        found = asyncio.run_coroutine_threadsafe(
            engine.index_search("albatross", scope="repo"), loop
        ).result(120)
        assert "a.py" in found.text
        asyncio.run_coroutine_threadsafe(engine.close(), loop).result(120)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(60)
        loop.close()


# asyncio says of the ended loop's pipes to the workers that they were never closed in it (they
# cannot be now): its warning, about the loop that was let end before the close, not the library's.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_engine_whose_loop_ended_says_so_and_closes_from_another(tmp_path: Path) -> None:
    """``asyncio.run`` ends the loop an engine was opened in (and its actors' tasks with it): a
    call in a later loop says so, and a close there lets the worker processes go."""
    root = _pool_tree(tmp_path)

    async def first() -> Engine:
        engine = await _open(root, tmp_path)
        await engine.index_update()
        return engine

    engine = asyncio.run(first())
    assert _worker_children(), "the build was to start a worker process"

    async def later(engine: Engine) -> None:
        with pytest.raises(EngineClosed, match="event loop this engine was opened in has ended"):
            await engine.index_search("albatross", scope="repo")
        await engine.close()
        await engine.close()

    asyncio.run(later(engine))
    for _ in range(600):  # each worker leaves as its input ends; a loaded machine may be slow
        if not _worker_children():
            break
        threading.Event().wait(0.1)
    assert _worker_children() == []
    del engine
    gc.collect()  # the ended loop's transports, and their warnings, go within this test
