"""Bad input at the tools' boundary, beyond paths (test_boundary_paths): the person's recall, a
query of over-long words, Engine.open's own arguments and the command line's empty options. Each is
one clear error that loses nothing, never a raw Python exception. Through the library and the
command line's real process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval import Engine
from nodwyn_retrieval.errors import BadInput

from tests.support import Log, one_line_error, run_cli, small_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return small_repo(tmp_path)


# -- the person's recall -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_persons_recall_checks_its_numbers_as_recall_does(
    repo: Path, tmp_path: Path
) -> None:
    # memory_recall took any seq, start and count: a string or None was a TypeError from deep
    # in the reader, True read seq 1, and 0 or 1.5 was "no event with seq 0".
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        engine.dirs.tasks.mkdir(parents=True, exist_ok=True)
        Log(engine.dirs.tasks / "old-1.jsonl").add("person.message", text="albatross\nsecond")
        bad: list[tuple[dict[str, Any], str]] = [
            ({"seq": "1"}, "seq must be a whole number of at least 1, got '1'"),
            ({"seq": None}, "seq must be a whole number of at least 1, got None"),
            ({"seq": True}, "seq must be a whole number of at least 1, got True"),
            ({"seq": 0}, "seq must be a whole number of at least 1, got 0"),
            ({"seq": 1.5}, "seq must be a whole number of at least 1, got 1.5"),
            ({"seq": 1, "start": "1"}, "start must be a whole number of at least 1, got '1'"),
            ({"seq": 1, "count": 1.5}, "count must be a whole number of at least 1, got 1.5"),
        ]
        for args, said in bad:
            with pytest.raises(BadInput) as got:
                await engine.memory_recall("old-1", **args)
            assert str(got.value) == said
            assert type(got.value) is BadInput
        out = await engine.memory_recall("old-1", 1, 2, 1)
        assert out.text.endswith("second")


# -- a query of words too long to be indexed -----------------------------------------------------


@pytest.mark.asyncio
async def test_a_query_of_only_over_long_words_says_why_it_has_none(
    repo: Path, tmp_path: Path
) -> None:
    # "has no words to search for" of a query holding a word (a hash, a long name) read as
    # though it were only punctuation: it is a word no index keeps, over 64 bytes.
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        for query in ("x" * 65, "é" * 33, f"{'a1' * 40} -- {'b' * 70}"):
            out = await engine.call_tool("index-search", {"query": query, "scope": "repo"})
            assert out.is_error
            one_line_error(out.text)
            assert "a word over 64 bytes (a hash, a minified line) is never indexed" in out.text
        # A word of 64 bytes is a word; punctuation alone keeps the plain message.
        out = await engine.call_tool("index-search", {"query": "x" * 64, "scope": "repo"})
        assert not out.is_error, out.text
        out = await engine.call_tool("index-search", {"query": "?!.,;", "scope": "repo"})
        assert out.text == "query '?!.,;' has no words to search for: give words or names"


# -- Engine.open's own arguments ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_engine_open_refuses_arguments_of_the_wrong_kind_as_bad_input(
    repo: Path, tmp_path: Path
) -> None:
    # A string of workers was a TypeError from the pool, True and 1.5 were taken, 0 was said as
    # "max_workers"; a root, data_dir or log that is not a path was a TypeError, and a root ""
    # opened the current directory.
    data = tmp_path / "data"
    bad: list[tuple[dict[str, Any], str]] = [
        ({"workers": "2"}, "workers must be a whole number of at least 1, got '2'"),
        ({"workers": True}, "workers must be a whole number of at least 1, got True"),
        ({"workers": 1.5}, "workers must be a whole number of at least 1, got 1.5"),
        ({"workers": 0}, "workers must be a whole number of at least 1, got 0"),
        ({"data_dir": 5}, "data_dir must be a non-empty path, got 5"),
        ({"config_dir": b"cfg"}, "config_dir must be a non-empty path, got b'cfg'"),
        ({"log": 5}, "log must be a non-empty path, got 5"),
        ({"log": ""}, "log must be a non-empty path, got ''"),
        ({"root": ""}, "root must be a non-empty path, got ''"),
        ({"root": 5}, "root must be a non-empty path, got 5"),
        ({"limits": "big"}, "limits must be a Limits, got str"),
    ]
    for args, said in bad:
        kwargs: dict[str, Any] = {"data_dir": data, "config_dir": tmp_path / "cfg", **args}
        root = kwargs.pop("root", repo)
        with pytest.raises(BadInput) as got:
            await asyncio.wait_for(Engine.open(root, **kwargs), 60)
        assert str(got.value) == said
    assert not data.exists()  # nothing was made
    async with await Engine.open(repo, data_dir=data, config_dir=tmp_path / "cfg", workers=1) as e:
        out = await e.call_tool("index-search", {"query": "albatross", "scope": "repo"})
        assert not out.is_error, out.text


# -- the command line's empty options ------------------------------------------------------------


def test_the_cli_says_an_empty_task_or_log_instead_of_ignoring_it(
    repo: Path, tmp_path: Path
) -> None:
    # --task '' and --log '' were taken as not given: a repo search ran without the log asked
    # for, and a conversation search said it needed --task, which it had been given.
    cases = [
        (["search", "albatross", "--task", ""], "task id '' is not a task id"),
        (["search", "albatross", "--scope", "conversation", "--task", ""], "task id ''"),
        (["search", "albatross", "--log", ""], "--log needs the path of a session's .jsonl"),
        (["recall", "1", "--log", ""], "--log needs the path of a session's .jsonl"),
    ]
    for args, said in cases:
        out = run_cli(repo, tmp_path, *args)
        err = out.stderr.decode()
        assert out.returncode == 2, (args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert said in lines[0], err
