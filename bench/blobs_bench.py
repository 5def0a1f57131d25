"""How fast the blob finder runs over source code, beside analyze, which it runs inside.

Usage: python bench/blobs_bench.py [DIRECTORY] [--runs N]

Without a directory it unpacks the sympy snapshot of the shared corpora (bench/_corpora.py). Every
UTF-8 text file up to 1 MiB is read once; retrieval.blobs.blob_spans runs over each file's bytes,
best of N runs, and retrieval.analyze.analyze over the same files once, for the ratio. Prints MB/s
of each, the files holding blobs and the load average (the machines here are shared). A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _corpora
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.blobs import blob_spans
from nodwyn_retrieval.retrieval.words import clear_memo


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("directory", nargs="?", type=Path, default=None)
    p.add_argument("--runs", type=int, default=3)
    ns = p.parse_args(argv)
    root = ns.directory or _corpora.prepare("sympy", Path(tempfile.gettempdir()) / "nodwyn-bench")
    texts = [t.encode("utf-8") for _, t in _corpora.read_texts(root)]
    size = sum(map(len, texts))
    print(f"{root}: {len(texts):,} files, {size / 1e6:.1f} MB; load {os.getloadavg()[0]:.2f}")
    best = float("inf")
    holding = 0
    for _ in range(ns.runs):
        t = time.perf_counter()
        holding = sum(1 for d in texts if blob_spans(d))
        best = min(best, time.perf_counter() - t)
    clear_memo()
    t = time.perf_counter()
    for d in texts:
        analyze(d.decode("utf-8"))
    whole = time.perf_counter() - t
    print(f"blob_spans: {size / 1e6 / best:.0f} MB/s ({holding} files hold blobs)")
    print(f"analyze:    {size / 1e6 / whole:.1f} MB/s (blob finding included)")
    print(f"the finder's share of analyze: {best / whole:.1%}; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
