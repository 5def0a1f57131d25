"""The agents' transcripts read as they are: Claude Code's sessions and Codex's rollouts mapped
into the log's events when a line is read (docs/log-format.md, "Transcripts")."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.mem import mem_path
from nodwyn_retrieval.store.transcripts import NODWYN, place, reader_for, sniff, unplace
from nodwyn_retrieval.store.transcripts.claude import CLAUDE
from nodwyn_retrieval.store.transcripts.codex import CODEX
from nodwyn_retrieval.store.transcripts.sessions import find_sessions, newest_session

from tests.support import make_repo


def _ts(n: int) -> str:
    return f"2026-10-15T09:{n // 60 % 60:02d}:{n % 60:02d}.000Z"


class ClaudeSession:
    """A Claude Code session transcript written as Claude Code writes one: a line per message
    or content block, under projects/<a directory>/<session id>.jsonl."""

    def __init__(self, home: Path, cwd: Path, folder: str | None = None) -> None:
        self.id = str(uuid.uuid4())
        self.cwd = str(cwd)
        d = home / "projects" / (folder or str(cwd).replace("/", "-"))
        d.mkdir(parents=True, exist_ok=True)
        self.path = d / f"{self.id}.jsonl"
        self.n = 0
        self.parent: str | None = None
        self.raw(json.dumps({"type": "summary", "summary": "an old title", "leafUuid": "x"}))

    def raw(self, text: str, newline: bool = True) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text + ("\n" if newline else ""))

    def _line(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.n += 1
        me = str(uuid.uuid4())
        line = {
            "parentUuid": self.parent, "isSidechain": False, "userType": "external",
            "cwd": self.cwd, "sessionId": self.id, "version": "2.1.12", "gitBranch": "main",
            "type": kind, "message": message, "uuid": me, "timestamp": _ts(self.n), **extra,
        }  # fmt: skip
        self.parent = me
        self.raw(json.dumps(line))

    def user(self, text: str) -> None:
        self._line("user", {"role": "user", "content": text})

    def assistant(self, text: str = "", calls: list[tuple[str, str, dict[str, Any]]] = ()) -> None:  # type: ignore[assignment]
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        if text:
            block = {"type": "text", "text": text}
            self._line("assistant", {"id": mid, "type": "message", "role": "assistant",
                                     "model": "claude-x", "content": [block],
                                     "stop_reason": None})  # fmt: skip
        for cid, name, args in calls:
            block = {"type": "tool_use", "id": cid, "name": name, "input": args}
            self._line("assistant", {"id": mid, "type": "message", "role": "assistant",
                                     "model": "claude-x", "content": [block],
                                     "stop_reason": "tool_use"})  # fmt: skip

    def result(self, cid: str, output: str, error: bool = False) -> None:
        block = {"tool_use_id": cid, "type": "tool_result", "content": output, "is_error": error}
        shown = {"stdout": output, "stderr": "", "interrupted": False}
        self._line("user", {"role": "user", "content": [block]}, toolUseResult=shown)


class CodexRollout:
    """A Codex CLI rollout written as Codex writes one: session_meta first, then response items
    and the interface's events, under sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.id = str(uuid.uuid4())
        d = home / "sessions" / "2026" / "10" / "15"
        d.mkdir(parents=True, exist_ok=True)
        self.path = d / f"rollout-2026-10-15T09-00-00-{self.id}.jsonl"
        self.n = 0
        self.line("session_meta", {"id": self.id, "timestamp": _ts(0), "cwd": str(cwd),
                                   "originator": "codex_cli_rs", "cli_version": "0.65.0",
                                   "instructions": None})  # fmt: skip
        self.item({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n"
                                           "</environment_context>"}]})  # fmt: skip

    def line(self, kind: str, payload: dict[str, Any]) -> None:
        self.n += 1
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"timestamp": _ts(self.n), "type": kind, "payload": payload}) + "\n")

    def item(self, payload: dict[str, Any]) -> None:
        self.line("response_item", payload)

    def torn(self, text: str) -> None:
        """A line cut before its end: a writer still writing it, or killed."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text)

    def user(self, text: str) -> None:
        self.line("turn_context", {"cwd": "/x", "approval_policy": "on-request", "model": "m"})
        self.item({"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": text}]})  # fmt: skip
        self.line("event_msg", {"type": "user_message", "message": text, "images": []})

    def assistant(self, text: str) -> None:
        self.item({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": text}]})  # fmt: skip
        self.line("event_msg", {"type": "agent_message", "message": text})

    def call(self, cid: str, name: str, args: dict[str, Any], output: str, code: int = 0) -> None:
        self.item({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "zz"})
        self.item({"type": "function_call", "name": name, "arguments": json.dumps(args),
                   "call_id": cid})  # fmt: skip
        out = json.dumps(
            {"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.1}}
        )
        self.item({"type": "function_call_output", "call_id": cid, "output": out})


@pytest.fixture
def homes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dirs: tuple[Path, Path]
) -> dict[str, Path]:
    """The agents' homes in the test's directory: never the real ~/.claude or ~/.codex."""
    h = {"home": tmp_path / "home", "claude": tmp_path / "claude", "codex": tmp_path / "codex"}
    for p in h.values():
        p.mkdir()
    monkeypatch.setenv("HOME", str(h["home"]))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(h["claude"]))
    monkeypatch.setenv("CODEX_HOME", str(h["codex"]))
    return h


def _claude_story(s: ClaudeSession) -> None:
    s.user("Why does the credential binding reject localhost?")
    s.assistant("Let me look.", [("toolu_1", "Read", {"file_path": "keychain/bind.go"})])
    s.result(
        "toolu_1", "package keychain\nfunc bindHost(h string) error { return refuseLoopback(h) }"
    )
    s.assistant("It refuses loopback hosts on purpose.")
    s.user("Then change the fixture port to 7443")
    s.assistant("", [("toolu_2", "Bash", {"command": "grep -rn 7443 ."})])
    s.result("toolu_2", "fixtures/port.txt:1:7443 quokka", error=False)


async def _open(
    root: Path, log: Path, dirs: tuple[Path, Path]
) -> tuple[Engine, list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    engine = await Engine.open(root, data_dir=dirs[0], config_dir=dirs[1], log=log,
                               record=records.append, workers=1)  # fmt: skip
    return engine, records


def _tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.mark.asyncio
async def test_claude_session_searched_and_recalled_from_its_own_lines(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    s = ClaudeSession(homes["claude"], root)
    _claude_story(s)
    before = _tree(homes["claude"])
    place(s.path, CLAUDE, dirs[0] / "mems")
    try:
        engine, _ = await _open(root, s.path, dirs)
        try:
            out = await engine.index_search("refuseLoopback", "conversation")
            assert out.hits, out.text
            hit = out.hits[0]
            assert "refuseLoopback" in out.text
            # recall reads the transcript's own line again
            r = await engine.recall(hit["seq"])
            assert not r.is_error
            assert "func bindHost" in r.text
            q = await engine.index_search("fixture port quokka", "conversation")
            assert "quokka" in q.text
        finally:
            await engine.close()
        # the .mem of the first, whole turn is in the data directory, none in the agent's
        assert _tree(homes["claude"]) == before
        m = mem_path(s.path)
        assert m.is_file()
        assert (dirs[0] / "mems") in m.parents
    finally:
        unplace(s.path)


@pytest.mark.asyncio
async def test_codex_rollout_searched_and_recalled(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    r = CodexRollout(homes["codex"], root)
    r.user("Where is the retry budget configured?")
    r.call(
        "call_1", "shell", {"command": ["rg", "retry_budget"]}, "conf/net.toml:3:retry_budget = 5"
    )
    r.assistant("In conf/net.toml, five retries.")
    r.user("Run the failing test")
    r.call("call_2", "shell", {"command": ["pytest", "-x"]}, "E   AssertionError: wombat", code=1)
    before = _tree(homes["codex"])
    # not placed: a rollout under $CODEX_HOME/sessions is known by where it lies
    assert reader_for(r.path).name == "codex"
    assert sniff(r.path) is CODEX
    engine, _ = await _open(root, r.path, dirs)
    try:
        out = await engine.index_search("retry budget", "conversation")
        kinds = [h["kind"] for h in out.hits]
        assert "tool.result" in kinds, out.text
        assert "person.message" in kinds, out.text
        res = next(h for h in out.hits if h["kind"] == "tool.result")
        rec = await engine.recall(res["seq"])
        assert "retry_budget = 5" in rec.text
        bad = await engine.index_search("wombat", "conversation")
        assert bad.hits
        assert bad.hits[0]["kind"] == "tool.result"
        # the environment context Codex writes as the person's is not a message of theirs
        env = await engine.index_search("environment_context", "conversation")
        assert not env.hits
    finally:
        await engine.close()
    assert _tree(homes["codex"]) == before


@pytest.mark.asyncio
async def test_torn_lines_unknown_types_and_huge_outputs(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    s = ClaudeSession(homes["claude"], root)
    s.raw(json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}))
    s.raw(json.dumps({"type": "a-type-from-the-future", "sessionId": s.id}))
    s.raw("not json at all")
    s.raw("[1, 2, 3]")
    s.user("Dump the whole log please")
    huge = "\n".join(f"line {i} of the dump" for i in range(200_000)) + "\nthe needle narwhal"
    s.assistant("", [("toolu_9", "Bash", {"command": "cat big.log"})])
    s.result("toolu_9", huge)
    s.user("thanks")
    s.raw(
        '{"parentUuid": null, "type": "user", "message": {"role": "user", "content": "torn',
        newline=False,
    )
    place(s.path, CLAUDE, dirs[0] / "mems")
    try:
        engine, _ = await _open(root, s.path, dirs)
        try:
            out = await engine.index_search("narwhal", "conversation")
            assert out.hits
            assert out.hits[0]["kind"] == "tool.result"
            seq = out.hits[0]["seq"]
            page = await engine.recall(seq, start=200_001, count=1)
            assert "narwhal" in page.text
            assert (
                "torn"
                not in (await engine.index_search("torn", "conversation")).text.split("\n", 1)[-1]
            )
            # the torn line completed: the next search reads it
            s.raw(' and mended"}, "sessionId": "x", "uuid": "y"}')
            mended = await engine.index_search("mended", "conversation")
            assert mended.hits
        finally:
            await engine.close()
    finally:
        unplace(s.path)


@pytest.mark.asyncio
async def test_numbers_do_not_depend_on_where_a_read_started(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    s = ClaudeSession(homes["claude"], root)
    _claude_story(s)
    place(s.path, CLAUDE, dirs[0] / "mems")
    try:
        engine, _ = await _open(root, s.path, dirs)
        try:
            await engine.index_search("binding", "conversation")  # writes the .mem of turn 1
            s.assistant("Changed.")
            s.user("Now the platypus test")
            s.assistant("", [("toolu_3", "Bash", {"command": "pytest -k platypus"})])
            s.result("toolu_3", "1 passed platypus")
            grown = await engine.index_search("platypus binding quokka", "conversation", limit=20)
            mem_path(s.path).unlink()
            fresh = await engine.index_search("platypus binding quokka", "conversation", limit=20)
        finally:
            await engine.close()
        key = [(h["seq"], h["turn"], h["kind"]) for h in grown.hits]
        assert key == [(h["seq"], h["turn"], h["kind"]) for h in fresh.hits]
        assert {h["turn"] for h in grown.hits} == {1, 2, 3}
    finally:
        unplace(s.path)


def test_sessions_found_by_the_cwd_they_record(tmp_path: Path, homes: dict[str, Path]) -> None:
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    # the folder's name says nothing: the lines' cwd does
    a = ClaudeSession(homes["claude"], root, folder="any-name-at-all")
    a.user("first")
    b = ClaudeSession(homes["claude"], root / "sub", folder="another")
    b.user("second")
    c = ClaudeSession(homes["claude"], other, folder="any-name-at-all")
    c.user("elsewhere")
    x = CodexRollout(homes["codex"], root)
    x.user("codex one")
    os.utime(a.path, (1, 1))
    found = find_sessions(root)
    assert {f.path for f in found} == {a.path, b.path, x.path}
    assert {f.agent for f in found} == {"claude", "codex"}
    newest = newest_session(root, ("claude",))
    assert newest is not None
    assert newest.path == b.path
    assert find_sessions(root, ("codex",))[0].id == x.path.stem


def test_a_log_of_ours_is_read_as_ours(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"seq":1,"ts":"2026-10-15T09:00:00Z","kind":"person.message","turn":1,'
                 '"agent":"main","text":"hi"}\n')  # fmt: skip
    assert sniff(p) is NODWYN
    assert reader_for(p) is NODWYN
    assert mem_path(p) == tmp_path / "t.mem"


@pytest.mark.asyncio
async def test_this_projects_own_calls_and_results_are_not_ranked(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    s = ClaudeSession(homes["claude"], root)
    for turn in ("first", "second"):  # the first turn is read from the .mem, the second is not
        s.user(f"find the tapir, {turn} time")
        search = {"query": "tapir", "scope": "repo"}
        s.assistant("", [(f"s-{turn}", "mcp__nodwyn-retrieval__index-search", search)])
        s.result(f"s-{turn}", "ranked 3 chunks in 1 file\ntapir.py:1-3\n  1: def tapir(): echo")
        s.assistant("", [(f"r-{turn}", "Read", {"file_path": "tapir.py"})])
        s.result(f"r-{turn}", "def tapir(): pass")
    place(s.path, CLAUDE, dirs[0] / "mems")
    try:
        engine, _ = await _open(root, s.path, dirs)
        try:
            out = await engine.index_search("tapir", "conversation", limit=20)
            echo = await engine.index_search("echo", "conversation", limit=20)
        finally:
            await engine.close()
        assert mem_path(s.path).is_file()
        kinds = sorted(h["kind"] for h in out.hits)
        # the replies' Read calls match too; the searches' calls and results do not; the two
        # turns' identical Read results are one result, naming the other's seq
        assert kinds == ["llm.resp"] * 2 + ["person.message"] * 2 + ["tool.result"]
        assert [len(h["also"]) for h in out.hits if h["kind"] == "tool.result"] == [1]
        assert "ranked 3 chunks" not in out.text
        # a result read again from where the .mem places it still names its call
        assert out.text.count('tool.result of Read {"file_path": "tapir.py"}') == 1
        assert not echo.hits
    finally:
        unplace(s.path)


@pytest.mark.asyncio
async def test_a_rollout_with_a_torn_line_unknown_items_and_a_huge_output(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    r = CodexRollout(homes["codex"], root)
    r.line("event_msg", {"type": "token_count", "info": None})
    r.line("a_line_from_a_later_version", {"whatever": 1})
    r.item({"type": "an_item_from_a_later_version", "call_id": "z"})
    r.user("Show me the build log")
    huge = "\n".join(f"step {i} ok" for i in range(300_000)) + "\nfailed at the capybara stage"
    r.call("call_9", "shell", {"command": ["cat", "build.log"]}, huge, code=2)
    r.torn('{"timestamp": "2026-10-15T10:00:00.000Z", "type": "response_item", "payload": {')
    engine, _ = await _open(root, r.path, dirs)
    try:
        out = await engine.index_search("capybara stage", "conversation")
        assert out.hits
        hit = out.hits[0]
        assert hit["kind"] == "tool.result"
        assert hit["call"]["name"] == "shell"
        page = await engine.recall(hit["seq"], start=300_001, count=1)
        assert "capybara" in page.text
        assert "(error)" in out.text
    finally:
        await engine.close()


@pytest.mark.asyncio
async def test_a_log_of_ours_under_another_name_keeps_its_mem_beside_it(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    p = tmp_path / "notes.log"
    events = [  # a .mem holds whole turns: the first is whole at its turn.end
        {"seq": 1, "kind": "person.message", "turn": 1, "text": "where is the wombat"},
        {"seq": 2, "kind": "turn.end", "turn": 1},
        {"seq": 3, "kind": "person.message", "turn": 2, "text": "and the quokka"},
    ]
    p.write_text(
        "".join(
            json.dumps({**e, "ts": f"2026-10-15T09:00:0{e['seq']}Z", "agent": "main"}) + "\n"
            for e in events
        )
    )
    assert reader_for(p) is NODWYN
    assert mem_path(p) == tmp_path / "notes.log.mem"
    engine, _ = await _open(root, p, dirs)
    try:
        out = await engine.index_search("wombat", "conversation")
    finally:
        await engine.close()
    assert [h["seq"] for h in out.hits] == [1]
    assert (tmp_path / "notes.log.mem").is_file()


@pytest.mark.asyncio
async def test_a_transcripts_mem_directory_is_made_with_its_parents(
    tmp_path: Path, homes: dict[str, Path], dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    s = ClaudeSession(homes["claude"], root)
    _claude_story(s)
    mems = dirs[0] / "not" / "yet" / "made"
    place(s.path, CLAUDE, mems)
    try:
        engine, _ = await _open(root, s.path, dirs)
        try:
            out = await engine.index_search("refuseLoopback", "conversation")
        finally:
            await engine.close()
        assert out.hits
        assert mem_path(s.path).parent == mems
        assert mem_path(s.path).is_file()
    finally:
        unplace(s.path)
