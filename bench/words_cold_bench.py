"""A first build's worker, cold: analyze() over half of a tree's texts, the word table empty.

Usage: python bench/words_cold_bench.py [DIRECTORY] [--runs N] [--part K/N] [--read-only] [--warm]

The texts are read first (every UTF-8 text file up to 1 MiB, in path order, as
bench/analyze_bench.py reads them) and dealt out in batches of 50, as the pool deals a build's
batches to its two workers; ``--part 0/2`` (the default) is the first worker's share. Each run
clears the word table and analyses the share once, and prints the CPU seconds of that pass
(``time.process_time``); with ``--warm``, one untimed pass comes first and the table is kept.
``--read-only`` reads and deals without analysing, so that an instruction count of the whole
process (callgrind) can have the reading taken off. The process ends by ``os._exit`` once it has
printed, so that a count leaves out the interpreter's teardown. This is a measurement, not a
test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.words import clear_memo

BATCH = 50


def share(texts: list[str], part: int, parts: int) -> list[str]:
    """The texts of every parts-th batch of BATCH, from batch part on."""
    return [t for i, t in enumerate(texts) if (i // BATCH) % parts == part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="/tmp/nodwyn-bench/sympy")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--part", default="0/2")
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--warm", action="store_true", help="one pass first: the runs warm")
    args = parser.parse_args()
    part, parts = map(int, args.part.split("/"))
    texts = share([t for _, t in _corpora.read_texts(Path(args.directory))], part, parts)
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    print(f"{len(texts)} texts, {size / 1e6:.1f} MB")
    if args.read_only:
        return
    if args.warm:
        clear_memo()
        for text in texts:
            analyze(text)
    times = []
    for _ in range(args.runs):
        if not args.warm:
            clear_memo()
        t0 = time.process_time()
        for text in texts:
            analyze(text)
        times.append(time.process_time() - t0)
    print("cpu s:", " ".join(f"{t:.3f}" for t in times), f"median {statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
