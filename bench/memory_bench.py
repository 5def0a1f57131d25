"""The conversation's and earlier tasks' figures: first search, later searches, .mem size.

Usage: python bench/memory_bench.py [--tree DIR] [--work DIR] [--runs N] [--earlier-bytes B]

Generates (bench/loggen.py, from the tree given or this project's files) a log of 6,849 events and
6.7 MB, and a tasks directory of 78 logs holding 17,663 events, then measures through the actors,
as the engine asks them:

- conversation, first search: the log's .mem missing, so the search builds it (the word splitter's
  memo and redaction's names cleared first, as in a new process);
- conversation, later searches: the median over a set of queries, the .mem in place;
- earlier tasks, first search: no .mem anywhere, so the search writes all 78 (folded here, or in
  worker processes when the logs to fold pass actors.earlier.POOL_MIN_BYTES; the row "pool" forces
  the workers to show what they cost and save on this machine);
- earlier tasks, second search: the one after a first, after whose answer the tasks' join is
  written once, in a thread (a search that follows at once waits for it);
- earlier tasks, later searches: the median over the same queries;
- the .mem files' bytes against the logs';
- the same conversation with one more turn holding a 2 MB image in base64 (76 columns, and on
  one line): its .mem against its log, and its first search against the log's without it.

The earlier tasks' logs are generated, then left alone for more than store.mem.RACY_NS before the
first search, as a project's earlier tasks are: a log changed within that of its .mem's build is
hashed at every search (the "racily clean" rule), which a task finished minutes ago never is.

Each figure is printed as wall time and as this process's CPU time (which waiting for a processor
does not inflate; with worker processes it leaves their time out), beside its target
(PERFORMANCE.md) and the machine's load average, since the machines here are shared. This is a
measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nodwyn_retrieval.actors.earlier as earlier_mod
from nodwyn_retrieval.actors.conversation import ConversationActor, LogSearch
from nodwyn_retrieval.actors.earlier import EarlierActor, EarlierSearch
from nodwyn_retrieval.bus import ActorSystem
from nodwyn_retrieval.retrieval.words import clear_memo as clear_words
from nodwyn_retrieval.store.config import Config
from nodwyn_retrieval.store.mem import RACY_NS, mem_path
from nodwyn_retrieval.store.mem_join import JOIN_NAME

from bench.loggen import Tree, add_image, generate_log, generate_tasks

QUERIES = (
    "credential binding localhost",
    "lock taken twice",
    "ScrubEnv",
    "segment postings words",
    "test fails undefined",
    "rename everywhere docs",
)
CONV_EVENTS, CONV_BYTES = 6_849, 6_700_000
TASKS, TASK_EVENTS = 78, 17_663


def clear_memo() -> None:
    """Forget what a process remembers between builds (the word splitter's table, the names
    redaction judged), so that a first search is measured as a new process makes it."""
    clear_words()
    from nodwyn_retrieval.guard import redact as _redact

    # The assignment rule's module since it left guard/redact.py; the code before kept it there.
    for module in ("nodwyn_retrieval.guard._assignment", _redact.__module__):
        judged = getattr(sys.modules.get(module), "secret_name", None)
        if hasattr(judged, "cache_clear"):
            judged.cache_clear()


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _forget(tasks: Path) -> None:
    """Remove every .mem and the tasks' join: the next search is a project's first."""
    for m in tasks.glob("*.mem"):
        m.unlink()
    (tasks / JOIN_NAME).unlink(missing_ok=True)


def _logs(tasks: Path) -> list[Path]:
    return sorted(tasks.glob("*.jsonl"))


def _ratio(logs: list[Path]) -> float:
    """The .mem files' and the tasks' join's bytes over their logs' (a joined task has no .mem)."""
    size = sum(m.stat().st_size for m in map(mem_path, logs) if m.exists())
    joins = {x.parent / JOIN_NAME for x in logs}
    size += sum(j.stat().st_size for j in joins if j.exists())
    return size / sum(x.stat().st_size for x in logs)


Timing = tuple[float, float]
"""(wall seconds, this process's CPU seconds)."""

BY_QUERY: dict[str, dict[str, list[float]]] = {}
"""Each later search's CPU seconds by scope and query: the queries differ by twice in cost, so
the median of all of them sits between the cheap and the dear ones and moves with the noise."""


def _clock() -> Timing:
    return time.perf_counter(), time.process_time()


def _since(t: Timing) -> Timing:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def _median(xs: list[Timing]) -> Timing:
    return statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)


async def conversation(log: Path, runs: int) -> tuple[Timing, Timing, float]:
    """(first search, later search median, .mem / log)."""
    firsts: list[Timing] = []
    laters: list[Timing] = []
    async with ActorSystem() as system:
        ref = system.spawn(ConversationActor(log, Config()), name="conversation")
        for _ in range(runs):
            mem_path(log).unlink(missing_ok=True)
            clear_memo()
            t = _clock()
            await ref.ask(LogSearch(QUERIES[0], 8))
            firsts.append(_since(t))
        for _ in range(runs * 3):
            for q in QUERIES:
                t = _clock()
                await ref.ask(LogSearch(q, 8))
                laters.append(_since(t))
                BY_QUERY.setdefault(log.stem, {}).setdefault(q, []).append(laters[-1][1])
    return _median(firsts), _median(laters), _ratio([log])


async def earlier(tasks: Path, runs: int, *, pool: bool) -> tuple[Timing, Timing, Timing, float]:
    """(first search, second search median, later search median, .mem files and join / logs).
    The second search after a first is the one that writes the tasks' join, once. The CPU time
    is this process's only: with workers, theirs is not counted."""
    firsts: list[Timing] = []
    seconds: list[Timing] = []
    laters: list[Timing] = []
    saved = earlier_mod.POOL_MIN_BYTES
    if pool:
        earlier_mod.POOL_MIN_BYTES = 0
    try:
        async with ActorSystem() as system:
            ref = system.spawn(EarlierActor(tasks, "bench", tasks, Config()), name="earlier")
            for _ in range(runs):
                _forget(tasks)
                clear_memo()
                t = _clock()
                await ref.ask(EarlierSearch(QUERIES[0], 8, True))
                firsts.append(_since(t))
                t = _clock()
                await ref.ask(EarlierSearch(QUERIES[1], 8, True))
                seconds.append(_since(t))
            for _ in range(runs * 3):
                for q in QUERIES:
                    t = _clock()
                    await ref.ask(EarlierSearch(q, 8, True))
                    laters.append(_since(t))
                    BY_QUERY.setdefault("earlier", {}).setdefault(q, []).append(laters[-1][1])
    finally:
        earlier_mod.POOL_MIN_BYTES = saved
    return _median(firsts), _median(seconds), _median(laters), _ratio(_logs(tasks))


def row(what: str, got: str, cpu: str, target: str) -> None:
    print(f"| {what:<50} | {got:>10} | {cpu:>10} | {target:>8} |")


def secs(t: Timing) -> tuple[str, str]:
    return f"{t[0]:.3f} s", f"{t[1]:.3f} s"


def msecs(t: Timing) -> tuple[str, str]:
    return f"{t[0] * 1e3:.2f} ms", f"{t[1] * 1e3:.2f} ms"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tree", type=Path, default=None, help="a tree whose files the logs read")
    p.add_argument(
        "--work", type=Path, default=None, help="where to generate (default: a temp dir)"
    )
    p.add_argument("--runs", type=int, default=3, help="first searches measured (median)")
    p.add_argument("--earlier-bytes", type=float, default=17.3e6, help="bytes of the 78 logs")
    p.add_argument("--no-pool-row", action="store_true", help="skip the forced worker-pool row")
    ns = p.parse_args(argv)
    work = ns.work or Path(tempfile.mkdtemp(prefix="memory-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = Tree.load(ns.tree) if ns.tree else Tree.load(Path(__file__).resolve().parent.parent)
    log = work / "conversation.jsonl"
    if not log.exists():
        generate_log(log, events=CONV_EVENTS, size=CONV_BYTES, tree=tree, seed=1)
    tasks = work / "tasks"
    if not tasks.exists():
        generate_tasks(
            tasks, tasks=TASKS, events=TASK_EVENTS, size=int(ns.earlier_bytes), tree=tree
        )
        time.sleep(RACY_NS / 1e9 + 0.2)  # earlier tasks are not being written (module doc)
    log_mb = log.stat().st_size / 1e6
    tasks_mb = sum(x.stat().st_size for x in tasks.glob("*.jsonl")) / 1e6
    print(f"tree {tree.root} ({len(tree.files):,} files); {os.cpu_count()} CPUs")
    print(f"load average before: {load()}")
    print(f"conversation: {log_mb:.1f} MB, {CONV_EVENTS:,} events; earlier: {TASKS} logs, "
          f"{TASK_EVENTS:,} events, {tasks_mb:.1f} MB")  # fmt: skip
    print()
    print(f"| {'figure':<50} | {'wall':>10} | {'CPU':>10} | {'target':>8} |")
    print(f"|{'-' * 52}|{'-' * 12}|{'-' * 12}|{'-' * 10}|")
    first, later, ratio = asyncio.run(conversation(log, ns.runs))
    row("conversation: first search (builds the .mem)", *secs(first), "0.3 s")
    row("conversation: later search (median)", *msecs(later), "4 ms")
    row("conversation: .mem / log", f"{ratio:.2f}x", "", "0.5x")
    for wrap in (76, None):
        img = work / f"conversation-image-{wrap or 'flat'}.jsonl"
        if not img.exists():
            add_image(log, img, wrap=wrap)
        ifirst, _, iratio = asyncio.run(conversation(img, ns.runs))
        how = f"wrapped at {wrap}" if wrap else "on one line"
        row(f"  + 2 MB image ({how}): .mem / log", f"{iratio:.2f}x", "", "0.3x")
        row(f"  + 2 MB image ({how}): first search / without", f"{ifirst[0] / first[0]:.2f}x",
            f"{ifirst[1] / first[1]:.2f}x", "1.5x")  # fmt: skip
    first, second, later, ratio = asyncio.run(earlier(tasks, ns.runs, pool=False))
    row("earlier: first search (writes 78 .mem)", *secs(first), "1.3 s")
    row("earlier: second search (the join written after it)", *msecs(second), "")
    row("earlier: later search (median)", *msecs(later), "10 ms")
    row("earlier: .mem files and join / logs", f"{ratio:.2f}x", "", "0.5x")
    if not ns.no_pool_row:
        first, _, _, _ = asyncio.run(earlier(tasks, ns.runs, pool=True))
        row("earlier: first search, workers fold the biggest", *secs(first), "1.3 s")
    print("\nlater searches' CPU by query (median, ms):")
    for scope, by in BY_QUERY.items():
        cells = ", ".join(f"{q!r} {statistics.median(xs) * 1e3:.2f}" for q, xs in by.items())
        print(f"  {scope}: {cells}")
    print(f"\nload average after: {load()}")
    if ns.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
