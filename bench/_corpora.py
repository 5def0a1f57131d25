"""The trees the repository benchmark runs on, the text files in them, and the queries it asks.

- :func:`prepare` turns ``--corpus NAME`` into a git working tree under the cache directory
  (``/tmp/nodwyn-bench`` unless ``NODWYN_BENCH_CACHE`` says otherwise): a snapshot of the shared
  corpora is unpacked and committed once; ``big`` is built once by the shared
  ``make_big_tree.py``. Later runs reuse what is there.
- :func:`snapshot` copies a tree given by ``--tree`` into the cache, so that the change tests
  edit a copy and never the tree itself.
- :func:`text_files` lists what the index covers as the project does (git's listing, regular files
  up to 1 MiB, no NUL byte in the first 8,000 bytes, valid UTF-8), so that the peers are given the
  same text.
- :func:`queries` gives a fixed set of queries: hand-written ones for the known corpora, and for
  any other tree the most widespread identifiers of the tree, paired deterministically.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

# ../shared beside the checkout, where the corpora are kept; NODWYN_BENCH_SHARED points elsewhere.
SHARED = Path(
    os.environ.get("NODWYN_BENCH_SHARED", Path(__file__).resolve().parent.parent.parent / "shared")
)
CORPORA = SHARED / "corpora"
MAKE_BIG = SHARED / "tools" / "make_big_tree.py"
CACHE = Path(os.environ.get("NODWYN_BENCH_CACHE", "/tmp/nodwyn-bench"))
MAX_FILE_BYTES = 1 << 20  # the index's whole-file cap
BINARY_SNIFF = 8000  # git's test for a binary file
GIT_ID = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
LS_FILES = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]

# Queries an agent might ask of the corpora (two to four plain words each).
SYMPY_QUERIES = [
    "solve polynomial roots",
    "matrix determinant",
    "latex printer",
    "simplify trigonometric expression",
    "integrate rational function",
    "series expansion limit",
    "symbol assumptions positive",
    "groebner basis",
    "differential equation solver",
    "prime factorization",
    "sparse matrix multiplication",
    "lambdify numpy",
    "pretty print unicode",
    "piecewise function",
    "tensor contraction indices",
    "quantum spin operator",
    "plot backend matplotlib",
    "code generation fortran",
    "geometry polygon intersection",
    "random variable probability distribution",
    "cache decorator",
    "parse expression string",
]
FLASK_QUERIES = [
    "register blueprint",
    "session cookie signing",
    "request context teardown",
    "url_for build error",
    "json response provider",
    "template rendering jinja",
    "app config from object",
    "static files send_file",
    "test client cookies",
    "cli command group",
    "error handler exception",
    "before request hook",
    "async view support",
    "redirect location header",
    "logging default handler",
    "instance path",
    "secret key",
    "method view dispatch",
    "stream with context",
    "environ builder",
]
BIG_QUERIES = [
    *SYMPY_QUERIES[:8],
    "units quantity conversion",
    "fits header keyword",
    "wcs pixel world transform",
    "table column masked",
    "refs packed object",
    "diff hunk header",
    "strbuf append",
    "commit graph traversal",
    "http adapter retries",
    "session cookie signing",
    "register blueprint",
    "connection pool timeout",
]
KNOWN_QUERIES = {"sympy": SYMPY_QUERIES, "flask": FLASK_QUERIES, "big": BIG_QUERIES}

# Words too common in code to make a query of: keywords and the like.
_COMMON = frozenset(
    " ".join(
        (
            "self def return import from none true false class else elif pass with assert raise",
            "not and the for while this that int char void const static struct unsigned size_t",
            "null include define endif ifdef ifndef var let function new try except finally",
            "lambda yield print args kwargs cls object str bool list dict tuple float len range",
            "isinstance super init main string value data name type file test tests http https",
            "www com org license copyright",
        )
    ).split(" ")
)
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{3,30}")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True)


def prepare(name: str, cache: Path = CACHE) -> Path:
    """The working tree of corpus ``name`` (``big`` or a tarball's stem), made once."""
    cache.mkdir(parents=True, exist_ok=True)
    if name == "big":
        out = cache / "big"
        if not (out / ".git").is_dir():
            if out.exists():
                raise SystemExit(f"{out} exists without a git repository: remove it first")
            print(f"building the big tree in {out} (once)", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, str(MAKE_BIG), str(out)], check=True)
        return out
    tarball = CORPORA / f"{name}.tar.gz"
    out = cache / name
    if (out / ".git").is_dir():
        return out
    if not tarball.is_file():
        raise SystemExit(f"no corpus {name!r}: {tarball} is not here")
    print(f"unpacking {tarball.name} into {out} (once)", file=sys.stderr, flush=True)
    tmp = cache / f".{name}.unpack"
    if tmp.exists():
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
    tmp.mkdir()
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp, filter="data")
    tops = [p for p in tmp.iterdir() if p.is_dir()]
    top = tops[0] if len(tops) == 1 else tmp
    _git(top, "init", "-q")
    _git(top, "config", "core.autocrlf", "false")
    _git(top, "add", "-A")
    _git(top, *GIT_ID, "commit", "-qm", "snapshot")
    top.rename(out)
    if tmp.exists():
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
    return out


def snapshot(tree: Path, cache: Path = CACHE) -> Path:
    """A copy of a working tree's listed files, committed as a git repository of its own.

    The benchmark appends lines to files to measure a search after a change: it does that to a
    copy, never to the tree it was given, where someone may be editing the same file. The copy is
    made again on every run, so it holds the tree as it is now, uncommitted changes included.
    """
    out = cache / f"tree-{tree.name}"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for rel in listed(tree):
        src = tree / rel
        if src.is_symlink() or not src.is_file():
            continue
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    _git(out, "init", "-q")
    _git(out, "config", "core.autocrlf", "false")
    _git(out, "add", "-A")
    _git(out, *GIT_ID, "commit", "-qm", "snapshot")
    return out


def listed(root: Path) -> list[str]:
    """What git lists in the tree (tracked and untracked, not ignored)."""
    out = subprocess.run(LS_FILES, cwd=root, capture_output=True, check=True).stdout
    return sorted({os.fsdecode(p) for p in out.split(b"\0") if p})


def text_files(root: Path) -> list[tuple[str, bytes]]:
    """(path, bytes) of every file the index would hold: regular, at most 1 MiB, UTF-8 text."""
    out: list[tuple[str, bytes]] = []
    base = str(root) + os.sep
    for rel in listed(root):
        full = base + rel
        try:
            if not os.path.isfile(full) or os.path.islink(full):
                continue
            if os.path.getsize(full) > MAX_FILE_BYTES:
                continue
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data[:BINARY_SNIFF]:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.append((rel, data))
    return out


def frequent_queries(files: list[tuple[str, bytes]], n: int) -> list[str]:
    """n two-word queries of the tree's most widespread identifiers, the same on every run.

    An identifier's weight is the number of files holding it; keywords and words in more than
    half the files are left out. Query i pairs the i-th word with the (n + i)-th, so that every
    query mixes a common word with a rarer one.
    """
    df: Counter[bytes] = Counter()
    for _, data in files:
        df.update({m.lower() for m in _IDENT.findall(data)})
    cap = max(2, len(files) // 2)
    ranked = sorted(
        (w for w, c in df.items() if c <= cap and c >= 2 and w.decode() not in _COMMON),
        key=lambda w: (-df[w], w),
    )
    words = [w.decode() for w in ranked[: 2 * n]]
    if len(words) < 2:
        return ["main", "test"][:n]
    half = len(words) // 2
    return [f"{words[i]} {words[half + i]}" for i in range(min(n, half))]


def queries(name: str | None, files: list[tuple[str, bytes]], n: int) -> list[str]:
    """The queries for a tree: the known corpus's list, else frequent identifiers; n of them."""
    known = KNOWN_QUERIES.get(name or "")
    if known:
        return (known * (n // len(known) + 1))[:n]
    return frequent_queries(files, n)


MAX_TEXT_FILE = 1 << 20


def read_texts(root: Path) -> list[tuple[str, str]]:
    """(path relative to root, text) of every UTF-8 text file under root up to 1 MiB, in order."""
    texts: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_TEXT_FILE:
                continue
            data = path.read_bytes()
            if b"\0" in data:
                continue
            try:
                texts.append((path.relative_to(root).as_posix(), data.decode("utf-8")))
            except UnicodeDecodeError:
                continue
    return texts
