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
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import _corpora  # noqa: E402
import _peers  # noqa: E402
from _repo_children import Child, first_search, ours_child, peer_child, serve_ours  # noqa: E402
from _repo_report import (  # noqa: E402
    MB,
    _median_build,
    loadavg,
    p50,
    p90,
    ratio,
    report,
    say,
)

BOUND_FILES = 3000


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
            say("  ours: a fresh tree's first search")
            data, config = self.work / "cold-data", self.work / "config"
            log = self.work / f"ours-cold{n}.log"
            runs.append(first_search(self.root, data, config, log, queries[0], fresh=True))
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
