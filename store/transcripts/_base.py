"""What every agent's transcript adapter shares: numbering, turns, and a call's result.

A transcript has no seq and no turn. As a reader reads its lines in order, each line an adapter
maps to an event gets the next seq (1, 2, 3, ...), and a turn is counted from the person's
messages: a person's message after one of the same turn opens the next turn, and the turn it
closes gets a ``turn.end`` of its own, numbered before it and placed just before the message's
line (offset of the newline before it, length 0), so a ``.mem`` covers whole turns and the next
read starts at the line of the message that opened the turn after them. Reading again from a
``.mem``'s end goes on from its last seq and turn, so the numbers never depend on where a read
started.

A transcript names a tool result's call only by its id: the call's name and arguments are taken
from the reply that made it, read in the same pass (a pass starts at a turn, and a turn holds its
calls and their results, so a ranked result always has them); a result read again alone from
where the ``.mem`` places it (recall, a result's line) finds the reply among the turn's events
before it (at most :data:`CALL_LOOKBACK`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nodwyn_retrieval.retrieval.events import SELF_TOOLS
from nodwyn_retrieval.store.mem_log import LoggedEvent

if TYPE_CHECKING:
    from nodwyn_retrieval.store.mem_format import MemIndex

__all__ = ["CALL_LOOKBACK", "TranscriptReader", "as_text", "json_object", "self_name"]

CALL_LOOKBACK = 512
"""How many events before a result read again alone are looked through for the reply that made
its call (they are in its turn, most often just before it)."""


def json_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object a transcript's line holds, or None for a line that holds none (torn, not
    JSON, nested past the parser's depth, or another JSON value)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def as_text(value: object) -> str:
    """A transcript's content as text: a string, or the text of a list of content blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[str] = []
        for b in value:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict):
                t = b.get("text")
                if isinstance(t, str):
                    parts.append(t)
                elif isinstance(b.get("type"), str) and "image" in b["type"]:
                    parts.append("[image]")
        return "\n".join(parts)
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def self_name(name: object) -> str:
    """A call's name, with this project's own tools named as they are here: an agent names an
    MCP server's tool with its server (``mcp__nodwyn__index-search``, ``nodwyn.recall``), and
    the conversation must still know a search's own calls and results (they are never ranked)."""
    if not isinstance(name, str):
        return ""
    for sep in ("__", ".", "/"):
        last = name.rsplit(sep, 1)[-1]
        if last != name and last in SELF_TOOLS:
            return last
    return name


class TranscriptReader:
    """An agent's transcript read into events; subclasses map one line (:meth:`map_line`)."""

    name = "transcript"

    def map_line(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The event one line's object holds (``kind``, ``ts``, ``agent`` and the kind's fields,
        no seq nor turn), or None for a line that holds none."""
        raise NotImplementedError

    def _event(self, line: bytes) -> dict[str, Any] | None:
        obj = json_object(line)
        if obj is None:
            return None
        try:
            return self.map_line(obj)
        except (TypeError, ValueError, AttributeError, KeyError):
            return None  # a line of a shape this adapter does not know: skipped, counted

    def parse(
        self, data: bytes, base: int, after_seq: int, mem: MemIndex | None
    ) -> tuple[list[LoggedEvent], int, int]:
        turn = 0
        if mem is not None and mem.n_events:
            turn = int(mem.events().turn[-1])
        closed = True  # the start of a transcript, or the end of a .mem: a turn.end
        prompted = False
        seq = after_seq
        calls: dict[str, tuple[str, Any]] = {}
        events: list[LoggedEvent] = []
        skipped = 0
        pos = 0
        end = data.rfind(b"\n") + 1
        find = data.find
        while pos < end:
            nl = find(b"\n", pos)
            event = self._event(data[pos:nl])
            if event is None:
                skipped += 1
                pos = nl + 1
                continue
            if event["kind"] == "person.message":
                if not closed and prompted:
                    seq += 1
                    closing = {"seq": seq, "ts": event.get("ts", ""), "kind": "turn.end",
                               "turn": turn, "agent": "main"}  # fmt: skip
                    events.append(LoggedEvent(closing, base + pos - 1, 0))
                    closed = True
                if closed:
                    turn += 1
                    closed = False
                prompted = True
            elif closed:
                turn += 1
                closed = False
                prompted = False
            seq += 1
            event = {"seq": seq, "turn": turn, **event}
            if event["kind"] == "llm.resp":
                for c in event.get("calls", ()):
                    if c["id"]:  # an empty id names no call, as when a result is read alone
                        calls[c["id"]] = (c["name"], c["args"])
            elif event["kind"] == "tool.result" and event.get("call_id") in calls:
                event["name"], event["args"] = calls[event["call_id"]]
            events.append(LoggedEvent(event, base + pos, nl - pos))
            pos = nl + 1
        return events, base + end, skipped

    def line_event(
        self,
        line: bytes,
        seq: int,
        mem: MemIndex | None,
        read: Callable[[int, int], bytes] | None = None,
    ) -> dict[str, Any] | None:
        turn = 0
        i: int | None = None
        if mem is not None and mem.n_events:
            ev = mem.events()
            i = ev.find(seq)
            if i is None:
                return None
            turn = int(ev.turn[i])
        if not line:
            return {"seq": seq, "ts": "", "kind": "turn.end", "turn": turn, "agent": "main"}
        event = self._event(line)
        if event is None:
            return None
        event = {"seq": seq, "turn": turn, **event}
        if event["kind"] == "tool.result" and read is not None and mem is not None and i:
            self._find_call(event, i, mem, read)
        return event

    def _find_call(
        self, event: dict[str, Any], i: int, mem: MemIndex, read: Callable[[int, int], bytes]
    ) -> None:
        """Fill a result's call in from the reply before it in its turn that made it."""
        cid = event.get("call_id")
        if not isinstance(cid, str) or not cid:
            return
        key = json.dumps(cid).encode("utf-8")
        ev = mem.events()
        kinds = mem.kinds
        turn = int(ev.turn[i])
        for j in range(i - 1, max(i - CALL_LOOKBACK, 0) - 1, -1):
            if int(ev.turn[j]) != turn:
                return
            if kinds[int(ev.kind[j])] != "llm.resp":
                continue
            raw = read(int(ev.off[j]), int(ev.length[j]))
            if key not in raw:
                continue
            reply = self._event(raw)
            for c in (reply or {}).get("calls", ()):
                if c.get("id") == cid:
                    event["name"], event["args"] = c["name"], c["args"]
                    return

    def mem_file(self, log_path: str) -> str:
        raise NotImplementedError("a transcript's .mem is placed (store.transcripts.place)")
