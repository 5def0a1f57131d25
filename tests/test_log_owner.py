"""A session log has one writer (docs/log-format.md, "Who writes the log").

An agent loop that writes its own log, line by line with plain appends, while the engine searches
and records: no seq of the two collides, nothing of either is lost or skipped, and every event of
the loop is searchable. A log that does not exist yet is a conversation with no events.
"""

from __future__ import annotations

import asyncio
import itertools
import string
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval import BadInput, Engine, NotFound
from nodwyn_retrieval.store.config import set_earlier_tasks
from nodwyn_retrieval.store.log import LogWriter, read_log, records_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import Log, make_repo


def word(i: int) -> str:
    """A made-up word of its own for the i-th event: zorbaa, zorbab, ..."""
    letters = string.ascii_lowercase
    return "zorb" + letters[i // 26 % 26] + letters[i % 26]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {f"pkg/mod{i}.py": f"def handler_{i}(request):\n    return request\n" for i in range(8)}
    files["keychain/bind.py"] = "def check_binding(host):\n    return host == 'example'\n"
    return make_repo(tmp_path / "repo", files)


async def _open(repo: Path, dirs: tuple[Path, Path], **kw: Any) -> Engine:
    return await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, **kw)


@pytest.mark.asyncio
async def test_a_loop_writing_its_own_log_and_the_engine_never_collide(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    path = tmp_path / "tasks" / "t1.jsonl"
    path.parent.mkdir()
    loop_log = Log(path)
    written: dict[int, str] = {}
    n_turns = 6
    stop = threading.Event()

    def the_loop() -> None:
        # The loop's own writer: a plain append of one JSON line per event, with its own seqs.
        i = itertools.count()
        for _ in range(n_turns):
            w = word(next(i))
            written[loop_log.add("person.message", text=f"Where is the {w} handled?")] = w
            w = word(next(i))
            written[loop_log.result(f"the {w} lives in pkg", path="pkg/mod1.py")] = w
            loop_log.end_turn()
            time.sleep(0.02)
        stop.set()

    writer = threading.Thread(target=the_loop)
    async with await _open(repo, dirs, log=path) as engine:
        writer.start()
        searches = 0
        while not stop.is_set() or searches < 3:
            await engine.index_search("check binding handler", "repo")
            await engine.index_search(word(0), "conversation")
            (repo / f"pkg/mod{searches % 8}.py").write_text(f"def changed_{searches}():\n  pass\n")
            searches += 1
        writer.join()
        await engine.index_update()
        found = {}
        for seq, w in written.items():
            out = await engine.index_search(w, "conversation", limit=1)
            found[seq] = [h["seq"] for h in out.hits]
        records_file = engine.records_path
    # The log holds the loop's events only, every one read, none skipped.
    got = read_log(path)
    assert got.skipped == 0
    assert not got.torn
    assert [e["seq"] for e in got.events] == list(range(1, loop_log.seq + 1))
    assert {e["kind"] for e in got.events} == {"person.message", "llm.resp", "tool.result",
                                               "turn.end"}  # fmt: skip
    # Every event the loop wrote is found by its own word, as the first result.
    assert found == {seq: [seq] for seq in written}
    # The engine's records are beside the log, in a numbering of their own, none skipped.
    assert records_file == records_path(path) == tmp_path / "tasks" / "t1.records.ndjson"
    rec = read_log(records_file)
    assert rec.skipped == 0
    assert [e["seq"] for e in rec.events] == list(range(1, len(rec.events) + 1))
    kinds = {e["kind"] for e in rec.events}
    assert kinds == {"guard.decision", "index.update"}
    assert sum(e["kind"] == "index.update" for e in rec.events) >= 3
    # Each record says how far the session log was when the call that made it began.
    log_seqs = [e["log_seq"] for e in rec.events]
    assert log_seqs == sorted(log_seqs)
    assert log_seqs[-1] == loop_log.seq


@pytest.mark.asyncio
async def test_a_log_that_does_not_exist_yet_has_no_events_until_it_appears(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    path = tmp_path / "later" / "t2.jsonl"
    async with await _open(repo, dirs, log=path) as engine:
        empty = await engine.index_search("pangolin cache", "conversation")
        with pytest.raises(NotFound, match=r"no event with seq 1 in this log \(it has no events"):
            await engine.recall(1)
        bad = await engine.call_tool("recall", {"seq": 1})
        assert not path.exists()
        path.parent.mkdir()
        later = Log(path)
        later.add("person.message", text="Why does the pangolin cache miss?")
        later.end_turn()
        found = await engine.index_search("pangolin cache", "conversation")
        back = await engine.recall(1)
    assert empty.hits == []
    assert empty.header["events"] == 0
    assert "no event matches" in empty.text
    assert bad.is_error
    assert "no events yet" in bad.text
    assert [h["seq"] for h in found.hits] == [1]
    assert "pangolin" in back.text


@pytest.mark.asyncio
async def test_an_engine_that_owns_the_log_is_its_one_writer(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    path = tmp_path / "own" / "t3.jsonl"
    async with await _open(repo, dirs, log=path, owns_log=True) as engine:
        assert engine.log is not None
        assert engine.records_path is None
        engine.log.append("person.message", turn=1, text="Find the binding check")
        await engine.index_search("check binding", "repo")
        engine.log.append("turn.end", turn=1)
        out = await engine.index_search("binding check", "conversation")
    got = read_log(path)
    assert got.skipped == 0
    assert [e["seq"] for e in got.events] == list(range(1, len(got.events) + 1))
    kinds = [e["kind"] for e in got.events]
    assert kinds[0] == "person.message"
    assert "guard.decision" in kinds
    assert "index.update" in kinds
    assert kinds[-1] == "turn.end"
    assert [h["seq"] for h in out.hits] == [1]
    assert not records_path(path).exists()


@pytest.mark.asyncio
async def test_records_go_to_the_loops_sink_when_it_gives_one(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    path = tmp_path / "t4.jsonl"
    mine = LogWriter(path)  # the loop's own writer, in this process
    mine.append("person.message", turn=1, text="hello")
    got: list[dict[str, Any]] = []

    def sink(event: dict[str, Any]) -> None:
        got.append(event)
        mine.record_decision(event)

    async with await _open(repo, dirs, log=path, record=sink) as engine:
        await engine.index_update()
        assert engine.records_path is None
    mine.close()
    assert {e["kind"] for e in got} == {"guard.decision", "index.update"}
    events = read_log(path)
    assert events.skipped == 0
    assert len(events.events) == 1 + len(got)
    assert not records_path(path).exists()


@pytest.mark.asyncio
async def test_owning_a_log_needs_one_and_a_directory_is_not_a_log(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    with pytest.raises(BadInput, match="owns_log=True needs log="):
        await _open(repo, dirs, owns_log=True)
    with pytest.raises(BadInput, match="is a directory"):
        await _open(repo, dirs, log=tmp_path)


@pytest.mark.asyncio
async def test_records_that_cannot_be_written_never_fail_a_search(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t5.jsonl"
    Log(path).add("person.message", text="hello")
    records_path(path).mkdir()  # where the records file would be: nothing can be written there
    async with await _open(repo, dirs, log=path) as engine:
        out = await engine.index_search("check binding", "repo")
        again = await engine.index_search("check binding", "repo")
    assert out.hits
    assert again.hits
    warned = [r for r in caplog.records if "records are not kept" in r.getMessage()]
    assert len(warned) == 1
    assert read_log(path).skipped == 0


def test_the_loop_can_run_the_engine_from_its_own_event_loop(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """asyncio.run from a plain function, as a script does."""
    path = tmp_path / "t6.jsonl"

    async def main() -> int:
        async with await _open(repo, dirs, log=path) as engine:
            out = await engine.index_search("check binding", "repo")
            return len(out.hits)

    assert asyncio.run(main()) >= 1


@pytest.mark.asyncio
async def test_a_log_that_appears_later_is_still_not_one_of_the_earlier_tasks(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    key = project_key(repo)
    tasks = project_dirs(dirs[0], key).tasks
    tasks.mkdir(parents=True)
    old = Log(tasks / "old.jsonl")
    old.add("person.message", text="The quokka ledger was reconciled here.")
    old.end_turn()
    set_earlier_tasks(dirs[1], key, True, root=str(repo))
    async with await _open(repo, dirs, log=tasks / "now.jsonl") as engine:
        now = Log(tasks / "now.jsonl")
        now.add("person.message", text="Where is the quokka ledger reconciled?")
        now.end_turn()
        out = await engine.index_search("quokka ledger", "earlier")
        mine = await engine.index_search("quokka ledger", "conversation")
    assert [h["task"] for h in out.hits] == ["old"]
    assert [h["seq"] for h in mine.hits] == [1]
