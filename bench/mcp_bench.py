"""The MCP server's figures (docs/benchmarks.md, "MCP"): a server's first search of a repository
the index already holds, from the server's start, and what a later search adds over
``Engine.index_search`` itself.

    python bench/mcp_bench.py --corpus sympy            # the shared corpora's snapshot, made once
    python bench/mcp_bench.py --tree PATH --runs 5

The index is built once first (``nodwyn-retrieval refresh``) in a data directory of the run's own.
Then, ``--runs`` times, a server is started by the MCP SDK's client over stdio (a new process,
as an agent starts it) and the time from before the process is started to the first
``index-search`` result is taken: the start of Python, the SDK's import, the handshake, the
Engine opened at the first call, the refresh that finds the tree unchanged, and the search. Then
``--searches`` searches in that server, each timed at the client, against the same searches made
in this process with ``Engine.index_search`` on the same index. Then servers asked one search
each, for the CPU time of every process they ran from start to exit (what the start costs with a
core free). Medians; the load is printed.
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
    root: Path, env: dict[str, str], queries: list[str], searches: int
) -> dict[str, Any]:
    from mcp import ClientSession, types
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "nodwyn_retrieval", "mcp"], env=env, cwd=str(root)
    )
    later: list[float] = []
    t0 = time.perf_counter()
    with open(os.devnull, "w") as err:  # noqa: ASYNC230  the child writes it
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            t_init = time.perf_counter()
            r = await s.call_tool("index-search", {"query": queries[0], "scope": "repo"})
            first = time.perf_counter() - t0
            assert not r.is_error, r
            block = r.content[0]
            assert isinstance(block, types.TextContent)
            for q in (queries * (searches // len(queries) + 1))[:searches]:
                t = time.perf_counter()
                r = await s.call_tool("index-search", {"query": q, "scope": "repo"})
                later.append(time.perf_counter() - t)
                assert not r.is_error
    return {"first_s": first, "handshake_s": t_init - t0, "later_s": later}


def _first_cpu(root: Path, env: dict[str, str], query: str) -> tuple[float, float]:
    """A server started, asked one search and closed: (wall to the answer, CPU of every process
    it ran, start to exit). The CPU time is what the start costs on a machine with a core free."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = asyncio.run(_server_run(root, env, [query], 0))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return got["first_s"], cpu


async def _engine_run(
    root: Path, data: Path, config: Path, queries: list[str], searches: int
) -> list[float]:
    from nodwyn_retrieval.entry import Engine

    engine = await Engine.open(root, data_dir=data, config_dir=config, workers=1)
    out: list[float] = []
    try:
        await engine.index_search(queries[0], "repo")
        for q in (queries * (searches // len(queries) + 1))[:searches]:
            t = time.perf_counter()
            await engine.index_search(q, "repo")
            out.append(time.perf_counter() - t)
    finally:
        await engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--corpus", help="a shared corpus (sympy, ...)")
    g.add_argument("--tree", type=Path, help="a git working tree (copied first)")
    ap.add_argument("--runs", type=int, default=5, help="servers started")
    ap.add_argument("--searches", type=int, default=40, help="later searches in each")
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
    loads = [Path("/proc/loadavg").read_text().split()[0]]
    firsts: list[float] = []
    shakes: list[float] = []
    later: list[float] = []
    engine: list[float] = []
    for _ in range(args.runs):
        got = asyncio.run(_server_run(root, env, queries, args.searches))
        firsts.append(got["first_s"])
        shakes.append(got["handshake_s"])
        later.extend(got["later_s"])
        engine.extend(asyncio.run(_engine_run(root, data, config, queries, args.searches)))
        loads.append(Path("/proc/loadavg").read_text().split()[0])
    cpus = [_first_cpu(root, env, queries[0])[1] for _ in range(args.runs)]
    imports = []
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mcp.server.lowlevel"], env=env, check=True)
        imports.append(time.perf_counter() - t)
    first = statistics.median(firsts)
    over_ms = (statistics.median(later) - statistics.median(engine)) * 1000
    doc = {
        "tree": name,
        "runs": args.runs,
        "searches": len(later),
        "first_search_s": round(first, 3),
        "first_search_s_each": [round(x, 3) for x in firsts],
        "handshake_s": round(statistics.median(shakes), 3),
        "python_and_sdk_import_s": round(statistics.median(imports), 3),
        "first_search_cpu_s": round(statistics.median(cpus), 3),
        "later_search_ms": round(statistics.median(later) * 1000, 2),
        "engine_search_ms": round(statistics.median(engine) * 1000, 2),
        "added_ms": round(over_ms, 2),
        "load": loads,
        "first_ok": first <= FIRST_TARGET_S,
        "later_ok": over_ms <= LATER_TARGET_MS,
    }
    print(json.dumps(doc, indent=2))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
