"""Codex CLI's rollouts, read as the events of docs/log-format.md.

A session is one JSON-lines file under ``sessions/`` of Codex's home (``$CODEX_HOME``, else
``~/.codex``), in folders by date (``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``). Each line
is ``{"timestamp", "type", "payload"}``: the first is ``session_meta`` (its ``payload.cwd`` is the
session's working directory), then ``response_item`` lines (the model's input and output items:
``message`` with ``role`` and ``content`` blocks ``input_text``/``output_text``, ``reasoning``,
``function_call`` ``{name, arguments, call_id}``, ``function_call_output`` ``{call_id, output}``,
``custom_tool_call`` and its output, ``local_shell_call``, ``web_search_call``), ``event_msg``
lines (what the interface showed, repeating the items), ``turn_context`` and ``compacted``. Older
rollouts hold the items themselves, one a line, without the envelope.

The mapping (docs/log-format.md, "Transcripts"):

- a ``user`` message is a ``person.message``, except the context Codex writes as one
  (``<environment_context>``, ``<user_instructions>``, AGENTS.md instructions): a ``note``;
  ``developer`` and ``system`` messages are ``note``;
- an ``assistant`` message is an ``llm.resp`` with its text; each call (``function_call``,
  ``custom_tool_call``, ``local_shell_call``, ``web_search_call``) is an ``llm.resp`` of its own,
  with that one call (its ``arguments`` parsed when they are JSON);
- a call's output is a ``tool.result``; a shell output's JSON (``{"output", "metadata":
  {"exit_code"}}``) gives the output and an error when the exit code is not 0;
- ``reasoning`` is ``thinking``; ``compacted`` is a ``compaction``; ``session_meta`` is a
  ``note``; ``event_msg``, ``turn_context`` and any other line are no event (skipped, counted).
"""

from __future__ import annotations

import json
from typing import Any

from nodwyn_retrieval.store.transcripts._base import (
    TranscriptReader,
    as_text,
    json_object,
    self_name,
)

__all__ = ["CODEX", "CodexReader", "line_cwd"]

_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTR")
"""How the messages Codex writes in the person's role begin."""
_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)


def _args(raw: object) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    return raw


def _output(raw: object) -> tuple[str, bool]:
    """A call's output as text, and whether it is an error."""
    if isinstance(raw, str):
        parsed = _args(raw)
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            meta = parsed.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return parsed["output"], isinstance(code, int) and code != 0
        return raw, False
    if isinstance(raw, dict):
        text = as_text(raw.get("content", raw.get("output")))
        return text, raw.get("success") is False
    return as_text(raw), False


class CodexReader(TranscriptReader):
    name = "codex"

    def map_line(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        kind = obj.get("type")
        ts = obj.get("timestamp")
        payload = obj.get("payload")
        if kind in _ITEMS and payload is None:  # an older rollout: the item itself
            payload, kind = obj, "response_item"
        if not isinstance(payload, dict):
            return None
        base: dict[str, Any] = {"ts": ts if isinstance(ts, str) else "", "agent": "main"}
        if kind == "session_meta":
            text = f"session {payload.get('id', '')} in {payload.get('cwd', '')}"
            return {"kind": "note", **base, "text": text}
        if kind == "compacted":
            return {"kind": "compaction", **base, "note": as_text(payload.get("message"))}
        if kind != "response_item":
            return None
        item = payload.get("type")
        if item == "message":
            role = payload.get("role")
            text = as_text(payload.get("content"))
            if role == "assistant":
                return {"kind": "llm.resp", **base, "text": text, "calls": []}
            if role == "user" and not text.lstrip().startswith(_CONTEXT):
                return {"kind": "person.message", **base, "text": text}
            return {"kind": "note", **base, "text": text}
        if item == "reasoning":
            summary = payload.get("summary")
            return {"kind": "thinking", **base, "text": as_text(summary)}
        call: dict[str, Any] | None = None
        if item == "function_call":
            call = {"name": payload.get("name"), "args": _args(payload.get("arguments"))}
        elif item == "custom_tool_call":
            call = {"name": payload.get("name"), "args": {"input": payload.get("input")}}
        elif item == "local_shell_call":
            call = {"name": "local_shell", "args": payload.get("action")}
        elif item == "web_search_call":
            call = {"name": "web_search", "args": payload.get("action")}
        if call is not None:
            cid = payload.get("call_id") or payload.get("id") or ""
            call = {"id": str(cid), "name": self_name(call["name"]), "args": call["args"]}
            return {"kind": "llm.resp", **base, "text": "", "calls": [call]}
        if item in ("function_call_output", "custom_tool_call_output"):
            output, error = _output(payload.get("output"))
            return {
                "kind": "tool.result", **base, "call_id": str(payload.get("call_id", "")),
                "name": "", "args": None, "output": output, "error": error,
            }  # fmt: skip
        return None


CODEX = CodexReader()


def line_cwd(line: bytes) -> str | None:
    """The working directory a rollout's ``session_meta`` (or ``turn_context``) line records."""
    obj = json_object(line)
    if obj is None:
        return None
    payload = obj.get("payload")
    if obj.get("type") in ("session_meta", "turn_context") and isinstance(payload, dict):
        cwd = payload.get("cwd")
        if isinstance(cwd, str) and cwd:
            return cwd
    return None
