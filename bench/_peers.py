"""The peers of the repository benchmark, and the small protocol its child processes speak.

Every measured session (this project's and each indexing peer's) runs in a child process of its
own, so that its start, imports and peak memory are its own. The parent writes one JSON object a
line to the child's standard input and reads one JSON object a line back; the child times each
operation itself, so the pipe costs nothing that is reported.

Peers here:

- ``bm25s`` (numpy/scipy BM25) and ``tantivy`` (Rust, through tantivy-py) index the same §6 chunks
  the project indexes: each listed text file is cut by ``retrieval.chunks.split_lines`` and
  ``chunk_spans`` and each chunk's text is one document. Reading and cutting are timed apart from
  indexing (``prep`` and ``index``); a peer's throughput is its index time only, the stricter
  comparison for the project, whose first build is timed whole.
- ``naive``: a plain Python prototype of §6 (words and chunks, one core), when the analysis
  benchmark that defines it (``bench/analyze_bench.py``) is present.
- :func:`rg_count`, :func:`git_ls_files`, :func:`lstat_all`, :func:`read_all` and
  :func:`sha_all` run in the parent: ripgrep as an agent runs it without an index, and the floors
  of a refresh (listing and stat-ing the tree) and of a build (reading and hashing it).

Run as ``python bench/_peers.py serve KIND ROOT``; the parent does that.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _corpora import LS_FILES, listed, text_files  # noqa: E402

KINDS = ("bm25s", "tantivy", "naive")
TOP_K = 10


# -- memory and the protocol ------------------------------------------------------------------


def _status_kib(pid: int | str, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every living process under pid (its pool workers, a fork server and theirs)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def memory() -> dict[str, int]:
    """Bytes: this process's peak and current resident set, and the peaks of its descendants."""
    me = os.getpid()
    kids = descendants(me)
    return {
        "hwm": _status_kib(me, "VmHWM") * 1024,
        "rss": _status_kib(me, "VmRSS") * 1024,
        "children_hwm": sum(_status_kib(p, "VmHWM") for p in kids) * 1024,
        "children": len(kids),
    }


def du(path: Path) -> int:
    """Bytes of the regular files under path (their sizes, as the project's status counts)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def serve(handle: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
    """Answer one JSON line per request until ``close`` or the end of input."""
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        try:
            ans = handle(req)
        except Exception as e:
            ans = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(ans if ans is not None else {}) + "\n")
        out.flush()
        if req.get("op") == "close":
            return


# -- the §6 chunks -----------------------------------------------------------------------------


def chunk_texts(files: list[tuple[str, bytes]]) -> Iterator[str]:
    """Each chunk's text, file by file, cut as the project cuts it."""
    from nodwyn_retrieval.retrieval.chunks import chunk_spans, split_lines

    for _path, data in files:
        lines = split_lines(data.decode("utf-8"))
        for a, b in chunk_spans(lines):
            yield "\n".join(lines[a:b])


class Bm25sPeer:
    def __init__(self) -> None:
        self.retriever: Any = None
        self.tokenizer: Any = None

    def build(self, docs: list[str]) -> dict[str, Any]:
        import bm25s
        from bm25s.tokenization import Tokenizer

        t0 = time.perf_counter()
        self.tokenizer = Tokenizer()
        ids = self.tokenizer.tokenize(docs, return_as="ids", show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(ids, show_progress=False)
        return {"index": time.perf_counter() - t0, "disk": None}

    def search(self, q: str) -> int:
        qids = self.tokenizer.tokenize(
            [q], update_vocab=False, return_as="ids", show_progress=False
        )
        k = min(TOP_K, self.retriever.scores["num_docs"])
        docs, _scores = self.retriever.retrieve(qids, k=k, show_progress=False, n_threads=0)
        return int(docs.shape[1])


class TantivyPeer:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="nodwyn-bench-tantivy-"))
        self.index: Any = None
        self.searcher: Any = None

    def build(self, docs: list[str]) -> dict[str, Any]:
        import tantivy

        t0 = time.perf_counter()
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("body", stored=False)
        sb.add_integer_field("id", stored=True)
        self.index = tantivy.Index(sb.build(), path=str(self.dir))
        writer = self.index.writer()
        for i, text in enumerate(docs):
            writer.add_document(tantivy.Document(id=i, body=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        return {"index": time.perf_counter() - t0, "disk": du(self.dir)}

    def search(self, q: str) -> int:
        try:
            query = self.index.parse_query(q, ["body"])
        except ValueError:
            query, _errors = self.index.parse_query_lenient(q, ["body"])
        return len(self.searcher.search(query, TOP_K).hits)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _naive_build(files: list[tuple[str, bytes]]) -> dict[str, Any]:
    try:
        from analyze_bench import _naive_analyze
    except ImportError:
        return {"error": "the naive prototype (bench/analyze_bench.py) is not here"}
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    texts = [d.decode("utf-8") for _, d in files]
    t0 = time.perf_counter()
    for text in texts:
        _naive_analyze(text)
    return {"index": time.perf_counter() - t0, "disk": None}


def serve_peer(kind: str, root: Path) -> None:
    peer: Bm25sPeer | TantivyPeer | None = None

    def handle(req: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal peer
        op = req["op"]
        if op == "build":
            t0 = time.perf_counter()
            files = text_files(root)
            nbytes = sum(len(d) for _, d in files)
            if kind == "naive":
                out = _naive_build(files)
                return {
                    **out,
                    "prep": time.perf_counter() - t0,
                    "bytes": nbytes,
                    "files": len(files),
                    "docs": None,
                    "mem": memory(),
                }
            docs = list(chunk_texts(files))
            prep = time.perf_counter() - t0
            peer = Bm25sPeer() if kind == "bm25s" else TantivyPeer()
            out = peer.build(docs)
            return {
                **out,
                "prep": prep,
                "bytes": nbytes,
                "files": len(files),
                "docs": len(docs),
                "mem": memory(),
            }
        if op == "search":
            if peer is None:
                return {"error": "not built"}
            t0 = time.perf_counter()
            n = peer.search(req["q"])
            return {"seconds": time.perf_counter() - t0, "hits": n}
        if op == "mem":
            return {"mem": memory()}
        if op == "close":
            if isinstance(peer, TantivyPeer):
                peer.close()
            return {}
        return {"error": f"unknown op {op!r}"}

    serve(handle)


def available(kind: str) -> str | None:
    """None when the peer can run here, else why not."""
    if kind == "naive":
        return None if (HERE / "analyze_bench.py").is_file() else "bench/analyze_bench.py absent"
    mod = {"bm25s": "bm25s", "tantivy": "tantivy"}[kind]
    try:
        __import__(mod)
    except ImportError:
        return f"{mod} not installed (pip install '.[bench]')"
    return None


# -- peers that run in the parent ----------------------------------------------------------------


def rg_pattern(query: str) -> str:
    """The query's words as one case-insensitive alternation, as an agent greps without an index."""
    return "|".join(re.escape(w) for w in query.split())


def rg_count(root: Path, query: str) -> tuple[float, int]:
    """Seconds of ``rg -c -i 'a|b|c'`` over the tree, and the number of files it counted in."""
    t0 = time.perf_counter()
    out = subprocess.run(
        ["rg", "-c", "-i", rg_pattern(query)], cwd=root, capture_output=True, check=False
    )
    seconds = time.perf_counter() - t0
    return seconds, out.stdout.count(b"\n")


def git_ls_files(root: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(LS_FILES, cwd=root, capture_output=True, check=True)
    return time.perf_counter() - t0


def lstat_all(root: Path, paths: list[str]) -> float:
    """A plain Python loop of lstat over the listed files: the floor of a full refresh."""
    base = str(root) + os.sep
    lstat = os.lstat
    t0 = time.perf_counter()
    for p in paths:
        with contextlib.suppress(OSError):
            lstat(base + p)
    return time.perf_counter() - t0


def read_all(root: Path, paths: list[str]) -> float:
    base = str(root) + os.sep
    t0 = time.perf_counter()
    for p in paths:
        try:
            with open(base + p, "rb") as f:
                f.read()
        except OSError:
            pass
    return time.perf_counter() - t0


def sha_all(root: Path, paths: list[str]) -> float:
    base = str(root) + os.sep
    t0 = time.perf_counter()
    for p in paths:
        try:
            with open(base + p, "rb") as f:
                hashlib.sha256(f.read()).digest()
        except OSError:
            pass
    return time.perf_counter() - t0


def have_rg() -> bool:
    return shutil.which("rg") is not None


__all__ = [
    "KINDS",
    "available",
    "git_ls_files",
    "have_rg",
    "listed",
    "lstat_all",
    "memory",
    "read_all",
    "rg_count",
    "serve",
    "serve_peer",
    "sha_all",
]


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "serve" or sys.argv[2] not in KINDS:
        raise SystemExit(f"usage: {sys.argv[0]} serve {{{','.join(KINDS)}}} ROOT")
    serve_peer(sys.argv[2], Path(sys.argv[3]))
