"""Whether a worker's units of work give the same results under two checkouts.

    python bench/worker_compare.py --tree /tmp/nodwyn-bench/sympy --python A --python B

Each interpreter runs, in a new process and on a fresh chunk store, :func:`analyze_packed` and
:func:`analyze_batch` over the tree's files in batches of 64 (twice: the second pass finds the
records stored), and prints one digest of every Analyzed, every batch's postings and every
record read back from the store. The same digest: the same results. Asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile

CHILD = r"""
import dataclasses, hashlib, pickle, subprocess, sys
from pathlib import Path
from nodwyn_retrieval.actors._work import analyze_batch, analyze_packed
from nodwyn_retrieval.store.chunkstore import ChunkStore

root, chunks = Path(sys.argv[1]), sys.argv[2]
names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
paths = sorted(p for p in names.stdout.decode().split("\0") if p)
items = []
for p in paths:
    f = root / p
    if f.is_file() and not f.is_symlink() and f.stat().st_size <= 1 << 20:
        items.append((p, f.read_bytes()))
h = hashlib.sha256()
def add(obj):
    h.update(pickle.dumps(obj, 4))
for rnd in range(2):
    for i in range(0, len(items), 64):
        batch = items[i:i + 64]
        fn = analyze_packed if (i // 64) % 2 == 0 else analyze_batch
        got = fn(batch, chunks)
        made, pairs = got if fn is analyze_packed else (got, None)
        for a in made:
            add(dataclasses.astuple(a))
        if pairs is not None:
            add([getattr(pairs, f.name) for f in dataclasses.fields(pairs)]
                if dataclasses.is_dataclass(pairs) else pickle.dumps(pairs, 4))
store = ChunkStore(Path(chunks))
for a in sorted({a.key for a in made if a.key}):
    add(store.get(a))
print(len(items), h.hexdigest())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", required=True)
    ap.add_argument("--python", action="append", required=True)
    args = ap.parse_args()
    digests = set()
    for py in args.python:
        with tempfile.TemporaryDirectory(prefix="nodwyn-wcmp-") as d:
            out = subprocess.run(
                [py, "-c", CHILD, args.tree, d], check=True, capture_output=True, text=True
            ).stdout.split()
        print(py, out[0], "files", out[1])
        digests.add(out[1])
    print("the same results" if len(digests) == 1 else "DIFFERENT results")


if __name__ == "__main__":
    main()
