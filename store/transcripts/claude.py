"""Claude Code's session transcripts, read as the events of docs/log-format.md.

A session is one JSON-lines file under ``projects/`` of Claude Code's configuration directory
(``$CLAUDE_CONFIG_DIR``, else ``~/.claude``), one directory per working directory. Each line has
a ``type``; ``user`` and ``assistant`` lines hold an API message (``message.role``,
``message.content``: a string, or content blocks ``text``, ``thinking``, ``tool_use``
``{id, name, input}`` and ``tool_result`` ``{tool_use_id, content, is_error}``), with
``timestamp``, ``sessionId``, ``cwd``, ``isSidechain`` and ``isMeta`` beside it. A reply's content
blocks may come one line each, and each tool result usually has a line of its own.

The mapping (docs/log-format.md, "Transcripts"):

- a ``user`` line of text is a ``person.message``; one Claude Code wrote itself (``isMeta``) is a
  ``note``; a compaction's summary (``isCompactSummary``) is a ``compaction``;
- a ``user`` line of ``tool_result`` blocks is a ``tool.result`` (several in one line: one event,
  their outputs one after another, under the first's id);
- an ``assistant`` line is an ``llm.resp`` with its text and its ``tool_use`` blocks as calls, or
  ``thinking`` when it holds nothing else;
- a helper's lines (``isSidechain``) have the agent ``sidechain``; ``summary`` and ``system``
  lines are ``note``; any other type is no event (skipped, counted).
"""

from __future__ import annotations

from typing import Any

from nodwyn_retrieval.store.transcripts._base import (
    TranscriptReader,
    as_text,
    json_object,
    self_name,
)

__all__ = ["CLAUDE", "ClaudeReader", "line_cwd"]


def _result_text(block: dict[str, Any]) -> str:
    return as_text(block.get("content"))


class ClaudeReader(TranscriptReader):
    name = "claude"

    def map_line(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        kind = obj.get("type")
        ts = obj.get("timestamp")
        base: dict[str, Any] = {
            "ts": ts if isinstance(ts, str) else "",
            "agent": "sidechain" if obj.get("isSidechain") is True else "main",
        }
        if kind in ("summary", "system"):
            text = obj.get("summary") if kind == "summary" else obj.get("content")
            return {"kind": "note", **base, "text": as_text(text)}
        if kind not in ("user", "assistant"):
            return None
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return None
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        blocks = [b for b in blocks if isinstance(b, dict)]
        if kind == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results:
                first = results[0]
                if len(results) == 1:
                    output = _result_text(first)
                else:
                    output = "\n".join(
                        f"[result of {b.get('tool_use_id')}]\n{_result_text(b)}" for b in results
                    )
                return {
                    "kind": "tool.result", **base, "call_id": str(first.get("tool_use_id", "")),
                    "name": "", "args": None, "output": output,
                    "error": any(b.get("is_error") is True for b in results),
                }  # fmt: skip
            text = as_text(blocks)
            if not text.strip():
                return None
            if obj.get("isCompactSummary") is True:
                return {"kind": "compaction", **base, "note": text}
            if obj.get("isMeta") is True:
                return {"kind": "note", **base, "text": text}
            if base["agent"] != "main":
                return {"kind": "nodwyn.message", **base, "text": text}
            return {"kind": "person.message", **base, "text": text}
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        for b in blocks:
            t = b.get("type")
            text = b.get("text")
            if t == "text" and isinstance(text, str):
                texts.append(text)
            elif t in ("thinking", "redacted_thinking"):
                th = b.get("thinking")
                thinking.append(th if isinstance(th, str) else "")
            elif t in ("tool_use", "server_tool_use"):
                calls.append(
                    {"id": str(b.get("id", "")), "name": self_name(b.get("name")),
                     "args": b.get("input")}
                )  # fmt: skip
        if not texts and not calls:
            if thinking:
                return {"kind": "thinking", **base, "text": "\n".join(thinking)}
            return None
        return {"kind": "llm.resp", **base, "text": "\n".join(texts), "calls": calls}


CLAUDE = ClaudeReader()


def line_cwd(line: bytes) -> str | None:
    """The working directory a line of a session records, if it does."""
    obj = json_object(line)
    if obj is not None:
        cwd = obj.get("cwd")
        if isinstance(cwd, str) and cwd:
            return cwd
    return None
