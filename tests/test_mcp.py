"""nodwyn-retrieval mcp: the server started as a subprocess by the MCP SDK's own client over
stdio, with a Claude Code and a Codex transcript written by the tests (docs/mcp.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from nodwyn_retrieval.actors.earlier import DISABLED
from nodwyn_retrieval.mcp_server import mcp_tools

from tests.support import make_repo, mcp_process, raw_mcp_client, server_env
from tests.test_transcripts import ClaudeSession, CodexRollout, _claude_story


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The server's environment: every home in the test's directory."""
    return server_env(tmp_path)


@asynccontextmanager
async def server(
    cwd: Path, env: dict[str, str], errlog: Path, *args: str, client: str = "claude-code"
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "nodwyn_retrieval", "mcp", "--workers", "1", *args],
        env=env,
        cwd=str(cwd),
    )
    with open(errlog, "w", encoding="utf-8") as err:  # noqa: ASYNC230  the child writes it
        async with stdio_client(params, errlog=err) as (read, write):
            info = types.Implementation(name=client, version="1.0")
            async with ClientSession(read, write, client_info=info) as session:
                await session.initialize()
                yield session


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def call(s: ClientSession, name: str, **arguments: Any) -> tuple[str, bool]:
    r = await s.call_tool(name, arguments)
    return text_of(r), r.is_error


def first_seq(text: str, kind: str) -> int:
    """The seq of the first result of this kind a search's text shows (``  seq N kind ...``)."""
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "seq" and words[2] == kind:
            return int(words[1])
    raise AssertionError(f"no {kind} in {text!r}")


def tree(path: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in path.rglob("*") if p.is_file()}


def cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


@pytest.mark.asyncio
async def test_claude_code_session_through_the_server(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(
        tmp_path / "repo",
        {
            "keychain/bind.go": "package keychain\n\nfunc bindCredential(host string) error {\n"
            "\treturn refuseLoopback(host)\n}\n",
            "README.md": "a project\n",
        },
    )
    claude = Path(env["CLAUDE_CONFIG_DIR"])
    earlier = ClaudeSession(claude, root, folder="whatever-the-encoding")
    earlier.user("Teach the parser about the ocelot dialect")
    earlier.assistant("Done: the ocelot dialect is parsed in parse/ocelot.go.")
    old = CodexRollout(Path(env["CODEX_HOME"]), root)
    old.user("Why is the lynx cache cold?")
    old.assistant("The lynx cache is cleared at start.")
    os.utime(earlier.path, (1_000, 1_000))
    os.utime(old.path, (2_000, 2_000))
    current = ClaudeSession(claude, root)
    _claude_story(current)
    before = {**tree(claude), **tree(Path(env["CODEX_HOME"]))}
    errlog = tmp_path / "server.err"

    async with server(root, env, errlog) as s:
        listed = await s.list_tools()
        got = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
        assert [g["name"] for g in got] == ["index-search", "index-update", "recall"]
        for g, want in zip(got, mcp_tools(), strict=True):
            assert g["description"] == want["description"]
            assert g["inputSchema"] == want["inputSchema"]
        # the session's record log is made at the first call, not before
        assert not list(Path(env["NODWYN_RETRIEVAL_DATA_DIR"]).glob("projects/*/records/*"))

        text, err = await call(s, "index-update")
        assert not err, text
        assert text.startswith("index of the repository: 2 files")

        text, err = await call(s, "index-search", query="credential binding", scope="repo")
        assert not err, text
        assert "keychain/bind.go:" in text

        text, err = await call(s, "index-search", query="refuseLoopback", scope="conversation")
        assert not err, text
        assert "func bindHost" in text
        text, err = await call(s, "index-search", query="fixture port quokka", scope="conversation")
        assert "quokka" in text
        # recall reads the transcript's own line again
        seq = first_seq(text, "tool.result")
        text, err = await call(s, "recall", seq=seq)
        assert not err, text
        assert "fixtures/port.txt:1:7443 quokka" in text

        text, err = await call(s, "index-search", query="ocelot dialect", scope="earlier")
        assert err
        assert text == DISABLED
        text, err = await call(s, "recall", seq=2, task=earlier.id)
        assert err
        assert text == DISABLED

        on = cli(env, root, "earlier", "on")
        assert on.returncode == 0, on.stderr
        text, err = await call(s, "index-search", query="ocelot dialect", scope="earlier")
        assert not err, text
        assert "ocelot" in text
        assert earlier.id in text
        seq = first_seq(text, "person.message")
        text, err = await call(s, "index-search", query="lynx cache", scope="earlier")
        assert not err, text
        assert old.path.stem in text
        # the current session is not an earlier task
        text, err = await call(s, "index-search", query="refuseLoopback", scope="earlier")
        assert "no event matches" in text

        text, err = await call(s, "recall", seq=seq, task=earlier.id)
        assert not err, text
        assert "Teach the parser about the ocelot dialect" in text

        # bad arguments: a tool error of one line, and the server goes on
        for name, args in [
            ("index-search", {"query": "x", "scope": "repo", "colour": "red"}),
            ("index-search", {"query": "x", "scope": "everywhere"}),
            ("index-search", {"query": "binding", "scope": "repo", "limit": 0}),
            ("index-search", {"query": "   ", "scope": "repo"}),
            ("index-search", {"query": "x", "scope": "repo", "path": "../outside"}),
            ("recall", {"seq": 99_999}),
            ("recall", {"seq": "three"}),
            ("recall", {}),
            ("recall", {"seq": 1, "task": "../../etc/passwd"}),
            ("no-such-tool", {}),
        ]:
            r = await s.call_tool(name, args)
            line = text_of(r)
            assert r.is_error, (name, args, line)
            assert line.strip()
            assert "\n" not in line, line
        text, err = await call(s, "index-search", query="credential binding", scope="repo")
        assert not err
        assert "keychain/bind.go:" in text

    # a clean shutdown: no traceback, and the agents' directories as they were
    assert "Traceback" not in errlog.read_text(), errlog.read_text()
    assert {**tree(claude), **tree(Path(env["CODEX_HOME"]))} == before
    # the guard's records went to the project's own log for the session, which status names
    st = cli(env, root, "status", "--json")
    assert st.returncode == 0, st.stderr
    logs = json.loads(st.stdout)["server_logs"]
    assert len(logs) == 1
    events = [json.loads(x) for x in Path(logs[0]).read_text().splitlines()]
    assert "guard.decision" in [e["kind"] for e in events]
    # the Engine was closed when the client closed the connection
    assert events[-1]["kind"] == "note"
    assert events[-1]["text"] == "the server closed"
    assert "server session log" in cli(env, root, "status").stdout


@pytest.mark.asyncio
async def test_codex_rollout_through_the_server(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"net/retry.py": "RETRY_BUDGET = 5\n"})
    r = CodexRollout(Path(env["CODEX_HOME"]), root)
    r.user("Where is the retry budget configured?")
    r.call("call_1", "shell", {"command": ["rg", "-n", "RETRY"]}, "net/retry.py:1:RETRY_BUDGET = 5")
    r.assistant("In net/retry.py: five.")
    # a Claude Code session of the same root, newer: a Codex client's session is its rollout
    c = ClaudeSession(Path(env["CLAUDE_CONFIG_DIR"]), root)
    c.user("something else entirely: pangolin")
    async with server(root, env, tmp_path / "err", client="codex-mcp-client") as s:
        text, err = await call(s, "index-search", query="retry budget", scope="conversation")
        assert not err, text
        assert "RETRY_BUDGET = 5" in text
        assert "pangolin" not in text
        text, err = await call(s, "recall", seq=first_seq(text, "person.message"))
        assert not err, text
        assert "Where is the retry budget configured?" in text
        text, err = await call(s, "recall", seq=first_seq(
            (await call(s, "index-search", query="RETRY", scope="conversation"))[0], "tool.result"
        ))  # fmt: skip
        assert not err, text
        assert "net/retry.py:1:RETRY_BUDGET = 5" in text


@pytest.mark.asyncio
async def test_a_root_without_a_transcript(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def walrus():\n    pass\n"})
    async with server(root, env, tmp_path / "err", client="cursor") as s:
        text, err = await call(s, "index-search", query="walrus", scope="repo")
        assert not err, text
        assert "a.py:" in text
        text, err = await call(s, "index-search", query="walrus", scope="conversation")
        assert err
        assert "--log FILE" in text
        assert "\n" not in text


@pytest.mark.asyncio
async def test_log_given_by_hand(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    # a Claude Code transcript kept elsewhere, named with --log: told by its lines
    s = ClaudeSession(tmp_path / "elsewhere", root)
    s.user("What does the heron flag do?")
    s.assistant("It turns on the heron mode.")
    before = tree(tmp_path / "elsewhere")
    async with server(root, env, tmp_path / "err", "--log", str(s.path), client="cursor") as c:
        text, err = await call(c, "index-search", query="heron flag", scope="conversation")
        assert not err, text
        seq = first_seq(text, "person.message")
        text, err = await call(c, "recall", seq=seq)
        assert not err, text
        assert "What does the heron flag do?" in text
    assert tree(tmp_path / "elsewhere") == before
    bad = cli(env, root, "mcp", "--log", str(tmp_path / "missing.jsonl"))
    assert bad.returncode == 2
    assert bad.stderr.startswith("nodwyn-retrieval: no log at")


def test_sigterm_closes_the_server_cleanly(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def marmot():\n    pass\n"})
    with mcp_process(root, env) as p:
        assert p.stdin is not None
        assert p.stdout is not None
        assert p.stderr is not None

        try:
            call = raw_mcp_client(p)
            search = {"name": "index-search", "arguments": {"query": "marmot", "scope": "repo"}}
            reply = call({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search})
            assert reply is not None
            assert reply["result"]["isError"] is False
            assert "a.py:" in reply["result"]["content"][0]["text"]
            p.terminate()
            assert p.wait(timeout=60) == 0
            err = p.stderr.read()
        finally:
            if p.poll() is None:
                p.kill()
    assert "Traceback" not in err
    (log,) = Path(env["NODWYN_RETRIEVAL_DATA_DIR"]).glob("projects/*/records/mcp-*.jsonl")
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["text"] == "the server closed"
