"""The agents' transcripts at their edges: every kind of line each adapter maps, a line of a type
it does not know skipped and counted, turns opened and closed by the person's messages, a result's
call found when it is read again alone, and the sessions found by where they ran
(docs/log-format.md, "Transcripts")."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.store.mem import LogView
from nodwyn_retrieval.store.transcripts import NODWYN, place, sniff, unplace
from nodwyn_retrieval.store.transcripts._base import CALL_LOOKBACK, as_text, self_name
from nodwyn_retrieval.store.transcripts.claude import CLAUDE
from nodwyn_retrieval.store.transcripts.claude import line_cwd as claude_cwd
from nodwyn_retrieval.store.transcripts.codex import CODEX
from nodwyn_retrieval.store.transcripts.codex import line_cwd as codex_cwd
from nodwyn_retrieval.store.transcripts.sessions import find_sessions, newest_session


def jl(*objs: Any) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def events_of(reader: Any, data: bytes) -> tuple[list[dict[str, Any]], int]:
    events, end, skipped = reader.parse(data, 0, 0, None)
    assert end == data.rfind(b"\n") + 1
    return [le.event for le in events], skipped


# -- Claude Code's lines ---------------------------------------------------------------------------


def cl(kind: str, content: Any, role: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "timestamp": "2026-10-01T10:00:00Z",
        "sessionId": "s",
        "message": {"role": role or kind, "content": content},
        **extra,
    }


def test_every_kind_of_claude_line_maps_to_its_event() -> None:
    data = jl(
        cl("user", "Why does Bind fail?"),
        cl(
            "assistant",
            [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a.go"}},
                {"type": "tool_use", "id": "t2", "name": "mcp__nodwyn__recall", "input": {}},
            ],
        ),
        cl("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "func Bind()"}]),
        cl(
            "user",
            [
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"text": "one"}]},
                {"type": "tool_result", "tool_use_id": "t3", "content": "two", "is_error": True},
            ],
        ),
        cl("assistant", [{"type": "thinking", "thinking": "only a thought"}]),
        cl("assistant", [{"type": "redacted_thinking", "data": "x"}]),
        cl("user", "a note Claude wrote", isMeta=True),
        cl("user", "the summary so far", isCompactSummary=True),
        cl("user", "a helper's prompt", isSidechain=True),
        {"type": "summary", "summary": "Fixing Bind"},
        {"type": "system", "content": "compacting", "timestamp": 5},
    )
    events, skipped = events_of(CLAUDE, data)
    assert skipped == 0
    kinds = [e["kind"] for e in events]
    assert kinds == [
        "person.message",
        "llm.resp",
        "tool.result",
        "tool.result",
        "thinking",
        "thinking",
        "note",
        "compaction",
        "nodwyn.message",
        "note",
        "note",
    ]
    reply = events[1]
    assert reply["text"] == "Let me look."
    assert reply["calls"] == [
        {"id": "t1", "name": "Read", "args": {"path": "a.go"}},
        {"id": "t2", "name": "recall", "args": {}},
    ]
    first = events[2]
    assert (first["call_id"], first["output"], first["error"]) == ("t1", "func Bind()", False)
    assert (first["name"], first["args"]) == ("Read", {"path": "a.go"})  # from the reply
    two = events[3]
    assert two["call_id"] == "t2"
    assert two["output"] == "[result of t2]\none\n[result of t3]\ntwo"
    assert two["error"] is True
    assert two["name"] == "recall"
    assert events[4]["text"] == "only a thought"
    assert events[5]["text"] == ""
    assert events[6]["text"] == "a note Claude wrote"
    assert events[7]["note"] == "the summary so far"
    assert events[8]["agent"] == "sidechain"
    assert all(e["agent"] == "main" for i, e in enumerate(events) if i != 8)
    assert events[9]["text"] == "Fixing Bind"
    assert events[10]["ts"] == ""  # not a string
    assert events[0]["ts"] == "2026-10-01T10:00:00Z"


@pytest.mark.parametrize(
    "line",
    [
        {"type": "progress", "sessionId": "s"},
        {"type": "user", "message": "not an object"},
        {"type": "user", "message": {"content": "   "}},
        {"type": "user", "message": {"content": [{"type": "text"}, 3]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": 3}]}},
        {"type": "assistant", "message": {"content": []}},
        ["a", "list"],
    ],
    ids=[
        "unknown type",
        "message not a map",
        "blank",
        "no text",
        "text not a string",
        "empty",
        "list",
    ],
)
def test_a_claude_line_that_holds_no_event_is_skipped_and_counted(line: Any) -> None:
    data = jl(cl("user", "before"), line, cl("user", "after")) + b'{"type": "user", "mess'
    events, skipped = events_of(CLAUDE, data)
    assert [e["text"] for e in events if e["kind"] == "person.message"] == ["before", "after"]
    assert skipped == 1


def test_a_claude_line_of_a_known_type_but_an_unknown_shape_is_skipped() -> None:
    # A block's id that is a list, a result's content that is a map: skipped, never a crash.
    data = jl(
        cl("user", "go"),
        cl("user", [{"type": "tool_result", "tool_use_id": "x", "content": {"a": 1}}]),
        cl("assistant", [{"type": "tool_use", "id": ["x"], "name": 3, "input": None}]),
    )
    events, skipped = events_of(CLAUDE, data)
    assert skipped == 0
    assert events[1]["output"] == '{"a": 1}'
    assert events[2]["calls"] == [{"id": "['x']", "name": "", "args": None}]


def test_claude_line_cwd() -> None:
    assert claude_cwd(b'{"cwd": "/w", "type": "user"}') == "/w"
    assert claude_cwd(b'{"cwd": "", "type": "user"}') is None
    assert claude_cwd(b'{"cwd": 3}') is None
    assert claude_cwd(b"not json") is None


# -- Codex's lines ---------------------------------------------------------------------------------


def cx(kind: str, payload: Any) -> dict[str, Any]:
    return {"timestamp": "2026-10-01T10:00:00Z", "type": kind, "payload": payload}


def item(**payload: Any) -> dict[str, Any]:
    return cx("response_item", payload)


def test_every_kind_of_codex_line_maps_to_its_event() -> None:
    data = jl(
        cx("session_meta", {"id": "r1", "cwd": "/w"}),
        item(type="message", role="user", content=[{"type": "input_text", "text": "Fix Bind"}]),
        item(type="message", role="user", content="<environment_context>cwd</environment_context>"),
        item(type="message", role="developer", content="rules"),
        item(type="reasoning", summary=[{"text": "think"}]),
        item(type="function_call", name="shell", arguments='{"cmd": ["ls"]}', call_id="c1"),
        item(
            type="function_call_output",
            call_id="c1",
            output='{"output": "a.go", "metadata": {"exit_code": 2}}',
        ),
        item(type="custom_tool_call", name="apply_patch", input="*** patch", call_id="c2"),
        item(
            type="custom_tool_call_output",
            call_id="c2",
            output={"content": "done", "success": False},
        ),
        item(type="local_shell_call", id="c3", action={"command": ["pwd"]}),
        item(type="function_call_output", call_id="c3", output="plain text"),
        item(type="web_search_call", action={"query": "q"}),
        item(type="function_call", name="nodwyn.index-search", arguments="not json", call_id="c4"),
        item(type="message", role="assistant", content=[{"type": "output_text", "text": "Done."}]),
        cx("compacted", {"message": "summary"}),
        cx("event_msg", {"type": "agent_message"}),
        cx("turn_context", {"cwd": "/w"}),
        item(type="something_new"),
        {"type": "message", "role": "user", "content": "an older rollout's item"},
        cx("response_item", "not a map"),
    )
    events, skipped = events_of(CODEX, data)
    assert skipped == 4
    kinds = [e["kind"] for e in events]
    assert kinds == [
        "note",
        "person.message",
        "note",
        "note",
        "thinking",
        "llm.resp",
        "tool.result",
        "llm.resp",
        "tool.result",
        "llm.resp",
        "tool.result",
        "llm.resp",
        "llm.resp",
        "llm.resp",
        "compaction",
        "turn.end",
        "person.message",
    ]
    assert events[0]["text"] == "session r1 in /w"
    assert events[4]["text"] == "think"
    assert events[5]["calls"] == [{"id": "c1", "name": "shell", "args": {"cmd": ["ls"]}}]
    out = events[6]
    assert (out["output"], out["error"], out["name"]) == ("a.go", True, "shell")
    assert events[7]["calls"][0]["args"] == {"input": "*** patch"}
    assert (events[8]["output"], events[8]["error"]) == ("done", True)
    assert events[9]["calls"] == [{"id": "c3", "name": "local_shell", "args": {"command": ["pwd"]}}]
    assert (events[10]["output"], events[10]["error"]) == ("plain text", False)
    assert events[11]["calls"][0]["name"] == "web_search"
    assert events[11]["calls"][0]["id"] == ""
    assert events[12]["calls"][0] == {"id": "c4", "name": "index-search", "args": "not json"}
    assert events[13]["text"] == "Done."
    assert events[14]["note"] == "summary"
    assert events[16]["text"] == "an older rollout's item"


@pytest.mark.parametrize(
    ("output", "text", "error"),
    [
        ('{"output": "ok", "metadata": {"exit_code": 0}}', "ok", False),
        ('{"output": "ok", "metadata": {"exit_code": 1}}', "ok", True),
        ('{"output": "ok", "metadata": {"exit_code": "1"}}', "ok", False),
        ('{"output": "ok"}', "ok", False),
        ('{"output": 3}', '{"output": 3}', False),
        ("[1, 2]", "[1, 2]", False),
        ({"output": "o"}, "o", False),
        ({"content": "c", "success": True}, "c", False),
        (["a", "b"], "a\nb", False),
        (None, "", False),
    ],
)
def test_a_codex_output_gives_its_text_and_whether_it_failed(
    output: Any, text: str, error: bool
) -> None:
    data = jl(item(type="function_call_output", call_id="c", output=output))
    events, _ = events_of(CODEX, data)
    assert (events[0]["output"], events[0]["error"]) == (text, error)


def test_a_codex_calls_arguments_given_as_an_object_or_a_list_are_kept() -> None:
    data = jl(
        item(type="function_call", name="shell", arguments={"cmd": ["ls"]}, call_id="c1"),
        item(type="function_call", name="shell", arguments=["pwd"], call_id="c2"),
        item(type="function_call", name="shell", call_id="c3"),
    )
    events, _ = events_of(CODEX, data)
    assert [e["calls"][0]["args"] for e in events] == [{"cmd": ["ls"]}, ["pwd"], None]


def test_codex_line_cwd() -> None:
    assert codex_cwd(json.dumps(cx("session_meta", {"cwd": "/w"})).encode()) == "/w"
    assert codex_cwd(json.dumps(cx("turn_context", {"cwd": "/t"})).encode()) == "/t"
    assert codex_cwd(json.dumps(cx("response_item", {"cwd": "/w"})).encode()) is None
    assert codex_cwd(json.dumps(cx("session_meta", {"cwd": ""})).encode()) is None
    assert codex_cwd(json.dumps(cx("session_meta", "x")).encode()) is None
    assert codex_cwd(b"[]") is None


# -- turns and numbering ---------------------------------------------------------------------------


def test_turns_open_at_the_persons_messages_and_close_with_a_turn_end_before_the_next() -> None:
    lines = [
        cl("assistant", "a reply before any question"),
        cl("user", "first question"),
        cl("user", "another question"),  # a message after a message of its turn: the next turn
        cl("assistant", "answer"),
        cl("user", "third question"),
        cl("assistant", "answer three"),
    ]
    data = jl(*lines)
    events, end, skipped = CLAUDE.parse(data, 100, 7, None)
    assert (end, skipped) == (100 + len(data), 0)
    got = [(le.event["seq"], le.event["turn"], le.event["kind"]) for le in events]
    assert got == [
        (8, 1, "llm.resp"),  # a turn opens at the first line, whatever it is
        (9, 1, "person.message"),  # and the first message joins it
        (10, 1, "turn.end"),
        (11, 2, "person.message"),
        (12, 2, "llm.resp"),
        (13, 2, "turn.end"),
        (14, 3, "person.message"),
        (15, 3, "llm.resp"),
    ]
    starts = [0]
    for line in data.splitlines(keepends=True)[:-1]:
        starts.append(starts[-1] + len(line))
    for closing, line in ((events[2], 2), (events[5], 4)):
        assert (closing.offset, closing.length) == (100 + starts[line] - 1, 0)  # the newline
        assert closing.event["ts"] == "2026-10-01T10:00:00Z"
        assert closing.event["agent"] == "main"
    assert [le.offset for le in events if le.length] == [100 + s for s in starts]


def test_a_codex_call_and_its_result_keep_their_turn_and_the_result_its_call() -> None:
    data = jl(
        item(type="message", role="user", content="q1"),
        item(type="function_call", name="shell", arguments="{}", call_id="c1"),
        item(type="function_call_output", call_id="c1", output="r1"),
        item(type="message", role="user", content="q2"),
        item(type="function_call_output", call_id="nope", output="r2"),
    )
    events, _ = events_of(CODEX, data)
    assert [(e["turn"], e["kind"]) for e in events] == [
        (1, "person.message"),
        (1, "llm.resp"),
        (1, "tool.result"),
        (1, "turn.end"),
        (2, "person.message"),
        (2, "tool.result"),
    ]
    assert (events[2]["name"], events[2]["args"]) == ("shell", {})
    assert (events[5]["name"], events[5]["args"]) == ("", None)  # its call is nowhere


# -- a placed transcript, read again from its .mem -------------------------------------------------


@pytest.fixture
def placed(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "claude" / "projects" / "w" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    place(path, CLAUDE, tmp_path / "mems")
    yield path
    unplace(path)


def test_a_result_read_again_alone_finds_its_call_in_its_turn(placed: Path) -> None:
    filler = [cl("assistant", f"step {i}") for i in range(5)]
    placed.write_bytes(
        jl(
            cl("user", "first"),
            cl("assistant", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}]),
            *filler,
            cl("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "out one"}]),
            cl("user", "second"),
            cl("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "out two"}]),
            cl("user", "third"),
        )
    )
    with LogView.open(placed) as view:
        mem = view.mem
        assert mem is not None
        assert str(view.reader.mem_file(os.fspath(placed))).startswith(str(placed.parents[3]))
        ev = mem.events()
        seqs = ev.seq.tolist()
        kinds = [mem.kinds[k] for k in ev.kind.tolist()]
        results = [i for i, k in enumerate(kinds) if k == "tool.result"]
        assert len(results) == 2
        one = view.read_event(int(ev.off[results[0]]), int(ev.length[results[0]]), seqs[results[0]])
        assert (one["output"], one["name"], one["args"]) == ("out one", "Read", {"p": 1})
        assert one["turn"] == int(ev.turn[results[0]])
        # In the next turn the call is not looked for: that turn never made it.
        two = view.read_event(int(ev.off[results[1]]), int(ev.length[results[1]]), seqs[results[1]])
        assert (two["output"], two["name"], two["args"]) == ("out two", "", None)
        ends = [i for i, k in enumerate(kinds) if k == "turn.end"]
        closing = view.read_event(int(ev.off[ends[0]]), int(ev.length[ends[0]]), seqs[ends[0]])
        assert (closing["kind"], closing["turn"], closing["seq"]) == ("turn.end", 1, seqs[ends[0]])


def test_a_transcript_read_in_two_passes_numbers_as_one(placed: Path) -> None:
    first = jl(cl("user", "q1"), cl("assistant", "a1"), cl("user", "q2"), cl("assistant", "a2"))
    second = jl(cl("user", "q3"), cl("assistant", "a3"), cl("user", "q4"))
    placed.write_bytes(first)
    with LogView.open(placed) as view:
        assert view.mem is not None
        part = (view.mem.last_seq, [le.event["seq"] for le in view.tail])
    with placed.open("ab") as f:
        f.write(second)
    with LogView.open(placed) as view:
        assert view.mem is not None
        grown = view.mem.events().seq.tolist() + [le.event["seq"] for le in view.tail]
        turns = view.mem.events().turn.tolist() + [le.event["turn"] for le in view.tail]
    whole, _ = events_of(CLAUDE, first + second)
    assert grown == [e["seq"] for e in whole]
    assert turns == [e["turn"] for e in whole]
    assert part[0] == 3  # q1, a1, the turn's end
    assert part[1] == [4, 5]


def test_the_lookback_for_a_call_is_bounded() -> None:
    assert CALL_LOOKBACK == 512


# -- small helpers a person sees the result of -----------------------------------------------------


def test_as_text_of_each_shape_of_content() -> None:
    assert as_text("plain") == "plain"
    assert as_text(["a", {"text": "b"}, {"type": "image"}, {"type": "input_image"}, 3]) == (
        "a\nb\n[image]\n[image]"
    )
    assert as_text([{"type": "text"}, {"type": 3}]) == ""
    assert as_text(None) == ""
    assert as_text({"k": "é"}) == '{"k": "é"}'
    assert as_text(7) == "7"


@pytest.mark.parametrize(
    ("name", "seen"),
    [
        ("mcp__nodwyn__index-search", "index-search"),
        ("nodwyn.recall", "recall"),
        ("srv/memory-read", "memory-read"),
        ("srv/index-update", "srv/index-update"),
        ("recall", "recall"),
        ("mcp__other__read", "mcp__other__read"),
        ("a.b", "a.b"),
        (3, ""),
        (None, ""),
    ],
)
def test_this_projects_own_tools_are_known_by_their_own_names(name: object, seen: str) -> None:
    assert self_name(name) == seen


def test_a_log_is_told_by_its_first_lines(tmp_path: Path) -> None:
    ours = tmp_path / "ours.jsonl"
    ours.write_bytes(b"not json\n" + jl({"seq": 1, "kind": "plan"}))
    assert sniff(ours) is NODWYN
    claude = tmp_path / "c.jsonl"
    claude.write_bytes(jl({"type": "x"}, cl("user", "hi")))
    assert sniff(claude) is CLAUDE
    codex = tmp_path / "x.jsonl"
    codex.write_bytes(jl(cx("session_meta", {"cwd": "/w"})))
    assert sniff(codex) is CODEX
    old = tmp_path / "old.jsonl"
    old.write_bytes(jl({"type": "message", "role": "user", "content": "hi"}))
    assert sniff(old) is CODEX
    other = tmp_path / "other.jsonl"
    other.write_bytes(jl({"type": "event_msg"}, {"type": "user"}) + b'{"type": "user", "uuid"')
    assert sniff(other) is NODWYN
    assert sniff(tmp_path / "missing.jsonl") is NODWYN


# -- sessions found by where they ran --------------------------------------------------------------


def test_sessions_below_a_root_are_found_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude_home, codex_home = tmp_path / "claude", tmp_path / "codex"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_home))
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "workshop").mkdir()

    def claude_session(name: str, cwd: Path, when: int) -> Path:
        p = claude_home / "projects" / "d" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(jl({"type": "summary"}, {"cwd": str(cwd), "type": "user"}))
        os.utime(p, ns=(when, when))
        return p

    a = claude_session("a.jsonl", root, 3_000)
    b = claude_session("b.jsonl", root / "sub", 2_000)
    claude_session("c.jsonl", tmp_path / "workshop", 9_000)  # a sibling whose name starts alike
    claude_session("agent-1.jsonl", root, 8_000)  # a helper's own transcript
    top = claude_home / "projects" / "top.jsonl"  # not in a working directory's folder
    top.write_bytes(jl({"cwd": str(root)}))
    rollout = codex_home / "sessions" / "2026" / "10" / "01" / "rollout-1.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_bytes(jl(cx("session_meta", {"cwd": str(root)})))
    os.utime(rollout, ns=(5_000, 5_000))
    older = codex_home / "sessions" / "rollout-0.jsonl"
    older.write_bytes(jl(cx("session_meta", {"cwd": str(root)})))
    os.utime(older, ns=(1_000, 1_000))
    deep = codex_home / "sessions" / "2026" / "10" / "01" / "x" / "rollout-2.jsonl"
    deep.parent.mkdir()
    deep.write_bytes(jl(cx("session_meta", {"cwd": str(root)})))

    found = find_sessions(root)
    assert [(s.agent, s.path) for s in found] == [
        ("codex", rollout),
        ("claude", a),
        ("claude", b),
        ("codex", older),
    ]
    assert found[0].id == "rollout-1"
    assert found[2].cwd == str(root / "sub")
    assert [s.path for s in find_sessions(root, ("claude",))] == [a, b]
    newest = newest_session(root)
    assert newest is not None
    assert newest.path == rollout
    assert newest_session(tmp_path / "nowhere") is None


def test_a_result_read_again_finds_a_call_made_by_the_transcripts_first_line(
    placed: Path,
) -> None:
    placed.write_bytes(
        jl(
            cl("assistant", [{"type": "tool_use", "id": "t0", "name": "Grep", "input": {"q": 1}}]),
            cl("user", [{"type": "tool_result", "tool_use_id": "t0", "content": "found"}]),
            cl("user", "next"),
            cl("user", "and the turn after"),  # closes the first turn: a .mem holds it
        )
    )
    with LogView.open(placed) as view:
        mem = view.mem
        assert mem is not None
        ev = mem.events()
        kinds = [mem.kinds[k] for k in ev.kind.tolist()]
        assert kinds[:2] == ["llm.resp", "tool.result"]
        got = view.read_event(int(ev.off[1]), int(ev.length[1]), int(ev.seq[1]))
        assert (got["output"], got["name"], got["args"]) == ("found", "Grep", {"q": 1})


def test_only_a_text_block_gives_a_replys_text() -> None:
    # A block of another type that carries a "text" field is not the reply's text.
    data = jl(
        cl("user", "go"),
        cl("assistant", [{"type": "thinking", "thinking": "t", "text": "not said"}]),
        cl("assistant", [{"type": "image", "text": "alt"}, {"type": "text", "text": "said"}]),
    )
    events, _ = events_of(CLAUDE, data)
    assert [(e["kind"], e["text"]) for e in events[1:]] == [("thinking", "t"), ("llm.resp", "said")]


def test_a_line_read_again_without_a_mem_is_its_event() -> None:
    # No .mem yet (a transcript not indexed): the line is read as itself, its call not looked for.
    line = json.dumps(item(type="function_call_output", call_id="c1", output="r1")).encode()
    reads: list[tuple[int, int]] = []

    def read(offset: int, length: int) -> bytes:
        reads.append((offset, length))
        return b""

    got = CODEX.line_event(line, 4, None, read)
    assert got is not None
    assert (got["seq"], got["turn"], got["kind"]) == (4, 0, "tool.result")
    assert (got["output"], got["name"], got["args"]) == ("r1", "", None)
    assert reads == []
    assert CODEX.line_event(b"", 5, None) == {
        "seq": 5, "ts": "", "kind": "turn.end", "turn": 0, "agent": "main"
    }  # fmt: skip


def read_alone(view: LogView, kind: str) -> list[dict[str, Any]]:
    mem = view.mem
    assert mem is not None
    ev = mem.events()
    kinds = [mem.kinds[k] for k in ev.kind.tolist()]
    return [
        view.read_event(int(ev.off[i]), int(ev.length[i]), int(ev.seq[i]))
        for i, k in enumerate(kinds)
        if k == kind
    ]


def test_a_result_read_again_takes_the_call_made_before_it_not_after(placed: Path) -> None:
    # An id used again later in the turn: the result's call is the one that came before it,
    # read in a pass or read again alone.
    data = jl(
        cl("user", "first"),
        cl("assistant", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}]),
        cl("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "out"}]),
        cl("assistant", [{"type": "tool_use", "id": "t1", "name": "Grep", "input": {"q": 2}}]),
        cl("user", "second"),
        cl("user", "third"),
    )
    placed.write_bytes(data)
    in_a_pass = [e for e in events_of(CLAUDE, data)[0] if e["kind"] == "tool.result"]
    assert [(e["name"], e["args"]) for e in in_a_pass] == [("Read", {"p": 1})]
    with LogView.open(placed) as view:
        alone = read_alone(view, "tool.result")
    assert [(e["output"], e["name"], e["args"]) for e in alone] == [("out", "Read", {"p": 1})]


def test_a_result_with_an_empty_call_id_names_no_call(placed: Path) -> None:
    # An empty id names nothing: not the call of a reply whose id is empty too, in a pass or
    # read again alone.
    data = jl(
        cl("user", "first"),
        cl("assistant", [{"type": "tool_use", "id": "", "name": "Read", "input": {"p": 1}}]),
        cl("user", [{"type": "tool_result", "tool_use_id": "", "content": "out"}]),
        cl("user", "second"),
        cl("user", "third"),
    )
    placed.write_bytes(data)
    in_a_pass = [e for e in events_of(CLAUDE, data)[0] if e["kind"] == "tool.result"]
    assert [(e["output"], e["name"], e["args"]) for e in in_a_pass] == [("out", "", None)]
    with LogView.open(placed) as view:
        alone = read_alone(view, "tool.result")
    assert [(e["output"], e["name"], e["args"]) for e in alone] == [("out", "", None)]


def test_a_session_too_new_to_say_where_it_ran_is_found_once_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    root = tmp_path / "work"
    root.mkdir()
    p = tmp_path / "claude" / "projects" / "d" / "s.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(jl({"type": "summary"}) + b'{"type": "user", "cwd"')  # its cwd not written yet
    assert find_sessions(root) == []
    with p.open("ab") as f:
        f.write(f': "{root}"}}\n'.encode())
    assert [s.path for s in find_sessions(root)] == [p]


def test_a_link_in_an_agents_folders_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    root = tmp_path / "work"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "s.jsonl").write_bytes(jl({"cwd": str(root), "type": "user"}))
    (elsewhere / "rollout-9.jsonl").write_bytes(jl(cx("session_meta", {"cwd": str(root)})))
    (tmp_path / "claude" / "projects").mkdir(parents=True)
    (tmp_path / "claude" / "projects" / "linked").symlink_to(elsewhere, target_is_directory=True)
    (tmp_path / "codex" / "sessions" / "2026").mkdir(parents=True)
    (tmp_path / "codex" / "sessions" / "2026" / "10").symlink_to(elsewhere)
    assert find_sessions(root) == []
    real = tmp_path / "claude" / "projects" / "d" / "s.jsonl"
    real.parent.mkdir()
    real.write_bytes((elsewhere / "s.jsonl").read_bytes())
    assert [s.path for s in find_sessions(root)] == [real]
