"""Mutation testing of the core modules, one module at a time against the tests that cover it.

    python bench/mutation.py                      # every module below, in order
    python bench/mutation.py retrieval/bm25.py guard/denylist.py
    python bench/mutation.py --module-seconds 900 --out /tmp/mutation

Runs pytest-gremlins (the dev extra) on each module of retrieval/, guard/, store/ and on
actors/refresher.py and actors/indexer.py: every gremlin (a small change of one comparison, one
operator, one constant, one return) is switched on in turn and the module's tests run against it;
a gremlin no test notices survives. Each module's run is bounded (``--module-seconds``, 1,200 s by
default) and so is each gremlin's test run (``--mutant-seconds``, 120 s). It runs under ``nice -n
19`` with one worker: the machine may be shared. Not part of CI (a whole run takes hours).

Writes ``<out>/<module>.json`` (pytest-gremlins's report; ``<out>`` is bench/out/mutation/ unless
told) and ``<out>/summary.md``: the score per module and every survivor, by line, for
docs/reliability.md. Survivors are read by hand: some are
equivalent (the change cannot alter behaviour) and are set aside there, with the reason.

Why pytest-gremlins: it instruments the modules as they are imported, whatever finds them, so it
works with this layout (the checkout is the package ``nodwyn_retrieval`` through setuptools's
``package-dir``, installed in editable mode). mutmut 3 copies the sources to ``mutants/`` and
runs the tests there, but the tests import ``nodwyn_retrieval`` from the editable install, never
the copy: its stats run finds no test covering any mutant and it stops. cosmic-ray edits the files
in place and works too, but starts a fresh test process per mutant with no batching.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The tests that cover each module: its own unit tests and the behaviour tests that go through it.
# The quick edge tests go first: a gremlin's run stops at its first failing test.
# A module not named here (a new one, after a split) is given the tests that import it.
TESTS: dict[str, list[str]] = {
    "retrieval/analyze.py": [
        "test_analyze_edges.py",
        "test_words_file.py",
        "test_analyze.py",
        "test_words_native.py",
        "test_words_native_rule.py",
        "test_words_simd.py",
        "test_tree_index.py",
        "test_adr_numbers.py",
    ],
    "retrieval/bm25_packed.py": [
        "test_bm25_packed.py",
        "test_bm25_edges.py",
        "test_fuzz_decoders.py",
        "test_tree_native.py",
    ],
    "retrieval/bm25.py": [
        "test_bm25_packed.py",
        "test_tree_native.py",
        "test_bm25.py",
        "test_bm25_edges.py",
        "test_tree_index.py",
        "test_adr_numbers.py",
    ],
    "retrieval/blobs.py": [
        "test_blobs_looks.py",
        "test_blobs_fast.py",
        "test_blobs_native.py",
        "test_blobs_edges.py",
        "test_blobs.py",
    ],
    "retrieval/chunks.py": [
        "test_chunks_heads.py",
        "test_words_file.py",
        "test_chunks_edges.py",
        "test_chunks.py",
        "test_analyze.py",
        "test_words_native.py",
    ],
    "retrieval/event_render.py": ["test_event_render_edges.py", "test_events.py"],
    "retrieval/events.py": ["test_events_edges.py", "test_events.py", "test_ranking_events.py"],
    "retrieval/kinds.py": ["test_kinds_edges.py", "test_ranking.py"],
    "retrieval/render.py": [
        "test_render_shown.py",
        "test_repo_search.py",
        "test_conversation.py",
        "test_earlier.py",
    ],
    "retrieval/tree_build.py": [
        "test_tree_native.py",
        "test_build_pipeline.py",
        "test_build_start.py",
        "test_tree_segment.py",
        "test_tree_kinds.py",
    ],
    "retrieval/tree.py": [
        "test_build_start.py",
        "test_tree_rank_best.py",
        "test_tree_index.py",
        "test_tree_segment.py",
        "test_tree_kinds.py",
        "test_build_pipeline.py",
        "test_ranking.py",
        "test_adr_numbers.py",
    ],
    "retrieval/tree_best.py": ["test_tree_rank_best.py", "test_tree_index.py", "test_ranking.py"],
    "retrieval/words.py": [
        "test_words_edges.py",
        "test_words.py",
        "test_words_native.py",
        "test_words_native_rule.py",
    ],
    "guard/budget.py": ["test_budget_edges.py", "test_guard.py"],
    "guard/beneath.py": [
        "test_beneath_edges.py",
        "test_link_swap.py",
        "test_attack_worker_reads.py",
    ],
    "guard/decision.py": ["test_decision_edges.py", "test_guard.py"],
    "guard/denylist.py": ["test_denylist_globs.py", "test_denylist_defaults.py", "test_guard.py"],
    "guard/guard.py": ["test_guard_edges.py", "test_guard.py", "test_denylist_defaults.py"],
    "guard/redact.py": [
        "test_redact_places.py",
        "test_redact_edges.py",
        "test_redact_prefilter.py",
        "test_redact_name_start.py",
        "test_redact.py",
        "test_redact_shapes.py",
    ],
    "guard/_assignment.py": [
        "test_redact_name_start.py",
        "test_attack_secrets.py",
        "test_redact_edges.py",
        "test_redact.py",
        "test_redact_shapes.py",
    ],
    "guard/_prefix.py": ["test_redact_prefilter.py", "test_redact.py"],
    "guard/kubernetes.py": ["test_redact_edges.py", "test_redact.py", "test_redact_shapes.py"],
    "guard/secret_rules.py": [
        "test_attack_secrets.py",
        "test_secret_edges.py",
        "test_redact_first_use.py",
        "test_redact_shapes.py",
        "test_redact.py",
    ],
    "guard/secret_values.py": ["test_secret_edges.py", "test_redact.py", "test_redact_edges.py"],
    "store/atomic.py": [
        "test_store_atomic_edges.py",
        "test_store_atomic.py",
        "test_store_manifest.py",
    ],
    "store/chunkstore.py": [
        "test_chunk_record_format.py",
        "test_store_chunkstore_edges.py",
        "test_chunkstore_packs.py",
        "test_store_chunkstore.py",
        "test_gc_packs.py",
        "test_gc.py",
    ],
    "store/packs.py": [
        "test_store_chunkstore_edges.py",
        "test_store_chunkstore.py",
        "test_chunkstore_packs.py",
        "test_gc_packs.py",
    ],
    "store/codec.py": [
        "test_store_codec_zstd.py",
        "test_store_codec_edges.py",
        "test_store_codec.py",
        "test_store_chunkstore.py",
    ],
    "store/config.py": ["test_store_config_edges.py", "test_store_config.py", "test_seq_edges.py"],
    "store/log.py": [
        "test_log_decode.py",
        "test_store_log_edges.py",
        "test_store_log.py",
        "test_seq_edges.py",
    ],
    "store/manifest.py": [
        "test_store_manifest_edges.py",
        "test_store_manifest.py",
        "test_refresher.py",
    ],
    "store/mem.py": [
        "test_mem_read_paths.py",
        "test_mem_view_edges.py",
        "test_mem_edges.py",
        "test_mem.py",
        "test_seq_edges.py",
        "test_conversation.py",
    ],
    "store/mem_fold.py": [
        "test_mem_fold_native.py",
        "test_mem_fold_edges.py",
        "test_mem_sums.py",
        "test_mem_edges.py",
        "test_mem.py",
    ],
    "store/mem_encode.py": [
        "test_mem_fold_native.py",
        "test_mem_read_paths.py",
        "test_mem_format_edges.py",
        "test_mem_format_fold_edges.py",
        "test_mem_edges.py",
        "test_mem.py",
        "test_seq_edges.py",
    ],
    "store/mem_join.py": ["test_mem_join_edges.py", "test_mem_join.py"],
    "store/mem_format.py": [
        "test_mem_read_paths.py",
        "test_mem_format_edges.py",
        "test_mem_format_fold_edges.py",
        "test_mem_edges.py",
        "test_mem.py",
        "test_seq_edges.py",
    ],
    "store/mem_log.py": [
        "test_mem_log_edges.py",
        "test_mem_edges.py",
        "test_mem.py",
        "test_seq_edges.py",
    ],
    "store/paths.py": ["test_store_paths_edges.py", "test_store_paths.py", "test_listing.py"],
    "store/transcripts/__init__.py": [
        "test_mem_read_paths.py",
        "test_transcripts_edges.py",
        "test_transcripts.py",
        "test_mem.py",
        "test_conversation_forms.py",
        "test_conversation.py",
    ],
    "store/transcripts/_base.py": ["test_transcripts_edges.py", "test_transcripts.py"],
    "store/transcripts/claude.py": ["test_transcripts_edges.py", "test_transcripts.py"],
    "store/transcripts/codex.py": ["test_transcripts_edges.py", "test_transcripts.py"],
    "store/transcripts/sessions.py": ["test_transcripts_edges.py", "test_transcripts.py"],
    # Quickest files first: the in-process runner stops at the first failure.
    "actors/refresher.py": [
        "test_refresher.py",
        "test_stat_native.py",
        "test_refresher_sessions.py",
        "test_refresher_edges.py",
        "test_refresher_phases.py",
        "test_adr_numbers.py",
        "test_scan_bounds.py",
        "test_listing_edges.py",
    ],
    "actors/_fastpath.py": ["test_fastpath.py"],
    "actors/_stat.py": ["test_stat_native.py", "test_fastpath.py"],
    "actors/_listing.py": [
        "test_listing_edges.py",
        "test_listing_parse.py",
        "test_listing.py",
        "test_scan_bounds.py",
        "test_hostile_clone.py",
        "test_refresher.py",
    ],
    "actors/_watch.py": [
        "test_watch_edges.py",
        "test_stat_native.py",
        "test_refresher.py",
        "test_refresher_edges.py",
        "test_listing.py",
        "test_scan_bounds.py",
    ],
    "actors/indexer.py": [
        "test_build_start.py",
        "test_indexer_snapshot.py",
        "test_indexer.py",
        "test_indexer_edges.py",
        "test_indexer_bounds.py",
        "test_indexer_estimates.py",
        "test_refresher.py",
        "test_scan_bounds.py",
    ],
    "actors/_batches.py": [
        "test_batches_edges.py",
        "test_attack_worker_reads.py",
        "test_work_edges.py",
        "test_build_pipeline.py",
        "test_indexer_estimates.py",
        "test_build_start.py",
        "test_indexer_edges.py",
        "test_indexer.py",
        "test_link_swap.py",
    ],
    "actors/_work.py": [
        "test_worker_process_settings.py",
        "test_attack_worker_reads.py",
        "test_build_start.py",
        "test_work_edges.py",
        "test_chunkstore_packs.py",
        "test_indexer_snapshot.py",
        "test_indexer_bounds.py",
        "test_indexer.py",
        "test_build_pipeline.py",
    ],
    "actors/gc.py": ["test_gc_packs.py", "test_gc.py"],
    "actors/_results.py": [
        "test_indexer_edges.py",
        "test_repo_search.py",
        "test_indexer.py",
        "test_hostile_clone.py",
        "test_link_swap.py",
    ],
}
DEFAULT_MODULES = [
    *sorted(str(p.relative_to(ROOT)) for d in ("retrieval", "guard", "store", "store/transcripts")
            for p in (ROOT / d).glob("*.py") if p.name != "__init__.py"),
    "store/transcripts/__init__.py",
    "actors/refresher.py",
    "actors/_fastpath.py",
    "actors/_stat.py",
    "actors/_listing.py",
    "actors/_watch.py",
    "actors/indexer.py",
    "actors/_batches.py",
    "actors/_work.py",
    "actors/gc.py",
    "actors/_results.py",
]  # fmt: skip


def tests_for(module: str) -> list[str]:
    named = [t for t in TESTS.get(module, []) if (ROOT / "tests" / t).is_file()]
    if named:
        return [f"tests/{t}" for t in named]
    dotted = "nodwyn_retrieval." + module.removesuffix(".py").replace("/", ".")
    return sorted(
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if dotted in p.read_text(encoding="utf-8", errors="replace")
    )


def run_module(
    module: str, out: Path, module_seconds: float, mutant_seconds: int, only: list[str]
) -> dict:
    tests = [f"tests/{t}" for t in only] if only else tests_for(module)
    if not tests:
        return {"module": module, "error": "no test imports it"}
    report = ROOT / "coverage" / "gremlins" / "gremlins.json"
    report.unlink(missing_ok=True)
    env = {
        **os.environ,
        "NODWYN_FUZZ_EXAMPLES": os.environ.get("NODWYN_FUZZ_EXAMPLES", "25"),
        "COVERAGE_FILE": str(Path(tempfile.gettempdir()) / f"nodwyn-mutation-{os.getpid()}.cov"),
    }
    cmd = [
        "nice", "-n", "19", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        *tests, "--gremlins", f"--gremlin-targets={module}", "--gremlin-no-coverage-filter",
        "--gremlin-report=json", f"--gremlin-mutant-timeout={mutant_seconds}",
        "-W", "ignore::UserWarning",
    ]  # fmt: skip
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            check=False,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=module_seconds,
        )
        timed_out = False
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    except subprocess.TimeoutExpired:
        timed_out, tail = True, [f"stopped after {module_seconds:.0f} s"]
    seconds = time.monotonic() - t0
    row: dict = {"module": module, "tests": tests, "seconds": round(seconds)}
    row["timed_out"] = timed_out
    if not report.is_file():
        row["error"] = " / ".join(tail)
        return row
    data = json.loads(report.read_text(encoding="utf-8"))
    dest = out / (module.replace("/", "_") + ".json")
    shutil.move(report, dest)
    for d in (report.parent, report.parent.parent):  # coverage/gremlins, coverage: if now empty
        with contextlib.suppress(OSError):
            d.rmdir()
    s = data["summary"]
    row.update(
        total=s["total"], zapped=s["zapped"], survived=s["survived"],
        timeout=s.get("timeout", 0), error_count=s.get("error", 0),
        survivors=[
            f"{Path(r['file_path']).name}:{r['line_number']} {r['description']} ({r['operator']})"
            for r in data["results"] if r["status"] == "survived"
        ],
    )  # fmt: skip
    return row


def summary(rows: list[dict]) -> str:
    lines = [
        "| module | gremlins | killed | survived | timeout | score | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "total" not in r:
            lines.append(f"| {r['module']} | - | - | - | - | {r.get('error', '')} | - |")
            continue
        killed = r["zapped"] + r["timeout"]  # a gremlin that hangs the tests is noticed
        score = 100.0 * killed / r["total"] if r["total"] else 100.0
        lines.append(
            f"| {r['module']} | {r['total']} | {r['zapped']} | {r['survived']} | {r['timeout']} "
            f"| {score:.1f}% | {r['seconds']}{' (bound)' if r['timed_out'] else ''} |"
        )
    lines.append("")
    for r in rows:
        if r.get("survivors"):
            lines.append(f"Survivors of {r['module']}:")
            lines += [f"- {s}" for s in r["survivors"]]
            lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="module paths (default: every core module)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "mutation")
    ap.add_argument("--module-seconds", type=float, default=1200.0)
    ap.add_argument("--mutant-seconds", type=int, default=120)
    ap.add_argument(
        "--tests", nargs="+", default=[], help="test files to run instead of the module's own"
    )
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for module in ns.modules or DEFAULT_MODULES:
        print(f"== {module}", flush=True)
        row = run_module(module, ns.out, ns.module_seconds, ns.mutant_seconds, ns.tests)
        rows.append(row)
        (ns.out / "rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
        (ns.out / "summary.md").write_text(summary(rows), encoding="utf-8")
        print(summary([row]), flush=True)
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
