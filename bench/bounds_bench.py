"""The §5 bounds under load: no ``update`` call past 60 s, no search past 10 s, on a loaded machine.

Usage::

    nice python bench/bounds_bench.py                      # the 100,000-file tree and sympy
    python bench/bounds_bench.py --corpus sympy --burners 2 --max-seconds 900 --json out.json

Trees: ``bounds100k``, 100,000 files (324 MiB, files of at most 16 KiB) built once in the cache
directory (``/tmp/nodwyn-bench``, or ``NODWYN_BENCH_CACHE``) by the shared ``make_big_tree.py``,
and ``sympy``, a snapshot of the shared corpora. §2's limits (20,000 files, 128 MiB) make the big
tree a tree mostly over its limits: every refresh lists, stats and checks all 100,000 names.

Load: ``--burners`` processes (2 by default, one a core) spin on the CPU for the whole run, at the
same niceness as the sessions, so each session competes with them for the cores.

For each tree, with a fresh data directory, each session a new process:

1. cold: ``Engine.open`` and a first search of a tree never indexed (its refresh reads what it can
   in the bound), then ``index_update`` calls until nothing is left unread; every call timed;
2. warm: a new session's first search of the indexed tree (the snapshot is loaded);
3. changed: ``--changes`` files (3,000 by default) get a line appended, then a new session's first
   search, and ``index_update`` calls until nothing is left unread.

Every ``index_update`` call and every first search is recorded with its wall time, timed inside
the session around the call. The bound holds when no update call took more than 60.5 s and no
search more than 10.5 s (the half second is the time a call may take to stop). The whole run is
bounded by ``--max-seconds``: a session past it is killed and the run reported as cut short.
This is a measurement, not a test; it exits 1 when a bound is broken.

``BOUNDS_TRACE=1`` in the environment prints each session's refresher and indexer log at debug
level on stderr, with milliseconds since the session began: the indexer times each phase of a
refresh (the records' loading, the reads, storing, applying, the merge and the snapshot), the
time left to its deadline and the slowdown it measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora

UPDATE_BOUND = 60.5
SEARCH_BOUND = 10.5
BIG_FILES = 100_000
QUERY = {"sympy": "solve polynomial roots", "bounds100k": "matrix determinant"}


def say(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def prepare(name: str, files: int) -> Path:
    """The tree of name: sympy from the corpora, bounds100k built once with make_big_tree."""
    if name != "bounds100k":
        return _corpora.prepare(name)
    out = _corpora.CACHE / name
    if not (out / ".git").is_dir():
        if out.exists():
            raise SystemExit(f"{out} exists without a git repository: remove it first")
        say(f"building {out} ({files:,} files, once)")
        subprocess.run(
            [sys.executable, str(_corpora.MAKE_BIG), str(out), "--files", str(files),
             "--mib", "1024", "--max-file-kib", "16"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    return out


# -- a session, in a process of its own ------------------------------------------------------


async def _session(spec: dict[str, Any]) -> list[dict[str, Any]]:
    from nodwyn_retrieval.entry import Engine

    if os.environ.get("BOUNDS_TRACE"):
        import logging

        logging.basicConfig(format="%(relativeCreated)9.0f %(name)s %(message)s", stream=sys.stderr)
        logging.getLogger("nodwyn_retrieval.actors").setLevel(logging.DEBUG)

    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    engine = await Engine.open(spec["root"], data_dir=spec["data"], config_dir=spec["config"])
    rows.append({"op": "open", "seconds": time.perf_counter() - t0})
    try:
        if spec.get("search"):
            t = time.perf_counter()
            out = await engine.index_search(spec["search"], "repo")
            rows.append(
                {
                    "op": "first search",
                    "seconds": time.perf_counter() - t,
                    "partial": bool(out.header.get("partial")),
                    "not_seen": out.header.get("not_seen", 0),
                    "hits": len(out.hits),
                }
            )
        for _ in range(spec.get("updates", 0)):
            t = time.perf_counter()
            up = await engine.index_update()
            s = up.summary
            rows.append(
                {
                    "op": "update",
                    "seconds": time.perf_counter() - t,
                    "read": s["read"],
                    "not_read": s["not_read"],
                    "not_seen": s.get("not_seen", 0),
                    "files": s["files"],
                    "partial": s["partial"],
                }
            )
            # Done when nothing is left to read or to look at (a call that stopped in the listing
            # or the stats reads nothing and goes on at the next).
            if s.get("not_seen", 0) == 0 and (s["not_read"] == 0 or s["read"] == 0):
                break
    finally:
        await engine.close()
    return rows


def child(spec_json: str) -> int:
    rows = asyncio.run(_session(json.loads(spec_json)))
    print(json.dumps(rows))
    return 0


def run_session(spec: dict[str, Any], deadline: float) -> list[dict[str, Any]] | None:
    """One session in a new process; None when it ran past the run's deadline (killed)."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=left)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    if proc.returncode != 0:
        raise SystemExit(f"a session failed (exit {proc.returncode})")
    rows: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return rows


# -- the load -------------------------------------------------------------------------------


def start_burners(n: int) -> list[subprocess.Popen[bytes]]:
    code = "import time\nend = time.monotonic() + float(__import__('sys').argv[1])\n" \
           "while time.monotonic() < end:\n    pass\n"  # fmt: skip
    # Each stops by itself after an hour even if this process dies.
    return [subprocess.Popen([sys.executable, "-c", code, "3600"]) for _ in range(n)]


def stop_burners(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


# -- a tree ---------------------------------------------------------------------------------


def touch(root: Path, n: int) -> int:
    """Append a line to n listed source or text files spread over the tree; how many changed."""
    listed = [
        p for p in _corpora.listed(root) if Path(p).suffix in {".py", ".rst", ".txt", ".c", ".h"}
    ]
    step = max(1, len(listed) // max(1, n))
    done = 0
    for p in listed[::step][:n]:
        path = root / p
        if path.is_symlink() or not path.is_file():
            continue
        with open(path, "ab") as f:
            f.write(b"\n# changed for the bounds benchmark\n")
        done += 1
    return done


def measure(name: str, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    root = prepare(name, args.files)
    work = Path(tempfile.mkdtemp(prefix=f"bounds-{name}-", dir=_corpora.CACHE))
    tree = work / "tree"
    say(f"[{name}] copying the tree to {tree}")
    subprocess.run(["cp", "-a", str(root), str(tree)], check=True)
    base = {"root": str(tree), "data": str(work / "data"), "config": str(work / "config")}
    query = QUERY.get(name, "main function")
    phases: list[tuple[str, dict[str, Any] | None]] = [
        ("cold", {**base, "search": query, "updates": args.max_updates}),
        ("warm", {**base, "search": query}),
        ("changed", None),  # files touched first
    ]
    rows: list[dict[str, Any]] = []
    cut = False
    try:
        for phase, given in phases:
            spec = given
            if spec is None:
                changed = touch(tree, args.changes)
                say(f"[{name}] {changed:,} files changed")
                spec = {**base, "search": query, "updates": args.max_updates}
            say(f"[{name}] {phase} session; load {loadavg()}")
            got = run_session(spec, deadline)
            if got is None:
                cut = True
                say(f"[{name}] cut short: past --max-seconds")
                break
            for r in got:
                r["phase"] = phase
                say(f"  {phase:8s} {r['op']:13s} {r['seconds']:7.2f} s"
                    + "".join(f" {k}={r[k]}" for k in ("read", "not_read", "files", "partial")
                              if k in r)
                    + (f" not_seen={r['not_seen']}" if r.get("not_seen") else ""))  # fmt: skip
            rows.extend(got)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    updates = [r["seconds"] for r in rows if r["op"] == "update"]
    searches = [r["seconds"] for r in rows if r["op"] == "first search"]
    return {
        "tree": name,
        "listed": len(_corpora.listed(root)),
        "rows": rows,
        "cut_short": cut,
        "max_update": max(updates, default=None),
        "max_search": max(searches, default=None),
        "updates_ok": all(s <= UPDATE_BOUND for s in updates),
        "searches_ok": all(s <= SEARCH_BOUND for s in searches),
    }


def report(results: list[dict[str, Any]], load: tuple[str, str], burners: int) -> str:
    lines = [
        f"load average {load[0]} at the start, {load[1]} at the end; {burners} CPU burner(s)"
        f" on {os.cpu_count()} cores",
        "",
        "| tree | listed | phase | call | wall time | read | not read | not seen | partial |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for r in res["rows"]:
            if r["op"] == "open":
                continue
            lines.append(
                f"| {res['tree']} | {res['listed']:,} | {r['phase']} | {r['op']} |"
                f" {r['seconds']:.2f} s | {r.get('read', '')} | {r.get('not_read', '')} |"
                f" {r.get('not_seen', '')} | {r.get('partial', '')} |"
            )
    lines.append("")
    for res in results:
        mu, ms = res["max_update"], res["max_search"]
        lines.append(
            f"{res['tree']}: longest update {mu if mu is None else round(mu, 2)} s"
            f" (bound {UPDATE_BOUND} s: {'held' if res['updates_ok'] else 'BROKEN'}),"
            f" longest first search {ms if ms is None else round(ms, 2)} s"
            f" (bound {SEARCH_BOUND} s: {'held' if res['searches_ok'] else 'BROKEN'})"
            + (" - cut short" if res["cut_short"] else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", choices=["bounds100k", "sympy"])
    ap.add_argument("--files", type=int, default=BIG_FILES, help="files of the big tree")
    ap.add_argument("--burners", type=int, default=2, help="CPU burner processes beside it")
    ap.add_argument("--changes", type=int, default=3000, help="files changed before 'changed'")
    ap.add_argument("--max-updates", type=int, default=20, help="update calls a session at most")
    ap.add_argument("--max-seconds", type=float, default=1800, help="the whole run's bound")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the trees' copies and data")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    names = args.corpus or ["bounds100k", "sympy"]
    for n in names:  # built before the clock starts
        prepare(n, args.files)
    deadline = time.monotonic() + args.max_seconds
    start_load = loadavg()
    burners = start_burners(args.burners)
    results: list[dict[str, Any]] = []
    try:
        for n in names:
            results.append(measure(n, args, deadline))
    finally:
        stop_burners(burners)
    text = report(results, (start_load, loadavg()), args.burners)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "load": [start_load, loadavg()]}))
    ok = all(r["updates_ok"] and r["searches_ok"] and not r["cut_short"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
