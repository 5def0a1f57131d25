"""Bad input at the tools' boundary: paths no file can have, argument names that are not names, and
a session log that is not a file. Each is one clear error that loses nothing: the engine answers
the next call as before. Through the library, the CLI's real process and the MCP SDK's client."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from nodwyn_retrieval import Engine
from nodwyn_retrieval.errors import BadInput

from tests.support import (
    Log,
    cli_env,
    mcp_process,
    mcp_session,
    one_line_error,
    raw_mcp_client,
    server_env,
    small_repo,
)

LONG_NAME = "n" * 300  # past NAME_MAX (255) on every Linux file system
BAD_PATHS = [
    ("a\x00b.py", "holds a NUL byte"),
    ("\ud800.py", "lone surrogate"),
    (LONG_NAME, "cannot be looked up"),
    (f"d/{LONG_NAME}/x.py", "cannot be looked up"),
    ("x" * 5000, "cannot be looked up"),
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return small_repo(tmp_path)


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", ["index-search", "index-update"])
async def test_a_path_no_file_can_have_is_one_clear_error(
    repo: Path, tmp_path: Path, tool: str
) -> None:
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        for path, said in BAD_PATHS:
            args: dict[str, Any] = {"path": path}
            if tool == "index-search":
                args |= {"query": "albatross", "scope": "repo"}
            out = await engine.call_tool(tool, args)
            assert out.is_error, (path, out.text)
            assert said in out.text, out.text
            one_line_error(out.text)
        # Nothing lost: the next call answers as before.
        out = await engine.call_tool("index-search", {"query": "albatross", "scope": "repo"})
        assert not out.is_error
        assert "a.py:1-2" in out.text


@pytest.mark.asyncio
async def test_a_name_that_is_not_utf8_is_still_a_path(repo: Path, tmp_path: Path) -> None:
    # Python gives an argv byte that is not UTF-8 as a lone surrogate of U+DC80..U+DCFF: such a
    # path names a real file and is looked up, not refused as a lone surrogate.
    os.mkdir(os.fsencode(repo) + b"/raw\x80")
    name = os.fsdecode(b"raw\x80")
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        out = await engine.call_tool(
            "index-search", {"query": "albatross", "scope": "repo", "path": name}
        )
        assert not out.is_error, out.text
        missing = await engine.call_tool(
            "index-search", {"query": "albatross", "scope": "repo", "path": name + "x"}
        )
        assert missing.is_error
        assert "does not exist" in missing.text


@pytest.mark.asyncio
async def test_a_huge_query_without_words_is_named_short_in_its_error(
    repo: Path, tmp_path: Path
) -> None:
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        huge = "+-*/ " * 400_000  # 2 MB of punctuation: no word in it
        out = await engine.call_tool("index-search", {"query": huge, "scope": "repo"})
        assert out.is_error
        one_line_error(out.text)
        assert "has no words to search for" in out.text
        assert f"({len(huge)} characters)" in out.text
        control = await engine.call_tool("index-search", {"query": "+-\x1b[\n", "scope": "repo"})
        one_line_error(control.text)  # shown escaped, on one line
        assert "\\x1b" in control.text
        assert (
            await engine.call_tool("index-search", {"query": "albatross", "scope": "repo"})
        ).is_error is False


@pytest.mark.asyncio
async def test_argument_names_that_are_not_strings_are_one_clear_error(
    repo: Path, tmp_path: Path
) -> None:
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        for tool in ("index-search", "index-update", "recall"):
            out = await engine.call_tool(tool, {1: "x", "query": "albatross"})  # type: ignore[dict-item]
            assert out.is_error
            assert out.text == "arguments' names must be strings"


@pytest.mark.asyncio
async def test_a_log_that_is_a_fifo_or_a_device_is_refused_at_open(
    repo: Path, tmp_path: Path
) -> None:
    # On a FIFO the first call's read of the log's tail blocked the event loop for ever; on a
    # device the engine made its records file beside it, in /dev.
    fifo = tmp_path / "task.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "link.jsonl"
    link.symlink_to(fifo)
    for log in (fifo, link, Path("/dev/null")):
        with pytest.raises(BadInput, match="is not a regular file"):
            await asyncio.wait_for(
                Engine.open(repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", log=log),
                60,
            )
    assert not Path("/dev/null.records.ndjson").exists()
    # A log that does not exist yet, and a real one, still open.
    for log in (tmp_path / "later.jsonl", tmp_path / "real.jsonl"):
        if log.name == "real.jsonl":
            Log(log).add("user.message", text="albatross")
        async with await Engine.open(
            repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", log=log
        ) as engine:
            out = await engine.call_tool(
                "index-search", {"query": "albatross", "scope": "conversation"}
            )
            assert not out.is_error, out.text


def test_the_cli_says_a_name_too_long_in_one_line_and_exits_2(repo: Path, tmp_path: Path) -> None:
    env = cli_env(tmp_path / "data", tmp_path / "cfg")
    for args in (["search", "albatross", "--path", LONG_NAME], ["update", LONG_NAME]):
        out = subprocess.run(
            [sys.executable, "-m", "nodwyn_retrieval", *args],
            cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert lines[0].startswith("nodwyn-retrieval: path nnnn")
        assert "cannot be looked up: File name too long" in lines[0]


@pytest.mark.asyncio
async def test_the_mcp_server_answers_a_bad_path_with_one_clear_error(
    repo: Path, tmp_path: Path
) -> None:
    async with mcp_session(repo, tmp_path) as s:
        for path, said in BAD_PATHS:
            if "\ud800" in path:
                continue  # the SDK's client cannot send it: the raw test below does
            r = await s.call_tool(
                "index-search", {"query": "albatross", "scope": "repo", "path": path}
            )
            (block,) = r.content
            assert isinstance(block, types.TextContent)
            assert r.is_error
            assert said in block.text, block.text
            assert not block.text.startswith("unexpected error")
            one_line_error(block.text)
        r = await s.call_tool("index-search", {"query": "albatross", "scope": "repo"})
        (block,) = r.content
        assert isinstance(block, types.TextContent)
        assert not r.is_error
        assert "a.py:1-2" in block.text
    assert "Traceback" not in (tmp_path / "err").read_text(encoding="utf-8")


def test_the_mcp_server_answers_a_lone_surrogate_sent_raw(repo: Path, tmp_path: Path) -> None:
    # JSON allows "\ud800" escaped; a client that sends it gets one clear error, not a
    # UnicodeEncodeError's "unexpected error" and a traceback in the server's log.
    env = server_env(tmp_path)
    with mcp_process(repo, env) as p:
        assert p.stdin is not None
        assert p.stdout is not None
        assert p.stderr is not None

        try:
            call = raw_mcp_client(p)
            for i, tool in enumerate(("index-search", "index-update"), 2):
                args: dict[str, Any] = {"path": "src/\ud800.py"}
                if tool == "index-search":
                    args |= {"query": "albatross", "scope": "repo"}
                reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": tool, "arguments": args}})  # fmt: skip
                assert reply is not None
                assert reply["result"]["isError"] is True
                text = reply["result"]["content"][0]["text"]
                assert "lone surrogate" in text, text
                one_line_error(text)
            p.terminate()
            assert p.wait(timeout=60) == 0
            err = p.stderr.read()
        finally:
            if p.poll() is None:
                p.kill()
    assert "Traceback" not in err
