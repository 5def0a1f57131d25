"""The MCP server's figures (docs/benchmarks.md, "MCP"): a server's first search of a repository
the index already holds, from the server's start, and what a later search adds over
``Engine.index_search`` itself.

    python bench/mcp_bench.py --corpus sympy            # the shared corpora's snapshot, made once
    python bench/mcp_bench.py --tree PATH --runs 5
    git show main:mcp_server.py > /tmp/old_server.py
    python bench/mcp_bench.py --corpus sympy --against /tmp/old_server.py   # before and after
    python bench/mcp_bench.py --corpus sympy --against-python /tmp/before/bin/python

The index is built once first (``nodwyn-retrieval refresh``) in a data directory of the run's own.
Then, ``--runs`` times, a server is started by the MCP SDK's client over stdio (a new process,
as an agent starts it) and the time from before the process is started to the first
``index-search`` result is taken: the start of Python, the SDK's import, the handshake, the
Engine opened at the first call, the refresh that finds the tree unchanged, and the search. Then
``--searches`` searches in that server, each timed at the client, against the same searches made
in this process with ``Engine.index_search`` on the same index. Then servers asked one search
each, for the CPU time of every process they ran from start to exit. Medians; the load is printed.

The wall times are what a client sees on this machine as loaded as it is; with the machine shared
they can be several times what a free machine gives. So the CPU time each of the server's processes
has used is read from ``/proc`` too, at the handshake and at the first answer: the process the
client started (the protocol: Python, the command line, the SDK's protocol package, the first
exchange; then the rest of the SDK, imported in a thread while the call is with the engine) and the
engine's process it starts beside it, with what they ran. With two cores free the two run side by
side, and the first answer takes about the later of: the protocol's process ready (its CPU time at
the handshake), and the engine's process, started once the protocol's has spent what the command
line, ``nodwyn_retrieval.mcp_server`` and asyncio cost to import, done loading (its CPU time at the
first answer less the first search of a loaded index, measured in this process); then that search.
With one core, their sum. Likewise the CPU time the server's processes spend on each later search
(from the sixth on, after a pause in which the SDK's import ends), against what
``Engine.index_search`` spends in this process: what a later search adds on a free machine. The
search right after the first is given apart: it can wait for the SDK's server to take the
connection over.

``--against FILE`` runs another version of ``mcp_server.py`` (``git show main:mcp_server.py``)
the same way, alternately with this one, on the same index: the peer measured in the same run.
``--against-python PY`` runs the server of another install (``PY -m nodwyn_retrieval mcp``, a
virtual environment's interpreter with another version installed) the same way: a change that
spans more than mcp_server.py, or one the other file cannot run with.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora

FIRST_TARGET_S = 0.5
LATER_TARGET_MS = 5.0
SETTLE = 5
"""The later searches' CPU is counted from the sixth on, after a pause of SETTLE_S."""
SETTLE_S = 2.0


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """A process's parent and the CPU seconds it and its waited-for children have used."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / CLK_TCK


def _server_cpu() -> tuple[float, float]:
    """CPU seconds so far of the server this process started (its one child): the process the
    client started, and every process under it (the engine's, its workers, what they ran)."""
    stats = {int(e): _stat(int(e)) for e in os.listdir("/proc") if e.isdigit()}
    kids: dict[int, list[int]] = {}
    for pid, st in stats.items():
        if st is not None:
            kids.setdefault(st[0], []).append(pid)
    servers = kids.get(os.getpid(), [])
    if len(servers) != 1:
        return float("nan"), float("nan")
    top = servers[0]
    below, todo = 0.0, list(kids.get(top, []))
    while todo:
        pid = todo.pop()
        st = stats.get(pid)
        below += st[1] if st is not None else 0.0
        todo.extend(kids.get(pid, []))
    own = stats[top]
    return (own[1] if own is not None else float("nan")), below


def _command(against: Path | None, python: Path | None = None) -> list[str]:
    """The server's command: this checkout's, another install's (``python``, its interpreter),
    or another version's mcp_server.py run the same way (its ``main`` with the command line's
    defaults)."""
    if python is not None:
        return [str(python), "-m", "nodwyn_retrieval", "mcp"]
    if against is None:
        return [sys.executable, "-m", "nodwyn_retrieval", "mcp"]
    code = (
        "import argparse, importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location("
        f"'nodwyn_retrieval.mcp_other', {str(against)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m\n"
        "spec.loader.exec_module(m)\n"
        "# the installed engine, which it names by the module that held it before mcp_engine.py\n"
        "m._ENGINE_MAIN = m._ENGINE_MAIN.replace(\n"
        "    'mcp_server import engine_main', 'mcp_engine import engine_main')\n"
        "ns = argparse.Namespace(\n"
        "    root=None, log=None, data_dir=None, config_dir=None, workers=None)\n"
        "sys.exit(m.main(ns))\n"
    )
    return [sys.executable, "-c", code]


def _env(data: Path, config: Path) -> dict[str, str]:
    home = data.parent / "home"
    for d in (home, home / ".claude", home / ".codex"):
        d.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "NODWYN_RETRIEVAL_DATA_DIR": str(data),
        "NODWYN_RETRIEVAL_CONFIG_DIR": str(config),
    }


async def _server_run(
    root: Path, env: dict[str, str], queries: list[str], searches: int, command: list[str]
) -> dict[str, Any]:
    from mcp import ClientSession, types
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(root))
    later: list[float] = []
    t0 = time.perf_counter()
    with open(os.devnull, "w") as err:  # noqa: ASYNC230  the child writes it
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            t_init = time.perf_counter()
            at_handshake = _server_cpu()
            r = await s.call_tool("index-search", {"query": queries[0], "scope": "repo"})
            first = time.perf_counter() - t0
            cpu = _server_cpu()
            assert not r.is_error, r
            block = r.content[0]
            assert isinstance(block, types.TextContent)
            settled = cpu
            for i, q in enumerate((queries * (searches // len(queries) + 1))[:searches]):
                if i == SETTLE:
                    # The SDK's server has taken over by now: its import is not a search's CPU.
                    await asyncio.sleep(SETTLE_S)
                    settled = _server_cpu()
                t = time.perf_counter()
                r = await s.call_tool("index-search", {"query": q, "scope": "repo"})
                later.append(time.perf_counter() - t)
                assert not r.is_error
            end = _server_cpu()
    counted = searches - SETTLE if searches > SETTLE else searches
    return {
        "first_s": first, "handshake_s": t_init - t0, "later_s": later,
        "protocol_cpu_s": cpu[0], "engine_cpu_s": cpu[1],
        "protocol_cpu_handshake_s": at_handshake[0],
        "later_cpu_s": (sum(end) - sum(settled)) / max(counted, 1),
    }  # fmt: skip


def _first_cpu(
    root: Path, env: dict[str, str], query: str, command: list[str]
) -> tuple[float, float]:
    """A server started, asked one search and closed: (wall to the answer, CPU of every process
    it ran, start to exit)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = asyncio.run(_server_run(root, env, [query], 0, command))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return got["first_s"], cpu


async def _engine_run(
    root: Path, data: Path, config: Path, queries: list[str], searches: int
) -> tuple[list[float], float, float]:
    """The same searches with ``Engine.index_search`` in this process: each one's wall time, the
    CPU time a later search takes (this process's, as the server's are counted), and the CPU time
    of the first search of an engine whose index is loaded (:meth:`Engine.warm`)."""
    from nodwyn_retrieval.entry import Engine

    engine = await Engine.open(root, data_dir=data, config_dir=config, workers=1)
    out: list[float] = []
    try:
        await engine.warm()
        first = time.process_time()
        await engine.index_search(queries[0], "repo")
        first = time.process_time() - first
        cpu = time.process_time()
        for q in (queries * (searches // len(queries) + 1))[:searches]:
            t = time.perf_counter()
            await engine.index_search(q, "repo")
            out.append(time.perf_counter() - t)
        cpu = (time.process_time() - cpu) / max(searches, 1)
    finally:
        await engine.close()
    return out, cpu, first


def _figures(
    runs: list[dict[str, Any]],
    cpus: list[float],
    engine: list[float],
    engine_cpu: list[float],
    loaded_first: float,
    *,
    spawn: float,
) -> dict[str, Any]:
    later = [x for r in runs for x in r["later_s"]]
    firsts = [r["first_s"] for r in runs]
    proto = [r["protocol_cpu_s"] for r in runs]
    below = [r["engine_cpu_s"] for r in runs]
    first = statistics.median(firsts)
    over_ms = (statistics.median(later) - statistics.median(engine)) * 1000
    return {
        "searches": len(later),
        "first_search_s": round(first, 3),
        "first_search_s_each": [round(x, 3) for x in firsts],
        "handshake_s": round(statistics.median(r["handshake_s"] for r in runs), 3),
        "protocol_cpu_at_first_s": round(statistics.median(proto), 3),
        "engine_cpu_at_first_s": round(statistics.median(below), 3),
        "protocol_cpu_at_handshake_s": round(
            statistics.median(r["protocol_cpu_handshake_s"] for r in runs), 3
        ),
        # With two cores free: the protocol's process is ready to hand the call over when its
        # CPU time at the handshake is spent; the engine's process, started once the protocol's
        # has spent ``spawn`` (Python, the command line, mcp_server's import), has loaded the
        # index when its own CPU time but for the first search is spent; then the search.
        "two_cores_free_first_s": round(
            statistics.median(
                max(r["protocol_cpu_handshake_s"], spawn + r["engine_cpu_s"] - loaded_first)
                + loaded_first
                for r in runs
            ),
            3,
        ),
        "one_core_free_first_s": round(
            statistics.median(a + b for a, b in zip(proto, below, strict=True)), 3
        ),
        "first_search_cpu_s": round(statistics.median(cpus), 3),
        "later_search_ms": round(statistics.median(later) * 1000, 2),
        # The search right after the first: it may wait for the SDK's server to take over.
        "second_search_ms_each": [round(r["later_s"][0] * 1000, 1) for r in runs if r["later_s"]],
        "added_ms": round(over_ms, 2),
        "later_search_cpu_ms": round(statistics.median(r["later_cpu_s"] for r in runs) * 1000, 2),
        "added_cpu_ms": round(
            (statistics.median(r["later_cpu_s"] for r in runs) - statistics.median(engine_cpu))
            * 1000,
            2,
        ),
        "first_ok": first <= FIRST_TARGET_S,
        "later_ok": over_ms <= LATER_TARGET_MS,
    }


def _import_cpu_s(env: dict[str, str], code: str, runs: int) -> float:
    """Median CPU seconds of a Python process running ``code``, start to exit."""
    took = []
    for _ in range(runs):
        p = subprocess.Popen([sys.executable, "-c", code], env=env)
        _, status, usage = os.wait4(p.pid, 0)
        assert status == 0, status
        took.append(usage.ru_utime + usage.ru_stime)
    return round(statistics.median(took), 3)


def _import_s(env: dict[str, str], code: str, runs: int) -> float:
    took = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        took.append(time.perf_counter() - t)
    return round(statistics.median(took), 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--corpus", help="a shared corpus (sympy, ...)")
    g.add_argument("--tree", type=Path, help="a git working tree (copied first)")
    ap.add_argument("--runs", type=int, default=5, help="servers started")
    ap.add_argument("--searches", type=int, default=40, help="later searches in each")
    peer = ap.add_mutually_exclusive_group()
    peer.add_argument(
        "--against", type=Path, help="another version's mcp_server.py, run alternately"
    )
    peer.add_argument(
        "--against-python", type=Path,
        help="another install's interpreter (a venv's bin/python), its server run alternately",
    )  # fmt: skip
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    root = _corpora.prepare(args.corpus) if args.corpus else _corpora.snapshot(args.tree)
    name = args.corpus or root.name
    queries = _corpora.queries(args.corpus, [], 20) if args.corpus else ["main function", "test"]
    work = Path(tempfile.mkdtemp(prefix="nodwyn-mcp-bench-"))
    data, config = work / "data", work / "config"
    env = _env(data, config)
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", "refresh", str(root)],
        env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    print(f"{name}: index built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    variants: dict[str, Path | None] = {"this": None}
    if args.against is not None:
        variants["against"] = args.against.resolve()
    other_python: Path | None = args.against_python
    if other_python is not None:
        variants["against"] = None
    loads = [Path("/proc/loadavg").read_text().split()[0]]
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    cpus: dict[str, list[float]] = {v: [] for v in variants}
    engine: list[float] = []
    engine_cpu: list[float] = []
    loaded_first: list[float] = []
    for _ in range(args.runs):
        for v, other in variants.items():
            command = _command(other, other_python if v == "against" else None)
            runs[v].append(asyncio.run(_server_run(root, env, queries, args.searches, command)))
        took, cpu, first = asyncio.run(_engine_run(root, data, config, queries, args.searches))
        engine.extend(took)
        engine_cpu.append(cpu)
        loaded_first.append(first)
        loads.append(Path("/proc/loadavg").read_text().split()[0])
    for _ in range(args.runs):
        for v, other in variants.items():
            command = _command(other, other_python if v == "against" else None)
            cpus[v].append(_first_cpu(root, env, queries[0], command)[1])
    # What the protocol's process has spent when it starts the engine's (asyncio too: on Linux
    # it is imported before the fork, once for both).
    spawn = _import_cpu_s(
        env, "import nodwyn_retrieval.cli, nodwyn_retrieval.mcp_server, subprocess, asyncio", 9
    )
    doc: dict[str, Any] = {
        "tree": name,
        "runs": args.runs,
        "engine_search_ms": round(statistics.median(engine) * 1000, 2),
        "engine_search_cpu_ms": round(statistics.median(engine_cpu) * 1000, 2),
        "loaded_first_search_cpu_s": round(statistics.median(loaded_first), 3),
        "python_s": _import_s(env, "pass", args.runs),
        "spawn_cpu_s": spawn,
        "sdk_types_import_cpu_s": _import_cpu_s(env, "import asyncio, mcp_types", 9),
        "sdk_server_import_cpu_s": _import_cpu_s(
            env, "from nodwyn_retrieval.mcp_server import _import_sdk; _import_sdk()", 9
        ),
        "sdk_import_s": _import_s(env, "import mcp.server.lowlevel", args.runs),
        "server_sdk_import_s": _import_s(
            env, "from nodwyn_retrieval.mcp_server import _import_sdk; _import_sdk()", args.runs
        ),
    }
    for v in variants:
        doc[v] = _figures(
            runs[v], cpus[v], engine, engine_cpu, statistics.median(loaded_first), spawn=spawn
        )
    doc["load"] = loads
    print(json.dumps(doc, indent=2))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
