"""Throughput of redact() and every redaction it makes on a tree, for a person to look at each.

Usage: python bench/redact_bench.py [DIRECTORY] [--runs N] [--no-baseline]

Without a directory it unpacks the sympy snapshot of the shared corpora (``../shared/corpora``
beside the checkout) into a temporary directory. It reads every UTF-8 text file up to 1 MiB (the
ADR's whole-file cap, §2), skipping .git and files with a NUL byte, and prints:

- MB/s (10^6 bytes of UTF-8 a second) of redact() over all the files, the median of the runs, by
  the wall clock and by this process's CPU time (which moves less with a shared machine's load);
- beside it, unless --no-baseline, a naive redactor: every shape in one alternation, run over the
  whole of every file with no gate and no locator, which is what the gates and locators save;
- the count of redactions by kind;
- each redaction: file, line, kind and the line as redacted, so a person can look at each one.
  On a corpus that holds no secrets a redaction is a false positive, and a bug, unless the text
  really is a credential's shape (a test's key, a documented example).

This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora
from nodwyn_retrieval.guard.redact import redact, scan

CORPUS = _corpora.SHARED / "corpora" / "sympy.tar.gz"


def read_texts(root: Path) -> list[tuple[str, str]]:
    """(path relative to root, text) of every UTF-8 text file under root up to 1 MiB."""
    return _corpora.read_texts(root)


def _naive() -> Callable[[str], int]:
    """Every shape in one alternation over the whole text: no gate, no locator."""
    module = importlib.import_module("guard.redact")
    branches = []
    for i, shape in enumerate(module._SHAPES):
        source = (
            shape.pattern.pattern.replace("?P<v>", f"?P<v{i}>")
            .replace("?P<u>", f"?P<u{i}>")
            .replace("?P<q>", f"?P<q{i}>")
            .replace("(?P=q)", f"(?P=q{i})")
        )
        branches.append(f"(?:{source})")
    rx = re.compile("|".join(branches))

    def run(text: str) -> int:
        return sum(1 for _ in rx.finditer(text))

    return run


def _time(fn: Callable[[str], object], texts: list[str], runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of fn over every text.

    The CPU time is this process's alone: on a shared machine it moves less with other load.
    """
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            fn(t)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def run(root: Path, runs: int, baseline: bool) -> None:
    files = read_texts(root)
    texts = [t for _, t in files]
    total = sum(len(t.encode("utf-8")) for t in texts)
    mb = total / 1e6
    print(f"tree: {root}  files: {len(files)}  text: {mb:.1f} MB  runs: {runs} (median)")
    print()
    print("| redactor | seconds | MB/s | CPU seconds | MB/s of CPU |")
    print("|---|---|---|---|---|")
    rows: list[tuple[str, Callable[[str], object]]] = [("redact()", redact)]
    if baseline:
        rows.append(("naive: one alternation, no gates", _naive()))
    for name, fn in rows:
        wall, cpu = _time(fn, texts, runs)
        print(f"| {name} | {wall:.3f} | {mb / wall:.1f} | {cpu:.3f} | {mb / cpu:.1f} |")
    print()
    by_kind: Counter[str] = Counter()
    listing: list[str] = []
    for rel, text in files:
        findings = scan(text)
        if not findings:
            continue
        lines = redact(text).text.split("\n")
        for f in findings:
            by_kind[f.kind] += 1
            shown = lines[f.line - 1].strip()
            if len(shown) > 120:
                shown = shown[:117] + "..."
            listing.append(f"| {rel}:{f.line} | {f.kind} | `{shown}` |")
    print(f"redactions: {sum(by_kind.values())}")
    print()
    print("| kind | count |")
    print("|---|---|")
    for kind, n in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| {kind} | {n} |")
    if listing:
        print()
        print("| file:line | kind | the line, redacted |")
        print("|---|---|---|")
        for row in listing:
            print(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory", nargs="?", type=Path, help="a tree (default: sympy)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs; the median is shown")
    parser.add_argument("--no-baseline", action="store_true", help="skip the naive redactor")
    args = parser.parse_args(argv)
    if args.directory is not None:
        run(args.directory, args.runs, not args.no_baseline)
        return 0
    if not CORPUS.is_file():
        parser.error(f"no directory given and no corpus at {CORPUS}")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(CORPUS) as tar:
            tar.extractall(tmp, filter="data")
        entries = list(Path(tmp).iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        run(root, args.runs, not args.no_baseline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
