"""An agent loop around nodwyn-retrieval, whole and offline: a scripted model stands in for the API.

    python examples/agent_loop.py [REPO] [--data-dir DIR]

It opens an Engine on a working tree (REPO, or a small repository made on the spot), offers the
model the engine's tools in the Anthropic format for the first turn and in the OpenAI format for
the second, runs every tool call the model makes, and writes the session log itself, one JSON
line per event, as docs/log-format.md describes. The engine only reads that log (it keeps its own
records beside it, in task.records.ndjson). Turn 1 finds code by what it does and reads it; turn 2
searches the conversation for what turn 1 read and recalls that event by its seq.

A real loop sends the same ``tools`` and messages to the API; only ScriptedModel is made up. By
default the index lives in a temporary directory; give --data-dir to keep it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodwyn_retrieval import Engine, ToolOutput

# A tool of the loop's own, beside the engine's: a ranged read of a file.
READ_FILE = {
    "name": "read-file",
    "description": "Read lines of a file of the repository.",
    "schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file, relative to the repository."},
            "start": {"type": "integer", "minimum": 1, "description": "The first line, from 1."},
            "count": {"type": "integer", "minimum": 1, "description": "How many lines."},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
}


class SessionLog:
    """The loop's own log writer: a plain append of one JSON line per event, numbered by us."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0
        self.turn = 0

    def add(self, kind: str, **fields: Any) -> int:
        self.seq += 1
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        event = {"seq": self.seq, "ts": now, "kind": kind, "turn": self.turn, "agent": "main"}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({**event, **fields}, ensure_ascii=False) + "\n")
        return self.seq


class ScriptedModel:
    """Answers as the model would, from a script: what a real model decides is made up here, the
    shapes of the requests and responses are the APIs' own."""

    def anthropic(
        self, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """A Messages API response (``content`` blocks, ``stop_reason``)."""
        names = {t["name"] for t in tools}
        _expect({"index-search", "read-file"} <= names and "index-search" in system, names)
        results = [b for m in messages if m["role"] == "user" and isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]  # fmt: skip
        if not results:
            call = {"query": "credential sent to which host, localhost refused", "scope": "repo"}
            return _anthropic_call("index-search", call)
        if len(results) == 1:
            top = _found(r"^(\S+):(\d+)-(\d+): ", results[0]["content"])
            path, a, b = top.group(1), int(top.group(2)), int(top.group(3))
            return _anthropic_call("read-file", {"path": path, "start": a, "count": b - a + 1})
        text = "check_binding refuses localhost."
        return {"role": "assistant", "stop_reason": "end_turn",
                "content": [{"type": "text", "text": text}]}  # fmt: skip

    def openai(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """A Chat Completions response (``choices[0].message.tool_calls``)."""
        names = {t["function"]["name"] for t in tools if t["type"] == "function"}
        _expect({"index-search", "recall"} <= names, names)
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return _openai_call("index-search", {"query": "binding localhost", "scope":
                                                 "conversation"})  # fmt: skip
        if len(results) == 1:
            # The search names each event by its seq: recall the file read of turn 1.
            seq = _found(r"^  seq (\d+) tool\.result of read-file", results[0]["content"])
            return _openai_call("recall", {"seq": int(seq.group(1))})
        text = "Turn 1 read check_binding: it returns False for localhost."
        return {"choices": [{"finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}]}  # fmt: skip


def _expect(ok: bool, what: object) -> None:
    if not ok:
        raise RuntimeError(f"the script did not go as planned: {what}")


def _found(pattern: str, text: str) -> re.Match[str]:
    m = re.search(pattern, text, re.MULTILINE)
    if m is None:
        raise RuntimeError(f"the script did not go as planned: {text}")
    return m


def _anthropic_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "text", "text": f"Calling {name}."},
        {"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": args},
    ]}  # fmt: skip


def _openai_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {"id": f"call_{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
    return {"choices": [{"finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


class Loop:
    def __init__(self, engine: Engine, log: SessionLog, root: Path) -> None:
        self.engine = engine
        self.log = log
        self.root = root
        self.model = ScriptedModel()

    async def run_tool(self, call_id: str, name: str, args: dict[str, Any]) -> ToolOutput:
        if name == "read-file":
            lines = (self.root / args["path"]).read_text(encoding="utf-8").splitlines()
            start = args.get("start", 1)
            part = lines[start - 1 : start - 1 + args.get("count", len(lines))]
            out = ToolOutput("\n".join(f"{start + i}: {t}" for i, t in enumerate(part)))
        else:
            out = await self.engine.call_tool(name, args)
        self.log.add("tool.result", call_id=call_id, name=name, args=args, output=out.text,
                     error=out.is_error)  # fmt: skip
        return out

    async def anthropic_turn(self, question: str) -> str:
        """One turn with the Anthropic Messages API's shapes."""
        self.log.turn += 1
        self.log.add("person.message", text=question)
        tools = [*self.engine.tools("anthropic"), {"name": READ_FILE["name"],
                 "description": READ_FILE["description"], "input_schema": READ_FILE["schema"]}]
        system = self.engine.working_rule()  # the working rule goes in the system prompt
        messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        while True:
            resp = self.model.anthropic(system, messages, tools)
            text = "".join(b["text"] for b in resp["content"] if b["type"] == "text")
            uses = [b for b in resp["content"] if b["type"] == "tool_use"]
            self.log.add("llm.resp", text=text, calls=[
                {"id": u["id"], "name": u["name"], "args": u["input"]} for u in uses])
            messages.append({"role": "assistant", "content": resp["content"]})
            if resp["stop_reason"] != "tool_use":
                self.log.add("turn.end")
                return text
            blocks = []
            for u in uses:
                out = await self.run_tool(u["id"], u["name"], u["input"])
                print(f"  [{u['name']}] {out.text.splitlines()[0] if out.text else ''}")
                blocks.append({"type": "tool_result", "tool_use_id": u["id"],
                               "content": out.text, "is_error": out.is_error})  # fmt: skip
            messages.append({"role": "user", "content": blocks})

    async def openai_turn(self, question: str) -> str:
        """One turn with the OpenAI Chat Completions API's shapes."""
        self.log.turn += 1
        self.log.add("person.message", text=question)
        tools = [*self.engine.tools("openai"), {"type": "function", "function": {
            "name": READ_FILE["name"], "description": READ_FILE["description"],
            "parameters": READ_FILE["schema"]}}]  # fmt: skip
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.engine.working_rule()},
            {"role": "user", "content": question},
        ]
        while True:
            msg = self.model.openai(messages, tools)["choices"][0]["message"]
            calls = msg.get("tool_calls") or []
            self.log.add("llm.resp", text=msg.get("content") or "", calls=[
                {"id": c["id"], "name": c["function"]["name"],
                 "args": json.loads(c["function"]["arguments"])} for c in calls])  # fmt: skip
            messages.append(msg)
            if not calls:
                self.log.add("turn.end")
                return str(msg["content"])
            for c in calls:
                args = json.loads(c["function"]["arguments"])
                out = await self.run_tool(c["id"], c["function"]["name"], args)
                first = out.text.splitlines()[0] if out.text else ""
                print(f"  [{c['function']['name']}] {first}")
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": out.text})


def make_repo(path: Path) -> Path:
    """A small git repository to search."""
    (path / "keychain").mkdir(parents=True)
    (path / "docs").mkdir()
    (path / "keychain" / "bind.py").write_text(
        '"""Credential bindings: which host a key may be sent to."""\n\n\n'
        "def check_binding(bound_host: str, host: str) -> bool:\n"
        '    """A credential is sent only to the host it is bound to; localhost is refused."""\n'
        '    if host in ("localhost", "127.0.0.1"):\n'
        "        return False\n"
        "    return bound_host == host\n"
    )
    (path / "docs" / "manual.md").write_text("# Manual\n\nA key is bound to a host.\n")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


async def session(root: Path, data: Path, work: Path) -> tuple[SessionLog, Path | None]:
    log = SessionLog(work / "task.jsonl")
    # log=: the engine reads the loop's log and never writes it (docs/log-format.md).
    async with await Engine.open(root, data_dir=data, config_dir=work / "config",
                                 log=log.path) as engine:  # fmt: skip
        loop = Loop(engine, log, root)
        print("turn 1 (Anthropic tools): where is the credential binding checked?")
        print("  answer:", await loop.anthropic_turn("Where do we refuse to send a key?"))
        print("turn 2 (OpenAI tools): what did turn 1 find?")
        print("  answer:", await loop.openai_turn("What did the binding check do again?"))
        return log, engine.records_path


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("repo", nargs="?", help="a working tree (default: a small one made here)")
    ap.add_argument("--data-dir", help="where the index lives (default: a temporary directory)")
    ns = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = Path(ns.repo) if ns.repo else make_repo(work / "repo")
        data = Path(ns.data_dir) if ns.data_dir else work / "data"
        log, records = asyncio.run(session(root, data, work))
        kept = records.read_text(encoding="utf-8").count("\n") if records else 0
        print(f"the loop wrote {log.seq} events to its log; the engine kept {kept} records")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
