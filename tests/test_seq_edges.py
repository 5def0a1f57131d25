"""The edges of a log's seqs (LOG-FORMAT.md, ADR 0050 §8): a repeated seq, the last seq the
``.mem`` holds, the last line of an event, and the earlier-tasks switch read at every call (§9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import BadInput, Disabled
from nodwyn_retrieval.store.config import set_earlier_tasks
from nodwyn_retrieval.store.log import write_task_meta
from nodwyn_retrieval.store.mem import MemIndex, mem_path, parse_lines
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import Log, make_repo


def line(seq: int, kind: str = "note", **fields: object) -> bytes:
    event = {"seq": seq, "ts": "2026-10-15T09:00:00Z", "kind": kind, "turn": 1, "agent": "main"}
    return json.dumps({**event, **fields}).encode() + b"\n"


# -- the .mem's line parser -----------------------------------------------------------------


def test_the_line_parser_skips_a_repeated_seq_and_one_that_goes_back() -> None:
    data = line(1) + line(2, text="first two") + line(2, text="second two") + line(1) + line(3)
    events, end, skipped = parse_lines(data, 100, 0)
    assert [e.event["seq"] for e in events] == [1, 2, 3]
    assert events[1].event["text"] == "first two"
    assert (end, skipped) == (100 + len(data), 2)
    # Offsets are the log's: base plus the line's place in data; lengths leave out the newline.
    assert [e.offset for e in events] == [100, 100 + len(line(1)), 100 + len(data) - len(line(3))]
    assert [e.length for e in events] == [len(line(1)) - 1, len(line(2, text="first two")) - 1,
                                          len(line(3)) - 1]  # fmt: skip


def test_the_line_parser_starts_above_the_seq_it_is_given_and_waits_for_a_torn_line() -> None:
    data = line(4) + line(5) + line(6)[:-1]
    events, end, skipped = parse_lines(data, 0, 4)
    assert [e.event["seq"] for e in events] == [5]
    assert (end, skipped) == (len(line(4)) + len(line(5)), 1)


@pytest.mark.asyncio
async def test_a_repeated_seq_in_a_log_recalls_the_first_event_that_holds_it(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    log = tmp_path / "task.jsonl"
    log.write_bytes(
        line(1, "person.message", text="Where is the axolotl?")
        + line(2, "person.message", text="the first axolotl answer")
        + line(2, "person.message", text="a repeated seq")
        + line(3, "turn.end")
    )
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], log=log
    ) as engine:
        got = await engine.recall(2)
        found = await engine.index_search("axolotl", "conversation")
    assert got.text.splitlines()[-1] == "the first axolotl answer"
    assert "repeated" not in got.text
    assert sorted(h["seq"] for h in found.hits) == [1, 2]


# -- recall at the ends: the .mem's last seq, an event's last line -------------------------


@pytest.fixture
def log(tmp_path: Path) -> Log:
    """Two whole turns, the second ending in a result of five lines; then an open turn."""
    lg = Log(tmp_path / "task.jsonl")
    lg.add("person.message", text="Read the binding")
    lg.result("alpha\nbeta", path="a.go")
    lg.end_turn()
    lg.add("person.message", text="And the host check")
    lg.result("one\ntwo\nthree\nfour\nthe last line", path="b.go")
    lg.end_turn()
    lg.add("person.message", text="Now the docs")
    return lg


async def engine_on(tmp_path: Path, dirs: tuple[Path, Path], log: Log) -> Engine:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    return await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], log=log.path
    )


@pytest.mark.asyncio
async def test_recall_reaches_the_last_seq_the_mem_holds_and_the_logs_last(
    tmp_path: Path, dirs: tuple[Path, Path], log: Log
) -> None:
    async with await engine_on(tmp_path, dirs, log) as engine:
        await engine.index_search("binding", "conversation")  # builds the .mem
        with MemIndex.open(mem_path(log.path)) as mem:
            last = mem.last_seq
            assert (mem.n_events, last) == (8, 8)
        # The .mem's last seq is the turn.end: found, and refused for its kind, not "not held".
        with pytest.raises(BadInput, match=r"^seq 8 is a turn.end, which recall does not read$"):
            await engine.recall(last)
        result = await engine.recall(last - 1)
        open_turn = await engine.recall(last + 1)
    assert result.text.splitlines()[-1] == "the last line"
    assert open_turn.text.splitlines()[-1] == "Now the docs"


@pytest.mark.asyncio
async def test_recall_from_an_events_last_line_gives_that_line(
    tmp_path: Path, dirs: tuple[Path, Path], log: Log
) -> None:
    async with await engine_on(tmp_path, dirs, log) as engine:
        whole = await engine.recall(7)
        body = whole.text.splitlines()
        assert body[-1] == "the last line"
        n = len(body) - body.index("one")  # the result's lines, numbered from 1
        assert n == 5
        last = await engine.recall(7, start=5)
        two = await engine.recall(7, start=4, count=2)
        with pytest.raises(BadInput, match=r"^start 6 is past the event's 5 lines$"):
            await engine.recall(7, start=6)
    assert last.text.splitlines()[-1] == "the last line"
    assert "four" not in last.text
    assert two.text.splitlines()[-2:] == ["four", "the last line"]


# -- the earlier-tasks switch is read at every call (§9) ------------------------------------


@pytest.mark.asyncio
async def test_the_earlier_tasks_switch_flipped_during_a_session_applies_at_the_next_call(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "a project\n"})
    key = project_key(repo)
    tasks = project_dirs(dirs[0], key).tasks
    tasks.mkdir(parents=True)
    old = Log(tasks / "t-1.jsonl")
    old.add("person.message", text="Fix the platypus binding")
    old.end_turn()
    write_task_meta(old.path, title="platypus", created="2026-10-03T09:00:00.000Z")
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1]) as engine:
        with pytest.raises(Disabled):
            await engine.index_search("platypus", "earlier")
        with pytest.raises(Disabled):
            await engine.recall(1, task="t-1")
        set_earlier_tasks(dirs[1], key, True)
        on = await engine.index_search("platypus", "earlier")
        recalled = await engine.recall(1, task="t-1")
        set_earlier_tasks(dirs[1], key, False)
        with pytest.raises(Disabled):
            await engine.index_search("platypus", "earlier")
        with pytest.raises(Disabled):
            await engine.recall(1, task="t-1")
        set_earlier_tasks(dirs[1], key, True)
        again = await engine.index_search("platypus", "earlier")
        status = await engine.index_status()
    assert [(h["task"], h["seq"]) for h in on.hits] == [("t-1", 1)]
    assert recalled.text.splitlines()[-1] == "Fix the platypus binding"
    assert [(h["task"], h["seq"]) for h in again.hits] == [("t-1", 1)]
    assert status["earlier_tasks"] is True
