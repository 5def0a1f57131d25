"""The chunk store's writes and reads as a build's worker and a second tree pay them.

Usage::

    python bench/chunkstore_bench.py /tmp/nodwyn-bench/sympy [--runs 3]
    python bench/chunkstore_bench.py --lookup 12000 --lookup 100000
    python bench/chunkstore_bench.py --trees /tmp/nodwyn-bench/sympy

With a tree: every text file git lists is redacted and analysed once (not timed), then its
records are stored in a fresh directory as a worker stores them, in batches of a megabyte of
text (one pack a batch where the store has ``put_many``, a ``put`` a record otherwise, so the
same script measures the store before and after packs), timed in CPU (``time.process_time``:
the kernel's work on files included) and wall time; then a new process reads every record back
by key (a second tree built from the store). With ``--lookup N``: N records' entries in packs of
about a hundred, and what a new process pays to list them, the time of one key's lookup, and
the memory the lookup holds. With ``--trees TREE``: ``nodwyn-retrieval update`` of a clone of
TREE into a fresh data directory, then of a second working tree of that clone, whose records
the store already holds. Runs at the caller's priority; prints the load average.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH_BYTES = 1 << 20


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _records(tree: Path) -> list[tuple[str, object, int]]:
    from nodwyn_retrieval.guard.redact import redact
    from nodwyn_retrieval.retrieval.analyze import analyze
    from nodwyn_retrieval.store.chunkstore import ChunkStore

    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=tree, capture_output=True, check=True
    ).stdout.split(b"\0")
    out = []
    seen = set()
    for name in names:
        if not name:
            continue
        try:
            data = (tree / os.fsdecode(name)).read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8000] or len(data) > 1 << 20:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        red = redact(text).text
        key = ChunkStore.key(hashlib.sha256(red.encode()).hexdigest())
        if key not in seen:
            seen.add(key)
            out.append((key, analyze(red), len(data)))
    return out


def _write(records: list[tuple[str, object, int]], directory: Path) -> tuple[float, float, int]:
    from nodwyn_retrieval.store.chunkstore import ChunkStore

    store = ChunkStore(directory)
    batches: list[list[tuple[str, object]]] = [[]]
    size = 0
    for key, rec, n in records:
        batches[-1].append((key, rec))
        size += n
        if size >= BATCH_BYTES:
            batches.append([])
            size = 0
    many = getattr(store, "put_many", None)
    c0, w0 = time.process_time(), time.perf_counter()
    for batch in batches:
        if many is not None:
            many(batch)
        else:
            for key, rec in batch:
                store.put(key, rec)
    return time.process_time() - c0, time.perf_counter() - w0, store.stats.bytes_written


_READ = """
import sys, time
c0, w0 = time.process_time(), time.perf_counter()
from nodwyn_retrieval.store.chunkstore import ChunkStore
store = ChunkStore(sys.argv[1])
keys = sys.stdin.read().split(",")
c1, w1 = time.process_time(), time.perf_counter()
got = sum(1 for k in keys if store.exists(k) and store.get(k) is not None)
print(got, time.process_time() - c1, time.perf_counter() - w1)
"""


def _read(directory: Path, keys: list[str]) -> tuple[int, float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _READ, str(directory)],
        input=",".join(keys), capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return int(out[0]), float(out[1]), float(out[2])


def tree_run(tree: Path, runs: int) -> None:
    print(f"{tree}: load average {_load()}")
    records = _records(tree)
    text = sum(n for _, _, n in records)
    print(f"  {len(records)} records of {text / 1e6:.1f} MB of text")
    cpu, wall, reads = [], [], []
    for _ in range(runs):
        d = Path(tempfile.mkdtemp(prefix="ckbench-"))
        try:
            c, w, n = _write(records, d / "chunks")
            cpu.append(c)
            wall.append(w)
            files = sum(len(fs) for _, _, fs in os.walk(d))
            got, rc, rw = _read(d / "chunks", [k for k, _, _ in records])
            reads.append((rc, rw))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(f"  write: CPU {c:.3f} s, wall {w:.3f} s, {n / 1e6:.2f} MB in {files} files "
              f"({n / text:.3f}x the text); read back {got} in a new process: CPU {rc:.3f} s, "
              f"wall {rw:.3f} s")  # fmt: skip
    read_cpu = statistics.median(r[0] for r in reads)
    print(f"  median write CPU {statistics.median(cpu):.3f} s, "
          f"wall {statistics.median(wall):.3f} s; read back CPU {read_cpu:.3f} s; "
          f"load average {_load()}")  # fmt: skip


_LOOKUP = """
import random, sys, time, tracemalloc
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.packs import reset_indexes
keys = sys.stdin.read().split(",")
c0, w0 = time.process_time(), time.perf_counter()
store = ChunkStore(sys.argv[1])
assert store.exists(keys[0])
c1, w1 = time.process_time(), time.perf_counter()
reset_indexes()
tracemalloc.start()  # apart: it slows every allocation
assert ChunkStore(sys.argv[1]).exists(keys[0])
mem = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
time.sleep(1.1)  # past the directory's last change, as a build's later lookups are
random.seed(1)
probe = random.sample(keys, min(20000, len(keys)))
c2 = time.perf_counter()
found = sum(store.exists(k) for k in probe)
per = (time.perf_counter() - c2) / len(probe)
c3 = time.perf_counter()
missing = [k[:-1] + ("0" if k[-1] != "0" else "1") for k in probe[:5000]]
miss = sum(store.exists(k) for k in missing)
per_miss = (time.perf_counter() - c3) / len(missing)
print(c1 - c0, w1 - w0, mem, per, found, per_miss, miss)
"""


def lookup_run(n: int) -> None:
    from nodwyn_retrieval.retrieval.analyze import ANALYZE_VERSION
    from nodwyn_retrieval.store.packs import write_pack

    d = Path(tempfile.mkdtemp(prefix="cklookup-"))
    try:
        digests = (hashlib.sha256(str(i).encode()).hexdigest() for i in range(n))
        keys = [f"{h}-{ANALYZE_VERSION}" for h in digests]
        blob = b"x" * 3000  # the entries are what a lookup reads; a record's bytes are not
        for i in range(0, n, 100):
            write_pack(d / "packs", [(k, blob) for k in keys[i : i + 100]])
        out = subprocess.run(
            [sys.executable, "-c", _LOOKUP, str(d)],
            input=",".join(keys), capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        cpu, wall, mem, per, found, per_miss, miss = out
        print(f"lookup of {n} records in {(n + 99) // 100} packs, load average {_load()}: "
              f"a new process lists them in CPU {float(cpu) * 1e3:.1f} ms (wall "
              f"{float(wall) * 1e3:.1f} ms), holding {int(mem) / 1e6:.1f} MB; a key found "
              f"{float(per) * 1e6:.2f} us ({found}), a key missing {float(per_miss) * 1e6:.2f} us"
              f" ({miss} found)")  # fmt: skip
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _update(root: Path, data: Path) -> tuple[float, float, int]:
    """``nodwyn-retrieval update`` of root until it is not partial: wall, CPU (the processes'
    and their workers', from the children's rusage), calls."""
    import json
    import resource

    cmd = [sys.executable, "-m", "nodwyn_retrieval", "--data-dir", str(data), "--config-dir",
           str(data / "config"), "--root", str(root), "--json", "update"]  # fmt: skip
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    calls = 0
    while True:
        calls += 1
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        if not json.loads(out).get("partial") or calls >= 10:
            break
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return time.perf_counter() - w0, cpu, calls


def trees_run(tree: Path) -> None:
    """A first build of a copy of tree, then of a second working tree of it (git worktree), whose
    records all come from the store."""
    d = Path(tempfile.mkdtemp(prefix="cktrees-"))
    try:
        repo, wt, data = d / "repo", d / "wt", d / "data"
        subprocess.run(["git", "clone", "-q", str(tree), str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(wt)], check=True)
        print(f"{tree}: load average {_load()}")
        for name, root in (("first tree", repo), ("second tree, from the store", wt)):
            wall, cpu, calls = _update(root, data)
            print(f"  {name}: wall {wall:.2f} s, CPU {cpu:.2f} s, {calls} call(s); "
                  f"load average {_load()}")  # fmt: skip
        files = [f for f in (data / "projects").rglob("*") if f.is_file() and "index" in f.parts]
        chunks = sum(f.stat().st_size for f in files if "chunks" in f.parts)
        index = sum(f.stat().st_size for f in files)
        tree_files = [f for f in repo.rglob("*") if f.is_file() and ".git" not in f.parts]
        text = sum(f.stat().st_size for f in tree_files)
        print(f"  chunk store {chunks / 1e6:.2f} MB, index {index / 1e6:.2f} MB: "
              f"{index / text:.3f}x the tree's {text / 1e6:.1f} MB")  # fmt: skip
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", nargs="?", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lookup", type=int, action="append", default=[])
    ap.add_argument("--trees", type=Path, help="a first build and a second tree's, of a copy")
    args = ap.parse_args()
    if args.trees is not None:
        trees_run(args.trees)
    if args.tree is not None:
        tree_run(args.tree, args.runs)
    for n in args.lookup:
        lookup_run(n)


if __name__ == "__main__":
    main()
