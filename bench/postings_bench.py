"""The session's side of a first build, replayed in one process: the batches' postings added
(``TreeBuilder.add``), the finish (``TreeBuilder.finish``), the snapshot's ``to_obj`` and its
encoding, each timed in CPU seconds.

    python bench/postings_bench.py --corpus big --capture     # a real first build, its batches kept
    python bench/postings_bench.py --corpus big --runs 5      # the replay, medians of 5
    python bench/postings_bench.py --corpus big --compare     # the Python and compiled paths' bytes

``--capture`` builds the tree with the library as it is (a fresh data directory, the workers of
the pool) and keeps every ``(files, pairs)`` the builder was given, in a pickle beside the
corpus. The replay feeds them to a new builder in the order they came; ``--compare`` does it
twice, the compiled paths on and off, and says whether the snapshots' bytes are the same.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _corpora  # noqa: E402
from nodwyn_retrieval import Engine  # noqa: E402
from nodwyn_retrieval.actors._work import SNAPSHOT_MAGIC, SNAPSHOT_VERSION  # noqa: E402
from nodwyn_retrieval.retrieval import tree as treemod  # noqa: E402
from nodwyn_retrieval.store.codec import encode  # noqa: E402


def capture(corpus: str, out: Path) -> None:
    root = _corpora.prepare(corpus)
    work = _corpora.CACHE / f"postings-{corpus}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "config").mkdir(parents=True)
    kept: list[tuple[Any, Any]] = []
    real_add = treemod.TreeBuilder.add

    def add(self: treemod.TreeBuilder, files: Any, pairs: treemod.Pairs) -> None:
        kept.append((list(files), pairs))
        real_add(self, files, pairs)

    treemod.TreeBuilder.add = add  # type: ignore[method-assign]

    async def run() -> None:
        engine = await Engine.open(root, data_dir=work / "data", config_dir=work / "config")
        await engine.index_update()
        await engine.close()

    asyncio.run(run())
    treemod.TreeBuilder.add = real_add  # type: ignore[method-assign]
    with out.open("wb") as f:
        pickle.dump(kept, f, protocol=5)
    print(f"{len(kept)} batches, {sum(len(p.doc) for _, p in kept):,} postings -> {out}")


def replay(batches: list[tuple[Any, Any]]) -> tuple[dict[str, float], bytes]:
    """One replay: each step's CPU seconds, and the snapshot's encoded bytes."""
    # Strings not yet hashed, as they come unpickled from a worker.
    fresh = pickle.loads(pickle.dumps(batches, protocol=5))  # noqa: S301 - our own bytes
    b = treemod.TreeBuilder()
    c0 = time.process_time()
    for files, pairs in fresh:
        b.add(files, pairs)
    c1 = time.process_time()
    seg = b.finish()
    c2 = time.process_time()
    obj = seg.to_obj()
    c3 = time.process_time()
    data = encode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, obj)
    c4 = time.process_time()
    return {"add": c1 - c0, "finish": c2 - c1, "to_obj": c3 - c2, "encode": c4 - c3}, data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="sympy")
    ap.add_argument("--capture", action="store_true")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--digest", action="store_true", help="the snapshot's digest alone")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    path = _corpora.CACHE / f"postings-{args.corpus}.pkl"
    if args.capture or not path.exists():
        capture(args.corpus, path)
    with path.open("rb") as f:
        batches = pickle.load(f)  # noqa: S301 - a file this script wrote
    if args.compare:
        # Each path in a process of its own: the compiled helpers are chosen when imported.
        digests = set()
        for pure in ("1", "0"):
            env = {**os.environ, "NODWYN_RETRIEVAL_PURE_PYTHON": pure}
            cmd = [sys.executable, __file__, "--corpus", args.corpus, "--digest"]
            got = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            print(f"pure_python={pure}: {got.stdout.strip()}")
            digests.add(got.stdout.split()[-1])
        print("the same bytes" if len(digests) == 1 else "DIFFERENT bytes")
        return 0 if len(digests) == 1 else 1
    if args.digest:
        _, data = replay(batches)
        print(f"{len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
        return 0
    rows: dict[str, list[float]] = {}
    for _ in range(args.runs):
        times, data = replay(batches)
        for k, v in times.items():
            rows.setdefault(k, []).append(v)
    n = sum(len(p.doc) for _, p in batches)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"{args.corpus}: {len(batches)} batches, {n:,} postings, snapshot {len(data):,} bytes, "
          f"sha256 {hashlib.sha256(data).hexdigest()[:16]}; load {load}")  # fmt: skip
    total = [sum(v) for v in zip(*rows.values(), strict=True)]
    for k, v in [*rows.items(), ("total", total)]:
        print(f"  {k:8s} median {statistics.median(v):.3f} s  (" + ", ".join(f"{x:.3f}" for x in v)
              + ")")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
