"""Redaction measured three ways: throughput, false positives, and planted credentials kept out.

Usage:
  python bench/redact_bench.py [DIRECTORY] [--runs N] [--no-baseline]   throughput (default: sympy)
  python bench/redact_bench.py --fp [--venv DIR]                         false positives
  python bench/redact_bench.py --corpus [--per-shape N]                  planted credentials

**Throughput.** Every UTF-8 text file up to 1 MiB of a tree (sympy of the shared corpora when no
directory is given), skipping .git and files with a NUL byte. MB/s (10^6 bytes of UTF-8 a second)
of redact(), the median of the runs, by the wall clock and by this process's CPU time (which moves
less with a shared machine's load), with the load average. Beside it, unless --no-baseline: the
locator scan alone, done by the compiled automaton and by a pure-Python alternative (one regular
expression of all the locators, as a trie); and a naive redactor, every shape in one alternation
over the whole text. Then every redaction, for a person to look at each one.

**False positives** (``--fp``). The Python standard library (``sysconfig``'s ``stdlib``, without
its site-packages) and the site-packages of a fresh virtual environment with the project's dev
extra (made in a temporary directory with pip, unless ``--venv`` names one). Neither holds a live
credential: every redaction is listed with its file and line, to be judged one by one.

**Planted credentials** (``--corpus``). bench/secrets_corpus.py's samples (every shape, four each
by default) are written into a git tree, indexed through the real Engine with a session log, and
searched (by the words around them, and by the secrets' own words). For each sample: is any of
the secret's words in the chunk store's records (decoded), are its bytes in any file of the data
directory, in any search result, in the log? The share kept out of each is printed, and every
sample that got through.

This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora
import secrets_corpus
from nodwyn_retrieval.guard.redact import redact, scan

CORPUS = _corpora.SHARED / "corpora" / "sympy.tar.gz"
CHECKOUT = Path(__file__).resolve().parent.parent
_R = importlib.import_module("nodwyn_retrieval.guard.redact")


def read_texts(root: Path) -> list[tuple[str, str]]:
    """(path relative to root, text) of every UTF-8 text file under root up to 1 MiB."""
    return _corpora.read_texts(root)


def _load() -> str:
    return (
        " ".join(Path("/proc/loadavg").read_text().split()[:3])
        if os.path.exists("/proc/loadavg")
        else "?"
    )


def _naive() -> Callable[[str], int]:
    """Every shape in one alternation over the whole text: no locator scan."""
    branches = []
    for i, rule in enumerate(_R._ALL):
        source = rule.pattern.pattern
        for g in ("v", "b", "u", "q"):
            source = source.replace(f"?P<{g}>", f"?P<{g}{i}>").replace(f"(?P={g})", f"(?P={g}{i})")
        branches.append(f"(?:{source})")
    rx = re.compile("|".join(branches))
    return lambda text: sum(1 for _ in rx.finditer(text))


def _trie(words: list[str]) -> str:
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def emit(node: dict) -> str:  # type: ignore[type-arg]
        alts = [re.escape(c) + emit(sub) for c, sub in sorted(node.items()) if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


def _locators_python() -> Callable[[str], int]:
    """The same locator scan in pure Python's re: one trie-shaped pattern over the lowered text."""
    literals = [x for r in _R._ALL for x in r.locators] + list(_R._SECRET_LOCATORS)
    rx = re.compile(_trie(sorted(set(literals))))
    return lambda text: sum(1 for _ in rx.finditer(_R._lowered(text)))


def _locators_automaton(text: str) -> int:
    return len(_R._locate(_R._lowered(text)))


def _time(fn: Callable[[str], object], texts: list[str], runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of fn over every text."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            fn(t)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def _listing(files: list[tuple[str, str]]) -> tuple[Counter[str], list[str]]:
    by_kind: Counter[str] = Counter()
    rows: list[str] = []
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
            rows.append(f"| {rel}:{f.line} | {f.kind} | `{shown}` |")
    return by_kind, rows


def _print_listing(by_kind: Counter[str], rows: list[str], mb: float) -> None:
    n = sum(by_kind.values())
    print(f"redactions: {n} in {mb:.1f} MB ({n / mb * 20:.2f} per 20 MB)")
    print()
    print("| kind | count |")
    print("|---|---|")
    for kind, k in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| {kind} | {k} |")
    if rows:
        print()
        print("| file:line | kind | the line, redacted |")
        print("|---|---|---|")
        for row in rows:
            print(row)


def throughput(root: Path, runs: int, baseline: bool) -> None:
    files = read_texts(root)
    texts = [t for _, t in files]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"tree: {root}  files: {len(files)}  text: {mb:.1f} MB  runs: {runs} (median)")
    print(f"load average before: {_load()}")
    print()
    print("| what | seconds | MB/s | CPU seconds | MB/s of CPU |")
    print("|---|---|---|---|---|")
    rows: list[tuple[str, Callable[[str], object]]] = [("redact()", redact)]
    if baseline:
        rows.append(("locator scan: the compiled automaton (ahocorasick_rs)", _locators_automaton))
        rows.append(("locator scan: pure-Python re, one trie pattern", _locators_python()))
        rows.append(("naive: every shape in one alternation", _naive()))
    for label, fn in rows:
        name, sample, smb = label, texts, mb
        if name.startswith("naive"):  # a few MB are enough to see it: the whole tree takes minutes
            sample = texts[: max(1, len(texts) // 10)]
            smb = sum(len(t.encode("utf-8")) for t in sample) / 1e6
            name = f"{name} (first {smb:.1f} MB)"
        wall, cpu = _time(fn, sample, runs if fn is redact else 1)
        print(f"| {name} | {wall:.3f} | {smb / wall:.1f} | {cpu:.3f} | {smb / cpu:.1f} |")
    print()
    print(f"load average after: {_load()}")
    print()
    _print_listing(*_listing(files), mb)


def _fresh_venv(where: Path) -> Path:
    """A new virtual environment with the project's dev extra; its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    pip = where / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", "-e", f"{CHECKOUT}[dev]"], check=True)
    out = subprocess.run(
        [
            str(where / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def false_positives(venv: Path | None) -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [
        (f"stdlib/{rel}", t)
        for rel, t in read_texts(stdlib)
        if not rel.startswith(("site-packages/", "dist-packages/"))
    ]
    with tempfile.TemporaryDirectory() as tmp:
        site = _fresh_venv(Path(tmp) / "venv") if venv is None else Path(venv)
        if venv is not None and site.name != "site-packages":
            found = sorted(site.glob("lib/python*/site-packages"))
            site = found[0] if found else site
        files += [(f"site-packages/{rel}", t) for rel, t in read_texts(site)]
        mb = sum(len(t.encode("utf-8")) for _, t in files) / 1e6
        print(f"stdlib: {stdlib}  site-packages: {site}")
        print(f"files: {len(files)}  text: {mb:.1f} MB  load average: {_load()}")
        print()
        _print_listing(*_listing(files), mb)


async def _index_and_search(
    repo: Path, data: Path, config: Path, log: Path, queries: list[tuple[str, bool]]
) -> list[str]:
    """Index the tree, then search: the whole output, or only the hits of an attacker's query
    (made of the secrets' own words, which the output may repeat as the asker's own text)."""
    from nodwyn_retrieval.entry import Engine

    shown: list[str] = []
    async with await Engine.open(repo, data_dir=data, config_dir=config, log=log) as engine:
        up = await engine.index_update()
        shown.append(f"\0read {up.summary['read']} files")
        for q, attack in queries:
            out = await engine.index_search(q, "repo", limit=20)
            shown.append(json.dumps(out.hits) if attack else out.text + json.dumps(out.to_json()))
    return shown


def planted(per_shape: int, seed: int) -> None:
    from nodwyn_retrieval.guard import default_guard
    from nodwyn_retrieval.retrieval.words import words
    from nodwyn_retrieval.store.chunkstore import ChunkStore
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    items = secrets_corpus.samples(per_shape, seed)
    shapes = sorted({s.shape for s in items})
    print(f"samples: {len(items)} of {len(shapes)} shapes  load average: {_load()}")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "tree"
        secrets_corpus.write(repo, items)
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
        for cmd in (["init", "-q"], ["add", "-A"], [*_corpora.GIT_ID, "commit", "-qm", "planted"]):
            subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
        data, config, log = (
            Path(tmp) / "data",
            Path(tmp) / "config",
            Path(tmp) / "data" / "task.jsonl",
        )
        data.mkdir()
        log.touch()
        rest = {w for s in items for w in words(s.path + " " + s.text.replace(s.secret, " "))}
        secret_words = [
            {w for w in words(s.secret) if len(w) >= 6 and w not in rest} for s in items
        ]
        plain = [
            "password token secret",
            "api key credential",
            "config service settings",
            "export env",
        ]
        queries = [(q, False) for q in plain]
        queries += [(w, True) for ws in secret_words[::5] for w in sorted(ws)[:1]]
        t0 = time.perf_counter()
        shown = asyncio.run(_index_and_search(repo, data, config, log, queries))
        took = time.perf_counter() - t0
        chunks = ChunkStore(project_dirs(data, project_key(repo)).chunks)
        vocab: set[str] = set()
        records = 0
        for key, _, _ in chunks.iter_entries():
            rec = chunks.get(key)
            if rec is not None:
                records += 1
                vocab.update(rec.vocab)
        stored = [f.read_bytes() for f in data.rglob("*") if f.is_file() and f != log]
        logged = log.read_text()
        guard = default_guard(repo, data_dir=data, config_dir=config)
        denied = {s.path for s in items if not guard.precheck(s.path).allowed}
    leaks: dict[str, list[str]] = {"store": [], "results": [], "log": []}
    for s, ws in zip(items, secret_words, strict=True):
        if ws & vocab or any(s.secret.encode() in b for b in stored):
            leaks["store"].append(s.path)
        if any(s.secret in t for t in shown):
            leaks["results"].append(s.path)
        if s.secret in logged:
            leaks["log"].append(s.path)
    alone = sum(1 for s in items if s.secret not in redact(s.text).text)
    print(f"redact() alone: {alone} of {len(items)} samples redacted")
    print(f"{shown[0][1:]}, {records} file records, {len(vocab)} distinct words stored")
    print(f"not read (the guard's denylist): {sum(1 for s in items if s.path in denied)} samples")
    print(f"indexed and searched {len(queries)} queries in {took:.1f} s")
    print()
    print("| kept out of | samples kept out | share |")
    print("|---|---|---|")
    for where, paths in leaks.items():
        kept = len(items) - len(paths)
        print(f"| {where} | {kept} of {len(items)} | {kept / len(items):.1%} |")
    for where, paths in leaks.items():
        for p in paths:
            print(f"reached the {where}: {p}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory", nargs="?", type=Path, help="a tree (default: sympy)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs; the median is shown")
    parser.add_argument("--no-baseline", action="store_true", help="skip the peers")
    parser.add_argument("--fp", action="store_true", help="false positives: stdlib + a fresh venv")
    parser.add_argument(
        "--venv", type=Path, help="with --fp: an existing venv instead of a fresh one"
    )
    parser.add_argument("--corpus", action="store_true", help="planted credentials, end to end")
    parser.add_argument("--per-shape", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    if args.fp:
        false_positives(args.venv)
        return 0
    if args.corpus:
        planted(args.per_shape, args.seed)
        return 0
    if args.directory is not None:
        throughput(args.directory, args.runs, not args.no_baseline)
        return 0
    if not CORPUS.is_file():
        parser.error(f"no directory given and no corpus at {CORPUS}")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(CORPUS) as tar:
            tar.extractall(tmp, filter="data")
        entries = list(Path(tmp).iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        throughput(root, args.runs, not args.no_baseline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
