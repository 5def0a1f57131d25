"""A new session's first search of an indexed, unchanged tree, and a fresh tree's, alone.

    python bench/_repo_first.py --corpus sympy --sessions 7
    python bench/_repo_first.py --corpus git --cold 3

The first form builds the tree's index once in a data directory kept between runs (``--data``,
by default ``/tmp/nodwyn-bench/first-NAME``), then starts ``--sessions`` new processes one after the
other, each opening the engine and searching once (what bench/repo_bench.py's "new session" times:
``Engine.open`` and the first search, the imports left out), with ripgrep over the same query right
after each. The second starts ``--cold`` new processes on a fresh data directory each: the first
search of a tree never indexed, which reads what its 10 s bound allows (§5).

Both print the medians, the load average before and after, and one line a run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _corpora  # noqa: E402
import _peers  # noqa: E402
from _repo_children import first_search, ours_child  # noqa: E402
from _repo_report import loadavg  # noqa: E402


def _build(root: Path, data: Path, config: Path, work: Path) -> None:
    child = ours_child(root, data, config, work / "build.log")
    try:
        child.ask(op="open")
        built = child.ask(op="build")
        print(f"built in {built['seconds']:.2f} s ({len(built['calls'])} calls)", flush=True)
    finally:
        child.close()


def sessions(
    root: Path, data: Path, config: Path, work: Path, *, queries: list[str], n: int
) -> None:
    runs: list[dict[str, Any]] = []
    for s in range(n):
        q = queries[s % len(queries)]
        a = first_search(root, data, config, work / f"session{s}.log", q)
        rg = _peers.rg_count(root, q)[0] if _peers.have_rg() else float("nan")
        a["rg"] = rg
        runs.append(a)
        print(
            f"  {s}: first {a['seconds'] * 1e3:7.1f} ms (open {a['open'] * 1e3:6.1f}, search "
            f"{a['search']['seconds'] * 1e3:6.1f}; partial {a['search']['partial']}; CPU "
            f"{a['cpu'] * 1e3:6.1f} ms) "
            f"rg {rg * 1e3:6.1f} ms; {q!r}",
            flush=True,
        )
    med = statistics.median
    first = med(a["seconds"] for a in runs)
    rg = med(a["rg"] for a in runs)
    print(
        f"median: first {first * 1e3:.1f} ms (open {med(a['open'] for a in runs) * 1e3:.1f}, "
        f"search {med(a['search']['seconds'] for a in runs) * 1e3:.1f}; CPU "
        f"{med(a['cpu'] for a in runs) * 1e3:.1f}); rg {rg * 1e3:.1f} ms; "
        f"ratio {first / rg:.2f}x",
        flush=True,
    )


def cold(root: Path, work: Path, queries: list[str], n: int) -> None:
    for c in range(n):
        a = first_search(
            root, work / "cold-data", work / "config", work / f"cold{c}.log", queries[0], fresh=True
        )
        s = a["search"]
        print(
            f"  cold {c}: {a['seconds']:.2f} s (open {a['open']:.2f}, search {s['seconds']:.2f}); "
            f"partial {s['partial']}, not read {s['not_read']}, files {s['files']}; "
            f"process start to answer {a['since_start']:.2f} s; load {loadavg()}",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="sympy")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--sessions", type=int, default=0)
    ap.add_argument("--cold", type=int, default=0)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    root = _corpora.prepare(args.corpus)
    work = args.data or _corpora.CACHE / f"first-{args.corpus}"
    work.mkdir(parents=True, exist_ok=True)
    data, config = work / "data", work / "config"
    config.mkdir(parents=True, exist_ok=True)
    queries = _corpora.queries(args.corpus, _corpora.text_files(root), args.queries)
    print(f"{args.corpus}: load {loadavg()}", flush=True)
    if args.sessions:
        if not data.exists():
            _build(root, data, config, work)
        sessions(root, data, config, work, queries=queries, n=args.sessions)
    if args.cold:
        cold(root, work, queries, args.cold)
    print(f"load at the end {loadavg()}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"load": loadavg()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
