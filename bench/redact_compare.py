"""Redaction's outputs hashed, to hold two versions of the code to the same bytes.

Usage:
  python bench/redact_compare.py --write OUT.json [PATH ...]    hash with the installed code
  python bench/redact_compare.py --compare A.json B.json         say which outputs differ

--write redacts every text of each PATH and hashes what redact() gives (the text, the count and
the kinds), one hash a text: a directory's UTF-8 text files up to 1 MiB (as bench/redact_bench.py
reads them), a file whole, and a ``.jsonl`` file's lines one by one too (a log's events, as the
conversation's fold redacts them). bench/secrets_corpus.py's samples are always added. Run it
with one environment's Python, then another's (main's code installed in one, a change in the
other; NODWYN_RETRIEVAL_PURE_PYTHON=1 for the Python path), then --compare the two files.

``nodwyn_retrieval`` is imported as installed in the running environment, not from this checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora
import secrets_corpus


def _digest(text: str) -> str:
    from nodwyn_retrieval.guard import redact

    got = redact(text)
    h = hashlib.sha256(got.text.encode("utf-8", "surrogatepass"))
    h.update(f"\0{got.count}\0{','.join(got.kinds)}".encode())
    return h.hexdigest()


def _texts(path: Path) -> list[tuple[str, str]]:
    if path.is_dir():
        return _corpora.read_texts(path)
    text = path.read_bytes().decode("utf-8", "replace")
    out = [(path.name, text)]
    if path.suffix == ".jsonl":
        out += [(f"{path.name}:{i + 1}", line) for i, line in enumerate(text.split("\n"))]
    return out


def write(out: Path, paths: list[Path]) -> int:
    hashes: dict[str, dict[str, str]] = {}
    t = time.process_time()
    n = 0
    samples = secrets_corpus.samples()
    hashes["secrets_corpus"] = {f"{i}:{s.shape}": _digest(s.text) for i, s in enumerate(samples)}
    n += len(samples)
    for path in paths:
        group = hashes.setdefault(str(path), {})
        files = (
            sorted(path.rglob("*")) if path.is_dir() and not (path / ".git").exists() else [path]
        )
        for f in files:
            if f != path and f.is_dir():
                continue
            for name, text in _texts(f):
                key = name if f == path else f"{f.relative_to(path)}|{name}"
                group[key] = _digest(text)
                n += 1
    module = importlib.import_module("nodwyn_retrieval.guard.redact")
    out.write_text(json.dumps(hashes, indent=0, sort_keys=True))
    print(
        f"{n:,} texts hashed in {time.process_time() - t:.1f} s CPU with {module.__file__}"
        f" (compiled scan: {getattr(module, 'NATIVE', 'none in this code')})"
    )
    return 0


def compare(a: Path, b: Path) -> int:
    left = json.loads(a.read_text())
    right = json.loads(b.read_text())
    differ = 0
    for group in sorted(set(left) | set(right)):
        x, y = left.get(group, {}), right.get(group, {})
        keys = set(x) | set(y)
        bad = sorted(k for k in keys if x.get(k) != y.get(k))
        differ += len(bad)
        print(f"{group}: {len(keys):,} texts, {len(bad)} differ")
        for k in bad[:20]:
            print(f"  {k}")
    print("the same outputs" if differ == 0 else f"{differ} outputs differ")
    return 0 if differ == 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--write", type=Path, help="hash the outputs of the installed code")
    p.add_argument("--compare", type=Path, nargs=2, help="two files --write made")
    p.add_argument("paths", type=Path, nargs="*", help="trees, files and directories of files")
    ns = p.parse_args(argv)
    if ns.compare:
        return compare(*ns.compare)
    if ns.write is None:
        p.error("--write or --compare")
    return write(ns.write, ns.paths)


if __name__ == "__main__":
    sys.exit(main())
