"""nodwyn-retrieval mcp's first exchange, answered before the SDK's low-level server is imported:
the same lines as that server's own, its session the client's, and the client's end met in it
(docs/mcp.md, "How it starts")."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.mcp_early import SdkImport
from nodwyn_retrieval.mcp_server import EARLY_ENV

from tests.support import make_repo, mcp_process
from tests.test_mcp import env
from tests.test_mcp_start import _gone, engine_started

__all__ = ["env"]  # the fixture, shared with test_mcp

HELLO = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "claude-code", "version": "1"}}}  # fmt: skip

# Sent at once, before any answer: what a client's first exchange can hold, the good and the bad.
EXCHANGE: list[dict[str, Any]] = [
    HELLO,
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "index-search", "arguments": {"query": "marmot burrow", "scope": "repo"}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "index-search", "arguments": {"query": 5}}},
    {"jsonrpc": "2.0", "id": "five", "method": "tools/call", "params": {
        "name": "recall", "arguments": {"seq": 1}}},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "no-such-tool"}},
    {"jsonrpc": "2.0", "id": 7, "method": "resources/list"},
    {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "index-search", "arguments": {"query": "marmot", "scope": "repo", "limit": 1}}},
    {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "index-search", "arguments": {"query": "marmot", "scope": "repo"},
        "task": {"ttl": 60000}}},
]  # fmt: skip


def _exchange(root: Path, env: dict[str, str], lines: list[str]) -> tuple[dict[Any, Any], str]:
    """The server's answers to the lines, by id, and what it wrote on stderr."""
    with mcp_process(root, env) as p:
        assert p.stdin is not None
        assert p.stdout is not None
        assert p.stderr is not None
        try:
            p.stdin.write("".join(lines))
            p.stdin.flush()
            want = set()
            for x in lines:
                try:
                    message = json.loads(x)
                except ValueError:
                    continue
                if "id" in message:
                    want.add(message["id"])
            answers: dict[Any, Any] = {}
            while not want <= answers.keys():
                line = p.stdout.readline()
                assert line, answers
                message = json.loads(line)
                assert message.get("id") not in answers, message  # each answered once
                answers[message.get("id")] = message
            p.stdin.close()
            assert p.wait(timeout=60) == 0
            assert p.stdout.read() == ""
            return answers, p.stderr.read()
        finally:
            if p.poll() is None:
                p.kill()


def test_the_first_exchange_is_the_sdk_servers_own(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"den.py": "def marmot_burrow():\n    return 1\n"})
    lines = [json.dumps(m) + "\n" for m in EXCHANGE]
    sdk, sdk_err = _exchange(root, {**env, EARLY_ENV: "0"}, lines)
    early, early_err = _exchange(root, env, lines)
    assert early == sdk
    assert "den.py:" in sdk[3]["result"]["content"][0]["text"]
    assert sdk[4]["result"]["isError"] is True
    assert sdk[7]["error"]["code"] == -32601  # the SDK's own "method not found"
    for err in (sdk_err, early_err):
        assert "Traceback" not in err
        assert "differed" not in err  # the SDK's answer to the replayed initialize was the same


def test_an_unknown_version_and_a_bad_line_in_the_first_exchange(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = make_repo(tmp_path / "repo", {"den.py": "def marmot_burrow():\n    return 1\n"})
    hello = {**HELLO, "params": {**HELLO["params"], "protocolVersion": "1999-01-01"}}
    lines = [
        json.dumps(hello) + "\n",
        "\n",
        "{not json\n",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}) + "\n",
    ]
    sdk, _ = _exchange(root, {**env, EARLY_ENV: "0"}, lines)
    early, early_err = _exchange(root, env, lines)
    assert early == sdk
    assert sdk[0]["result"]["protocolVersion"] != "1999-01-01"
    assert [t["name"] for t in sdk[1]["result"]["tools"]] == [
        "index-search", "index-update", "recall",
    ]  # fmt: skip
    assert "differed" not in early_err


def test_a_first_line_other_than_initialize_is_the_sdk_servers(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = make_repo(tmp_path / "repo", {"den.py": "def marmot_burrow():\n    return 1\n"})
    lines = [json.dumps(m) + "\n" for m in (EXCHANGE[2], HELLO, EXCHANGE[1], EXCHANGE[8])]
    sdk, _ = _exchange(root, {**env, EARLY_ENV: "0"}, lines)
    early, _ = _exchange(root, env, lines)
    assert early == sdk
    assert "result" in sdk[0]


def test_the_client_gone_in_the_first_exchange(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"den.py": "def marmot_burrow():\n    return 1\n"})
    with mcp_process(root, env) as p:
        assert p.stdin is not None
        assert p.stdout is not None
        try:
            p.stdin.write(json.dumps(HELLO) + "\n")
            p.stdin.write(json.dumps(EXCHANGE[4]) + "\n")  # a search, and then the end
            p.stdin.flush()
            assert json.loads(p.stdout.readline())["id"] == 0
            engines = engine_started(p.pid)
            p.stdin.close()
            assert p.wait(timeout=60) == 0
        finally:
            if p.poll() is None:
                p.kill()
        assert p.stderr is not None
        assert "Traceback" not in p.stderr.read()
    assert engines
    assert all(_gone(e) for e in engines)


@pytest.mark.asyncio
async def test_the_sdks_import_begins_once_however_often_asked() -> None:
    ran: list[int] = []

    def work() -> str:
        ran.append(threading.get_ident())
        return "imported"

    sdk = SdkImport(work, after=30.0)
    sdk.begin_later()  # far off: the asks below begin it
    await asyncio.sleep(0.05)
    assert not ran  # nothing begun before it is asked for
    sdk.begin()
    sdk.begin()
    assert await sdk.done == "imported"
    sdk.begin()
    await asyncio.sleep(0.05)
    assert len(ran) == 1
    assert ran[0] != threading.get_ident()  # in a thread, not the loop's


@pytest.mark.asyncio
async def test_the_sdks_import_begins_by_itself_after_a_while() -> None:
    sdk = SdkImport(lambda: 7, after=0.05)
    sdk.begin_later()
    assert await asyncio.wait_for(sdk.done, 30) == 7


@pytest.mark.asyncio
async def test_a_failed_import_of_the_sdk_is_met_where_it_is_awaited() -> None:
    def work() -> None:
        raise ImportError("no module named mcp.server")

    sdk = SdkImport(work, after=30.0)
    sdk.begin()
    with pytest.raises(ImportError, match="no module named"):
        await sdk.done
