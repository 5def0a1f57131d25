"""A wall-clock timeline of a fresh tree's first search (or first build) in a new process.

    python bench/build_timeline.py --corpus git               # the first search, 10 s bound
    python bench/build_timeline.py --corpus sympy --update    # one index_update call, 60 s

Each step is timed from the process's own start (the kernel's record of it, so the interpreter's
start and the imports are on the line): the imports, ``Engine.open``, the refresher's listing,
the indexer's call and its reads, each worker's start and every batch sent to it and back, the
session's work on each batch as it arrives (``TreeBuilder.add``), the finish
(``TreeBuilder.finish``), the snapshot (``TreeSegment.to_obj`` and its write) and the answer; and
each worker's and the session's CPU use over the run, a line every half second, which shows where
a core idles. The functions are wrapped in this process (nothing of the library is changed); the
indexer's own debug log is printed in its place on the line.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

_now = time.monotonic


def _process_start() -> float:
    """This process's start on the monotonic clock (from /proc: its start in ticks since boot)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return _now() - (uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))


T0 = _process_start()
EVENTS: list[tuple[float, str, str]] = []


def ev(what: str) -> None:
    EVENTS.append((_now() - T0, what, threading.current_thread().name))


ev("interpreter up, imports begin")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import importlib.abc  # noqa: E402
import importlib.util  # noqa: E402
import itertools  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _corpora  # noqa: E402
from nodwyn_retrieval.entry import Engine  # noqa: E402

ev("imports done")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a module once it is imported: the session imports the actors' modules as
    it opens (entry.py), and they are not imported here before it does, which would move their
    cost out of the line."""

    def __init__(self, hooks: dict[str, Callable[[types.ModuleType], None]]) -> None:
        self.hooks = hooks

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        hook = self.hooks.pop(name, None)
        if hook is None:
            return None
        spec = importlib.util.find_spec(name)  # the other finders' (this one's hook is gone)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            real_exec(module)
            hook(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def after_import(name: str, hook: Callable[[types.ModuleType], None]) -> None:
    """hook(module) now if name is imported, else once it is."""
    if name in sys.modules:
        hook(sys.modules[name])
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _AfterImport)), None)
    if finder is None:
        finder = _AfterImport({})
        sys.meta_path.insert(0, finder)
    finder.hooks[name] = hook


def timed(owner: Any, attr: str, what: str) -> None:
    """Wrap owner.attr (a function or a coroutine function) with events at its start and end."""
    fn: Callable[..., Any] = getattr(owner, attr)
    if asyncio.iscoroutinefunction(fn):

        async def wrapped_async(*a: Any, **k: Any) -> Any:
            ev(f"{what} begins")
            try:
                return await fn(*a, **k)
            finally:
                ev(f"{what} ends")

        setattr(owner, attr, wrapped_async)
    else:

        def wrapped(*a: Any, **k: Any) -> Any:
            ev(f"{what} begins")
            try:
                return fn(*a, **k)
            finally:
                ev(f"{what} ends")

        setattr(owner, attr, wrapped)


class _Log(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        ev("log: " + record.getMessage()[:240])


ADDS: list[tuple[float, float, float, int]] = []  # (at, wall, CPU, postings)
EXCHANGES: list[tuple[int, float, float, int]] = []  # (pid, sent, back, bytes sent)
WORKERS: dict[int, float] = {}  # pid -> started at


def instrument() -> None:
    after_import("nodwyn_retrieval.actors.refresher", _refresher)
    after_import("nodwyn_retrieval.actors.indexer", _indexer)
    after_import("nodwyn_retrieval.retrieval.tree", _tree)
    after_import("nodwyn_retrieval.bus.actor", _actors)
    after_import("nodwyn_retrieval.bus.pool", _pool)
    log = logging.getLogger("nodwyn_retrieval.actors.indexer")
    log.setLevel(logging.DEBUG)
    log.addHandler(_Log())


def _refresher(rf: types.ModuleType) -> None:
    timed(rf.RefresherActor, "_plan", "the refresher's listing and comparison")
    timed(rf.RefresherActor, "on_stop", "the refresher's stop")


def _indexer(ix: types.ModuleType) -> None:
    ev("the indexer's module imported")
    timed(ix.IndexerActor, "_index", "the indexer's call")
    timed(ix, "read_and_analyze", "reads and the pool")
    timed(ix.IndexerActor, "_settle", "waiting for the snapshot (settle)")
    timed(ix, "write_atomic", "the snapshot's write")
    timed(ix.IndexerActor, "on_stop", "the indexer's stop")


def _actors(busactor: types.ModuleType) -> None:
    timed(busactor.ActorSystem, "stop", "the actors' stop")


def _tree(treemod: types.ModuleType) -> None:
    timed(treemod.TreeIndex, "warm", "TreeIndex.warm")
    timed(treemod.TreeSegment, "to_obj", "the snapshot's to_obj")
    real_finish = treemod.TreeBuilder.finish

    def finish(self: Any) -> Any:
        if not len(self):
            return real_finish(self)
        ev("TreeBuilder.finish begins")
        c = time.thread_time()
        try:
            return real_finish(self)
        finally:
            pairs, adds = getattr(self, "n_pairs", 0), getattr(self, "cpu", float("nan"))
            ev(f"TreeBuilder.finish ends ({time.thread_time() - c:.3f} s CPU, "
               f"{pairs:,} postings; the adds before it {adds:.3f} s CPU)")  # fmt: skip

    treemod.TreeBuilder.finish = finish
    real_add = treemod.TreeBuilder.add

    def add(self: Any, files: Any, pairs: Any) -> None:
        t, c = _now(), time.thread_time()
        real_add(self, files, pairs)
        ADDS.append((t - T0, _now() - t, time.thread_time() - c, len(pairs.doc)))

    treemod.TreeBuilder.add = add


def _pool(poolmod: types.ModuleType) -> None:
    timed(poolmod.ProcessPool, "close", "the pool's close")
    real_start = poolmod.ProcessPool._start

    async def start(self: Any) -> Any:
        w = await real_start(self)
        WORKERS[w.proc.pid] = _now() - T0
        ev(f"worker {w.proc.pid} started")
        return w

    poolmod.ProcessPool._start = start
    real_exchange = poolmod._Worker.exchange

    async def exchange(self: Any, payload: bytes) -> bytes:
        t = _now()
        body = await real_exchange(self, payload)
        EXCHANGES.append((self.proc.pid, t - T0, _now() - T0, len(payload)))
        return body

    poolmod._Worker.exchange = exchange
    real_stop = poolmod._Worker.stop

    async def stop(self: Any, *a: Any, **k: Any) -> None:
        ev(f"worker {self.proc.pid}: stop begins")
        await real_stop(self, *a, **k)
        ev(f"worker {self.proc.pid}: stop ends")

    poolmod._Worker.stop = stop


def cpu_of(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="git")
    ap.add_argument("--update", action="store_true", help="one index_update call, not a search")
    ap.add_argument("--query", default="parse options")
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args()
    root = _corpora.prepare(args.corpus)
    work = args.data or _corpora.CACHE / f"timeline-{args.corpus}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "config").mkdir(parents=True)
    instrument()
    samples: list[dict[int | str, float | None]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            row: dict[int | str, float | None] = {"t": _now() - T0, "self": cpu_of(os.getpid())}
            for pid in list(WORKERS):
                row[pid] = cpu_of(pid)
            samples.append(row)
            time.sleep(0.5)

    threading.Thread(target=sample, daemon=True).start()

    async def run() -> None:
        ev("Engine.open begins")
        engine = await Engine.open(root, data_dir=work / "data", config_dir=work / "config")
        ev("Engine.open ends")
        if args.update:
            out = await engine.index_update()
            ev(f"answer: {out.summary.get('read')} read, {out.summary.get('not_read')} not read")
        else:
            found = await engine.index_search(args.query, "repo", 8)
            h = found.header
            ev(f"answer: {h['files']} files, partial {h['partial']}, {h['not_read']} not read")
        await engine.close()
        ev("closed")

    asyncio.run(run())
    done.set()
    with open("/proc/loadavg") as f:
        print(f"{args.corpus}: load average at the end {' '.join(f.read().split()[:3])}")
    for t, what, thread in sorted(EVENTS):
        print(f"{t:8.3f} s  {what}  [{thread}]")
    for pid, started in WORKERS.items():
        xs = [x for x in EXCHANGES if x[0] == pid]
        if not xs:
            continue
        gaps = [xs[i + 1][1] - xs[i][2] for i in range(len(xs) - 1)]
        print(f"worker {pid}: started {started:.3f} s, {len(xs)} batches; the first sent "
              f"{xs[0][1]:.3f}, back {xs[0][2]:.3f}; the last sent {xs[-1][1]:.3f}, back "
              f"{xs[-1][2]:.3f}; idle between batches {sum(gaps):.3f} s (at most "
              f"{max(gaps, default=0.0):.3f})")  # fmt: skip
    if ADDS:
        wall, cpu = sum(a[1] for a in ADDS), sum(a[2] for a in ADDS)
        print(f"TreeBuilder.add: {len(ADDS)} batches, {wall:.3f} s wall, {cpu:.3f} s CPU, "
              f"{sum(a[3] for a in ADDS):,} postings")  # fmt: skip
    print("CPU use (cores) over each half second: session, then each worker")
    for before, after in itertools.pairwise(samples):
        dt = float(after["t"] or 0.0) - float(before["t"] or 0.0)
        cells = []
        for key in ["self", *WORKERS]:
            a, b = before.get(key), after.get(key)
            cells.append("   - " if a is None or b is None else f"{(b - a) / dt:5.2f}")
        print(f"{float(after['t'] or 0.0):7.2f} s " + " ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
