"""The events of a log as the conversation and earlier-task searches see them (ADR 0050 §8, §9).

Pure functions, no I/O: which events are ranked, an event's text with the lines recall numbers,
the words it is indexed by and their weights, the call a result answers and a turn's card. How a
search's results and a recall read is :mod:`retrieval.event_render`.

One text, two uses. :func:`event_text` gives the lines a recall shows and numbers; the words an
event is indexed by (:func:`event_counts`) are the words of those same lines (less the lines of a
search's own calls, below), redacted the same way. So the three lines a search shows under a result
are numbered as a recall of that event numbers them, and a word that ranked an event is a word a
recall of it shows (§8: "numbered as recall numbers them").

What is ranked (§8, LOG-FORMAT.md): the person's messages (their attachments as attached files),
nodwyn's messages in the main context, attached files, plans, summaries, compaction notes, replies
with their tool calls and tool results with the call each answers, in the main context and in
helper agents' (labelled with the agent). Not thinking, guard, egress, request or note records,
not llm.req, embed.req, index.update or turn.end, and no call or result of a search or a recall
(``index-search``, ``recall``, ``memory-search``, ``memory-read``): their results repeat other
events, and their calls would make a search find itself. A reply that made such a call is still
ranked by its text and its other calls; the line of that call is shown by recall but never ranked.
nodwyn's messages to a helper agent repeat the request and the helper's instructions, so a
``nodwyn.message`` whose agent is not ``main`` is left out (the amendment "the clients made
usable").

Weights (§8): a tool result's call (its name and arguments) counts three times its output, as a
repository chunk's path and first line count three times (§6); an attached file's name counts
three times its text, for the same reason.

Everything shown or indexed is redacted first (§3, ADR 43): no known credential shape reaches a
``.mem``, a result or a recall.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodwyn_retrieval.guard.redact import redact
from nodwyn_retrieval.retrieval.blobs import BLOBS_VERSION, blank_blobs
from nodwyn_retrieval.retrieval.chunks import split_lines
from nodwyn_retrieval.retrieval.render import clip, plural
from nodwyn_retrieval.retrieval.words import (
    QUERY_STOP_WORDS,
    encode,
    query_words,
    run_counts,
    stem,
    translate,
    word_forms,
)

__all__ = [
    "CALL_CHARS",
    "CALL_WEIGHT",
    "CARD_LINE_CHARS",
    "DERIVATIONS",
    "EVENTS_VERSION",
    "FORM_WEIGHT",
    "MAIN",
    "NAME_WEIGHT",
    "NEVER_RANKED",
    "PIECE_CHARS",
    "RANKED_KINDS",
    "SELF_TOOLS",
    "Call",
    "Card",
    "CardMaker",
    "EventText",
    "Memo",
    "Term",
    "agent_of",
    "conversation_terms",
    "conversation_words",
    "event_counts",
    "event_fields",
    "event_text",
    "is_ranked",
    "kind_of",
    "seq_ranges",
    "text_counts",
    "turn_of",
    "unread_reason",
    "word_runs",
]

EVENTS_VERSION = 2 * 100 + BLOBS_VERSION  # 2: blobs are not words
"""Bumped whenever what an event is indexed by changes (its text, weights, what is ranked): it is
part of a ``.mem``'s validity, so every ``.mem`` is rebuilt after a change."""

MAIN = "main"
"""The agent of the main context (LOG-FORMAT.md)."""

RANKED_KINDS = frozenset(
    {
        "person.message",
        "nodwyn.message",
        "attachment",
        "plan",
        "summary",
        "compaction",
        "llm.resp",
        "tool.result",
    }
)
"""The kinds a search ranks and recall reads (§8); see :func:`is_ranked` for the exceptions."""

NEVER_RANKED = frozenset(
    {
        "thinking",
        "guard.decision",
        "egress",
        "request",
        "note",
        "llm.req",
        "embed.req",
        "index.update",
        "turn.end",
    }
)
"""Kinds LOG-FORMAT.md names as never ranked. An unknown kind is never ranked either."""

SELF_TOOLS = frozenset({"index-search", "recall", "memory-search", "memory-read"})
"""Calls whose results repeat other events and whose calls would make a search find itself."""

CALL_WEIGHT = 3
"""§8: a tool result's call counts three times its output."""
NAME_WEIGHT = 3
"""An attached file's name counts three times its text, as a chunk's path does (§6)."""
CARD_LINE_CHARS = 100
"""A card holds the first line of its turn's first person.message, cut at this many characters."""
PIECE_CHARS = 4000
"""A line of an event longer than this is cut into pieces of this many characters, each numbered
as a line: a recall pages a 40,000-character line (or a 5 MB tool output on one line) as it pages
lines, and every character can be reached with ``start``."""
CALL_CHARS = 160
"""A call shown in a result's line or a recall's header is cut here (a write's whole content is
an argument; recall's body shows it whole)."""


# -- the fields of an event ---------------------------------------------------------------------


def kind_of(event: Mapping[str, Any]) -> str:
    kind = event.get("kind")
    return kind if isinstance(kind, str) else ""


def agent_of(event: Mapping[str, Any]) -> str:
    """The event's agent; ``main`` when the field is missing or not a name."""
    agent = event.get("agent")
    return agent if isinstance(agent, str) and agent else MAIN


def turn_of(event: Mapping[str, Any]) -> int:
    """The event's turn; 0 when the field is missing or not a turn number."""
    turn = event.get("turn")
    return turn if type(turn) is int and turn > 0 else 0


def _seq_of(event: Mapping[str, Any]) -> int:
    seq = event.get("seq")
    return seq if type(seq) is int else 0


def _ts_of(event: Mapping[str, Any]) -> str:
    ts = event.get("ts")
    return ts if isinstance(ts, str) else ""


def _as_text(value: object) -> str:
    """A text field as a string: a string as is, nothing as empty, anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return _json(value, indent=2)


_ENCODERS = {
    None: json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")),
    2: json.JSONEncoder(ensure_ascii=False, indent=2, separators=(",", ": ")),
}
"""The encoders :func:`_json` uses, made once: ``json.dumps`` with these arguments makes the
same encoder at every call, which was half its cost for a call's arguments."""


def _json(value: object, indent: int | None = None) -> str:
    encoder = _ENCODERS.get(indent)
    try:
        if encoder is not None:
            return encoder.encode(value)
        return json.dumps(
            value,
            ensure_ascii=False,
            indent=indent,
            separators=(",", ": ") if indent else (", ", ": "),
        )
    except (TypeError, ValueError):
        return str(value)


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call: in a reply's ``calls``, or the call a tool result answers."""

    id: str
    """The call's id, which its result's ``call_id`` names."""
    name: str
    """The tool's name (``fs-read``)."""
    args: Any
    """The arguments as the log holds them (redacted when this came from :func:`event_text`)."""

    @property
    def text(self) -> str:
        """``fs-read {"path": "keychain/bind.go"}``: the words a result's call is ranked by."""
        name = self.name or "an unnamed call"
        if self.args is None or self.args == {}:
            return name
        return f"{name} {_json(self.args)}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args}


def _call_of(raw: object, *, id_key: str = "id") -> Call:
    if not isinstance(raw, Mapping):
        return Call("", "", None)
    cid = raw.get(id_key)
    name = raw.get("name")
    return Call(
        cid if isinstance(cid, str) else ("" if cid is None else str(cid)),
        name if isinstance(name, str) else "",
        raw.get("args"),
    )


def _calls_of(event: Mapping[str, Any]) -> tuple[Call, ...]:
    raw = event.get("calls")
    if not isinstance(raw, list):
        return ()
    return tuple(_call_of(c) for c in raw)


def _redacted_call(call: Call) -> tuple[Call, int]:
    """The call with credentials redacted from its arguments (and name), and how many."""
    name = redact(call.name)
    if call.args is None:
        return Call(call.id, name.text, None), name.count
    shown = redact(_json(call.args))
    if not shown.count:
        return Call(call.id, name.text, call.args), name.count
    try:
        args: Any = json.loads(shown.text)
    except ValueError:
        args = shown.text
    return Call(call.id, name.text, args), name.count + shown.count


def unread_reason(event: Mapping[str, Any]) -> str | None:
    """Why this event is never ranked nor recalled (``a guard.decision``); None when it is ranked.

    The reason reads after "seq N is": ``seq 3 is a guard.decision, which recall does not read``.
    """
    kind = kind_of(event)
    if kind not in RANKED_KINDS:
        return f"a {kind}" if kind else "an event without a kind"
    if kind == "nodwyn.message" and agent_of(event) != MAIN:
        return f"a nodwyn.message in {agent_of(event)}'s context"
    if kind == "tool.result":
        name = event.get("name")
        if isinstance(name, str) and name in SELF_TOOLS:
            return f"a result of {name}"
    return None


def is_ranked(event: Mapping[str, Any]) -> bool:
    """Whether a search ranks this event (and so recall reads it)."""
    return unread_reason(event) is None


# -- one event's text ----------------------------------------------------------------------------


def _segments(event: Mapping[str, Any]) -> tuple[list[tuple[str, bool]], Call | None, str]:
    """The event's body as segments ``(text, ranked)`` in order, its call, and its title.

    The body's lines are the segments' lines in order. A segment not ranked is a line of a call a
    search makes (SELF_TOOLS): shown by recall, never indexed.
    """
    kind = kind_of(event)
    call: Call | None = None
    title = ""
    segs: list[tuple[str, bool]] = []
    if kind == "tool.result":
        call = _call_of(
            {"id": event.get("call_id"), "name": event.get("name"), "args": event.get("args")}
        )
        segs.append((_as_text(event.get("output")), True))
    elif kind == "llm.resp":
        segs.append((_as_text(event.get("text")), True))
        for c in _calls_of(event):
            segs.append((f"call {c.text}", c.name not in SELF_TOOLS))
    elif kind == "compaction":
        segs.append((_as_text(event.get("note")), True))
    elif kind == "attachment":
        name = event.get("name")
        title = name if isinstance(name, str) else ""
        segs.append((_as_text(event.get("text")), True))
    else:
        segs.append((_as_text(event.get("text")), True))
        attachments = event.get("attachments") if kind == "person.message" else None
        if isinstance(attachments, list):
            for a in attachments:
                if not isinstance(a, Mapping):
                    continue
                name = a.get("name")
                segs.append((f"[attachment {name if isinstance(name, str) else ''}]", True))
                segs.append((_as_text(a.get("text")), True))
    return segs, call, title


def _joined(segs: Iterable[str]) -> str:
    """Segments joined so that each starts a line of its own."""
    out: list[str] = []
    for s in segs:
        if out and not out[-1].endswith("\n"):
            out.append("\n")
        out.append(s)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class EventText:
    """One ranked event as recall shows it and a search numbers its lines: redacted."""

    seq: int
    """The event's seq."""
    kind: str
    """Its kind."""
    turn: int
    """The turn that holds it (0 when the log does not say)."""
    agent: str
    """``main`` or the helper agent whose context it is in."""
    ts: str
    """Its time as the log holds it."""
    lines: tuple[str, ...]
    """The body's lines; line n is ``lines[n - 1]``."""
    call: Call | None = None
    """For a tool result, the call it answers."""
    calls: tuple[Call, ...] = ()
    """For a reply, its tool calls in order."""
    hidden: frozenset[int] = frozenset()
    """Lines (1-based) that are a search's own calls: shown, never ranked nor offered as a match."""
    error: bool = False
    """A tool result that is an error."""
    title: str = ""
    """An attached file's name."""
    redacted: int = 0
    """How many credentials redaction replaced."""
    pieces: tuple[tuple[int, int, int], ...] = ()
    """Each line of the event longer than :data:`PIECE_CHARS`: ``(first, last, characters)``,
    the lines (1-based) its pieces are numbered as and its length."""

    @property
    def label(self) -> str:
        """What the event is, in a result's line: its kind, or ``compaction note`` for one."""
        return "compaction note" if self.kind == "compaction" else self.kind

    def describe(self) -> str:
        """``tool.result (explorer) of fs-read {"path": "x"}``: kind, agent unless main, call."""
        out = self.label
        if self.agent != MAIN:
            out += f" ({self.agent})"
        if self.call is not None:
            out += f" of {clip(self.call.text, CALL_CHARS)}"
            if self.error:
                out += " (error)"
        if self.title:
            out += f" {clip(self.title, CALL_CHARS)}"
        return out


def _n_pieces(line: str) -> int:
    return max(1, -(-len(line) // PIECE_CHARS))


def _in_pieces(lines: list[str]) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Lines with each one longer than PIECE_CHARS cut into pieces; and where those lie."""
    if all(len(x) <= PIECE_CHARS for x in lines):
        return lines, []
    out: list[str] = []
    where: list[tuple[int, int, int]] = []
    for line in lines:
        if len(line) <= PIECE_CHARS:
            out.append(line)
            continue
        first = len(out) + 1
        out.extend(line[i : i + PIECE_CHARS] for i in range(0, len(line), PIECE_CHARS))
        where.append((first, len(out), len(line)))
    return out, where


def event_text(event: Mapping[str, Any]) -> EventText:
    """The event's redacted text in lines, as recall shows it and a search numbers it; a line
    longer than :data:`PIECE_CHARS` is numbered as its pieces."""
    segs, call, title = _segments(event)
    body = redact(_joined(s for s, _ in segs))
    lines, pieces = _in_pieces(split_lines(body.text))
    hidden: set[int] = set()
    if not all(ranked for _, ranked in segs):
        n = 0
        for text, ranked in segs:
            k = max(sum(_n_pieces(x) for x in split_lines(text)), 1)
            if not ranked:
                hidden.update(range(n + 1, n + k + 1))
            n += k
    count = body.count
    calls: list[Call] = []
    for c in _calls_of(event):
        rc, k = _redacted_call(c)
        calls.append(rc)
        count += k
    if call is not None:
        call, k = _redacted_call(call)
        count += k
    shown_title = redact(title)
    return EventText(
        seq=_seq_of(event),
        kind=kind_of(event),
        turn=turn_of(event),
        agent=agent_of(event),
        ts=_ts_of(event),
        lines=tuple(lines),
        call=call,
        calls=tuple(calls),
        hidden=frozenset(hidden),
        error=event.get("error") is True,
        title=shown_title.text,
        redacted=count + shown_title.count,
        pieces=tuple(pieces),
    )


Memo = dict[str, dict[str, int]]
"""Word counts of texts already seen in one build: a log reads the same file again and again (the
ADR counts 2,172 repeated reads in 3,864), and counting a text's words once is enough."""


def word_runs(text: str) -> list[bytes]:
    """The runs of text (retrieval.words.runs) with its blobs left out (retrieval.blobs): a
    base64 image, a hex dump or a minified bundle in an event gives no words."""
    return translate(blank_blobs(encode(text))).split()


def _word_counts(text: str) -> dict[str, int]:
    """retrieval.words.word_counts over :func:`word_runs`."""
    return run_counts(word_runs(text))


def text_counts(text: str, memo: Memo | None = None) -> dict[str, int]:
    """The words of text, redacted first, with their counts, its blobs left out. The dict may be
    one of memo's values: do not change it."""
    if memo is not None:
        got = memo.get(text)
        if got is not None:
            return got
    counts = _word_counts(redact(text).text) if text else {}
    if memo is not None:
        memo[text] = counts
    return counts


def event_fields(event: Mapping[str, Any]) -> list[tuple[str, int]] | None:
    """The texts an event is indexed by, each with its weight; None when it is not ranked.

    The ranked lines of :func:`event_text` (before redaction, which :func:`text_counts` applies)
    with weight 1, a result's call with :data:`CALL_WEIGHT`, an attached file's name with
    :data:`NAME_WEIGHT`.
    """
    if not is_ranked(event):
        return None
    segs, call, title = _segments(event)
    body = segs[0][0] if len(segs) == 1 else _joined(s for s, ranked in segs if ranked)
    out = [(body, 1)]
    if call is not None:
        out.append((call.text, CALL_WEIGHT))
    if title:
        out.append((title, NAME_WEIGHT))
    return out


def event_counts(event: Mapping[str, Any], memo: Memo | None = None) -> dict[str, int] | None:
    """The weighted word counts an event is indexed by; None when it is not ranked.

    The words of :func:`event_text`'s lines, less hidden ones, with a result's call counted
    :data:`CALL_WEIGHT` times and an attached file's name :data:`NAME_WEIGHT` times.
    """
    fields = event_fields(event)
    if fields is None:
        return None
    out: dict[str, int] = {}
    get = out.get
    for text, weight in fields:
        for w, c in text_counts(text, memo).items():
            out[w] = get(w, 0) + c * weight
    return out


CONVERSATION_STOP_WORDS = QUERY_STOP_WORDS | frozenset((
    "i", "me", "my", "we", "us", "our", "you", "your", "he", "she", "his", "her", "they", "was",
    "were", "been", "being", "has", "have", "had", "did", "done", "that", "than", "then", "so",
    "if", "but", "not", "no", "all", "any", "some", "just", "also", "would", "could", "should",
    "will", "may", "might", "must", "got", "get",
))  # fmt: skip
"""English words a question about what was seen carries ("what did the test print when I ran
it") and any event holds by chance: the repository's stop words and the pronouns and auxiliary
verbs of a question told in the first person."""


def conversation_words(query: str) -> list[str]:
    """The words a conversation or earlier-task search ranks by: the query's, less English stop
    words (CONVERSATION_STOP_WORDS), unless the query is nothing but those."""
    found = query_words(query)
    kept = [w for w in found if w not in CONVERSATION_STOP_WORDS]
    return kept or found


# -- word forms ----------------------------------------------------------------------------------

FORM_WEIGHT = 0.5
"""Another form of a query word (``auditing`` for ``audits``) weighs this share of the word, as
in a repository search (retrieval.tree.Ranking.forms)."""

DERIVATIONS: tuple[tuple[str, str], ...] = (
    ("duct", "duc"),  # reproduction, reproduce
    ("is", "id"),  # decision, decide
    ("us", "ud"),  # conclusion, conclude
    ("os", "od"),  # explosion, explode
    ("script", "scrib"),  # description, describe
    ("miss", "mit"),  # permission, permit
    ("cept", "ceiv"),  # reception, receive
    ("olut", "olv"),  # solution, solve
    ("osit", "os"),  # composition, compose
    ("ur", ""),  # failure, fail
)
"""English derivations whose two words the stemmer gives different stems (``reproduct``,
``reproduc``): the end of one stem and of the other, read both ways. A word of the other stem
counts as a form of the query's word when the log holds it, as :func:`retrieval.words.word_forms`
counts the forms of one stem."""
_DERIVED_MIN = 3
"""A derivation keeps at least this many letters of the stem before the end it changes."""


@dataclass(frozen=True, slots=True)
class Term:
    """A word a conversation or earlier-task search ranks by."""

    word: str
    """The word as the index holds it."""
    of: int
    """The query word it stands for: its index in :func:`conversation_words`."""
    weight: float
    """1 for the query's own word, :data:`FORM_WEIGHT` for another form of it."""


def _recorded(word: str) -> list[str]:
    """The words :func:`retrieval.words.word_forms` would look up for word."""
    asked: list[str] = []

    def ask(c: str) -> bool:
        asked.append(c)
        return False

    word_forms(word, ask)
    return asked


def _derived_stems(s: str) -> list[str]:
    """The stems of word that :data:`DERIVATIONS` relate to a word of stem s."""
    out: dict[str, None] = {}
    for a, b in DERIVATIONS:
        for end, other in ((a, b), (b, a)):
            if s.endswith(end) and len(s) - len(end) >= _DERIVED_MIN:
                out[s[: len(s) - len(end)] + other] = None
    out.pop(s, None)
    return list(out)


_DERIVED_ENDINGS = ("", "e", "s", "es", "ed", "ing", "ion", "ions")
"""The words of a derived stem looked up: the stem as a word (``fail``), with ``e``
(``reproduce``), its verb forms, and its nouns (``reproduction``). A short list: every candidate
costs a lookup in every log a search reads."""


def _derived_candidates(s: str) -> list[str]:
    """Words that may have stem s (:data:`_DERIVED_ENDINGS`)."""
    return [s + e for e in _DERIVED_ENDINGS]


def conversation_terms(
    qwords: Sequence[str],
    held: Callable[[Sequence[str]], Collection[str]],
    *,
    derivations: bool = True,
) -> list[Term]:
    """The terms a conversation or earlier-task search ranks by: each query word (weight 1),
    then the other forms of each that the logs hold (:data:`FORM_WEIGHT`).

    A word's forms are the repository's (:func:`retrieval.words.word_forms`: the same English
    stem, ``audits`` and ``auditing``) and, with ``derivations``, the words of a stem
    :data:`DERIVATIONS` relates to its own (``reproduction`` and ``reproduce``, which the name
    ``reproduce_bug`` holds as a part). A name with digits, ``_`` or ``-`` and a word under four
    letters have no forms: ``reproduce_bug`` is found whole, and its parts by their forms.
    ``held`` is asked once, with the query's words and every candidate, and returns those the
    logs hold.
    """
    own = set(qwords)
    cands: dict[str, None] = {}
    derived: list[list[tuple[str, list[str]]]] = []
    for w in qwords:
        cands.update(dict.fromkeys(_recorded(w)))
        stems = _derived_stems(stem(w)) if derivations and len(w) >= 4 and w.isalpha() else []
        derived.append([(s2, _derived_candidates(s2)) for s2 in stems])
        for _, more in derived[-1]:
            cands.update(dict.fromkeys(more))
    for w in own:
        cands.pop(w, None)
    found = set(held([*qwords, *cands]))
    terms = [Term(w, i, 1.0) for i, w in enumerate(qwords)]
    seen = set(own)
    for i, w in enumerate(qwords):
        forms = word_forms(w, found.__contains__)
        for s2, more in derived[i]:
            forms += [c for c in more if c in found and stem(c) == s2]
        for f in forms:
            if f not in seen:
                seen.add(f)
                terms.append(Term(f, i, FORM_WEIGHT))
    return terms


# -- cards ---------------------------------------------------------------------------------------


def _day_time(ts: str) -> str:
    """``2026-10-15T09:00:03.120Z`` as ``2026-10-15 09:00``; anything else as it is, cut."""
    if len(ts) >= 16 and ts[10] in "Tt ":
        return f"{ts[:10]} {ts[11:16]}"
    return clip(ts, 32)


@dataclass(frozen=True, slots=True)
class Card:
    """A line about one turn (LOG-FORMAT.md, ADR 51): what results are grouped under."""

    turn: int
    """The turn's number."""
    first: int
    """Its first event's seq."""
    last: int
    """Its last event's seq so far."""
    start: str
    """Its first event's time, as the log holds it."""
    line: str
    """The first line of its first person.message, redacted and cut at 100 characters."""
    calls: int
    """How many tool calls its replies made (every agent's)."""
    events: int
    """How many events it holds."""
    compactions: tuple[int, ...] = ()
    """The seqs of the compaction notes it holds."""
    whole: bool = True
    """Whether a ``turn.end`` closed it."""

    def text(self) -> str:
        """``turn 3 · seq 41-87 · 2026-10-15 09:00 · "Why ...?" · 12 tool calls``."""
        parts = [f"turn {self.turn}"]
        parts.append(
            f"seq {self.first}" if self.first == self.last else f"seq {self.first}-{self.last}"
        )
        if self.start:
            parts.append(_day_time(self.start))
        parts.append(f'"{self.line}"' if self.line else "no message from the person")
        parts.append(plural(self.calls, "tool call"))
        if self.compactions:
            seqs = ", ".join(str(s) for s in self.compactions)
            parts.append(f"compacted at seq {seqs}")
        if not self.whole:
            parts.append("not finished")
        return " · ".join(parts)

    def to_obj(self) -> list[Any]:
        return [
            self.turn,
            self.first,
            self.last,
            self.start,
            self.line,
            self.calls,
            self.events,
            list(self.compactions),
        ]

    @classmethod
    def from_obj(cls, obj: object) -> Card:
        """What :meth:`to_obj` made; ValueError when it is not that."""
        if not isinstance(obj, list) or len(obj) != 8:
            raise ValueError("a card is a list of 8 fields")
        turn, first, last, start, line, calls, events, comp = obj
        ints = (turn, first, last, calls, events)
        if not all(type(v) is int and 0 <= v < 2**63 for v in ints):
            raise ValueError("a card's numbers are whole numbers")
        if not isinstance(start, str) or not isinstance(line, str) or not isinstance(comp, list):
            raise ValueError("a card's fields have the wrong types")
        if not all(type(s) is int and 0 <= s < 2**63 for s in comp):
            raise ValueError("a card's compactions are seqs")
        return cls(turn, first, last, start, line, calls, events, tuple(comp))


def _first_line(text: str) -> str:
    for line in split_lines(text):
        if line.strip():
            return clip(line.strip(), CARD_LINE_CHARS)
    return ""


@dataclass(slots=True)
class _Turn:
    first: int
    last: int
    start: str
    line: str | None = None
    calls: int = 0
    events: int = 0
    compactions: list[int] = field(default_factory=list)


class CardMaker:
    """Folds events, in log order, into one card per turn."""

    def __init__(self) -> None:
        self._turns: dict[int, _Turn] = {}
        self._closed: set[int] = set()

    def add(self, event: Mapping[str, Any]) -> None:
        turn = turn_of(event)
        if not turn:
            return
        seq = _seq_of(event)
        t = self._turns.get(turn)
        if t is None:
            t = self._turns[turn] = _Turn(seq, seq, _ts_of(event))
        t.last = max(t.last, seq)
        t.events += 1
        kind = kind_of(event)
        if kind == "person.message" and t.line is None:
            # Redacted before it is cut: a credential cut short is no longer its shape.
            t.line = _first_line(redact(_as_text(event.get("text"))).text)
        elif kind == "llm.resp":
            raw = event.get("calls")  # as many as _calls_of gives, without making them
            t.calls += len(raw) if isinstance(raw, list) else 0
        elif kind == "compaction":
            t.compactions.append(seq)
        elif kind == "turn.end":
            self._closed.add(turn)

    def cards(self) -> list[Card]:
        """Every turn's card, in turn order."""
        return [
            Card(
                turn=n,
                first=t.first,
                last=t.last,
                start=t.start,
                line=t.line or "",
                calls=t.calls,
                events=t.events,
                compactions=tuple(t.compactions),
                whole=n in self._closed,
            )
            for n, t in sorted(self._turns.items())
        ]


def seq_ranges(seqs: Iterable[int]) -> str:
    """``41-60, 62, 64-87``: seqs in order, runs of consecutive ones as ranges."""
    out: list[str] = []
    run: list[int] = []
    for s in sorted(set(seqs)):
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [s]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)
