"""The conversation scope's quality on real agent transcripts: hit@1, 3 and 8.

Usage: python bench/conversation_quality.py [--transcripts DIR] [--queries FILE] [--misses]

The queries (bench/data/conversation_queries.jsonl) were written by reading the transcripts of the
shared quality set (``../shared/quality/transcripts/log``: SWE-agent, aider and Claude Code
sessions converted into docs/log-format.md): what an agent would ask later to find something it
saw, half naming it (a file, an error, a function, a value) and half describing it in other
words. Each names its log, its kind and the seqs that answer it (any of them counts).

Each log is copied to a temporary directory (its .mem is written beside it) and searched through
the conversation actor, as the engine asks it, with a limit of 8. A query hits at k when one of
its targets is among the first k results. This is a development set: it guides changes, and
every change tried is recorded in docs/conversation.md with its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodwyn_retrieval.actors.conversation import ConversationActor, LogSearch
from nodwyn_retrieval.actors.messages import SearchOutput
from nodwyn_retrieval.bus import ActorSystem
from nodwyn_retrieval.store.config import Config

HERE = Path(__file__).resolve().parent
QUERIES = HERE / "data" / "conversation_queries.jsonl"
TRANSCRIPTS = HERE.parent.parent.parent / "shared" / "quality" / "transcripts" / "log"
KS = (1, 3, 8)


def _default_transcripts() -> Path:
    for base in (HERE.parent, *HERE.parent.parents):
        cand = base / "shared" / "quality" / "transcripts" / "log"
        if cand.is_dir():
            return cand
    return TRANSCRIPTS


async def run(transcripts: Path, queries: list[dict[str, object]]) -> list[int | None]:
    """The rank (1-based) of each query's first target, or None when it is not in the top 8."""
    ranks: list[int | None] = []
    with tempfile.TemporaryDirectory(prefix="conv-quality-") as tmp:
        work = Path(tmp)
        async with ActorSystem() as system:
            actors = {}
            for q in queries:
                name = str(q["log"])
                if name not in actors:
                    shutil.copy(transcripts / name, work / name)
                    actors[name] = system.spawn(ConversationActor(work / name, Config()), name=name)
                out = await actors[name].ask(LogSearch(str(q["query"]), max(KS)))
                assert isinstance(out, SearchOutput)
                seqs = [h["seq"] for h in out.hits]
                targets = set(q["targets"])  # type: ignore[call-overload]
                rank = next((i for i, s in enumerate(seqs, 1) if s in targets), None)
                q["_got"] = seqs
                ranks.append(rank)
    return ranks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--transcripts", type=Path, default=None, help="the converted logs")
    p.add_argument("--queries", type=Path, default=QUERIES, help="the queries (JSON lines)")
    p.add_argument("--misses", action="store_true", help="list each query not at rank 1")
    ns = p.parse_args(argv)
    transcripts = ns.transcripts or _default_transcripts()
    if not transcripts.is_dir():
        print(f"no transcripts at {transcripts}", file=sys.stderr)
        return 2
    queries = [json.loads(x) for x in ns.queries.read_text(encoding="utf-8").splitlines() if x]
    ranks = asyncio.run(run(transcripts, queries))
    print(f"| queries | n | {' | '.join(f'top {k}' for k in KS)} |")
    print(f"|---|---|{'---|' * len(KS)}")
    for kind in ("naming", "describing", None):
        picked = [r for q, r in zip(queries, ranks, strict=True) if kind in (None, q["kind"])]
        hits = [sum(1 for r in picked if r is not None and r <= k) for k in KS]
        label = kind or "all"
        print(f"| {label} | {len(picked)} | {' | '.join(str(h) for h in hits)} |")
    if ns.misses:
        print()
        for q, r in zip(queries, ranks, strict=True):
            if r != 1:
                print(f"rank {r}: [{q['kind']}] {q['log']}: {q['query']!r} wants "
                      f"{q['targets']}, got {q['_got']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
