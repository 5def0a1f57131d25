"""Retrieval quality on the development set: code-search NDCG@10 and issue localization.

Usage::

    python bench/quality_bench.py [--only code|issues] [--json OUT] [--markdown] [--verbose]
                                  [--experiment SPEC ...] [--loo PARAM=V1,V2,...]
                                  [--quality-dir DIR] [--cache-dir DIR]

The development set is ``<repository>/../shared/quality`` (``--quality-dir`` otherwise); its
README defines the metrics, and this script follows it:

- Code search (``code-search-dev.json``, every repository in it): each tree is unpacked and
  committed to a fresh git repository, indexed by the project's :class:`entry.Engine` and searched
  with each query. The ranked files are cut at 10; every target, relevant and secondary alike,
  counts 1 at the rank of the first file that matches its path; NDCG = DCG / IDCG with IDCG over
  min(10, number of targets) and the discount 1/log2(rank + 1). Averaged per repository, then
  over repositories; also per language (from the targets' file names), per category and the
  top-5 hit rate (a *relevant* target among the first 5 files). "Search within benchmark_root":
  the benchmark root alone is indexed as the tree (the public benchmark's own harness does so)
  and paths are mapped back to the repository's; an entry without a root (cobra's) is searched
  whole.
- Issue localization (``issue-localization-dev.jsonl``): each instance's tree, its issue text
  whole as the query, hit@1/3/5/10 over distinct files and the rank of the first edited file.

The ranking is exactly the tool's: the engine builds the index and saves its snapshot; the bench
loads that snapshot into a :class:`retrieval.tree.TreeIndex` and ranks with
:meth:`TreeIndex.rank_files` and :func:`retrieval.words.weighted_query`, as the indexer does,
and checks for every query that the engine's own ``index_search(..., limit=20)`` returns the
same chunks. The file ranking covers every matching file; the tables also give the figure a
model gets from the chunks it is shown: the first 20 (``limit`` at most) and the first 8.

``--experiment SPEC`` (repeatable) ranks with other settings of
:class:`retrieval.tree.Ranking` (and of the query's identifier weight) without changing the
project: ``definition=0``, ``decay=1``, ``priors=off``, ``identifiers=1``, ``plain`` (chunk
BM25 as §6 has it: no definitions, forms, priors, name or identifier weights, a file at its best
chunk), combined with ``+``. ``--loo PARAM=V1,V2,...`` checks that a choice generalises: for
each repository held out, the value best on the others is chosen and its figure on the held-out
one reported, beside the figure of the value the project uses.

Trees and the engine's data directory are kept under ``--cache-dir`` (/tmp/nodwyn-quality), so a
second run reuses both. This is a measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _quality_report import (
    CATEGORIES,
    DEFAULT_LIMIT,
    HIT_KS,
    Table,
    code_tables,
    f3,
    issue_tables,
    mean,
    verbose_code,
    verbose_issues,
)
from nodwyn_retrieval.actors.indexer import load_snapshot
from nodwyn_retrieval.entry import MAX_LIMIT, Engine
from nodwyn_retrieval.retrieval.kinds import PRIORS
from nodwyn_retrieval.retrieval.tree import RANKING, Ranking, TreeHit, TreeIndex
from nodwyn_retrieval.retrieval.words import IDENTIFIER_WEIGHT, weighted_query
from nodwyn_retrieval.store.manifest import manifest_path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_QUALITY = REPO.parent / "shared" / "quality"
DEFAULT_CACHE = Path("/tmp/nodwyn-quality")
K = 10
# A repository's language, from its targets' file names.
LANGUAGE_OF_EXT = {
    "py": "Python", "go": "Go", "java": "Java", "rs": "Rust", "c": "C", "h": "C",
    "ts": "TypeScript", "tsx": "TypeScript", "js": "JavaScript",
}  # fmt: skip


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


@dataclass(frozen=True)
class Setting:
    """A ranking to measure: the project's, or another setting of it."""

    name: str
    ranking: Ranking = RANKING
    identifiers: float = IDENTIFIER_WEIGHT


PLAIN = Setting(
    "plain",
    Ranking(definition=0.0, forms=0.0, decay=0.0, name=0.0, priors={}, per_file=10**9, more=0.0),
    1.0,
)
"""Chunk BM25 as §6 has it: a file at its best chunk, every chunk shown in score order."""


def parse_setting(spec: str) -> Setting:
    """``plain``, ``PARAM=VALUE`` (a field of Ranking, ``identifiers``, ``priors=off`` or
    ``prior.KIND=F``), or several joined by ``+``."""
    ranking, ident = RANKING, IDENTIFIER_WEIGHT
    for part in spec.split("+"):
        if part == "plain":
            ranking, ident = PLAIN.ranking, PLAIN.identifiers
            continue
        key, _, value = part.partition("=")
        if key == "identifiers":
            ident = float(value)
        elif key == "priors" and value == "off":
            ranking = dataclasses.replace(ranking, priors={})
        elif key.startswith("prior."):
            priors = dict(ranking.priors or PRIORS)
            priors[key.removeprefix("prior.")] = float(value)
            ranking = dataclasses.replace(ranking, priors=priors)
        elif key in ("per_file",):
            ranking = dataclasses.replace(ranking, **{key: int(value)})
        elif key in {f.name for f in dataclasses.fields(Ranking)}:
            ranking = dataclasses.replace(ranking, **{key: float(value)})
        else:
            raise ValueError(f"unknown setting {part!r}")
    return Setting(spec, ranking, ident)


@dataclass
class Ranked:
    """One query's ranking: the chunks shown (as repository paths) and every file in order."""

    chunks: list[TreeHit]
    files: list[str]


class Ranker:
    """Ranks one tree's index for a query, the indexer's way."""

    def __init__(self, index: TreeIndex, prefix: str | None, to_repo: str) -> None:
        self.index = index
        self.prefix = prefix
        self.to_repo = to_repo  # prepended to a path to make it the repository's

    def rank(self, text: str, setting: Setting) -> Ranked:
        query = weighted_query(text, setting.identifiers)
        hits, files = self.index.rank_files(query, MAX_LIMIT, self.prefix, setting.ranking)
        hits = [TreeHit(self.to_repo + h.path, h.start, h.end, h.score) for h in hits]
        return Ranked(hits, [self.to_repo + f for f in files])


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
    """Whether the engine's own index_search gives the chunks of ranked."""
    out = await o.engine.index_search(query, "repo", limit=MAX_LIMIT, path=o.ranker.prefix)
    got = [(o.ranker.to_repo + h["path"], h["start"]) for h in out.hits]
    want = [(h.path, h.start) for h in ranked.chunks[:MAX_LIMIT]]
    return got == want


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
    spec: dict[str, Any] = json.loads((quality / "code-search-dev.json").read_text())
    return spec


def language(spec: dict[str, Any]) -> str:
    """The language most of a repository's targets are written in."""
    counts: dict[str, int] = {}
    for q in spec["queries"]:
        for t in q["relevant"] + q["secondary"]:
            ext = target_path(t).rsplit(".", 1)[-1]
            lang = LANGUAGE_OF_EXT.get(ext)
            if lang:
                counts[lang] = counts.get(lang, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else "?"


async def run_code(
    quality: Path, cache: Path, settings: Sequence[Setting]
) -> dict[str, list[QueryResult]]:
    """Each setting's results; the project's ranking is checked against the engine's search."""
    out: dict[str, list[QueryResult]] = {s.name: [] for s in settings}
    for repo, spec in code_spec(quality).items():
        root_dir = spec.get("benchmark_root", "").strip("/")
        tar = quality / spec["tree"]
        # The benchmark root alone is the tree; an entry without one is searched whole.
        top = unpack(tar, cache, root_dir or None)
        to_repo = root_dir + "/" if root_dir else ""
        o = await open_tree(top, cache, None, to_repo)
        note_tree(top.parent.name, o)
        try:
            for q in spec["queries"]:
                for s in settings:
                    ranked = o.ranker.rank(q["query"], s)
                    r = score_query(repo, q, ranked)
                    if s.name == "project":
                        r.agrees = await engine_agrees(o, q["query"], ranked)
                    out[s.name].append(r)
        finally:
            await o.engine.close()
    return out


def summarise_code(results: Sequence[QueryResult], langs: dict[str, str]) -> dict[str, Any]:
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
    per_lang: dict[str, float] = {}
    for lang in dict.fromkeys(langs[r] for r in repos):
        per_lang[lang] = mean([per_repo[r]["ndcg10"] for r in repos if langs[r] == lang])
    per_cat = {}
    for cat in CATEGORIES:
        rs = [r for r in results if r.category == cat]
        per_cat[cat] = {
            "queries": len(rs),
            "ndcg10": mean([r.ndcg for r in rs]),
            "hit5": mean([float(r.hit5) for r in rs]),
        }
    return {
        "per_repo": per_repo,
        "per_language": per_lang,
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
    repo: str
    words: int
    rank: int | None
    top5: list[str]
    agrees: bool | None = None


async def run_issues(
    quality: Path, cache: Path, settings: Sequence[Setting]
) -> dict[str, list[IssueResult]]:
    """Each setting's result per instance, the whole issue text as the query."""
    out: dict[str, list[IssueResult]] = {s.name: [] for s in settings}
    lines = (quality / "issue-localization-dev.jsonl").read_text().splitlines()
    for line in filter(None, lines):
        inst = json.loads(line)
        top = unpack(quality / inst["tree"], cache)
        text = inst["problem_statement"]
        edited = list(inst["edited_files"])
        o = await open_tree(top, cache, None, "")
        note_tree(top.parent.name, o)
        try:
            for s in settings:
                ranked = o.ranker.rank(text, s)
                r = IssueResult(
                    inst["instance_id"],
                    inst["repo"].split("/")[-1],
                    len(weighted_query(text, s.identifiers)),
                    first_rank(ranked.files, edited),
                    ranked.files[:5],
                )
                if s.name == "project":
                    r.agrees = await engine_agrees(o, text, ranked)
                out[s.name].append(r)
        finally:
            await o.engine.close()
    return out


def summarise_issues(results: Sequence[IssueResult]) -> dict[str, Any]:
    n = len(results)
    return {
        **{
            f"hit@{k}": sum(1 for r in results if r.rank is not None and r.rank <= k)
            for k in HIT_KS
        },
        "instances": n,
        "mrr": mean([1.0 / r.rank if r.rank else 0.0 for r in results]),
        "ranks": {r.instance: r.rank for r in results},
    }


# -- leave one out ----------------------------------------------------------------------------


def leave_one_out(
    param: str,
    code: dict[str, list[QueryResult]],
    issues: dict[str, list[IssueResult]],
    values: Sequence[str],
) -> tuple[list[Table], dict[str, Any]]:
    """For each repository held out: the value best on the others, and its figure there."""
    names = {v: v if param == "setting" else f"{param}={v}" for v in values}
    tables: list[Table] = []
    report: dict[str, Any] = {}
    if code:
        repos = list(dict.fromkeys(r.repo for r in code["project"]))

        def ndcg(name: str, repo: str) -> float:
            return mean([r.ndcg for r in code[name] if r.repo == repo])

        t = Table(
            f"Leave one out, code search NDCG@10: {param} chosen on the other repositories",
            ["held out", "chosen", "held-out NDCG@10", "with the project's value", "plain"],
        )
        for held in repos:
            others = [r for r in repos if r != held]
            best = max(values, key=lambda v: mean([ndcg(names[v], r) for r in others]))
            t.rows.append(
                [
                    held,
                    best,
                    f3(ndcg(names[best], held)),
                    f3(ndcg("project", held)),
                    f3(ndcg("plain", held)) if "plain" in code else "—",
                ]
            )
            report[held] = {"chosen": best, "ndcg10": ndcg(names[best], held)}
        held_mean = mean([report[r]["ndcg10"] for r in repos])
        t.rows.append(["mean of the held-out figures", "", f3(held_mean), "", ""])
        t.rows.append(
            [
                "all (per value)",
                ", ".join(f"{v}: {f3(mean([ndcg(names[v], r) for r in repos]))}" for v in values),
                "",
                "",
                "",
            ]
        )
        tables.append(t)
    if issues:
        groups = list(dict.fromkeys(r.repo for r in issues["project"]))

        def mrr(name: str, group: str) -> float:
            return mean([1.0 / r.rank if r.rank else 0.0 for r in issues[name] if r.repo == group])

        def hits(name: str, group: str, k: int) -> int:
            return sum(
                1 for r in issues[name] if r.repo == group and r.rank is not None and r.rank <= k
            )

        t = Table(
            f"Leave one out, issues: {param} chosen on the other repositories by MRR; the"
            " held-out repository's MRR and hit@1 / hit@5",
            ["held out", "issues", "chosen", "held-out MRR, hit@1 / hit@5", "project's value"],
        )
        for held in groups:
            others = [g for g in groups if g != held]
            best = max(values, key=lambda v: mean([mrr(names[v], g) for g in others]))
            n = sum(1 for r in issues["project"] if r.repo == held)
            t.rows.append(
                [
                    held,
                    str(n),
                    best,
                    f"{f3(mrr(names[best], held))}, {hits(names[best], held, 1)} /"
                    f" {hits(names[best], held, 5)}",
                    f"{f3(mrr('project', held))}, {hits('project', held, 1)} /"
                    f" {hits('project', held, 5)}",
                ]
            )
        tables.append(t)
    return tables, report


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
        metavar="SPEC",
        help="another setting of the ranking: plain, PARAM=VALUE (definition, forms, decay,"
        " name, per_file, more, identifiers, priors=off, prior.KIND), joined by +",
    )
    p.add_argument(
        "--loo",
        action="append",
        default=[],
        metavar="PARAM=V1,V2,...",
        help="leave one out: the value chosen on the other repositories, scored on each;"
        " setting=SPEC;SPEC;... chooses among whole settings",
    )
    p.add_argument("--quality-dir", type=Path, default=DEFAULT_QUALITY)
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    args = p.parse_args(argv)
    specs = ["plain", *args.experiment]
    args.loo_values = {}
    for spec in args.loo:
        param, _, values = spec.partition("=")
        vals = [v for v in values.split(",") if v]
        if not vals:
            p.error(f"--loo {spec}: give PARAM=V1,V2,...")
        if param == "setting":
            # Whole settings to choose among (decay=0.7+definition=0.5,...), separated by ";".
            vals = [v for v in values.split(";") if v]
            specs += vals
        else:
            specs += [f"{param}={v}" for v in vals]
        args.loo_values[param] = vals
    try:
        settings = [Setting("project")] + [parse_setting(s) for s in dict.fromkeys(specs)]
    except (ValueError, TypeError) as e:
        p.error(str(e))
    args.settings = settings
    return args


async def amain(args: argparse.Namespace) -> int:
    quality: Path = args.quality_dir
    if not (quality / "README.md").is_file():
        print(f"no development set at {quality}: give --quality-dir", file=sys.stderr)
        return 2
    cache: Path = args.cache_dir
    await asyncio.to_thread(cache.mkdir, parents=True, exist_ok=True)
    settings: list[Setting] = args.settings
    report: dict[str, Any] = {"quality_dir": str(quality), "settings": [s.name for s in settings]}
    tables: list[Table] = []
    notes: list[str] = []
    t0 = time.perf_counter()
    code: dict[str, list[QueryResult]] = {}
    issues: dict[str, list[IssueResult]] = {}
    if args.only in (None, "code"):
        code = await run_code(quality, cache, settings)
        langs = {repo: language(spec) for repo, spec in code_spec(quality).items()}
        sums = {name: summarise_code(rs, langs) for name, rs in code.items()}
        agree = sum(1 for r in code["project"] if r.agrees)
        notes.append(
            f"code search: the engine's index_search(limit={MAX_LIMIT}) gave the bench's chunks"
            f" for {agree}/{len(code['project'])} queries"
        )
        tables += code_tables(sums)
        report["code"] = {"languages": langs, "summary": sums}
        report["code_queries"] = [r.__dict__ for r in code["project"]]
        if args.verbose:
            notes.append(verbose_code(code["project"]))
    if args.only in (None, "issues"):
        issues = await run_issues(quality, cache, settings)
        isums = {name: summarise_issues(rs) for name, rs in issues.items()}
        agree = sum(1 for r in issues["project"] if r.agrees)
        notes.append(
            f"issues: the engine's index_search(limit={MAX_LIMIT}) gave the bench's chunks for"
            f" {agree}/{len(issues['project'])} instances"
        )
        tables += issue_tables(isums)
        report["issues"] = isums
        report["issue_results"] = [r.__dict__ for r in issues["project"]]
        if args.verbose:
            notes.append(verbose_issues(issues["project"]))
    for param, values in args.loo_values.items():
        ts, rep = leave_one_out(param, code, issues, values)
        tables += ts
        report.setdefault("leave_one_out", {})[param] = rep
    tt = Table(
        "Trees: files and chunks indexed, files skipped, seconds to open and bring up to date",
        ["tree", "files", "chunks", "skipped", "seconds"],
    )
    for label, d in TREES.items():
        skipped = ", ".join(f"{k} {v}" for k, v in d["skipped"].items()) or "—"
        tt.rows.append([label, str(d["files"]), str(d["chunks"]), skipped, f"{d['seconds']:.2f}"])
    tables.append(tt)
    report["trees"] = TREES
    report["seconds"] = round(time.perf_counter() - t0, 1)
    for t in tables:
        print(t.render(args.markdown))
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
