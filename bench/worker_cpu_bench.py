"""The CPU of a first build's worker processes, beside the session's, on one tree.

    python bench/worker_cpu_bench.py --tree /tmp/nodwyn-bench/sympy --runs 3

Each run is a new process that opens the engine on a fresh data directory, calls
``index_update`` until the build is done and closes the engine (its workers reaped): the workers'
CPU is then the process's children's (``RUSAGE_CHILDREN``), the session's its own. CPU time, not
wall time, so that a shared machine's load moves it little; run it in turns with another
checkout's interpreter to compare. This is a measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import asyncio, json, resource, sys
from pathlib import Path
from nodwyn_retrieval.entry import Engine

async def main(root, data, config):
    engine = await Engine.open(Path(root), data_dir=Path(data), config_dir=Path(config))
    try:
        for _ in range(50):
            up = await engine.index_update()
            if not up.summary["partial"] or not up.summary["not_read"]:
                break
    finally:
        await engine.close()

asyncio.run(main(*sys.argv[1:4]))
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"session": me.ru_utime + me.ru_stime, "workers": kids.ru_utime + kids.ru_stime,
                  "workers_rss_kib": kids.ru_maxrss}))
"""


def one(python: str, tree: Path) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="nodwyn-wcpu-"))
    try:
        out = subprocess.run(
            [python, "-c", CHILD, str(tree), str(work / "data"), str(work / "config")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        stores = list((work / "data").rglob("chunks"))
        got = json.loads(out.stdout.strip().splitlines()[-1])
        got["store_bytes"] = sum(
            f.stat().st_size for s in stores for f in s.rglob("*") if f.is_file()
        )
        return got
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--python", action="append", default=[], help="interpreters taken in turns")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    pythons = args.python or [sys.executable]
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in pythons}
    for r in range(args.runs):
        for p in pythons:
            got = one(p, args.tree)
            runs[p].append(got)
            print(f"run {r} {p}: {json.dumps(got)}", flush=True)
    for p, rs in runs.items():
        med = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
        print(f"median {p}: {json.dumps(med)}")


if __name__ == "__main__":
    main()
