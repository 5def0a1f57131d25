"""Repository search beside its peers, in one run: build, warm search, search after a change,
a new session, store size, memory and the §5 bounds, with the ratios of docs/PERFORMANCE targets.

Usage (from a clean clone; the optional peers are the ``bench`` extra, ripgrep is a system
package)::

    pip install '.[bench]'                      # bm25s and tantivy
    python bench/repo_bench.py --tree .         # any git working tree
    python bench/repo_bench.py --corpus sympy   # a snapshot of the shared corpora, made once
    python bench/repo_bench.py --corpus sympy --corpus big --json out.json --markdown

``--tree PATH`` copies the files git lists in that tree (uncommitted changes included) into the
cache directory (``/tmp/nodwyn-bench/tree-NAME``) and measures the copy: the change tests append
lines to files, which must never happen to a tree someone is editing. ``--corpus NAME`` unpacks
``NAME.tar.gz`` of the shared corpora into the cache directory (``/tmp/nodwyn-bench/NAME``) and
commits it as a git repository; ``--corpus big`` builds the big tree there once with the shared
``make_big_tree.py`` (~128 MiB). Each tree gets a fresh data directory, deleted at the end unless
``--keep``.

What is measured, for this project and for the peers on the same tree in the same run:

- first build: a fresh data directory, ``index_update`` until it is not partial, in a new process,
  timed from the process start (imports and the pool's start included), with its peak memory; the
  peers (bm25s, tantivy) index the same §6 chunks, timed apart from reading and cutting them;
- warm search of the unchanged tree in the session that built it, refresh included, p50 and p90
  over the queries, each run ``--repeat`` times, interleaved with ripgrep (``rg -c -i 'a|b'``) and
  the peers' warm searches so that the machine's noise hits all of them alike;
- search after one file changed (a line appended before each search), beside unchanged searches
  taken in the same loop;
- a new session's first search of the indexed tree: ``Engine.open`` and one search in a new
  process, timed inside it, and the process's wall time from its start;
- the store on disk and a session's peak resident memory, over the indexed text;
- on the big tree (or with ``--bounds``): a search after 3,000 files changed (the 10 s bound) and
  the longest single ``index_update`` call of the first build (the 60 s bound).

Times are medians unless said otherwise; the machine is shared, so the load average is printed at
the start and the end. This is a measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import _corpora  # noqa: E402
import _peers  # noqa: E402

MB = 1e6
BOUND_FILES = 3000

# PERFORMANCE.md's targets, as (key, what, target text, test of the measured ratio or seconds).
# The warm search and the new session have one target for sympy and another for big; any other
# tree is held to sympy's.
Check = Callable[[float], bool]


def _targets(big: bool) -> list[tuple[str, str, str, Check]]:
    warm = 0.5 if big else 0.3
    first = 2.0 if big else 1.0
    return [
        ("build_vs_bm25s", "first build throughput / bm25s's", ">= 2x", lambda r: r >= 2.0),
        ("build_vs_tantivy", "first build throughput / tantivy's", ">= 0.3x", lambda r: r >= 0.3),
        ("warm_vs_rg", "warm search p50 / ripgrep p50", f"<= {warm}x", lambda r: r <= warm),
        ("change_vs_warm", "search after a change / unchanged", "<= 1.5x", lambda r: r <= 1.5),
        (
            "first_vs_rg",
            "new session's first search / ripgrep",
            f"<= {first:g}x",
            lambda r: r <= first,
        ),
        ("store_vs_text", "store on disk / text", "<= 0.5x", lambda r: r <= 0.5),
        ("rss_vs_text", "session peak RSS / text", "<= 1.5x", lambda r: r <= 1.5),
        ("bound_search_s", "search, many files changed (s)", "<= 10.5 s", lambda s: s <= 10.5),
        ("bound_update_s", "longest index_update call (s)", "<= 60.5 s", lambda s: s <= 60.5),
    ]


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
        str(Path(__file__).resolve()),
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


def peer_child(kind: str, root: Path, log: Path) -> Child:
    return Child([sys.executable, str(HERE / "_peers.py"), "serve", kind, str(root)], log)


# -- this project's child ------------------------------------------------------------------------


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
                    opened = await open_engine()
                    s = await search(req["q"])
                    ans = {
                        "open": opened,
                        "search": s,
                        "seconds": opened + s["seconds"],
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


# -- statistics and formatting ---------------------------------------------------------------------


def _median_build(rounds: list[dict[str, Any]], by: str = "index") -> dict[str, Any]:
    """The round whose ``by`` time is the median (the lower of the two middle ones)."""
    ordered = sorted(rounds, key=lambda r: r[by])
    return dict(ordered[(len(ordered) - 1) // 2])


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def p90(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


def ms(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x / MB:.1f} MB"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def fx(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def say(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- one tree --------------------------------------------------------------------------------------


def _git_top(path: Path) -> Path:
    out = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{path} is not in a git working tree")
    return Path(out.stdout.strip())


def _edit_file(files: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    """The file edited by the change test: a source file at the 75th percentile of size."""
    code = [f for f in files if f[0].endswith((".py", ".c", ".h", ".go", ".js", ".ts", ".rs"))]
    pool = sorted(code or files, key=lambda f: (len(f[1]), f[0]))
    return pool[int(0.75 * (len(pool) - 1))]


class Run:
    """Every measurement of one tree."""

    def __init__(self, name: str, root: Path, args: argparse.Namespace, work: Path) -> None:
        self.name = name
        self.root = root
        self.args = args
        self.work = work
        self.big = name == "big"
        self.r: dict[str, Any] = {"tree": name, "root": str(root)}
        self.peers: dict[str, Child] = {}
        self.notes: list[str] = []

    # -- pieces --

    def floors(self, paths: list[str]) -> None:
        fl: dict[str, list[float]] = {"git_ls_files": [], "lstat": [], "read": [], "sha256": []}
        for _ in range(max(3, self.args.repeat)):
            fl["git_ls_files"].append(_peers.git_ls_files(self.root))
            fl["lstat"].append(_peers.lstat_all(self.root, paths))
            fl["read"].append(_peers.read_all(self.root, paths))
            fl["sha256"].append(_peers.sha_all(self.root, paths))
        self.r["floors"] = {k: p50(v) for k, v in fl.items()}

    def start_peers(self, last: bool = True) -> None:
        """Each peer's build in a new process; the last round's processes stay for searching.

        With ``--builds N`` this runs N times, between the project's builds, and each figure of
        the peers' build is the median of its rounds (``"rounds"`` keeps them all).
        """
        kinds = [] if self.args.skip_peers else ["bm25s", "tantivy", "naive"]
        peers = self.r.setdefault("peers", {})
        for kind in kinds:
            why = _peers.available(kind)
            if why is not None:
                if last:
                    self.notes.append(f"{kind} skipped: {why}")
                continue
            if kind == "naive" and (self.args.no_naive or not last):
                continue  # the naive prototype is a floor, built once
            say(f"  {kind}: build")
            child = peer_child(kind, self.root, self.work / f"{kind}.log")
            try:
                built = child.ask(op="build")
            except RuntimeError as e:
                self.notes.append(f"{kind} failed: {e}")
                child.close()
                continue
            rounds = [*peers.get(kind, {}).get("rounds", []), built]
            peers[kind] = {"build": _median_build(rounds), "rounds": rounds, "search": []}
            if kind == "naive" or not last:
                child.close()
            else:
                self.peers[kind] = child

    def build_ours(self) -> Child:
        data, config = self.work / "data", self.work / "config"
        shutil.rmtree(data, ignore_errors=True)
        config.mkdir(parents=True, exist_ok=True)
        say("  ours: first build")
        child = ours_child(self.root, data, config, self.work / "ours-build.log")
        child.send(op="open")
        child.send(op="build")
        opened = child.recv()
        built = child.recv()
        wall = time.perf_counter() - child.started
        mem = child.ask(op="mem")
        store = child.ask(op="store")
        one = {
            "wall": wall,
            "open": opened["seconds"],
            **built,
            "mem": mem["mem"],
            "store": store["bytes"],
        }
        rounds = [*self.r.get("build", {}).get("rounds", []), one]
        # The median round's figures (by wall time), every round kept.
        self.r["build"] = {**_median_build(rounds, "wall"), "rounds": rounds}
        return child

    def cold_search(self, queries: list[str]) -> None:
        """A fresh tree's first search in a new process: a fresh data directory, ``Engine.open``
        and one search, which indexes what its 10 s bound allows (§5)."""
        runs = []
        for n in range(self.args.builds):
            data, config = self.work / "cold-data", self.work / "config"
            shutil.rmtree(data, ignore_errors=True)
            config.mkdir(parents=True, exist_ok=True)
            say("  ours: a fresh tree's first search")
            child = ours_child(self.root, data, config, self.work / f"ours-cold{n}.log")
            try:
                a = child.ask(op="first", q=queries[0])
                a["wall"] = time.perf_counter() - child.started
            finally:
                child.close()
            shutil.rmtree(data, ignore_errors=True)
            runs.append(a)
        runs.sort(key=lambda a: a["seconds"])
        mid = runs[(len(runs) - 1) // 2]
        self.r["cold"] = {
            "seconds": mid["seconds"],
            "wall": mid["wall"],
            "search": mid["search"],
            "partial": sum(bool(a["search"]["partial"]) for a in runs),
            "n": len(runs),
            "all": [round(a["seconds"], 3) for a in runs],
        }

    def warm(self, ours: Child, queries: list[str]) -> None:
        for q in queries:  # the first search after a build may list the tree: not warm yet
            ours.ask(op="search", q=q)
        use_rg = _peers.have_rg() and not self.args.skip_peers
        if not use_rg and not self.args.skip_peers:
            self.notes.append("ripgrep skipped: rg not on PATH (apt-get install ripgrep)")
        times: dict[str, list[float]] = {"ours": [], "rg": []}
        for kind in self.peers:
            times[kind] = []
        partial = 0
        names = list(times)
        for rep in range(self.args.repeat):
            for qi, q in enumerate(queries):
                k = (rep + qi) % len(names)
                for name in names[k:] + names[:k]:
                    if name == "ours":
                        a = ours.ask(op="search", q=q)
                        times["ours"].append(a["seconds"])
                        partial += bool(a["partial"])
                    elif name == "rg":
                        if use_rg:
                            times["rg"].append(_peers.rg_count(self.root, q)[0])
                    else:
                        times[name].append(self.peers[name].ask(op="search", q=q)["seconds"])
        self.r["warm"] = {
            k: {"p50": p50(v), "p90": p90(v), "n": len(v)} for k, v in times.items() if v
        }
        self.r["warm"]["ours"]["partial"] = partial

    def change(self, ours: Child, files: list[tuple[str, bytes]], queries: list[str]) -> None:
        rel, original = _edit_file(files)
        path = self.root / rel
        changed: list[float] = []
        unchanged: list[float] = []
        try:
            for e in range(self.args.edits):
                q = queries[e % len(queries)]
                with open(path, "ab") as f:
                    f.write(f"\n# nodwyn bench edit {e} {q}\n".encode())
                changed.append(ours.ask(op="search", q=q)["seconds"])
                unchanged.append(ours.ask(op="search", q=q)["seconds"])
        finally:
            path.write_bytes(original)
        ours.ask(op="search", q=queries[0])  # the restored file is indexed again
        self.r["change"] = {
            "file": rel,
            "bytes": len(original),
            "changed_p50": p50(changed),
            "unchanged_p50": p50(unchanged),
            "n": len(changed),
        }

    def sessions(self, queries: list[str]) -> None:
        data, config = self.work / "data", self.work / "config"
        firsts = []
        rg_times = []
        last: Child | None = None
        for s in range(self.args.sessions):
            q = queries[s % len(queries)]
            child = ours_child(self.root, data, config, self.work / f"ours-session{s}.log")
            a = child.ask(op="first", q=q)
            a["wall"] = time.perf_counter() - child.started
            firsts.append(a)
            if _peers.have_rg() and not self.args.skip_peers:
                rg_times.append(_peers.rg_count(self.root, q)[0])
            if s == self.args.sessions - 1:
                last = child
            else:
                child.close()
        self.r["first"] = {
            "seconds": p50([f["seconds"] for f in firsts]),
            "open": p50([f["open"] for f in firsts]),
            "search": p50([f["search"]["seconds"] for f in firsts]),
            "import": p50([f["import"] for f in firsts]),
            "wall": p50([f["wall"] for f in firsts]),
            "rg": p50(rg_times) if rg_times else None,
            "partial": sum(bool(f["search"]["partial"]) for f in firsts),
            "n": len(firsts),
        }
        if last is not None:
            for q in queries:
                last.ask(op="search", q=q)
            m = last.ask(op="mem")
            self.r["session_mem"] = {**m["mem"], "import_rss": m["mem_import"]["rss"]}
            if self.args.bounds or (self.big and not self.args.no_bounds):
                self.bound_search(last, queries)
            last.close()

    def bound_search(self, ours: Child, queries: list[str]) -> None:
        listed = [p for p, _ in _corpora.text_files(self.root)]
        step = max(1, len(listed) // BOUND_FILES)
        chosen = listed[::step][:BOUND_FILES]
        say(f"  ours: search after {len(chosen)} files changed")
        originals = {p: (self.root / p).read_bytes() for p in chosen}
        try:
            for p in chosen:
                with open(self.root / p, "ab") as f:
                    f.write(b"\n# nodwyn bench bound\n")
            a = ours.ask(op="search", q=queries[0])
        finally:
            for p, data in originals.items():
                (self.root / p).write_bytes(data)
        self.r["bound_search"] = {**a, "changed": len(chosen)}
        for _ in range(10):  # put the index back in step with the restored tree
            if not ours.ask(op="update")["not_read"]:
                break

    # -- the whole tree --

    def measure(self) -> dict[str, Any]:
        r = self.r
        r["load_start"] = loadavg()
        files = _corpora.text_files(self.root)
        paths = _corpora.listed(self.root)
        queries = _corpora.queries(self.name, files, self.args.queries)
        r.update(
            files=len(files),
            listed=len(paths),
            text_bytes=sum(len(d) for _, d in files),
            queries=queries,
        )
        say(
            f"{self.name}: {len(files)} text files, {r['text_bytes'] / MB:.1f} MB, "
            f"{len(queries)} queries x {self.args.repeat}; load {r['load_start']}"
        )
        self.floors(paths)
        if self.args.cold:
            self.cold_search(queries)
        for n in range(self.args.builds - 1):  # earlier rounds, each closed when done
            self.build_ours().close()
            self.start_peers(last=False)
            say(f"  build round {n + 1} of {self.args.builds} done; load {loadavg()}")
        ours = self.build_ours()
        try:
            self.start_peers()
            say("  warm searches, interleaved")
            self.warm(ours, queries)
            say("  search after a change")
            self.change(ours, files, queries)
        finally:
            ours.close()
            for child in self.peers.values():
                child.close()
        say("  new sessions")
        self.sessions(queries)
        r["load_end"] = loadavg()
        r["notes"] = self.notes
        r["ratios"] = self.ratios()
        return r

    def ratios(self) -> dict[str, float | None]:
        r = self.r
        b = r["build"]
        text = r["text_bytes"]
        ours_mbs = b["bytes"] / b["wall"] if b.get("wall") else None
        peers = r.get("peers", {})

        def peer_mbs(kind: str) -> float | None:
            p = peers.get(kind, {}).get("build")
            return p["bytes"] / p["index"] if p and p.get("index") else None

        warm = r["warm"]
        rg = warm.get("rg", {}).get("p50")
        ch = r["change"]
        first = r["first"]
        mem = r.get("session_mem", {})
        out: dict[str, float | None] = {
            "build_vs_bm25s": ratio(ours_mbs, peer_mbs("bm25s")),
            "build_vs_tantivy": ratio(ours_mbs, peer_mbs("tantivy")),
            "warm_vs_rg": ratio(warm["ours"]["p50"], rg),
            "change_vs_warm": ratio(ch["changed_p50"], ch["unchanged_p50"]),
            "first_vs_rg": ratio(first["seconds"], first["rg"]),
            "store_vs_text": ratio(b["store"], text),
            "rss_vs_text": ratio(mem.get("hwm"), text),
            "bound_search_s": r["bound_search"]["seconds"] if "bound_search" in r else None,
            "bound_update_s": max(c["seconds"] for c in b["calls"]) if self.big else None,
        }
        return out


# -- printing --------------------------------------------------------------------------------------


def _rounds_note(b: dict[str, Any], peers: dict[str, Any]) -> str:
    rounds = b.get("rounds", [])
    if len(rounds) < 2:
        return ""

    def times(xs: list[dict[str, Any]], key: str) -> str:
        return ", ".join(f"{x[key]:.2f}" for x in xs)

    parts = [f"ours {times(rounds, 'wall')} s"]
    for kind in ("bm25s", "tantivy"):
        pr = peers.get(kind, {}).get("rounds", [])
        if pr:
            parts.append(f"{kind} {times(pr, 'index')} s")
    return f"; median of {len(rounds)} rounds ({'; '.join(parts)})"


def report(r: dict[str, Any], markdown: bool) -> str:
    """The tables of one tree: side by side, floors, and the targets."""
    text = r["text_bytes"]
    b = r["build"]
    peers = r.get("peers", {})
    warm = r["warm"]
    out: list[str] = []
    head = (
        f"{r['tree']}: {r['files']:,} text files of {r['listed']:,} listed, "
        f"{text / MB:.1f} MB of text; {len(r['queries'])} queries; "
        f"load {r['load_start']} -> {r['load_end']}"
    )
    out.append(f"### {head}" if markdown else head)
    out.append("")

    def build_cell(seconds: float | None, nbytes: float | None) -> str:
        if not seconds or not nbytes:
            return "-"
        return f"{seconds:.2f} s ({nbytes / MB / seconds:.1f} MB/s)"

    def peer(kind: str, f: Callable[[dict[str, Any]], str]) -> str:
        p = peers.get(kind)
        return f(p) if p else "-"

    def wcell(name: str) -> str:
        w = warm.get(name)
        return f"{ms(w['p50'])} / {ms(w['p90'])}" if w else "-"

    mem = b["mem"]
    smem = r.get("session_mem", {})
    ch = r["change"]
    first = r["first"]
    rows = [
        [
            "first build (MB/s of text)",
            build_cell(b["wall"], b["bytes"])
            + f"; in process {b['seconds']:.2f} s, {len(b['calls'])} update call(s)",
            "-",
            peer("bm25s", lambda p: build_cell(p["build"]["index"], p["build"]["bytes"])),
            peer("tantivy", lambda p: build_cell(p["build"]["index"], p["build"]["bytes"])),
            "ours: process start to done; peers: index only (read + chunk apart)"
            + _rounds_note(b, peers),
        ],
        [
            "peak RSS while building",
            f"{mib(mem['hwm'])} (+ workers {mib(mem['children_hwm'])})",
            "-",
            peer("bm25s", lambda p: mib(p["build"]["mem"]["hwm"])),
            peer("tantivy", lambda p: mib(p["build"]["mem"]["hwm"])),
            "peers' figure holds the chunk texts too",
        ],
        [
            "warm search p50 / p90",
            wcell("ours"),
            wcell("rg"),
            wcell("bm25s"),
            wcell("tantivy"),
            "ours: refresh included; peers: no refresh",
        ],
        [
            "search after one change (p50)",
            f"{ms(ch['changed_p50'])} (unchanged {ms(ch['unchanged_p50'])})",
            "-",
            "-",
            "-",
            f"a line appended to {ch['file']} ({ch['bytes']:,} B), {ch['n']} edits",
        ],
        [
            "new session's first search",
            f"{ms(first['seconds'])} (open {ms(first['open'])}, search {ms(first['search'])}); "
            f"process {ms(first['wall'])}",
            ms(first["rg"]),
            "-",
            "-",
            f"median of {first['n']} new processes; process: start, imports, open, search",
        ],
        [
            "store on disk",
            f"{mib(b['store'])} ({fx(ratio(b['store'], text))} text)",
            "-",
            "-",
            peer(
                "tantivy",
                lambda p: f"{mib(p['build']['disk'])} ({fx(ratio(p['build']['disk'], text))} text)",
            ),
            "the project's index directory",
        ],
        [
            "session peak RSS",
            f"{mib(smem.get('hwm'))} ({fx(ratio(smem.get('hwm'), text))} text; "
            f"{mib(smem.get('import_rss'))} after imports)"
            if smem
            else "-",
            "-",
            "-",
            "-",
            "a new session after its searches",
        ],
    ]
    if "cold" in r:
        c = r["cold"]
        s = c["search"]
        rows.append(
            [
                "a fresh tree's first search",
                f"{c['seconds']:.2f} s (search {s['seconds']:.2f} s), partial {c['partial']} of"
                f" {c['n']}, not read {s['not_read']:,}; process {c['wall']:.2f} s",
                "-",
                "-",
                "-",
                f"a new process, a fresh data directory, one search (10 s bound); all {c['all']}",
            ]
        )
    if "bound_search" in r:
        bs = r["bound_search"]
        rows.append(
            [
                f"search, {bs['changed']:,} files changed",
                f"{bs['seconds']:.2f} s, partial {bs['partial']}, not read {bs['not_read']:,}",
                "-",
                "-",
                "-",
                "a line appended to each, then one search (the 10 s bound)",
            ]
        )
    rows.append(
        [
            "longest index_update call",
            f"{max(c['seconds'] for c in b['calls']):.2f} s",
            "-",
            "-",
            "-",
            "of the first build",
        ]
    )
    out.append(
        table(["figure", "this project", "ripgrep", "bm25s", "tantivy", "note"], rows, markdown)
    )
    out.append("")

    fl = r["floors"]
    frows = [
        ["git ls-files", ms(fl["git_ls_files"])],
        ["lstat of every listed file (Python loop)", ms(fl["lstat"])],
        ["read every listed file (Python)", ms(fl["read"])],
        ["SHA-256 of every listed file", ms(fl["sha256"])],
    ]
    nv = peers.get("naive")
    if nv:
        frows.append(
            [
                "naive Python chunk + words (one core)",
                build_cell(nv["build"]["index"], nv["build"]["bytes"]),
            ]
        )
    for kind in ("bm25s", "tantivy"):
        p = peers.get(kind)
        if p:
            frows.append(
                [
                    f"{kind}: read + cut the chunks (Python)",
                    f"{ms(p['build']['prep'])}, {p['build']['docs']:,} chunks",
                ]
            )
    out.append(table(["floor", "time"], frows, markdown))
    out.append("")

    trows = []
    for key, what, target, ok in _targets(r["tree"] == "big"):
        v = r["ratios"].get(key)
        if v is None:
            continue
        shown = f"{v:.2f} s" if key.startswith("bound") else f"{v:.2f}x"
        note = ""
        if key == "rss_vs_text" and r["tree"] != "big":
            note = " (the target is big's)"
        trows.append([what, shown, target, ("met" if ok(v) else "not met") + note])
    out.append(table(["ratio", "measured", "target", ""], trows, markdown))
    for n in r.get("notes", []):
        out.append(f"- {n}" if markdown else f"note: {n}")
    return "\n".join(out)


# -- profiling -------------------------------------------------------------------------------------


def profile(root: Path, name: str, args: argparse.Namespace, work: Path, out: Path) -> None:
    """pyinstrument profiles of the session's process: the first build, then warm searches."""
    out.mkdir(parents=True, exist_ok=True)
    files = _corpora.text_files(root)
    queries = _corpora.queries(name, files, args.queries)
    data, config = work / "data", work / "config"
    config.mkdir(parents=True, exist_ok=True)
    for phase in ("build", "search"):
        child = ours_child(
            root, data, config, work / f"profile-{phase}.log", out / f"{name}-{phase}.txt"
        )
        try:
            if phase == "build":
                child.ask(op="profile", on=True)
                child.ask(op="open")
                child.ask(op="build")
                child.ask(op="profile", on=False)
            else:
                child.ask(op="open")
                for q in queries:
                    child.ask(op="search", q=q)
                child.ask(op="profile", on=True)
                for _ in range(args.repeat):
                    for q in queries:
                        child.ask(op="search", q=q)
                child.ask(op="profile", on=False)
        finally:
            child.close()
        say(f"profile of the {phase}: {out / f'{name}-{phase}.txt'}")


# -- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument(
        "--corpus",
        action="append",
        default=[],
        help="a shared corpus (sympy, flask, requests, git, astropy) or big",
    )
    ap.add_argument("--tree", action="append", default=[], type=Path, help="a git working tree")
    ap.add_argument("--queries", type=int, default=20, help="how many queries (default 20)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each query (default 5)")
    ap.add_argument("--edits", type=int, default=10, help="edits in the change test")
    ap.add_argument("--sessions", type=int, default=3, help="new sessions timed (default 3)")
    ap.add_argument(
        "--builds",
        type=int,
        default=1,
        help="first builds, ours and the peers' (median; default 1)",
    )
    ap.add_argument(
        "--cold", action="store_true", help="a fresh tree's first search in a new process"
    )
    ap.add_argument("--skip-peers", action="store_true", help="this project and the floors only")
    ap.add_argument("--no-naive", action="store_true", help="skip the naive prototype")
    ap.add_argument("--bounds", action="store_true", help="the 10 s test on any tree")
    ap.add_argument("--no-bounds", action="store_true", help="not even on big")
    ap.add_argument("--json", type=Path, help="write every figure as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="only profile the build and warm searches (pyinstrument) into DIR",
    )
    ap.add_argument("--render", type=Path, metavar="JSON", help="print the tables of a --json file")
    ap.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--serve-ours", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--config-dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.serve_ours is not None:
        serve_ours(args.serve_ours, args.data_dir, args.config_dir, args.workers, args.profile_out)
        return 0

    if args.render is not None:
        saved = json.loads(args.render.read_text())
        print(
            f"{saved['command']}\n{saved['date']}, load average {saved['load_start']} at the "
            f"start, {saved['load_end']} at the end\n"
        )
        for r in saved["trees"]:
            print(report(r, args.markdown))
            print()
        return 0

    trees: list[tuple[str, Path]] = [(c, _corpora.prepare(c)) for c in args.corpus]
    for t in args.tree:
        top = _git_top(t)
        say(f"copying the files of {top} into the cache: the change tests edit the copy")
        trees.append((top.name, _corpora.snapshot(top)))
    if not trees:
        ap.error("give --tree PATH or --corpus NAME")

    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load0 = loadavg()
    results = []
    for name, root in trees:
        work = Path(tempfile.mkdtemp(prefix=f"nodwyn-bench-{name}-"))
        try:
            if args.profile is not None:
                profile(root, name, args, work, args.profile)
                continue
            results.append(Run(name, root, args, work).measure())
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
            else:
                say(f"kept {work}")
    if args.profile is not None:
        return 0
    load1 = loadavg()
    command = "python bench/repo_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(
        f"{command}\n{started}, {os.cpu_count()} cores, load average {load0} at the start, "
        f"{load1} at the end\n"
    )
    for r in results:
        print(report(r, args.markdown))
        print()
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "command": command,
                    "date": started,
                    "load_start": load0,
                    "load_end": load1,
                    "trees": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
