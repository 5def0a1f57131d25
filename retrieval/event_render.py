"""How a conversation or earlier-task search's results and a recall read (ADR 0050 §8, §9).

Pure functions over :mod:`retrieval.events`' texts and cards: the lines of an event that hold a
query's words, a result grouped under its turn's card, the JSON of a result, and a recall paged
in lines (a long line in its pieces) within the result cap.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from nodwyn_retrieval.retrieval.events import (
    CALL_CHARS,
    CARD_LINE_CHARS,
    MAIN,
    PIECE_CHARS,
    Call,
    Card,
    EventText,
    seq_ranges,
)
from nodwyn_retrieval.retrieval.render import best_lines, clip, plural
from nodwyn_retrieval.retrieval.words import words

__all__ = ["LogHit", "hit_json", "matched_lines", "render_hits", "render_recall"]

_PIECE_NOTES = 3
"""At most this many notes say which lines of a recall are one long line."""


# -- a search's results -------------------------------------------------------------------------


def matched_lines(et: EventText, query_words: Sequence[str], n: int = 3) -> list[tuple[int, str]]:
    """The n lines of the event holding the most query words, numbered as recall numbers them:
    what :func:`retrieval.render.best_lines` picks, found with less splitting.

    A line cannot hold more query words than it holds as substrings of its lowercased text (every
    word is a lowercased piece of the line), so that count bounds each line's. Lines are split
    into words best bound first, and the search stops once n lines are known to beat every line
    left: a 2,000-line file read costs a substring search, not 2,000 splits.
    """
    wanted = set(query_words)
    if not wanted:
        return []
    lines = et.lines
    if not all(w.isascii() for w in wanted):
        # A non-ASCII word's lowercasing may not be a substring of the line's: no bound.
        numbered = [(i, line) for i, line in enumerate(lines, 1) if i not in et.hidden]
        return best_lines(numbered, query_words, n)
    cut = lines if max(map(len, lines), default=0) <= 4096 else [x[:4096] for x in lines]
    low = "\n".join(cut).lower()
    starts = list(accumulate(map(len, cut), lambda a, b: a + b + 1, initial=0))
    bound: dict[int, set[str]] = {}
    for w in wanted:
        pos = low.find(w)
        while pos >= 0:
            k = bisect.bisect_right(starts, pos) - 1
            if k + 1 not in et.hidden:
                bound.setdefault(k, set()).add(w)
            pos = low.find(w, starts[k + 1])
    order = sorted(bound, key=lambda k: (-len(bound[k]), k))
    found: list[tuple[int, int, str]] = []  # (-hits, line number, text)
    for k in order:
        if len(found) >= n:
            worst = max(found)
            if (-len(bound[k]), k + 1) > worst[:2]:
                break
        num, text = k + 1, lines[k]
        hits = len(wanted.intersection(words(text[:4096])))
        if hits:
            found.append((-hits, num, text))
            found.sort()
            del found[n:]
    return [(num, text) for _, num, text in sorted(found, key=lambda t: t[1])]


@dataclass(frozen=True, slots=True)
class LogHit:
    """One conversation or earlier-task result, ready to show."""

    event: EventText
    """The event, redacted."""
    card: Card
    """The card of the turn that holds it."""
    lines: tuple[tuple[int, str], ...]
    """Its lines holding the most matched words: (number as recall numbers it, text)."""
    score: float
    """Its BM25 score."""
    task: str | None = None
    """For an earlier task, the task's id."""
    date: str | None = None
    """For an earlier task, its date (``2026-10-09``)."""
    title: str = ""
    """For an earlier task, its title."""
    archived: bool = False
    """For an earlier task, whether it is archived (§9: archived ones are marked)."""
    also: tuple[int, ...] = ()
    """The seqs of near-duplicates of this event, collapsed into this result."""


def _group_line(hit: LogHit) -> str:
    if hit.task is None:
        return hit.card.text()
    task = f"task {hit.task}"
    details = [d for d in (hit.date, "archived" if hit.archived else None) if d]
    if details:
        task += f" ({', '.join(details)})"
    if hit.title:
        task += f' "{clip(hit.title, CARD_LINE_CHARS)}"'
    return f"{task} · {hit.card.text()}"


def render_hits(header: str, hits: Sequence[LogHit]) -> str:
    """The header, then the results grouped by the turn that holds each, under its card's line.

    Groups come in the order of their best result, results within one in rank order: the first
    result shown is still the best one.
    """
    groups: dict[tuple[str | None, int], list[LogHit]] = {}
    for h in hits:
        groups.setdefault((h.task, h.card.turn), []).append(h)
    out = [header]
    for members in groups.values():
        out.append(_group_line(members[0]))
        for h in members:
            also = f" · also seq {seq_ranges(h.also)}" if h.also else ""
            out.append(f"  seq {h.event.seq} {h.event.describe()}{also}")
            out.extend(f"    {n}: {clip(text)}" for n, text in h.lines)
    return "\n".join(out)


def hit_json(hit: LogHit) -> dict[str, Any]:
    """One result as CLI.md's JSON has it."""
    et = hit.event
    doc: dict[str, Any] = {
        "seq": et.seq,
        "kind": et.kind,
        "agent": et.agent,
        "turn": et.turn,
        "card": _group_line(hit) if hit.task is None else hit.card.text(),
        "call": et.call.to_json() if et.call is not None else None,
        "lines": [{"n": n, "text": t} for n, t in hit.lines],
        "score": round(hit.score, 4),
        "also": list(hit.also),
        "provenance": "external:log",
    }
    if hit.task is not None:
        doc["task"] = hit.task
        doc["date"] = hit.date
        doc["archived"] = hit.archived
        doc["title"] = hit.title
    return doc


# -- recall --------------------------------------------------------------------------------------


def _read_on(seq: int, nxt: int, cap: int, task: str | None) -> str:
    """The line closing a recall cut at its cap: where to start the next one."""
    how = f"recall seq {seq} with start {nxt}" + (f" and task {task}" if task else "")
    return f"[cut at {cap:,} characters: {how} to read on]"


def render_recall(
    et: EventText,
    *,
    start: int | None,
    count: int | None,
    cap: int,
    results: Sequence[tuple[Call, int | None]] = (),
    card: Card | None = None,
    turn_seqs: Sequence[int] = (),
    task: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """A recall's text and JSON: a header naming the event, then its lines, within ``cap``.

    Whole when no range is given and it fits; otherwise in lines, as a ranged file read pages a
    file (``[lines A-B of N]``), and cut at ``cap`` characters with a line saying how to go on.
    ``results`` pairs a reply's calls with the seq of each one's result (None when the log holds
    none); ``card`` and ``turn_seqs`` are given for a turn's first person.message. The caller
    has checked that ``start`` is within the lines.
    """
    total = len(et.lines)
    where = f" of task {task}" if task else ""
    head = [f"seq {et.seq}{where} · {et.label}"]
    if et.agent != MAIN:
        head[0] += f" · {et.agent}'s context"
    head[0] += f" · turn {et.turn}" if et.turn else ""
    if et.ts:
        head[0] += f" · {et.ts}"
    if et.call is not None:
        head.append(
            f"result of {clip(et.call.text, CALL_CHARS)}" + (" (error)" if et.error else "")
        )
    if et.title:
        head.append(f"attachment {et.title}")
    if et.redacted:
        head.append(f"[{plural(et.redacted, 'credential')} redacted]")
    if card is not None:
        head.append(f"card: {card.text()}")
        head.append(f"turn {card.turn} holds seqs {seq_ranges(turn_seqs)}")
    tail: list[str] = []
    for call, seq in results:
        name = clip(call.text, CALL_CHARS)
        tail.append(
            f"[call {name}: its result is seq {seq}]"
            if seq is not None
            else f"[call {name}: no result in the log]"
        )

    first = start or 1
    last = total if count is None else min(total, first + count - 1)
    ranged = start is not None or count is not None
    # A line in pieces is said so above the lines (at most a few notes; their room is kept).
    near = [p for p in et.pieces if p[0] <= last and p[1] >= first]
    note_room = 90 * min(len(near), _PIECE_NOTES + 1)
    budget = cap - sum(len(h) + 1 for h in head) - sum(len(t) + 1 for t in tail) - note_room
    body: list[str] = []
    used = 0
    shown_last = first - 1
    # The room of the marker and of the line saying how to read on, at their longest (a page
    # ends at `last` at most).
    room_note = (
        len(f"[lines {first}-{last} of {total}]") + len(_read_on(et.seq, last, cap, task)) + 2
    )
    for n in range(first, last + 1):
        line = et.lines[n - 1]
        room = budget - used - room_note
        if room <= 0:
            break
        if len(line) + 1 > room:
            if n == first:
                body.append(clip(line, room))
                shown_last = n
            break
        body.append(line)
        used += len(line) + 1
        shown_last = n
    cut = shown_last < last
    paged = ranged or cut
    out = list(head)
    if paged and total:
        out.append(f"[lines {first}-{shown_last} of {total}]")
    shown_pieces = [p for p in near if p[0] <= shown_last]
    for a, b, n_chars in shown_pieces[:_PIECE_NOTES]:
        out.append(
            f"[lines {a}-{b} are one line of {n_chars:,} characters, in pieces of {PIECE_CHARS:,}]"
        )
    if len(shown_pieces) > _PIECE_NOTES:
        out.append(f"[and {len(shown_pieces) - _PIECE_NOTES} more long lines in pieces]")
    out.extend(body)
    if cut:
        out.append(_read_on(et.seq, shown_last + 1, cap, task))
    out.extend(tail)
    text = "\n".join(out)
    data: dict[str, Any] = {
        "seq": et.seq,
        "kind": et.kind,
        "agent": et.agent,
        "turn": et.turn,
        "ts": et.ts,
        "call": et.call.to_json() if et.call is not None else None,
        "lines": {"start": first, "end": shown_last, "total": total},
        "cut": cut,
        "results": [{"call": c.to_json(), "seq": s} for c, s in results],
        "redacted": et.redacted,
        "pieces": [{"start": a, "end": b, "chars": n} for a, b, n in shown_pieces],
        "provenance": "external:log",
        "text": text,
    }
    if task is not None:
        data["task"] = task
    if card is not None:
        data["card"] = card.text()
        data["turn_seqs"] = list(turn_seqs)
    return text, data
