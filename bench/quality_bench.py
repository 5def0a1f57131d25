"""Retrieval quality on the development set: code-search NDCG@10 and issue localization.

Usage::

    python bench/quality_bench.py [--only code|issues] [--json OUT] [--markdown] [--verbose]
                                  [--experiment NAME ...] [--quality-dir DIR] [--cache-dir DIR]

The development set is ``<repository>/../shared/quality`` (``--quality-dir`` otherwise); its
README defines the metrics, and this script follows it:

- Code search (``code-search-dev.json``): each repository tree (``trees/semble-*.tar.gz``) is
  unpacked and committed to a fresh git repository, indexed by the project's :class:`entry.Engine`
  and searched with each query. The ranked chunks become a ranked list of files (each file's first
  appearance), cut at 10; every target, relevant and secondary alike, counts 1 at the rank of the
  first file that matches its path; NDCG = DCG / IDCG with IDCG over min(10, number of targets)
  and the discount 1/log2(rank + 1). Averaged per repository, then over repositories. Also per
  category (architecture, semantic, symbol: the mean over all the queries of the category) and
  the top-5 hit rate (a *relevant* target's file among the first 5 files).
- Issue localization (``issue-localization-dev.jsonl``): each instance's tree, its issue text as
  the query in several forms (:data:`VARIANTS`), hit@1/3/5/10 over distinct files and the rank of
  the first edited file.

"Search within benchmark_root" is done two ways. The headline indexes ``benchmark_root`` alone as
the tree (the public benchmark's own harness indexes that directory), and the paths, relative to
it, are mapped back to the repository's. The second ("tree scope") indexes the whole repository
and narrows the search to ``benchmark_root`` with the tool's path argument, so that the statistics
and the path words are those of the whole repository.

Ranks come from every matching chunk, not from the tool's first 20: ten distinct files often take
more than 20 chunks. The ranking is exactly the tool's: the engine builds the index and saves its
snapshot; the bench loads that snapshot into a :class:`retrieval.tree.TreeIndex` and ranks with
the words :func:`retrieval.words.ranking_words` gives, as the indexer does, and it checks, for every
query, that the engine's own ``index_search(..., limit=20)`` returns the same first 20 chunks.
The tables also give the figure a model would get from the chunks it is shown: the first 20
(``limit`` at most) and the first 8 (the default).

``--experiment NAME`` (repeatable, or ``all``) measures an idea without changing the project's
ranking code: the bench patches the ranking inside this process (:data:`EXPERIMENTS`), rebuilds
each index in memory under the patch and reports the figures beside an in-memory build of the
unchanged ranking. Nothing an experiment does reaches the engine's data directory.

Trees and the engine's data directory are kept under ``--cache-dir`` (/tmp/nodwyn-quality), so a
second run reuses both. This is a measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodwyn_retrieval import retrieval
from nodwyn_retrieval.actors._work import analyze_blob
from nodwyn_retrieval.actors.indexer import load_snapshot
from nodwyn_retrieval.entry import MAX_LIMIT, Engine
from nodwyn_retrieval.retrieval.tree import TreeHit, TreeIndex, TreeSegment
from nodwyn_retrieval.retrieval.words import clear_memo, ranking_words
from nodwyn_retrieval.store.manifest import manifest_path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_QUALITY = REPO.parent / "shared" / "quality"
DEFAULT_CACHE = Path("/tmp/nodwyn-quality")
K = 10
DEFAULT_LIMIT = 8  # entry.DEFAULT_LIMIT: what a search shows when no limit is given

# The README's reference figures (file-level NDCG@10 per repository).
REFERENCES: dict[str, dict[str, float]] = {
    "ADR ranking as specified": {"flask": 0.651, "requests": 0.750, "click": 0.883},
    "ripgrep file list": {"flask": 0.212, "requests": 0.232, "click": 0.200},
    "leading tool (BM25 + ranker)": {"flask": 0.842, "requests": 0.942, "click": 0.959},
}
# The README's ranks of the first edited file for the ADR's ranking as specified.
REFERENCE_RANKS: dict[str, int] = {
    "pallets__flask-4045": 7,
    "pallets__flask-4992": 1,
    "pallets__flask-5063": 7,
    "psf__requests-863": 4,
    "psf__requests-1963": 1,
    "psf__requests-2148": 1,
    "psf__requests-2317": 14,
    "psf__requests-2674": 6,
    "psf__requests-3362": 13,
}
CATEGORIES = ("architecture", "semantic", "symbol")
HIT_KS = (1, 3, 5, 10)


# -- the metrics ------------------------------------------------------------------------------


def distinct_files(paths: Sequence[str]) -> list[str]:
    """Each file at its first appearance, in rank order."""
    return list(dict.fromkeys(paths))


def ndcg_at_k(files: Sequence[str], targets: Sequence[str], k: int = K) -> float:
    """The README's file-level NDCG@k with binary relevance.

    files are the ranked distinct files; each target path counts 1 at the rank of the first file
    equal to it (two targets of one path count once, at that rank, as a relevance list holds one
    grade a rank); IDCG is over min(k, number of targets).
    """
    if not targets:
        return 0.0
    top = list(files[:k])
    ranks = {top.index(t) + 1 for t in targets if t in top}
    dcg = sum(1.0 / math.log2(r + 1) for r in ranks)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(k, len(targets)) + 1))
    return dcg / ideal


def first_rank(files: Sequence[str], targets: Sequence[str]) -> int | None:
    """The 1-based rank of the first file that is a target, or None."""
    wanted = set(targets)
    for i, f in enumerate(files, 1):
        if f in wanted:
            return i
    return None


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


# -- trees ------------------------------------------------------------------------------------


# A fixed identity and no hooks or signing, whatever the person's git configuration says.
GIT_CONFIG = {
    "init.defaultBranch": "main",
    "user.name": "bench",
    "user.email": "bench@localhost",
    "commit.gpgsign": "false",
    "core.hooksPath": "/dev/null",
}


def _git(cwd: Path, *args: str) -> None:
    config = [a for k, v in GIT_CONFIG.items() for a in ("-c", f"{k}={v}")]
    subprocess.run(["git", *config, *args], cwd=cwd, check=True, capture_output=True)


def _commit(top: Path) -> None:
    _git(top, "init", "-q")
    _git(top, "add", "-A")
    _git(top, "commit", "-q", "--no-verify", "-m", "tree")


def unpack(tar: Path, cache: Path, subdir: str | None = None) -> Path:
    """The tree of tar as a git repository of one commit under cache/trees; made once.

    With subdir, the repository holds only that directory of the tree (the benchmark root).
    """
    stem = tar.name.removesuffix(".tar.gz")
    label = stem if subdir is None else f"{stem}@{subdir.strip('/').replace('/', '_')}"
    dest = cache / "trees" / label
    done = dest / ".unpacked"
    if not done.exists():
        shutil.rmtree(dest, ignore_errors=True)
        staging = dest / "staging"
        staging.mkdir(parents=True)
        with tarfile.open(tar) as tf:
            tf.extractall(staging, filter="data")
        (top,) = [p for p in staging.iterdir() if p.is_dir()]
        src = top if subdir is None else top / subdir
        final = dest / src.name
        src.rename(final)
        shutil.rmtree(staging)
        _commit(final)
        done.write_text(final.name)
    return dest / done.read_text()


# -- ranking ----------------------------------------------------------------------------------


@dataclass
class Ranked:
    """One query's ranking: the chunks (as repository paths) and the distinct files."""

    chunks: list[TreeHit]
    files: list[str]


class Ranker:
    """Ranks the chunks of one tree's index for a query, the indexer's way (§6)."""

    def __init__(self, index: TreeIndex, prefix: str | None, to_repo: str) -> None:
        self.index = index
        self.prefix = prefix
        self.to_repo = to_repo  # prepended to a path to make it the repository's
        self.aggregate: Callable[[list[TreeHit]], list[str]] | None = None

    def rank(self, words: Sequence[str]) -> Ranked:
        hits = self.index.search(words, max(self.index.n_docs, 1), self.prefix)
        hits = [TreeHit(self.to_repo + h.path, h.start, h.end, h.score) for h in hits]
        files = self.aggregate(hits) if self.aggregate else distinct_files([h.path for h in hits])
        return Ranked(hits, files)

    def df(self, word: str) -> int:
        """How many live chunks hold word."""
        n = 0
        for seg, live in ((self.index.base, self.index._live), (self.index.delta, None)):
            docs, _ = seg.segment.postings(word)
            n += int(docs.size if live is None or not docs.size else live[docs].sum())
        return n


def build_in_memory(root: Path, files: Sequence[str]) -> TreeIndex:
    """The index of the given files of root, built in this process as the indexer builds it."""
    items = []
    for path in files:
        try:
            data = (root / path).read_bytes()
        except OSError:
            continue
        a = analyze_blob(path, data, None)
        if a.record is not None:
            items.append((path, a.key, a.record))
    return TreeIndex(TreeSegment.build(items))


@dataclass
class Opened:
    """A tree indexed by the engine: the engine, open, and a ranker over its saved index."""

    engine: Engine
    ranker: Ranker
    files: list[str]
    seconds: float
    update: dict[str, Any]
    """The last index-update's summary (files, read, skipped by reason, ...)."""


async def open_tree(root: Path, cache: Path, prefix: str | None, to_repo: str) -> Opened:
    """Open an engine on root, bring its index up to date and load the index it saved."""
    t0 = time.perf_counter()
    engine = await Engine.open(root, data_dir=cache / "data", config_dir=cache / "config")
    try:
        for _ in range(100):
            up = await engine.index_update()
            if not up.summary["partial"]:
                break
        snap = manifest_path(engine.dirs.trees, engine.root).with_suffix(".snap")
        base = await asyncio.to_thread(load_snapshot, snap)
        if base is None:
            raise RuntimeError(f"no index snapshot at {snap} after index-update")
    except BaseException:
        await engine.close()
        raise
    ranker = Ranker(TreeIndex(base), prefix, to_repo)
    return Opened(engine, ranker, list(base.files), time.perf_counter() - t0, up.summary)


TREES: dict[str, dict[str, Any]] = {}
"""Each tree opened in this run: its files, chunks, what was skipped and the time to open it."""


def note_tree(label: str, o: Opened) -> None:
    skipped = {k: v for k, v in o.update["skipped"].items() if v}
    TREES[label] = {
        "files": len(o.files),
        "chunks": o.ranker.index.n_docs,
        "skipped": skipped,
        "seconds": round(o.seconds, 2),
    }


async def engine_agrees(o: Opened, query: str, ranked: Ranked) -> bool:
    """Whether the engine's own index_search gives the first MAX_LIMIT chunks of ranked."""
    out = await o.engine.index_search(query, "repo", limit=MAX_LIMIT, path=o.ranker.prefix)
    got = [(o.ranker.to_repo + h["path"], h["start"]) for h in out.hits]
    want = [(h.path, h.start) for h in ranked.chunks[:MAX_LIMIT]]
    return got == want


# -- query variants for long issue texts ----------------------------------------------------

FIRST_CHARS = 2000
RARE_SHARE = 0.01
"""A word is rare when at most this share of the tree's chunks hold it."""

# An identifier as written in prose: a name with "_", an inner capital (ScrubEnv, getURL, but not
# a capitalised first word), dotted names and paths (models.list, requests/models.py: each part
# begins with a letter or "_" and one has two characters or more, so not 1.0 or e.g), a name
# called (register_hook()), or anything between backticks.
_BACKTICKS = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:[./][A-Za-z_]\w*)+")
_CALLED = re.compile(r"\b(\w+)\(")
_NAME = re.compile(r"\b\w+\b")


def identifier_text(text: str) -> str:
    """The identifiers of text (the rule above), joined by spaces."""
    found: list[str] = []
    found += _BACKTICKS.findall(text)
    found += [d for d in _DOTTED.findall(text) if max(map(len, re.split(r"[./]", d))) > 1]
    found += _CALLED.findall(text)
    for name in _NAME.findall(text):
        if "_" in name.strip("_") or re.search(r"[a-z0-9][A-Z]", name):
            found.append(name)
    return " ".join(found)


def issue_words(name: str, text: str, ranker: Ranker) -> tuple[list[str], bool]:
    """The query words of one variant, and whether it gave none and the whole text stood in."""
    words = variant_words(name, text, ranker)
    return (words, False) if words else (ranking_words(text), True)


def variant_words(name: str, text: str, ranker: Ranker) -> list[str]:
    """The query words of one variant of an issue text."""
    whole = ranking_words(text)
    if name == "full":
        return whole
    if name == "first2000":
        return ranking_words(text[:FIRST_CHARS])
    n = max(ranker.index.n_docs, 1)
    ident = ranking_words(identifier_text(text))
    rare = [w for w in whole if 0 < ranker.df(w) <= RARE_SHARE * n]
    if name == "identifiers":
        return ident
    if name == "rare":
        return rare
    if name == "identifiers+rare":
        return list(dict.fromkeys(ident + rare))
    raise ValueError(name)


VARIANTS: dict[str, str] = {
    "full": "the whole issue text",
    "first2000": f"the first {FIRST_CHARS:,} characters of the issue text",
    "identifiers": "identifiers only: names with _ or an inner capital, dotted names and paths,"
    " names called with (, text in backticks; then split into words as usual",
    "rare": f"rare words only: the text's words held by at most {RARE_SHARE:.0%} of the tree's"
    " chunks (and by at least one)",
    "identifiers+rare": "the union of the two above",
}
"""A variant that gives no word falls back to the whole text (marked "full" in the word counts)."""


# -- experiments ------------------------------------------------------------------------------

STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "in", "into", "is", "it", "its", "of", "on", "or", "the", "their", "them", "there", "these",
    "this", "to", "what", "when", "where", "which", "who", "why", "with",
))  # fmt: skip


def light_stem(word: str) -> str:
    """A few English suffixes off a word of letters (registered, routes, handling -> register,
    route, handl); a word of fewer than 5 letters, or with a digit or "_", is kept."""
    if len(word) < 5 or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)] + repl
    return word


def _stemmed_expand_run(run: bytes) -> tuple[str, ...]:
    words = _ORIGINAL_EXPAND_RUN(run)
    return tuple(dict.fromkeys([*words, *map(light_stem, words)]))


_ORIGINAL_EXPAND_RUN = retrieval.words._expand_run

_METHOD_START = re.compile(rb"\n(?=[ \t]+(?:async[ \t]+)?(?:def|class)\b|[ \t]*@\w)")


def _declarations_with_methods(data: bytes) -> list[int]:
    """§6's declarations, and indented def/class and decorators (methods start chunks too)."""
    found = set(retrieval.chunks.declaration_offsets_utf8(data))
    found.update(m.end() for m in _METHOD_START.finditer(data))
    return sorted(found)


def _declarations_without_hash(data: bytes) -> list[int]:
    """§6's declarations but "#": a Python comment in the first column starts no chunk."""
    return [
        at for at in retrieval.chunks.declaration_offsets_utf8(data) if data[at : at + 1] != b"#"
    ]


def _robertson_idf(n_docs: int, df: int) -> float:
    """The classic Robertson-Spärck Jones idf, floored at 0 (a word in over half the chunks)."""
    return max(0.0, math.log((n_docs - df + 0.5) / (df + 0.5)))


def _file_sum(top: int) -> Callable[[list[TreeHit]], list[str]]:
    def aggregate(hits: list[TreeHit]) -> list[str]:
        per: dict[str, list[float]] = {}
        for h in hits:
            per.setdefault(h.path, []).append(h.score)
        score = {p: sum(sorted(s, reverse=True)[:top]) for p, s in per.items()}
        return sorted(score, key=lambda p: -score[p])

    return aggregate


@dataclass(frozen=True)
class Experiment:
    """A change to the ranking, measured in this process only."""

    name: str
    about: str
    patches: Callable[[], list[contextlib.AbstractContextManager[Any]]] = list
    words: Callable[[list[str]], list[str]] | None = None
    aggregate: Callable[[list[TreeHit]], list[str]] | None = None


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment("none", "the ranking as it is, built in memory (the reference for the deltas)"),
        Experiment(
            "path1",
            "path words count once, not three times",
            lambda: [mock.patch.object(retrieval.tree, "PATH_WEIGHT", 1)],
        ),
        Experiment(
            "path0",
            "path words not counted at all",
            lambda: [mock.patch.object(retrieval.tree, "PATH_WEIGHT", 0)],
        ),
        Experiment(
            "first1",
            "the first line counts once, not three times",
            lambda: [mock.patch.object(retrieval.tree, "FIRST_LINE_WEIGHT", 1)],
        ),
        Experiment(
            "b0.3",
            "BM25 b 0.3 (less length normalisation)",
            lambda: [mock.patch.object(retrieval.bm25, "B", 0.3)],
        ),
        Experiment(
            "k1-2",
            "BM25 k1 2.0 (less saturation)",
            lambda: [mock.patch.object(retrieval.bm25, "K1", 2.0)],
        ),
        Experiment(
            "stop",
            "English stop words (how, are, the, ...) dropped from the query",
            words=lambda ws: [w for w in ws if w not in STOPWORDS] or ws,
        ),
        Experiment(
            "stem",
            "a light English stemmer: each word also gives its stem, in the text and the query",
            lambda: [mock.patch.object(retrieval.words, "_expand_run", _stemmed_expand_run)],
        ),
        Experiment(
            "methods",
            "chunks also start at indented def/class and at decorators (20-line minimum kept)",
            lambda: [
                mock.patch.object(
                    retrieval.analyze, "declaration_offsets_utf8", _declarations_with_methods
                )
            ],
        ),
        Experiment(
            "no-hash",
            "a line starting with # (a Python comment) starts no chunk; the other §6 starts kept",
            lambda: [
                mock.patch.object(
                    retrieval.analyze, "declaration_offsets_utf8", _declarations_without_hash
                )
            ],
        ),
        Experiment(
            "idf-rsj",
            "the classic idf log((N-df+0.5)/(df+0.5)) floored at 0, not Lucene's log(1+...)",
            lambda: [mock.patch.object(retrieval.bm25, "idf", _robertson_idf)],
        ),
        Experiment(
            "whole-file",
            "one chunk per file (no 20-80 line rule): BM25 over files",
            lambda: [
                mock.patch.object(retrieval.chunks, "MIN_LINES", 10**9),
                mock.patch.object(retrieval.chunks, "MAX_LINES", 10**9),
            ],
        ),
        Experiment(
            "file-sum3",
            "a file ranks by the sum of its best 3 chunks' scores, not its best chunk's",
            aggregate=_file_sum(3),
        ),
        Experiment(
            "file-sum-all",
            "a file ranks by the sum of all its chunks' scores",
            aggregate=_file_sum(10**9),
        ),
    )
}


COMBINATIONS = ("stop+stem", "file-sum3+stop", "file-sum3+k1-2", "file-sum3+stop+stem+k1-2")
"""What ``all`` runs besides each experiment alone; any NAME+NAME is accepted."""


def combine(name: str) -> Experiment:
    """The experiment NAME, or NAME+NAME+...: the patches of all, the query rewrites in order,
    the last file ranking given."""
    parts = [EXPERIMENTS[n] for n in name.split("+")]
    if len(parts) == 1:
        return parts[0]

    def patches() -> list[contextlib.AbstractContextManager[Any]]:
        return [p for e in parts for p in e.patches()]

    rewrites = [e.words for e in parts if e.words]

    def words(ws: list[str]) -> list[str]:
        for f in rewrites:
            ws = f(ws)
        return ws

    aggregates = [e.aggregate for e in parts if e.aggregate]
    return Experiment(
        name,
        " and ".join(f"({e.about})" for e in parts),
        patches,
        words if rewrites else None,
        aggregates[-1] if aggregates else None,
    )


@contextlib.contextmanager
def applied(exp: Experiment) -> Iterator[None]:
    """The experiment's patches, with this thread's word memo cleared on the way in and out."""
    with contextlib.ExitStack() as stack:
        for p in exp.patches():
            stack.enter_context(p)
        clear_memo()
        try:
            yield
        finally:
            clear_memo()


# -- code search ------------------------------------------------------------------------------


@dataclass
class QueryResult:
    repo: str
    query: str
    category: str
    targets: list[str]
    relevant: list[str]
    ndcg: float
    ndcg20: float
    ndcg8: float
    hit5: bool
    rank: int | None
    top5: list[str]
    agrees: bool | None = None


def target_path(t: str | dict[str, Any]) -> str:
    return t if isinstance(t, str) else str(t["path"])


def score_query(repo: str, q: dict[str, Any], ranked: Ranked) -> QueryResult:
    relevant = [target_path(t) for t in q["relevant"]]
    targets = relevant + [target_path(t) for t in q["secondary"]]
    chunk_paths = [h.path for h in ranked.chunks]
    return QueryResult(
        repo=repo,
        query=q["query"],
        category=q["category"],
        targets=targets,
        relevant=relevant,
        ndcg=ndcg_at_k(ranked.files, targets),
        ndcg20=ndcg_at_k(distinct_files(chunk_paths[:MAX_LIMIT]), targets),
        ndcg8=ndcg_at_k(distinct_files(chunk_paths[:DEFAULT_LIMIT]), targets),
        hit5=any(f in relevant for f in ranked.files[:5]),
        rank=first_rank(ranked.files, targets),
        top5=ranked.files[:5],
    )


def code_spec(quality: Path) -> dict[str, Any]:
    return json.loads((quality / "code-search-dev.json").read_text())


async def run_code(
    quality: Path, cache: Path, scope: str, experiments: Sequence[Experiment]
) -> dict[str, list[QueryResult]]:
    """Each experiment's results (the engine's own ranking under "engine")."""
    out: dict[str, list[QueryResult]] = {"engine": []}
    for e in experiments:
        out[e.name] = []
    for repo, spec in code_spec(quality).items():
        root_dir = spec["benchmark_root"].strip("/")
        tar = quality / spec["tree"]
        if scope == "root":
            top = unpack(tar, cache, root_dir)
            prefix, to_repo = None, root_dir + "/"
        else:
            top = unpack(tar, cache)
            prefix, to_repo = root_dir, ""
        o = await open_tree(top, cache, prefix, to_repo)
        note_tree(top.parent.name, o)
        try:
            for q in spec["queries"]:
                ranked = o.ranker.rank(ranking_words(q["query"]))
                r = score_query(repo, q, ranked)
                r.agrees = await engine_agrees(o, q["query"], ranked)
                out["engine"].append(r)
        finally:
            await o.engine.close()
        for e in experiments:
            with applied(e):
                ranker = Ranker(build_in_memory(top, o.files), prefix, to_repo)
                ranker.aggregate = e.aggregate
                for q in spec["queries"]:
                    words = ranking_words(q["query"])
                    if e.words:
                        words = e.words(words)
                    out[e.name].append(score_query(repo, q, ranker.rank(words)))
    return out


def summarise_code(results: Sequence[QueryResult]) -> dict[str, Any]:
    repos = list(dict.fromkeys(r.repo for r in results))
    per_repo = {}
    for repo in repos:
        rs = [r for r in results if r.repo == repo]
        per_repo[repo] = {
            "queries": len(rs),
            "ndcg10": mean([r.ndcg for r in rs]),
            "ndcg10_first20": mean([r.ndcg20 for r in rs]),
            "ndcg10_first8": mean([r.ndcg8 for r in rs]),
            "hit5": mean([float(r.hit5) for r in rs]),
        }
    per_cat = {}
    for cat in CATEGORIES:
        rs = [r for r in results if r.category == cat]
        per_cat[cat] = {
            "queries": len(rs),
            "ndcg10": mean([r.ndcg for r in rs]),
            "hit5": mean([float(r.hit5) for r in rs]),
            "by_repo": {
                repo: mean([r.ndcg for r in rs if r.repo == repo])
                for repo in repos
                if any(r.repo == repo for r in rs)
            },
        }
    return {
        "per_repo": per_repo,
        "mean": {
            k: mean([v[k] for v in per_repo.values()])
            for k in ("ndcg10", "ndcg10_first20", "ndcg10_first8", "hit5")
        },
        "per_category": per_cat,
    }


# -- issue localization -----------------------------------------------------------------------


@dataclass
class IssueResult:
    instance: str
    variant: str
    words: int
    rank: int | None
    top5: list[str]
    fallback: bool = False
    agrees: bool | None = None


async def run_issues(
    quality: Path, cache: Path, experiments: Sequence[Experiment]
) -> dict[str, list[IssueResult]]:
    """Each experiment's results per instance and variant (the engine's own under "engine")."""
    out: dict[str, list[IssueResult]] = {"engine": []}
    for e in experiments:
        out[e.name] = []
    lines = (quality / "issue-localization-dev.jsonl").read_text().splitlines()
    for line in filter(None, lines):
        inst = json.loads(line)
        top = unpack(quality / inst["tree"], cache)
        text = inst["problem_statement"]
        edited = list(inst["edited_files"])
        o = await open_tree(top, cache, None, "")
        note_tree(top.parent.name, o)
        try:
            for v in VARIANTS:
                words, fallback = issue_words(v, text, o.ranker)
                ranked = o.ranker.rank(words)
                r = IssueResult(
                    inst["instance_id"],
                    v,
                    len(words),
                    first_rank(ranked.files, edited),
                    ranked.files[:5],
                    fallback,
                )
                if v == "full":
                    r.agrees = await engine_agrees(o, text, ranked)
                out["engine"].append(r)
        finally:
            await o.engine.close()
        for e in experiments:
            with applied(e):
                ranker = Ranker(build_in_memory(top, o.files), None, "")
                ranker.aggregate = e.aggregate
                for v in VARIANTS:
                    words, fallback = issue_words(v, text, ranker)
                    if e.words:
                        words = e.words(words)
                    ranked = ranker.rank(words)
                    out[e.name].append(
                        IssueResult(
                            inst["instance_id"],
                            v,
                            len(words),
                            first_rank(ranked.files, edited),
                            ranked.files[:5],
                            fallback,
                        )
                    )
    return out


def summarise_issues(results: Sequence[IssueResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in VARIANTS:
        rs = [r for r in results if r.variant == v]
        out[v] = {
            **{
                f"hit@{k}": sum(1 for r in rs if r.rank is not None and r.rank <= k) for k in HIT_KS
            },
            "instances": len(rs),
            "ranks": {r.instance: r.rank for r in rs},
            "words": {r.instance: "full" if r.fallback else r.words for r in rs},
        }
    return out


# -- output -----------------------------------------------------------------------------------


@dataclass
class Table:
    title: str
    head: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def render(self, markdown: bool) -> str:
        if markdown:
            lines = [f"**{self.title}**", ""]
            lines.append("| " + " | ".join(self.head) + " |")
            lines.append("|" + "|".join(" --- " for _ in self.head) + "|")
            lines += ["| " + " | ".join(r) + " |" for r in self.rows]
            return "\n".join(lines) + "\n"
        widths = [max(len(x) for x in col) for col in zip(self.head, *self.rows, strict=True)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [self.title, fmt.format(*self.head), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*r) for r in self.rows]
        return "\n".join(lines) + "\n"


def f3(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"  # noqa: PLR0124 - NaN test


def rank_s(r: int | None) -> str:
    return "—" if r is None else str(r)


def code_tables(label: str, s: dict[str, Any], refs: bool) -> list[Table]:
    repos = list(s["per_repo"])
    head = ["ranking", *repos, "mean"]
    t = Table(f"Code search, file NDCG@10 — {label}", head)

    def row(name: str, vals: dict[str, float]) -> list[str]:
        return [name, *(f3(vals[r]) for r in repos), f3(mean([vals[r] for r in repos]))]

    t.rows.append(
        row("this project: all matching chunks", {r: v["ndcg10"] for r, v in s["per_repo"].items()})
    )
    t.rows.append(
        row(
            f"this project: first {MAX_LIMIT} chunks (the tool's limit)",
            {r: v["ndcg10_first20"] for r, v in s["per_repo"].items()},
        )
    )
    t.rows.append(
        row(
            f"this project: first {DEFAULT_LIMIT} chunks (default limit)",
            {r: v["ndcg10_first8"] for r, v in s["per_repo"].items()},
        )
    )
    if refs:
        for name, vals in REFERENCES.items():
            t.rows.append(row(f"reference: {name}", vals))
    h = Table(f"Code search, top-5 hit rate (a relevant file in the first 5) — {label}", head)
    h.rows.append(row("this project", {r: v["hit5"] for r, v in s["per_repo"].items()}))
    c = Table(
        f"Code search by category, NDCG@10 — {label}",
        ["category", "queries", *repos, "all (query mean)", "top-5 hits"],
    )
    for cat, v in s["per_category"].items():
        c.rows.append(
            [
                cat,
                str(v["queries"]),
                *(f3(v["by_repo"].get(r, float("nan"))) for r in repos),
                f3(v["ndcg10"]),
                f3(v["hit5"]),
            ]
        )
    return [t, h, c]


def issue_tables(label: str, s: dict[str, Any], refs: bool) -> list[Table]:
    instances = list(next(iter(s.values()))["ranks"])
    short = [i.split("__")[1] for i in instances]
    t = Table(
        f"Issue localization, rank of the first edited file — {label}",
        ["query", *short, *(f"hit@{k}" for k in HIT_KS)],
    )
    if refs:
        t.rows.append(
            [
                "reference: ADR ranking as specified",
                *(rank_s(REFERENCE_RANKS.get(i)) for i in instances),
                *(str(sum(1 for i in instances if REFERENCE_RANKS[i] <= k)) + "/9" for k in HIT_KS),
            ]
        )
    for v, d in s.items():
        n = d["instances"]
        t.rows.append(
            [
                v,
                *(rank_s(d["ranks"][i]) for i in instances),
                *(f"{d[f'hit@{k}']}/{n}" for k in HIT_KS),
            ]
        )
    w = Table(f"Issue localization, query words per variant — {label}", ["query", *short])
    for v, d in s.items():
        w.rows.append([v, *(str(d["words"][i]) for i in instances)])
    return [t, w]


def delta_table(title: str, base: dict[str, Any], others: dict[str, dict[str, Any]]) -> Table:
    repos = list(base["per_repo"])
    t = Table(title, ["experiment", *repos, "mean", "Δ mean", *CATEGORIES, "top-5 hits"])
    b = base["mean"]["ndcg10"]
    for name, s in {"none": base, **others}.items():
        m = s["mean"]["ndcg10"]
        t.rows.append(
            [
                name,
                *(f3(s["per_repo"][r]["ndcg10"]) for r in repos),
                f3(m),
                f"{m - b:+.3f}",
                *(f3(s["per_category"][c]["ndcg10"]) for c in CATEGORIES),
                f3(s["mean"]["hit5"]),
            ]
        )
    return t


def issue_delta_table(base: dict[str, Any], others: dict[str, dict[str, Any]]) -> Table:
    variants = list(base)
    t = Table(
        "Experiments, issue localization: hit@5 / hit@10 (of 9) and the sum of the ranks"
        " (an instance not found counts 50) per query variant",
        ["experiment", *variants],
    )
    for name, s in {"none": base, **others}.items():
        cells = []
        for v in variants:
            d = s[v]
            total = sum(50 if r is None else min(r, 50) for r in d["ranks"].values())
            cells.append(f"{d['hit@5']} / {d['hit@10']} / Σ{total}")
        t.rows.append([name, *cells])
    return t


def verbose_code(results: Sequence[QueryResult]) -> str:
    lines = ["Per query (code search): NDCG@10, rank of the first target, the first 5 files"]
    for r in results:
        lines.append(
            f"  [{r.repo}/{r.category}] {r.query!r}: ndcg {r.ndcg:.3f}, first target at "
            f"{rank_s(r.rank)}, targets {r.targets}"
            + ("" if r.agrees is None or r.agrees else "  (ENGINE DISAGREES)")
        )
        lines.append("      " + ", ".join(r.top5))
    return "\n".join(lines)


def verbose_issues(results: Sequence[IssueResult]) -> str:
    lines = ["Per instance and variant (issues): rank of the first edited file, the first 5 files"]
    for r in results:
        lines.append(
            f"  {r.instance} [{r.variant}, {r.words} words]: rank {rank_s(r.rank)}"
            + ("" if r.agrees is None or r.agrees else "  (ENGINE DISAGREES)")
        )
        lines.append("      " + ", ".join(r.top5))
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=("code", "issues"), help="run one of the two sets")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every figure to OUT")
    p.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    p.add_argument("--verbose", action="store_true", help="per query: first target, top 5")
    p.add_argument(
        "--experiment",
        action="append",
        default=[],
        metavar="NAME",
        help=f"measure a change in this process only: {', '.join(EXPERIMENTS)}; NAME+NAME"
        " combines; all runs each and a few combinations",
    )
    p.add_argument("--quality-dir", type=Path, default=DEFAULT_QUALITY)
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    p.add_argument(
        "--no-tree-scope",
        action="store_true",
        help="skip the code search with the whole repository indexed and the search narrowed",
    )
    args = p.parse_args(argv)
    names: list[str] = []
    for n in args.experiment:
        names += [*EXPERIMENTS, *COMBINATIONS] if n == "all" else [n]
    unknown = [n for n in names if any(part not in EXPERIMENTS for part in n.split("+"))]
    if unknown:
        p.error(
            f"unknown experiment {unknown}: choose from {', '.join(EXPERIMENTS)}, NAME+NAME, or all"
        )
    if names and "none" not in names:
        names = ["none", *names]
    args.experiments = [combine(n) for n in dict.fromkeys(names)]
    return args


async def amain(args: argparse.Namespace) -> int:
    quality: Path = args.quality_dir
    if not (quality / "README.md").is_file():
        print(f"no development set at {quality}: give --quality-dir", file=sys.stderr)
        return 2
    cache: Path = args.cache_dir
    await asyncio.to_thread(cache.mkdir, parents=True, exist_ok=True)
    exps: list[Experiment] = args.experiments
    report: dict[str, Any] = {"quality_dir": str(quality), "references": REFERENCES}
    tables: list[Table] = []
    notes: list[str] = []
    t0 = time.perf_counter()
    if args.only in (None, "code"):
        scopes = ["root"] if args.no_tree_scope else ["root", "tree"]
        for scope in scopes:
            label = (
                "benchmark_root indexed as the tree"
                if scope == "root"
                else "whole repository indexed, search narrowed to benchmark_root"
            )
            res = await run_code(quality, cache, scope, exps if scope == "root" else [])
            s = summarise_code(res["engine"])
            agree = sum(1 for r in res["engine"] if r.agrees)
            notes.append(
                f"code search ({scope} scope): the engine's index_search(limit={MAX_LIMIT}) gave "
                f"the same first chunks as the bench's ranking for {agree}/{len(res['engine'])}"
                " queries"
            )
            tables += code_tables(label, s, refs=scope == "root")
            report[f"code_{scope}"] = {
                "summary": s,
                "queries": [r.__dict__ for r in res["engine"]],
            }
            if args.verbose:
                notes.append(f"[{scope} scope]\n" + verbose_code(res["engine"]))
            if scope == "root" and exps:
                sums = {e.name: summarise_code(res[e.name]) for e in exps}
                base = sums.pop("none")
                tables.append(
                    delta_table(
                        "Experiments, code search NDCG@10 (benchmark_root as the tree;"
                        " Δ against none)",
                        base,
                        sums,
                    )
                )
                same = s["mean"]["ndcg10"] == base["mean"]["ndcg10"]
                notes.append(
                    f"in-memory build of the unchanged ranking equals the engine's: {same}"
                )
                report["code_experiments"] = {
                    name: {"summary": sm, "queries": [r.__dict__ for r in res[name]]}
                    for name, sm in {"none": base, **sums}.items()
                }
    if args.only in (None, "issues"):
        res_i = await run_issues(quality, cache, exps)
        si = summarise_issues(res_i["engine"])
        agree = sum(1 for r in res_i["engine"] if r.agrees)
        notes.append(
            f"issues: the engine's index_search(limit={MAX_LIMIT}) with the whole text gave the "
            f"same first chunks as the bench's ranking for {agree}/9 instances"
        )
        tables += issue_tables("this project's ranking", si, refs=True)
        report["issues"] = {"summary": si, "results": [r.__dict__ for r in res_i["engine"]]}
        if args.verbose:
            notes.append(verbose_issues(res_i["engine"]))
        if exps:
            sums_i = {e.name: summarise_issues(res_i[e.name]) for e in exps}
            base_i = sums_i.pop("none")
            tables.append(issue_delta_table(base_i, sums_i))
            report["issue_experiments"] = sums_i | {"none": base_i}
    tt = Table(
        "Trees: files and chunks indexed, files skipped, seconds to open and bring up to date",
        ["tree", "files", "chunks", "skipped", "seconds"],
    )
    for label, d in TREES.items():
        skipped = ", ".join(f"{k} {v}" for k, v in d["skipped"].items()) or "—"
        tt.rows.append([label, str(d["files"]), str(d["chunks"]), skipped, f"{d['seconds']:.2f}"])
    tables.append(tt)
    report["trees"] = TREES
    report["variants"] = VARIANTS
    report["experiments"] = {e.name: e.about for e in exps}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    for t in tables:
        print(t.render(args.markdown))
    if exps:
        print("Experiments:")
        for e in exps:
            print(f"  {e.name}: {e.about}")
        print()
    print("Query variants (issues):")
    for v, about in VARIANTS.items():
        print(f"  {v}: {about}")
    print()
    for n in notes:
        print(n)
    print(f"({report['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
