"""The live part of a repository search: the best chunks of the indexer's ranking read again from
the working tree through the guard, redacted (each file whole, as the indexer redacts it), and
their best lines found (§5, §7).

A file the guard now refuses stops the search with the refusal and leaves the index; a file gone,
or whose chunk is gone, is said as gone. Nothing here changes the index but that refusal.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from nodwyn_retrieval.actors._batches import read_file
from nodwyn_retrieval.actors.messages import SearchTree, TreeSearched
from nodwyn_retrieval.guard import redact
from nodwyn_retrieval.guard.beneath import Beneath
from nodwyn_retrieval.retrieval.chunks import split_lines
from nodwyn_retrieval.retrieval.render import RepoResult, best_lines
from nodwyn_retrieval.retrieval.words import weighted_query

if TYPE_CHECKING:
    from nodwyn_retrieval.actors.indexer import IndexerActor

__all__ = ["redacted_lines", "search_in"]


async def search_in(actor: IndexerActor, msg: SearchTree, tree: Beneath) -> TreeSearched:
    """The answer to a repository search over the actor's index: its best chunks, each file read
    live through the guard and redacted, in tree (the root, held without a link)."""
    query = weighted_query(msg.query)
    words = list(query)
    # The best chunks of the best files (retrieval.tree.Ranking); a few more than shown, for
    # files gone since they were indexed. The selection is made in order, so the first
    # chunks of a longer list are the list of a shorter one.
    hits = actor.tree.rank(query, msg.limit * 2 + 4, msg.path)
    matched = actor.tree.count_matching(words, msg.path)
    results: list[RepoResult] = []
    gone: list[str] = []
    cache: dict[str, list[str] | None] = {}
    for h in hits:
        if len(results) >= msg.limit:
            break
        if h.path not in cache:
            size = await asyncio.to_thread(_size, tree, h.path)
            decision = await actor.read_guard.check_read(h.path, size)
            if not decision.allowed:
                # §3: a refusal stops the search with the refusal as the answer, and drops
                # the file from the tree's index.
                actor._apply({h.path: None})
                return TreeSearched(
                    (), actor.tree.n_docs, len(actor.tree.files), h.path, decision.reason
                )
            data = await read_file(tree, h.path)
            cache[h.path] = None if data is None else await asyncio.to_thread(redacted_lines, data)
        lines = cache[h.path]
        chunk = None if lines is None else lines[h.start - 1 : h.end]
        if not chunk:
            gone.append(h.path)
            continue
        red = redact("\n".join(chunk)).text.split("\n")
        numbered = list(enumerate(red, h.start))
        results.append(
            RepoResult(
                h.path,
                h.start,
                h.start + len(chunk) - 1,
                next((x for x in red if x.strip()), red[0]),
                tuple(best_lines(numbered, words)),
                h.score,
            )
        )
    return TreeSearched(
        tuple(results), actor.tree.n_docs, len(actor.tree.files), gone=tuple(gone),
        matched=matched,
    )  # fmt: skip


def redacted_lines(data: bytes) -> list[str]:
    """The lines of a file's bytes, redacted as the indexer redacts the file: whole. A credential
    over several lines (a private key, a YAML block, a Secret whose ``kind`` follows its data)
    is seen whole, though a chunk holds only its end: redacting the chunk alone showed those
    lines. Redaction keeps lines, so line n of the result is the file's line n."""
    return split_lines(redact(data.decode("utf-8", "replace")).text)


def _size(tree: Beneath, rel: str) -> int:
    """The size of the file at rel, reached without a link (0 when there is none)."""
    try:
        return tree.stat(rel).st_size
    except (OSError, ValueError):
        return 0
