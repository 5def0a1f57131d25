"""An event holding a lone surrogate (a name's byte that is not UTF-8, which the log's writer keeps
as a JSON escape): what the model reads, the command line prints and the MCP server sends is text
UTF-8 can carry, the surrogate shown as its escape. Through the library, the command line's real
process and the MCP SDK's real client."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from mcp import types
from nodwyn_retrieval import Engine
from nodwyn_retrieval.store.log import LogWriter

from tests.support import mcp_session, run_cli, small_repo

UNDECODED = os.fsdecode(b"\xff")  # what Python makes of a byte that is not UTF-8: "\udcff"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return small_repo(tmp_path)


# -- an event holding a lone surrogate ---------------------------------------------------------


def _surrogate_log(path: Path) -> None:
    """A log written by the library's own writer, whose event holds a lone surrogate (it writes
    that line with ASCII escapes, docs/log-format.md)."""
    w = LogWriter(path)
    w.append("person.message", turn=1, text=f"albatross {UNDECODED} and \ud800 raw")
    w.append("tool.result", turn=1, call_id="c1", name="fs-read", args={"path": UNDECODED},
             output=f"albatross{UNDECODED}\nline two", error=False)  # fmt: skip
    w.close()


@pytest.mark.asyncio
async def test_an_event_holding_a_lone_surrogate_answers_text_utf8_can_carry(
    repo: Path, tmp_path: Path
) -> None:
    # The text is "exactly what the model reads": a model's API sends it as UTF-8, which has no
    # lone surrogate, and failed there. It is shown as its escape and loses nothing.
    log = tmp_path / "task.jsonl"
    _surrogate_log(log)
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", log=log
    ) as engine:
        texts = [
            (await engine.recall(1)).text,
            (await engine.recall(2, start=1, count=1)).text,
            (await engine.index_search("albatross", "conversation")).text,
            (await engine.call_tool("recall", {"seq": 2})).text,
        ]
        for text in texts:
            text.encode("utf-8")  # no lone surrogate left
        assert "albatross \\udcff and \\ud800 raw" in texts[0]
        assert "albatross\\udcff" in texts[1]
        assert "\\udcff" in texts[2]


def test_the_cli_prints_a_lone_surrogate_on_a_utf8_stdout(repo: Path, tmp_path: Path) -> None:
    # A UTF-8 locale's stdout is strict: the print raised UnicodeEncodeError past every handler
    # (a traceback, exit 1). JSON gets the escape, which reads back as the string it was.
    log = tmp_path / "task.jsonl"
    _surrogate_log(log)
    strict = {"PYTHONIOENCODING": "utf-8:strict"}
    for extra in ([], ["--json"]):
        out = run_cli(repo, tmp_path, "recall", "1", "--log", str(log), *extra, **strict)
        assert out.returncode == 0, out.stderr
        assert b"Traceback" not in out.stderr
        text = out.stdout.decode("utf-8")
        if extra:
            doc = json.loads(text)
            assert f"albatross {UNDECODED} and \ud800 raw" in doc["text"]
        else:
            assert "albatross \\udcff and \\ud800 raw" in text
    # A query's byte that is not UTF-8, given on the command line and echoed in the JSON.
    out = run_cli(repo, tmp_path, "search", b"albatross\xff", "--json", **strict)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.decode("utf-8"))["query"] == f"albatross{UNDECODED}"


@pytest.mark.asyncio
async def test_the_mcp_server_answers_an_event_holding_a_lone_surrogate(
    repo: Path, tmp_path: Path
) -> None:
    # The SDK serializes its answer as UTF-8: with a lone surrogate in it that failed inside the
    # server and the call was never answered, so the client waited for ever.
    log = tmp_path / "task.jsonl"
    _surrogate_log(log)
    async with mcp_session(repo, tmp_path, "--log", str(log)) as s:
        for name, args in (
            ("recall", {"seq": 1}),
            ("index-search", {"query": "albatross", "scope": "conversation"}),
        ):
            r = await asyncio.wait_for(s.call_tool(name, args), 60)
            (block,) = r.content
            assert isinstance(block, types.TextContent)
            assert not r.is_error, block.text
            assert "\\udcff" in block.text
        r = await asyncio.wait_for(
            s.call_tool("index-search", {"query": "albatross", "scope": "repo"}), 60
        )
        assert not r.is_error
    assert "Traceback" not in (tmp_path / "err").read_text(encoding="utf-8")
