"""The conversation: this session's log, searched and recalled (ADR 0050 §8, amended by ADR 51).

The actor owns nothing between messages. A search opens the log's view (store.mem.LogView: the
``.mem`` beside the log, checked against it and rebuilt or extended when off, and the events
after it, folded now), decodes the postings of its own words only, ranks, reads each result's
event again from the log by where the ``.mem`` places it, and closes everything: the amendment's
"keeps nothing after". A recall does the same for one seq.

The ranking and recall machinery here is also what the earlier tasks' actor uses for each of the
project's other logs (:func:`rank_sources`, :func:`recall_event`): one function for what an event
is (retrieval.events), one for where it lies (store.mem).
"""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.actors.messages import SearchOutput, ToolOutput
from nodwyn_retrieval.bus import Actor
from nodwyn_retrieval.errors import BadInput, FormatError, NotFound
from nodwyn_retrieval.retrieval.bm25 import Part, Segment, search_all
from nodwyn_retrieval.retrieval.event_render import (
    LogHit,
    hit_json,
    matched_lines,
    render_hits,
    render_recall,
)
from nodwyn_retrieval.retrieval.events import (
    Call,
    Card,
    CardMaker,
    Term,
    conversation_terms,
    conversation_words,
    event_text,
    unread_reason,
)
from nodwyn_retrieval.retrieval.render import plural
from nodwyn_retrieval.store.atomic import file_lock
from nodwyn_retrieval.store.config import Config
from nodwyn_retrieval.store.mem import (
    LOCK_NAME,
    LOCK_SECONDS,
    LogView,
    mem_path,
    merge_cards,
    word_keys,
)

__all__ = [
    "ConversationActor",
    "Damaged",
    "LogSearch",
    "Recall",
    "Source",
    "rank_sources",
    "rebuilt_event",
    "recall_event",
    "with_views",
]

log = logging.getLogger("nodwyn_retrieval.actors.conversation")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LogSearch:
    """index-search with scope "conversation" (§1, §8)."""

    query: str
    """The query as given (the engine has checked it is not empty)."""
    limit: int
    """How many results, 1 to 20 (checked by the engine)."""


@dataclass(frozen=True, slots=True)
class Recall:
    """recall: one event of this conversation by its seq, whole or as lines (§1, §8)."""

    seq: int
    """The event's seq, as ``[elided seq=N]`` names it."""
    start: int | None = None
    """The first line to return, 1-based; None for the whole event."""
    count: int | None = None
    """How many lines from start; None for all that fit the result cap."""


# -- one log's view, opened for one search -------------------------------------------------------


class Damaged(Exception):
    """A ``.mem`` found damaged while a search read it, or a log that changed under the search:
    which view, so that only that log's ``.mem`` is rebuilt."""

    def __init__(self, index: int, cause: FormatError) -> None:
        super().__init__(str(cause))
        self.index = index
        self.cause = cause


def _drop_mem(path: Path) -> None:
    """Remove a log's ``.mem`` (under its lock): the next open rebuilds it from the log."""
    mem = mem_path(path)
    try:
        with file_lock(mem.parent / LOCK_NAME, timeout=LOCK_SECONDS):
            mem.unlink(missing_ok=True)
    except (OSError, TimeoutError) as exc:
        log.warning("cannot remove %s: %s", mem, exc)


def with_views(
    paths: Sequence[Path],
    fn: Callable[[list[LogView]], T],
    *,
    opened: list[LogView] | None = None,
    report: Callable[[Path, str], None] | None = None,
) -> T:
    """Open the logs' views (or take ``opened``, the views of paths already open), run fn over
    them, and close them all.

    A ``.mem`` found damaged past what opening it checks, or a log that changed under the search
    (fn raises :class:`Damaged` naming its view), is removed and that log's view opened again,
    which rebuilds it; the others are used as they are. Each log is given one second chance.
    """
    views: list[LogView] = list(opened) if opened is not None else []
    retried: set[int] = set()
    rebuilt: dict[int, str] = {}
    try:
        for p in paths[len(views) :]:
            views.append(LogView.open(p))
        while True:
            try:
                return fn(views)
            except Damaged as exc:
                i = exc.index
                if i in retried:
                    raise exc.cause from None
                retried.add(i)
                log.info("%s: %s; rebuilding its .mem", paths[i], exc.cause)
                rebuilt[i] = str(exc.cause)
                views[i].close()
                _drop_mem(paths[i])
                views[i] = LogView.open(paths[i])
    finally:
        for i, v in enumerate(views):
            if v.rebuilt is not None:
                rebuilt.setdefault(i, v.rebuilt)
            v.close()
        if report is not None:
            # Said once per search: a .mem found off and rebuilt (issue: reported, never silent).
            for i, why in sorted(rebuilt.items()):
                report(Path(paths[i]), why)


def rebuilt_event(scope: str, path: Path, why: str) -> dict[str, object]:
    """The ``index.update`` record of a ``.mem`` found off and rebuilt from its log."""
    return {"kind": "index.update", "scope": scope, "task": path.stem, "rebuilt": 1, "reason": why}


# -- ranking ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Source:
    """One log taking part in a search, with what labels its results."""

    view: LogView
    """The log's view."""
    task: str | None = None
    """For an earlier task, its id."""
    labels: Callable[[], tuple[str, str, bool]] | None = None
    """For an earlier task, its date, title and whether it is archived: read from its meta only
    when one of its events is a result."""
    _tail_cards: dict[int, Card] | None = field(default=None, repr=False)

    def tail_cards(self) -> dict[int, Card]:
        """The cards of the turns after the ``.mem``: not finished."""
        if self._tail_cards is None:
            maker = CardMaker()
            for le in self.view.tail:
                maker.add(le.event)
            self._tail_cards = {c.turn: c for c in maker.cards()}
        return self._tail_cards

    def card(self, turn: int, seq: int) -> Card:
        """The card of the turn that holds an event (FormatError when the ``.mem``'s is off)."""
        mem = self.view.mem
        old = mem.card(turn) if mem is not None and mem.n_cards else None
        new = self.tail_cards().get(turn)
        if old is not None and new is not None:
            return merge_cards([old], [new])[0]
        got = old or new
        return got if got is not None else Card(turn, seq, seq, "", "", 0, 1, whole=False)

    def n_turns(self) -> int:
        """How many turns the log holds."""
        mem = self.view.mem
        if mem is None or not mem.n_cards:
            return len(self.tail_cards())
        return mem.n_cards + sum(1 for t in self.tail_cards() if mem.card(t) is None)


class _Lookup:
    """Where the words a search asks about are in each source: for a ``.mem``, each word's index
    (one search of its keys for all the words at once), for the events after it, whether they
    hold the word. The postings are then read for the words a source holds only."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = sources
        self.at: list[dict[str, int]] = [{} for _ in sources]
        """For each source's ``.mem``, each word it holds and its index there."""
        self.tail: list[set[str]] = [set() for _ in sources]
        """For each source's tail, the words it holds."""
        self.asked: set[str] = set()
        """Every word asked about."""

    def held(self, words: Sequence[str]) -> list[str]:
        """The words some source holds (every word's place is kept for :func:`_collection`)."""
        words = list(dict.fromkeys(words))
        self.asked.update(words)
        if not words:
            return []
        keys = word_keys(words)
        any_held = np.zeros(len(words), dtype=bool)
        for si, src in enumerate(self.sources):
            v = src.view
            if v.mem is not None and v.mem.n_docs:
                try:
                    hit, where = v.mem.found_keys(keys)
                except FormatError as exc:
                    raise Damaged(si, exc) from None
                if hit:
                    any_held[hit] = True
                    self.at[si].update(zip([words[j] for j in hit], where, strict=True))
            if v.tail_docs and v.tail_segment is not None:
                seg = v.tail_segment
                got = {w for w in words if seg.word_id(w) is not None}
                if got:
                    self.tail[si] |= got
                    any_held[[j for j, w in enumerate(words) if w in got]] = True
        return [w for w, m in zip(words, any_held.tolist(), strict=True) if m]


def _collection(
    sources: Sequence[Source], qwords: Sequence[str], lookup: _Lookup
) -> tuple[Segment, list[tuple[int, bool, int]]]:
    """One segment holding every source's documents end to end, the ``.mem``'s then the events
    after it, source after source, with the query's words' postings only; and where each part
    starts: ``(source, in the .mem, first document)``.

    search_all's statistics are sums over its parts, and a tie goes to the earlier part and then
    the earlier document, so this one segment scores and orders every document as the parts
    would (§9: one collection), for one pass of scoring instead of one per log.

    ``lookup`` says where each word is (:meth:`_Lookup.held`, asked here for any word it was not
    asked about): a source's postings are read for the words it holds only.
    """
    lookup.held([w for w in qwords if w not in lookup.asked])
    lengths: list[npt.NDArray[np.uint32]] = []
    # Each word's postings, part after part in order: arrays, and between them the small blocks
    # as plain integers (MemIndex.postings_many), made one array when an array follows or at
    # the end.
    docs: dict[str, list[npt.NDArray[np.uint32]]] = {w: [] for w in qwords}
    tfs: dict[str, list[npt.NDArray[np.uint32]]] = {w: [] for w in qwords}
    small: dict[str, tuple[list[int], list[int]]] = {w: ([], []) for w in qwords}

    def flush(w: str) -> None:
        sd, st = small[w]
        if sd:
            docs[w].append(np.array(sd, dtype=np.uint32))
            tfs[w].append(np.array(st, dtype=np.uint32))
            small[w] = ([], [])

    starts: list[tuple[int, bool, int]] = []
    base = 0
    for si, src in enumerate(sources):
        v = src.view
        try:
            if v.mem is not None and v.mem.n_docs:
                mem, at = v.mem, lookup.at[si]
                asked = [(w, at[w]) for w in qwords if w in at]
                big = mem.postings_many([(i, *small[w]) for w, i in asked], base)
                if big:
                    for w, i in asked:
                        if i in big:
                            flush(w)
                            d, t = mem.postings_at(i)
                            docs[w].append(d + np.uint32(base) if base else d)
                            tfs[w].append(t)
                lens = mem.lengths()
                starts.append((si, True, base))
                lengths.append(lens)
                base += int(lens.shape[0])
            if v.tail_docs and v.tail_segment is not None:
                seg, held = v.tail_segment, lookup.tail[si]
                for w in qwords:
                    if w in held:
                        d, t = seg.postings(w)
                        if d.size:
                            flush(w)
                            docs[w].append(d + np.uint32(base) if base else d)
                            tfs[w].append(t)
                starts.append((si, False, base))
                lengths.append(seg.lengths)
                base += int(seg.lengths.shape[0])
        except FormatError as exc:
            raise Damaged(si, exc) from None
    for w in qwords:
        flush(w)
    found = [w for w in qwords if docs[w]]
    offsets = np.zeros(len(found) + 1, dtype=np.int64)
    np.cumsum([sum(d.size for d in docs[w]) for w in found], out=offsets[1:])
    z = np.zeros(0, dtype=np.uint32)
    segment = Segment(
        found,
        offsets,
        np.concatenate([d for w in found for d in docs[w]]) if found else z,
        np.concatenate([t for w in found for t in tfs[w]]) if found else z,
        np.concatenate(lengths) if lengths else z,
    )
    return segment, starts


# The reordering of a search's best documents (docs/conversation.md, "What ranks first").
CANDIDATES = 3
"""Documents ranked by BM25 per result wanted, before the setup weight, the collapse of
near-duplicates and the originals before their echoes pick and order the results."""
SETUP_WEIGHT = 0.3
"""A log's setup (its helper-written messages and attachments before the person's first message:
a system prompt, harness instructions, a demonstration) scores this share of its BM25 score: it
repeats in every task and matches generic words of any query."""
MODEL_KINDS = frozenset({"llm.resp", "summary", "plan", "nodwyn.message", "compaction"})
"""Text the model wrote, which restates what it saw."""
ORIGINAL_KINDS = frozenset({"tool.result", "attachment", "person.message"})
"""What the model saw."""
ECHO_SHARE = 0.4
"""An original ranks before a later restatement in its turn that matches no query word it does
not, when it scores at least this share of the restatement's score."""
DUPLICATE_LENGTH = 0.02
"""Two events of one kind whose lengths differ by at most this share and whose query words
occur equally often in each are near-duplicates: one result names the others' seqs."""
DUPLICATE_MIN_LENGTH = 12
"""...if each is at least this long (weighted words): for a few words, an equal length and equal
counts of the query's words say nothing of the rest (``Where is the axolotl?`` and ``the first
axolotl answer`` would be taken for one event)."""


@dataclass(slots=True)
class _Candidate:
    source: int
    in_mem: bool
    doc: int  # in its part
    score: float
    seq: int
    kind: str
    turn: int
    length: int  # the document's weighted length
    tfs: tuple[int, ...]  # each term's frequency in it
    words: frozenset[int]  # the query words it holds, itself or by another form
    also: list[int] = field(default_factory=list)


def _first_person_seq(src: Source) -> int | None:
    """The seq of the log's first person.message (None when it has none)."""
    v = src.view
    mem = v.mem
    if mem is not None and mem.n_events:
        kinds = mem.kinds
        if "person.message" in kinds:
            ev = mem.events()
            at = np.flatnonzero(ev.kind == kinds.index("person.message"))
            if at.size:
                return int(ev.seq[int(at[0])])
    for le in v.tail:
        if le.event.get("kind") == "person.message":
            seq: int = le.event["seq"]
            return seq
    return None


def _candidates(
    sources: Sequence[Source],
    segment: Segment,
    starts: list[tuple[int, bool, int]],
    terms: Sequence[Term],
    limit: int,
) -> list[_Candidate]:
    weights: dict[str, float] = {t.word: t.weight for t in terms}
    hits = search_all([Part(segment)], weights, limit * CANDIDATES)
    bases = [b for _, _, b in starts]
    # Each term's frequency in each hit: one search of the term's documents for all the hits.
    wanted = np.asarray([h.doc for h in hits], dtype=np.int64)
    per_term: list[list[int]] = []
    for t in terms:
        docs, tf = segment.postings(t.word)
        if not docs.size:
            per_term.append([0] * len(hits))
            continue
        k = np.minimum(np.searchsorted(docs, wanted), docs.shape[0] - 1)
        per_term.append(np.where(docs[k] == wanted, tf[k], 0).tolist())
    hit_tfs = list(zip(*per_term, strict=True)) if per_term else [()] * len(hits)
    meta: dict[int, Any] = {}
    firsts: dict[int, int | None] = {}
    out: list[_Candidate] = []
    for h, tfs in zip(hits, hit_tfs, strict=True):
        si, in_mem, base = starts[bisect.bisect_right(bases, h.doc) - 1]
        doc = h.doc - base
        v = sources[si].view
        try:
            if in_mem and v.mem is not None:
                if si not in meta:
                    meta[si] = (v.mem.events(), v.mem.doc_events(), v.mem.kinds)
                ev, doc_events, kinds = meta[si]
                e = int(doc_events[doc])
                seq, kind, turn = int(ev.seq[e]), kinds[int(ev.kind[e])], int(ev.turn[e])
            else:
                event = v.tail[v.tail_docs[doc]].event
                seq, kind, turn = event["seq"], str(event.get("kind")), int(event.get("turn") or 0)
        except FormatError as exc:
            raise Damaged(si, exc) from None
        score = h.score
        if kind in ("nodwyn.message", "attachment"):
            if si not in firsts:
                try:
                    firsts[si] = _first_person_seq(sources[si])
                except FormatError as exc:
                    raise Damaged(si, exc) from None
            first = firsts[si]
            if first is not None and seq < first:
                score *= SETUP_WEIGHT
        length = int(segment.lengths[h.doc])
        held = frozenset(t.of for t, n in zip(terms, tfs, strict=True) if n)
        out.append(_Candidate(si, in_mem, doc, score, seq, kind, turn, length, tfs, held))
    out.sort(key=lambda c: -c.score)  # stable: a tie keeps search_all's order
    return out


def _collapse(cands: list[_Candidate]) -> list[_Candidate]:
    """Near-duplicates (module constants) as one candidate, the best one, naming the others."""
    kept: list[_Candidate] = []
    for c in cands:
        for k in kept:
            if (
                k.source == c.source
                and k.kind == c.kind
                and k.tfs == c.tfs
                and min(k.length, c.length) >= DUPLICATE_MIN_LENGTH
                and abs(k.length - c.length) <= DUPLICATE_LENGTH * max(k.length, c.length)
            ):
                k.also.append(c.seq)
                break
        else:
            kept.append(c)
    return kept


def _originals_first(cands: list[_Candidate]) -> list[_Candidate]:
    """Each original before a restatement of it ranked above it (ECHO_SHARE)."""
    order = list(cands)
    i = 0
    while i < len(order):
        e = order[i]
        if e.kind in MODEL_KINDS:
            for j in range(i + 1, len(order)):
                o = order[j]
                if (
                    o.kind in ORIGINAL_KINDS
                    and o.source == e.source
                    and o.turn == e.turn
                    and e.words <= o.words
                    and o.score >= ECHO_SHARE * e.score
                ):
                    order.insert(i, order.pop(j))
                    break
        i += 1
    return order


def rank_sources(sources: Sequence[Source], query: str, limit: int) -> list[LogHit]:
    """The events of every source ranked as one collection (§9: retrieval.bm25.search_all), best
    first; a tie goes to the earlier source, then to the earlier event. Each query word also
    ranks by its other forms that the sources hold, at a lower weight
    (retrieval.events.conversation_terms). The best few times the limit are then weighed and
    ordered (docs/conversation.md): a log's setup weighs little, near-duplicates become one
    result naming the others' seqs, and an original ranks before the model's restatement of it."""
    lookup = _Lookup(sources)
    terms = conversation_terms(conversation_words(query), lookup.held)
    qwords = [t.word for t in terms]
    segment, starts = _collection(sources, qwords, lookup)
    cands = _originals_first(_collapse(_candidates(sources, segment, starts, terms, limit)))
    events: dict[int, Any] = {}
    out: list[LogHit] = []
    for c in cands[:limit]:
        si, doc = c.source, c.doc
        src = sources[si]
        v = src.view
        try:
            if c.in_mem and v.mem is not None:
                if si not in events:
                    events[si] = (v.mem.events(), v.mem.doc_events())
                ev, doc_events = events[si]
                e = int(doc_events[doc])
                event = v.read_event(int(ev.off[e]), int(ev.length[e]), int(ev.seq[e]))
            else:
                event = v.tail[v.tail_docs[doc]].event
            et = event_text(event)
            card = src.card(et.turn, et.seq)
        except FormatError as exc:
            raise Damaged(si, exc) from None
        date, title, archived = src.labels() if src.labels is not None else (None, "", False)
        out.append(
            LogHit(
                event=et,
                card=card,
                lines=tuple(matched_lines(et, qwords)),
                score=c.score,
                task=src.task,
                date=date,
                title=title,
                archived=archived,
                also=tuple(sorted(c.also)),
            )
        )
    return out


# -- recall -------------------------------------------------------------------------------------


def _not_found(seq: int, where: str, view: LogView) -> NotFound:
    if not view.n_events:
        return NotFound(f"no event with seq {seq} in {where} (it has no events yet)")
    return NotFound(
        f"no event with seq {seq} in {where} (it has seqs {view.first_seq} to {view.last_seq})"
    )


@dataclass(frozen=True, slots=True)
class _Located:
    event: dict[str, Any]
    index: int | None
    """Its index in the ``.mem``'s event arrays, or None when it is in the tail."""
    tail_index: int | None


def _locate(view: LogView, seq: int, where: str) -> _Located:
    mem = view.mem
    if mem is not None and mem.n_events and seq <= mem.last_seq:
        ev = mem.events()
        i = ev.find(seq)
        if i is None:
            raise _not_found(seq, where, view)
        return _Located(view.read_event(int(ev.off[i]), int(ev.length[i]), seq), i, None)
    seqs = [le.event["seq"] for le in view.tail]
    j = bisect.bisect_left(seqs, seq)
    if j < len(seqs) and seqs[j] == seq:
        return _Located(view.tail[j].event, None, j)
    raise _not_found(seq, where, view)


def _results_of(
    view: LogView, at: _Located, calls: Sequence[Call]
) -> list[tuple[Call, int | None]]:
    """Each call of a reply and the seq of its result: the first tool.result after the reply, in
    its turn, whose call_id names the call."""
    turn = at.event.get("turn")
    wanted = {c.id: c for c in calls if c.id}
    found: dict[str, int] = {}

    def consider(event: dict[str, Any]) -> None:
        cid = event.get("call_id")
        if isinstance(cid, str) and cid in wanted and cid not in found:
            found[cid] = event["seq"]

    mem = view.mem
    if at.index is not None and mem is not None and wanted:
        ev = mem.events()
        kinds = mem.kinds
        keys = {json.dumps(cid, ensure_ascii=False).encode("utf-8") for cid in wanted}
        for j in range(at.index + 1, mem.n_events):
            if len(found) == len(wanted) or int(ev.turn[j]) != turn:
                break
            if kinds[int(ev.kind[j])] != "tool.result":
                continue
            off, length = int(ev.off[j]), int(ev.length[j])
            line = view.read_line(off, length)
            if any(k in line for k in keys):
                consider(view.read_event(off, length, int(ev.seq[j])))
    start = 0 if at.tail_index is None else at.tail_index + 1
    for le in view.tail[start:]:
        if len(found) == len(wanted):
            break
        if le.event.get("turn") != turn and at.tail_index is not None:
            break
        if le.event.get("kind") == "tool.result":
            consider(le.event)
    return [(c, found.get(c.id)) for c in calls]


def _turn_seqs(view: LogView, turn: int) -> tuple[list[int], int | None]:
    """Every seq the turn holds, and its first person.message's seq."""
    seqs: list[int] = []
    first: int | None = None
    mem = view.mem
    if mem is not None and mem.n_events:
        ev = mem.events()
        kinds = mem.kinds
        for j in (ev.turn == turn).nonzero()[0]:
            s = int(ev.seq[j])
            seqs.append(s)
            if first is None and kinds[int(ev.kind[j])] == "person.message":
                first = s
    for le in view.tail:
        if le.event.get("turn") == turn:
            seqs.append(le.event["seq"])
            if first is None and le.event.get("kind") == "person.message":
                first = le.event["seq"]
    return seqs, first


def recall_event(
    view: LogView,
    seq: int,
    start: int | None,
    count: int | None,
    cap: int,
    *,
    task: str | None = None,
) -> ToolOutput:
    """One event of the log by its seq, as recall returns it (§8): redacted, under a header, in
    lines within the cap. Errors are one clear line each: NotFound for no such seq, BadInput for
    a kind recall does not read or a start past the event's lines."""
    if start is not None and start < 1:
        raise BadInput(f"start must be at least 1, got {start}")
    if count is not None and count < 1:
        raise BadInput(f"count must be at least 1, got {count}")
    where = f"task {task}" if task is not None else "this log"
    at = _locate(view, seq, where)
    reason = unread_reason(at.event)
    if reason is not None:
        raise BadInput(f"seq {seq} is {reason}, which recall does not read")
    et = event_text(at.event)
    total = len(et.lines)
    if start is not None and start > total:
        raise BadInput(f"start {start} is past the event's {plural(total, 'line')}")
    results = _results_of(view, at, et.calls) if et.kind == "llm.resp" else []
    card: Card | None = None
    turn_seqs: list[int] = []
    if et.kind == "person.message" and et.turn:
        seqs, first = _turn_seqs(view, et.turn)
        if first == seq:
            card = Source(view).card(et.turn, seq)
            turn_seqs = seqs
    text, data = render_recall(
        et,
        start=start,
        count=count,
        cap=cap,
        results=results,
        card=card,
        turn_seqs=turn_seqs,
        task=task,
    )
    return ToolOutput(text=text, provenance="external:log", data=data)


# -- the actor ----------------------------------------------------------------------------------


class ConversationActor(Actor):
    """index-search "conversation" and recall over this session's log (§8, ADR 51)."""

    def __init__(
        self,
        log_path: Path,
        config: Config,
        record: Callable[[dict[str, object]], None] | None = None,
    ) -> None:
        self.log_path = Path(log_path)
        self.config = config
        self.record = record

    def _report(self, path: Path, why: str) -> None:
        if self.record is not None:
            self.record(rebuilt_event("conversation", path, why))

    def __repr__(self) -> str:
        return f"<ConversationActor {self.log_path}>"

    async def handle(self, message: object) -> object:
        if isinstance(message, LogSearch):
            return self.search(message.query, message.limit)
        if isinstance(message, Recall):
            return self.recall(message.seq, message.start, message.count)
        raise BadInput(f"the conversation does not take {type(message).__name__}")

    def search(self, query: str, limit: int) -> SearchOutput:
        """Rank this log's events for query; results grouped under their turns' cards."""

        def run(views: list[LogView]) -> SearchOutput:
            (view,) = views
            src = Source(view)
            hits = rank_sources([src], query, limit)
            try:
                turns = src.n_turns()
            except FormatError as exc:
                raise Damaged(0, exc) from None
            text = (
                f"ranked {view.n_ranked:,} of the {plural(view.n_events, 'event')} "
                f"in this conversation ({plural(turns, 'turn')})"
            )
            if not hits:
                text += "\nno event matches those words"
            header = {
                "events": view.n_events,
                "ranked": view.n_ranked,
                "turns": turns,
                "text": text,
            }
            return SearchOutput(
                scope="conversation",
                query=query,
                text=render_hits(text, hits),
                header=header,
                hits=[hit_json(h) for h in hits],
            )

        return with_views([self.log_path], run, report=self._report)

    def recall(self, seq: int, start: int | None, count: int | None) -> ToolOutput:
        """One event of this log by its seq (§8)."""

        def run(views: list[LogView]) -> ToolOutput:
            try:
                return recall_event(views[0], seq, start, count, self.config.result_cap)
            except FormatError as exc:
                raise Damaged(0, exc) from None

        return with_views([self.log_path], run, report=self._report)
