"""Throughput of words, chunks and analyze() on one core, beside a naive prototype of §6.

Usage: python bench/analyze_bench.py [DIRECTORY] [--runs N] [--no-naive]
       python bench/analyze_bench.py --compare [DIRECTORY ...]

Without a directory it unpacks the sympy snapshot of the shared corpora into a temporary
directory. It reads every UTF-8 text file up to 1 MiB (the ADR's whole-file cap, §2), skipping
.git and files with a NUL byte, and prints MB/s (10^6 bytes of UTF-8 a second) for:

- naive: a plain prototype of §6 (regular expressions over str, a set of words per token, a
  Counter per chunk, no memo), which the first build must beat by at least 2x;
- words: word_counts() over each file;
- chunks: split_lines() and chunk_spans() over each file;
- analyze: analyze() over each file, which does both and builds the arrays;
- analyze-warm: analyze() again with the memo of the run before, as a long-lived worker has it;
- redact+analyze: a pool worker's CPU work on a file's text in a first build (guard.redact, then
  analyze() of the redacted text), without the hashing and the chunk store's write;
- analyze-py, analyze-py-warm, redact+analyze-py: the same through analyze()'s Python path, when
  the compiled pass is installed (retrieval/_words_native.c), so that the two are timed in turns.

``--compare`` times nothing: over every text file of each directory (default: the shared corpora,
unpacked), it checks that both paths give the same record, byte for byte as the chunk store
encodes it, first with the memo cleared and again with it warm, and prints how many it checked.

Each figure is the median of the runs, the rows taking turns; the word memo is cleared before
each run but analyze-warm's, so those runs are a first build. Everything runs in one thread (so
on one core at a time). MB/s is by the wall clock and cpu MB/s by the process's CPU time, the
steadier of the two on a shared machine; the last column is the naive prototype's CPU time over
the row's. This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora
from nodwyn_retrieval.guard.redact import redact
from nodwyn_retrieval.retrieval import analyze as _analyze_mod
from nodwyn_retrieval.retrieval.analyze import NATIVE, analyze
from nodwyn_retrieval.retrieval.chunks import chunk_spans, split_lines
from nodwyn_retrieval.retrieval.words import clear_memo, word_counts

CORPUS = _corpora.SHARED / "corpora" / "sympy.tar.gz"


def read_texts(root: Path) -> list[str]:
    """Every UTF-8 text file under root up to 1 MiB, in path order."""
    return [text for _, text in _corpora.read_texts(root)]


# The naive prototype: §6 written plainly, as a first version would be: a regular expression for
# tokens, one for camel case and one for declarations, a set of words per token occurrence, and a
# Counter per chunk and per first line; no memo, no bytes, no numpy.
_NAIVE_TOKEN = re.compile(r"\w+(?:-\w+)*")
_NAIVE_PARTS = re.compile(r"[-_]+")
_NAIVE_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]*[a-z0-9]+|[A-Z]+")
_NAIVE_DECL = re.compile(
    r"(?:func|function|type|var|const|\(define|class|export|def|\\chapter|\\section)\b|#"
)


def _naive_words(text: str) -> list[str]:
    out: list[str] = []
    for raw in _NAIVE_TOKEN.findall(text):
        token = raw.strip("-_")
        if not token:
            continue
        found = {token.lower()}
        for part in _NAIVE_PARTS.split(token):
            found.add(part.lower())
            pieces = _NAIVE_CAMEL.findall(part)
            if len(pieces) > 1:
                found.update(piece.lower() for piece in pieces)
        out.extend(w for w in found if len(w.encode()) <= 64)
    return out


def _naive_analyze(text: str) -> list[tuple[int, int, Counter[str], Counter[str]]]:
    lines = text.split("\n")
    starts = [0]
    for i, line in enumerate(lines):
        since = i - starts[-1]
        if since >= 80 or (since >= 20 and _NAIVE_DECL.match(line)):
            starts.append(i)
    bounds = [*starts, len(lines)]
    return [
        (lo, hi, Counter(_naive_words("\n".join(lines[lo:hi]))), Counter(_naive_words(lines[lo])))
        for lo, hi in pairwise(bounds)
    ]


def _chunks(text: str) -> object:
    return chunk_spans(split_lines(text))


def _warm_analyze(text: str) -> object:
    return analyze(text)


def _worker(text: str) -> object:
    return analyze(redact(text).text)


def _python(text: str) -> object:
    return _analyze_mod._analyze(text, native=False)


def _python_worker(text: str) -> object:
    return _analyze_mod._analyze(redact(text).text, native=False)


ROWS: dict[str, tuple[Callable[[str], object], bool]] = {
    # name: (function, whether the word memo is cleared before each run)
    "naive": (_naive_analyze, True),
    "words": (word_counts, True),
    "chunks": (_chunks, True),
    "analyze": (analyze, True),
    "analyze-warm": (_warm_analyze, False),
    "redact+analyze": (_worker, True),
}
if NATIVE:
    ROWS["analyze-py"] = (_python, True)
    ROWS["analyze-py-warm"] = (_python, False)
    ROWS["redact+analyze-py"] = (_python_worker, True)


def compare(roots: list[Path]) -> int:
    """Both paths of analyze() on every text of the roots, memo cold then warm: 1 if any differs."""
    import msgpack

    if not NATIVE:
        print("the compiled pass is not installed: nothing to compare")
        return 1
    bad = 0
    for root in roots:
        texts = [redact(t).text for t in read_texts(root)]
        for warm in (False, True):
            if not warm:
                clear_memo()
            for text in texts:
                a = _analyze_mod._analyze(text, native=True)
                b = _analyze_mod._analyze(text, native=False)
                if msgpack.packb(a.to_obj()) != msgpack.packb(b.to_obj()):
                    bad += 1
        print(f"{root}: {len(texts)} files, memo cold and warm, {bad} records differ so far")
    return 1 if bad else 0


def run_once(fn: Callable[[str], object], texts: list[str], *, cold: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of fn over every text, the word memo cleared first when cold."""
    if cold:
        clear_memo()
    wall, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        fn(text)
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(names: list[str], texts: list[str], runs: int) -> dict[str, tuple[float, float]]:
    """The median (wall, CPU) seconds of each row. The rows take turns, so that a noisy neighbour
    on a shared machine slows them alike and the ratios hold; CPU time is the steadier figure
    where other processes want the same cores."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for _ in range(runs):
        for name in names:
            fn, cold = ROWS[name]
            times[name].append(run_once(fn, texts, cold=cold))
    return {
        name: (statistics.median(w for w, _ in pairs), statistics.median(c for _, c in pairs))
        for name, pairs in times.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="*", type=Path, help="a tree (default: sympy)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-naive", action="store_true", help="skip the naive prototype")
    parser.add_argument("--compare", action="store_true", help="check both paths' records")
    args = parser.parse_args(argv)
    if args.compare:
        names = ("sympy", "git", "astropy", "requests", "flask")
        return compare(args.directory or [_corpora.prepare(name) for name in names])
    if len(args.directory) > 1:
        parser.error("one directory to time, or several with --compare")
    with ExitStack() as stack:
        if args.directory:
            root, label = args.directory[0], str(args.directory[0])
        elif CORPUS.exists():
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="analyze-bench-")))
            with tarfile.open(CORPUS) as tar:
                tar.extractall(root, filter="data")
            label = CORPUS.name
        else:
            parser.error(f"no directory given and {CORPUS} is not here")
        texts = read_texts(root)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    names = [name for name in ROWS if not (args.no_naive and name == "naive")]
    start_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    medians = measure(names, texts, args.runs)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{label}: {len(texts)} files, {mb:.1f} MB, median of {args.runs} runs, one thread")
    print(f"load average {start_load:.1f} -> {load:.1f} on {os.cpu_count()} CPUs")
    print(f"{'what':<15} {'wall s':>7} {'cpu s':>7} {'MB/s':>6} {'cpu MB/s':>9} {'x naive':>8}")
    for name in names:
        wall, cpu = medians[name]
        ratio = f"{medians['naive'][1] / cpu:8.1f}" if "naive" in medians else f"{'-':>8}"
        print(f"{name:<15} {wall:7.2f} {cpu:7.2f} {mb / wall:6.1f} {mb / cpu:9.1f} {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
