"""The quality benchmark's report: its reference figures, its tables and its per-query lines.

bench/quality_bench.py measures; this module turns the summaries it makes into the tables it
prints (plain text, or Markdown with ``--markdown``) and the ``--verbose`` lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodwyn_retrieval.entry import MAX_LIMIT

if TYPE_CHECKING:
    from quality_bench import IssueResult, QueryResult

DEFAULT_LIMIT = 8  # entry.DEFAULT_LIMIT: what a search shows when no limit is given

# The README's reference figures: plain BM25 as the ADR's §6 specifies it (file NDCG@10).
PLAIN_BM25: dict[str, float] = {
    "flask": 0.651, "requests": 0.750, "click": 0.883, "cobra": 0.761, "gson": 0.425,
    "tokio": 0.783, "curl": 0.513, "zod": 0.415,
}  # fmt: skip
LEADING_TOOL: dict[str, float] = {"flask": 0.842, "requests": 0.942, "click": 0.959}
CATEGORIES = ("architecture", "semantic", "symbol")
HIT_KS = (1, 3, 5, 10)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


# -- tables -----------------------------------------------------------------------------------


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


def code_tables(sums: dict[str, dict[str, Any]]) -> list[Table]:
    proj = sums["project"]
    repos = list(proj["per_repo"])
    head = ["ranking", *repos, "mean"]

    def row(name: str, vals: dict[str, float]) -> list[str]:
        got = [vals.get(r, float("nan")) for r in repos]
        return [name, *(f3(v) for v in got), f3(mean(got))]

    t = Table("Code search, file NDCG@10 (benchmark_root as the tree)", head)
    t.rows.append(
        row(
            "this project: every matching file",
            {r: v["ndcg10"] for r, v in proj["per_repo"].items()},
        )
    )
    t.rows.append(
        row(
            f"this project: first {MAX_LIMIT} chunks (the tool's limit)",
            {r: v["ndcg10_first20"] for r, v in proj["per_repo"].items()},
        )
    )
    t.rows.append(
        row(
            f"this project: first {DEFAULT_LIMIT} chunks (default limit)",
            {r: v["ndcg10_first8"] for r, v in proj["per_repo"].items()},
        )
    )
    for name, s in sums.items():
        if name != "project":
            t.rows.append(row(name, {r: v["ndcg10"] for r, v in s["per_repo"].items()}))
    t.rows.append(row("reference: plain BM25 (ADR §6, the README's figure)", PLAIN_BM25))
    t.rows.append(row("reference: leading tool (BM25 + ranker)", LEADING_TOOL))
    langs = list(proj["per_language"])
    lt = Table("Code search NDCG@10 per language (mean of its repositories)", ["ranking", *langs])
    for name, s in sums.items():
        lt.rows.append([name, *(f3(s["per_language"][g]) for g in langs)])
    c = Table(
        "Code search by category, NDCG@10 (query mean) and top-5 hits",
        ["ranking", *(f"{c} ({proj['per_category'][c]['queries']})" for c in CATEGORIES), "top-5"],
    )
    for name, s in sums.items():
        c.rows.append(
            [
                name,
                *(f3(s["per_category"][k]["ndcg10"]) for k in CATEGORIES),
                f3(s["mean"]["hit5"]),
            ]
        )
    return [t, lt, c]


def issue_tables(sums: dict[str, dict[str, Any]]) -> list[Table]:
    t = Table(
        "Issue localization, whole issue text as the query: hit@k over distinct files, MRR",
        ["ranking", *(f"hit@{k}" for k in HIT_KS), "MRR"],
    )
    for name, s in sums.items():
        n = s["instances"]
        t.rows.append(
            [
                name,
                *(f"{s[f'hit@{k}']}/{n} ({s[f'hit@{k}'] / n:.0%})" for k in HIT_KS),
                f3(s["mrr"]),
            ]
        )
    instances = list(sums["project"]["ranks"])
    r = Table(
        "Issue localization, rank of the first edited file",
        ["instance", *sums],
    )
    for i in instances:
        r.rows.append([i.split("__")[1], *(rank_s(s["ranks"][i]) for s in sums.values())])
    return [t, r]


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
    lines = ["Per instance (issues): rank of the first edited file, the first 5 files"]
    for r in results:
        lines.append(
            f"  {r.instance} [{r.words} words]: rank {rank_s(r.rank)}"
            + ("" if r.agrees is None or r.agrees else "  (ENGINE DISAGREES)")
        )
        lines.append("      " + ", ".join(r.top5))
    return "\n".join(lines)
