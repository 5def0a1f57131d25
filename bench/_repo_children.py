"""bench/repo_bench.py's child processes: this project's session and the peers'.

Each answers one JSON line for each request line.

The benchmark's measurements run in children so that each first build and each new session starts
from a fresh process (its imports, its pool's start and its peak memory are its own).
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

import _peers  # noqa: E402

# -- child processes -------------------------------------------------------------------------------


class Child:
    """A child process answering one JSON line per request line (see bench/_peers.py)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self._err = open(log, "ab")  # noqa: SIM115 - kept open for the child's life
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            cwd=REPO,
        )

    def send(self, **req: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"child {self.proc.args} ended:\n{tail}")
        ans: dict[str, Any] = json.loads(line)
        if "error" in ans:
            raise RuntimeError(f"child {self.proc.args[:3]} failed: {ans['error']}")
        return ans

    def ask(self, **req: Any) -> dict[str, Any]:
        self.send(**req)
        return self.recv()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(RuntimeError, OSError):
                self.ask(op="close")
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


def ours_child(
    root: Path, data: Path, config: Path, log: Path, profile: Path | None = None
) -> Child:
    argv = [
        sys.executable,
        str(HERE / "repo_bench.py"),
        "--serve-ours",
        str(root),
        "--data-dir",
        str(data),
        "--config-dir",
        str(config),
    ]
    if profile is not None:
        argv += ["--profile-out", str(profile)]
    return Child(argv, log)


def first_search(
    root: Path, data: Path, config: Path, log: Path, q: str, *, fresh: bool = False
) -> dict[str, Any]:
    """A new process's ``Engine.open`` and one search of q, as the child reports them, with its
    wall time from the process's start. ``fresh``: an empty data directory first and after, so
    the search is a fresh tree's first (it indexes what its 10 s bound allows, §5)."""
    if fresh:
        shutil.rmtree(data, ignore_errors=True)
    config.mkdir(parents=True, exist_ok=True)
    child = ours_child(root, data, config, log)
    try:
        a: dict[str, Any] = child.ask(op="first", q=q)
        a["wall"] = time.perf_counter() - child.started
    finally:
        child.close()
    if fresh:
        shutil.rmtree(data, ignore_errors=True)
    return a


def peer_child(kind: str, root: Path, log: Path) -> Child:
    return Child([sys.executable, str(HERE / "_peers.py"), "serve", kind, str(root)], log)


# -- this project's child ------------------------------------------------------------------------


def _cpu() -> float:
    """CPU seconds of this process (all its threads) and of its children waited for (git)."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def serve_ours(
    root: Path, data: Path, config: Path, workers: int | None, profile_out: Path | None
) -> None:
    """The project's session in a child: open, build, search, memory, store, close."""
    t_start = time.perf_counter()
    import asyncio

    from nodwyn_retrieval.entry import Engine

    t_import = time.perf_counter() - t_start
    mem_import = _peers.memory()
    profiler: Any = None
    if profile_out is not None:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled")

    async def run() -> None:
        engine: Any = None
        loop = asyncio.get_running_loop()

        async def open_engine() -> float:
            nonlocal engine
            t0 = time.perf_counter()
            engine = await Engine.open(root, data_dir=data, config_dir=config, workers=workers)
            return time.perf_counter() - t0

        async def search(q: str) -> dict[str, Any]:
            t0 = time.perf_counter()
            out = await engine.index_search(q, "repo", 8)
            seconds = time.perf_counter() - t0
            h = out.header
            return {
                "seconds": seconds,
                "partial": h["partial"],
                "not_read": h["not_read"],
                "hits": len(out.hits),
                "chunks": h["chunks"],
                "files": h["files"],
            }

        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            req = json.loads(line)
            op = req["op"]
            try:
                if op == "open":
                    ans: dict[str, Any] = {"seconds": await open_engine()}
                elif op == "first":
                    cpu0 = _cpu()
                    opened = await open_engine()
                    s = await search(req["q"])
                    ans = {
                        "open": opened,
                        "search": s,
                        "seconds": opened + s["seconds"],
                        "cpu": _cpu() - cpu0,
                        "import": t_import,
                        "since_start": time.perf_counter() - t_start,
                        "mem_import": mem_import,
                    }
                elif op == "build":
                    calls = []
                    t0 = time.perf_counter()
                    for _ in range(req.get("max_calls", 50)):
                        t1 = time.perf_counter()
                        up = await engine.index_update()
                        calls.append({"seconds": time.perf_counter() - t1, **up.summary})
                        if not up.summary["partial"] or not up.summary["not_read"]:
                            break  # done, or partial only because the tree passes §2's limits
                    ans = {
                        "calls": calls,
                        "seconds": time.perf_counter() - t0,
                        "since_start": time.perf_counter() - t_start,
                        "import": t_import,
                        "bytes": sum(c["bytes"] for c in calls),
                    }
                elif op == "update":
                    t0 = time.perf_counter()
                    up = await engine.index_update()
                    ans = {"seconds": time.perf_counter() - t0, **up.summary}
                elif op == "search":
                    ans = await search(req["q"])
                elif op == "mem":
                    ans = {"mem": _peers.memory(), "mem_import": mem_import}
                elif op == "store":
                    ans = {"bytes": _peers.du(engine.dirs.index), "dir": str(engine.dirs.index)}
                elif op == "profile":
                    if profiler is not None:
                        if req["on"]:
                            profiler.start()
                        else:
                            profiler.stop()
                    ans = {}
                elif op == "close":
                    if engine is not None:
                        await engine.close()
                    ans = {}
                else:
                    ans = {"error": f"unknown op {op!r}"}
            except Exception as e:
                ans = {"error": f"{type(e).__name__}: {e}"}
            sys.stdout.write(json.dumps(ans) + "\n")
            sys.stdout.flush()
            if op == "close":
                break

    try:
        import uvloop

        uvloop.run(run())
    except ImportError:
        asyncio.run(run())
    if profiler is not None and profile_out is not None:
        profile_out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
