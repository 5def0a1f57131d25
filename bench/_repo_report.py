"""bench/repo_bench.py's figures: medians, units, the targets and the tables of one tree."""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

MB = 1e6

# PERFORMANCE.md's targets, as (key, what, target text, test of the measured ratio or seconds).
# The warm search and the new session have one target for sympy and another for big; any other
# tree is held to sympy's.
Check = Callable[[float], bool]


def _targets(big: bool) -> list[tuple[str, str, str, Check]]:
    warm = 0.5 if big else 0.3
    first = 2.0 if big else 1.0
    return [
        ("build_vs_bm25s", "first build throughput / bm25s's", ">= 2x", lambda r: r >= 2.0),
        ("build_vs_tantivy", "first build throughput / tantivy's", ">= 0.3x", lambda r: r >= 0.3),
        ("warm_vs_rg", "warm search p50 / ripgrep p50", f"<= {warm}x", lambda r: r <= warm),
        ("change_vs_warm", "search after a change / unchanged", "<= 1.5x", lambda r: r <= 1.5),
        (
            "first_vs_rg",
            "new session's first search / ripgrep",
            f"<= {first:g}x",
            lambda r: r <= first,
        ),
        ("store_vs_text", "store on disk / text", "<= 0.5x", lambda r: r <= 0.5),
        ("rss_vs_text", "session peak RSS / text", "<= 1.5x", lambda r: r <= 1.5),
        ("bound_search_s", "search, many files changed (s)", "<= 10.5 s", lambda s: s <= 10.5),
        ("bound_update_s", "longest index_update call (s)", "<= 60.5 s", lambda s: s <= 60.5),
    ]


# -- statistics and formatting ---------------------------------------------------------------------


def _median_build(rounds: list[dict[str, Any]], by: str = "index") -> dict[str, Any]:
    """The round whose ``by`` time is the median (the lower of the two middle ones)."""
    ordered = sorted(rounds, key=lambda r: r[by])
    return dict(ordered[(len(ordered) - 1) // 2])


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def p90(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


def ms(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x / MB:.1f} MB"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def fx(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def say(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _rounds_note(b: dict[str, Any], peers: dict[str, Any]) -> str:
    rounds = b.get("rounds", [])
    if len(rounds) < 2:
        return ""

    def times(xs: list[dict[str, Any]], key: str) -> str:
        return ", ".join(f"{x[key]:.2f}" for x in xs)

    parts = [f"ours {times(rounds, 'wall')} s"]
    for kind in ("bm25s", "tantivy"):
        pr = peers.get(kind, {}).get("rounds", [])
        if pr:
            parts.append(f"{kind} {times(pr, 'index')} s")
    return f"; median of {len(rounds)} rounds ({'; '.join(parts)})"


def report(r: dict[str, Any], markdown: bool) -> str:
    """The tables of one tree: side by side, floors, and the targets."""
    text = r["text_bytes"]
    b = r["build"]
    peers = r.get("peers", {})
    warm = r["warm"]
    out: list[str] = []
    head = (
        f"{r['tree']}: {r['files']:,} text files of {r['listed']:,} listed, "
        f"{text / MB:.1f} MB of text; {len(r['queries'])} queries; "
        f"load {r['load_start']} -> {r['load_end']}"
    )
    out.append(f"### {head}" if markdown else head)
    out.append("")

    def build_cell(seconds: float | None, nbytes: float | None) -> str:
        if not seconds or not nbytes:
            return "-"
        return f"{seconds:.2f} s ({nbytes / MB / seconds:.1f} MB/s)"

    def peer(kind: str, f: Callable[[dict[str, Any]], str]) -> str:
        p = peers.get(kind)
        return f(p) if p else "-"

    def wcell(name: str) -> str:
        w = warm.get(name)
        return f"{ms(w['p50'])} / {ms(w['p90'])}" if w else "-"

    mem = b["mem"]
    smem = r.get("session_mem", {})
    ch = r["change"]
    first = r["first"]
    rows = [
        [
            "first build (MB/s of text)",
            build_cell(b["wall"], b["bytes"])
            + f"; in process {b['seconds']:.2f} s, {len(b['calls'])} update call(s)",
            "-",
            peer("bm25s", lambda p: build_cell(p["build"]["index"], p["build"]["bytes"])),
            peer("tantivy", lambda p: build_cell(p["build"]["index"], p["build"]["bytes"])),
            "ours: process start to done; peers: index only (read + chunk apart)"
            + _rounds_note(b, peers),
        ],
        [
            "peak RSS while building",
            f"{mib(mem['hwm'])} (+ workers {mib(mem['children_hwm'])})",
            "-",
            peer("bm25s", lambda p: mib(p["build"]["mem"]["hwm"])),
            peer("tantivy", lambda p: mib(p["build"]["mem"]["hwm"])),
            "peers' figure holds the chunk texts too",
        ],
        [
            "warm search p50 / p90",
            wcell("ours"),
            wcell("rg"),
            wcell("bm25s"),
            wcell("tantivy"),
            "ours: refresh included; peers: no refresh",
        ],
        [
            "search after one change (p50)",
            f"{ms(ch['changed_p50'])} (unchanged {ms(ch['unchanged_p50'])})",
            "-",
            "-",
            "-",
            f"a line appended to {ch['file']} ({ch['bytes']:,} B), {ch['n']} edits",
        ],
        [
            "new session's first search",
            f"{ms(first['seconds'])} (open {ms(first['open'])}, search {ms(first['search'])}); "
            f"process {ms(first['wall'])}",
            ms(first["rg"]),
            "-",
            "-",
            f"median of {first['n']} new processes; process: start, imports, open, search",
        ],
        [
            "store on disk",
            f"{mib(b['store'])} ({fx(ratio(b['store'], text))} text)",
            "-",
            "-",
            peer(
                "tantivy",
                lambda p: f"{mib(p['build']['disk'])} ({fx(ratio(p['build']['disk'], text))} text)",
            ),
            "the project's index directory",
        ],
        [
            "session peak RSS",
            f"{mib(smem.get('hwm'))} ({fx(ratio(smem.get('hwm'), text))} text; "
            f"{mib(smem.get('import_rss'))} after imports)"
            if smem
            else "-",
            "-",
            "-",
            "-",
            "a new session after its searches",
        ],
    ]
    if "cold" in r:
        c = r["cold"]
        s = c["search"]
        rows.append(
            [
                "a fresh tree's first search",
                f"{c['seconds']:.2f} s (search {s['seconds']:.2f} s), partial {c['partial']} of"
                f" {c['n']}, not read {s['not_read']:,}; process {c['wall']:.2f} s",
                "-",
                "-",
                "-",
                f"a new process, a fresh data directory, one search (10 s bound); all {c['all']}",
            ]
        )
    if "bound_search" in r:
        bs = r["bound_search"]
        rows.append(
            [
                f"search, {bs['changed']:,} files changed",
                f"{bs['seconds']:.2f} s, partial {bs['partial']}, not read {bs['not_read']:,}",
                "-",
                "-",
                "-",
                "a line appended to each, then one search (the 10 s bound)",
            ]
        )
    rows.append(
        [
            "longest index_update call",
            f"{max(c['seconds'] for c in b['calls']):.2f} s",
            "-",
            "-",
            "-",
            "of the first build",
        ]
    )
    out.append(
        table(["figure", "this project", "ripgrep", "bm25s", "tantivy", "note"], rows, markdown)
    )
    out.append("")

    fl = r["floors"]
    frows = [
        ["git ls-files", ms(fl["git_ls_files"])],
        ["lstat of every listed file (Python loop)", ms(fl["lstat"])],
        ["read every listed file (Python)", ms(fl["read"])],
        ["SHA-256 of every listed file", ms(fl["sha256"])],
    ]
    nv = peers.get("naive")
    if nv:
        frows.append(
            [
                "naive Python chunk + words (one core)",
                build_cell(nv["build"]["index"], nv["build"]["bytes"]),
            ]
        )
    for kind in ("bm25s", "tantivy"):
        p = peers.get(kind)
        if p:
            frows.append(
                [
                    f"{kind}: read + cut the chunks (Python)",
                    f"{ms(p['build']['prep'])}, {p['build']['docs']:,} chunks",
                ]
            )
    out.append(table(["floor", "time"], frows, markdown))
    out.append("")

    trows = []
    for key, what, target, ok in _targets(r["tree"] == "big"):
        v = r["ratios"].get(key)
        if v is None:
            continue
        shown = f"{v:.2f} s" if key.startswith("bound") else f"{v:.2f}x"
        note = ""
        if key == "rss_vs_text" and r["tree"] != "big":
            note = " (the target is big's)"
        trows.append([what, shown, target, ("met" if ok(v) else "not met") + note])
    out.append(table(["ratio", "measured", "target", ""], trows, markdown))
    for n in r.get("notes", []):
        out.append(f"- {n}" if markdown else f"note: {n}")
    return "\n".join(out)
