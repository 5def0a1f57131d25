"""store.log at its edges: the log's tail, seq and turn at the boundaries, a reader's refusals.

What a person sees of each: the seq and turn a session goes on from, an event read again where
it was recorded, a task's title when its meta is damaged, never a crash.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput, NotFound, StoreError
from nodwyn_retrieval.store.log import (
    LogWriter,
    TaskMeta,
    format_ts,
    list_tasks,
    meta_path,
    read_event_at,
    read_log,
    records_path,
    tail_of,
    task_meta,
    write_task_meta,
)


def line(seq: object, kind: object = "plan", **more: object) -> bytes:
    return json.dumps({"seq": seq, "kind": kind, **more}).encode() + b"\n"


# -- the tail: what a new session goes on from ------------------------------------------------


def test_the_tail_is_the_last_complete_events_seq_and_turn(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        w.append("person.message", 1, text="a")
        w.append("llm.resp", 4, text="b")
    assert tail_of(path) == (2, 4)
    with path.open("ab") as f:
        f.write(b"not an event\n" + line(9, "") + b'{"seq": 10, "kind": "pl')  # torn
    assert tail_of(path) == (2, 4)  # the lines after it are not events


def test_the_tail_of_a_log_with_one_event_or_none(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    assert tail_of(path) == (0, 0)  # not there yet
    path.write_bytes(b"")
    assert tail_of(path) == (0, 0)
    path.write_bytes(line(1, turn=1))
    assert tail_of(path) == (1, 1)
    path.write_bytes(b"garbage\n" + b"more garbage\n")
    assert tail_of(path) == (0, 0)
    (tmp_path / "dir.jsonl").mkdir()
    assert tail_of(tmp_path / "dir.jsonl") == (0, 0)


@pytest.mark.parametrize("turn", [0, -3, True, "2", None])
def test_a_tail_turn_that_is_not_a_positive_integer_is_0(tmp_path: Path, turn: object) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(5, turn=turn))
    assert tail_of(path) == (5, 0)


def test_the_tail_reads_the_last_64_kib_and_not_a_line_cut_by_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    big = line(1, turn=1, text="x" * 70_000)
    path.write_bytes(big + line(2, turn=2, text="y" * 1000))
    assert tail_of(path) == (2, 2)
    # The only event starts before the window: the window's first line is cut, not an event.
    path.write_bytes(big)
    assert tail_of(path) == (0, 0)
    # An event that begins exactly at the window's start cannot be told from a cut line.
    second = line(2, turn=3, text="z" * 100)
    pad = (1 << 16) - len(second)
    filler = b"#" * (pad - 1) + b"\n"  # a line that is not an event
    path.write_bytes(big + second + filler)
    assert os.path.getsize(path) - (1 << 16) == len(big)
    assert tail_of(path) == (0, 0)  # the window starts at the event, which may be cut: skipped
    # One byte more before it: the window starts at the newline that ends the line before.
    path.write_bytes(big + b"#\n" + second + filler[1:])
    assert tail_of(path) == (2, 3)


# -- the writer going on from a log -----------------------------------------------------------


def test_a_writer_goes_on_after_the_highest_seq_not_the_last(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1, turn=1) + line(9, turn=2) + line(4, turn=3))
    with LogWriter(path) as w:
        assert w.next_seq == 10
        assert w.turn == 3  # the last event's turn
        w.append("plan", 3)
    assert [e["seq"] for e in read_log(path).events] == [1, 9, 10]


def test_a_writer_reads_seqs_of_lines_written_by_another_writer(tmp_path: Path) -> None:
    # Not in this writer's layout (seq not first, spaces): parsed as JSON.
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"kind": "plan", "turn": 2, "seq": 41}\n' + b'{"seq": 7, "kind": "x"}\n')
    with LogWriter(path) as w:
        assert w.next_seq == 42
        assert w.turn == 1  # the last event has no turn


def test_a_writer_on_an_empty_log_starts_at_seq_1_turn_1(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    with LogWriter(path) as w:
        assert (w.next_seq, w.turn) == (1, 1)
        assert w.append("plan", 1)["seq"] == 1
    assert path.read_bytes().count(b"\n") == 1  # no blank line put before it


def test_a_writer_after_a_last_event_of_turn_0_or_none_is_at_turn_1(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(3, turn=5) + line(4, turn=0))
    with LogWriter(path) as w:
        assert (w.next_seq, w.turn) == (5, 1)
        event = w.record_decision({"path": "a.py", "verdict": "allow"})
    assert (event["seq"], event["turn"]) == (5, 1)


def test_a_writer_after_a_torn_line_and_garbage_takes_the_last_events_turn(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1, turn=6) + b"garbage\n" + b'{"seq": 2, "kind"')
    with LogWriter(path) as w:
        assert (w.next_seq, w.turn) == (2, 6)
        w.append("plan", 6)
    read = read_log(path)
    assert [e["seq"] for e in read.events] == [1, 2]
    assert read.skipped == 2
    assert not read.torn


def test_record_decision_keeps_a_given_kind_turn_and_agent(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        w.append("person.message", 2, text="go")
        event = w.record_decision({"kind": "guard.ask", "turn": 5, "agent": "sub", "path": "p"})
        assert w.turn == 5
    assert (event["kind"], event["turn"], event["agent"], event["seq"]) == (
        "guard.ask",
        5,
        "sub",
        2,
    )
    assert read_log(path).events[-1] == event


def test_a_writer_refuses_ts_and_names_both_clashes(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "t.jsonl") as w:
        with pytest.raises(BadInput, match=r"^the writer assigns ts; do not pass them$"):
            w.append("plan", 1, ts="x")
        with pytest.raises(BadInput, match=r"^the writer assigns seq and ts; do not pass them$"):
            w.append("plan", 1, ts="x", seq=3)
        with pytest.raises(BadInput, match=r"^an event's kind is a non-empty string, got 3$"):
            w.append(3, 1)  # type: ignore[arg-type]
        assert w.append("plan", 1)["seq"] == 1
        assert "next seq 2" in repr(w)


def test_a_writer_whose_log_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").mkdir()
    with pytest.raises(StoreError, match=r"t\.jsonl"):
        LogWriter(tmp_path / "t.jsonl")


# -- reading -----------------------------------------------------------------------------------


def test_seq_1_is_an_event_and_a_seq_at_after_seq_is_not(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1) + line(2) + line(3))
    assert [e["seq"] for e in read_log(path).events] == [1, 2, 3]
    read = read_log(path, after_seq=2)
    assert [e["seq"] for e in read.events] == [3]
    assert (read.skipped, read.last_seq) == (2, 3)
    none = read_log(path, after_seq=3)
    assert (none.events, none.skipped, none.last_seq) == ([], 3, 3)
    with pytest.raises(AttributeError):
        none.last_seq = 9  # type: ignore[misc]  what was read stays what was read


def test_a_log_that_is_a_directory_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(NotFound, match=r"^no log at .*d\.jsonl: it is a directory$"):
        read_log(tmp_path / "d.jsonl")


def test_reading_an_event_again_refuses_a_bad_offset_and_a_missing_log(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1) + line(2))
    first = read_log(path)
    assert read_event_at(path, 0) == first.events[0]
    assert read_event_at(path, first.offsets[1]) == first.events[1]
    assert read_event_at(path, first.offsets[1] - 1) is None  # the newline before it
    with pytest.raises(BadInput, match=r"^a log offset is at least 0, got -1$"):
        read_event_at(path, -1)
    with pytest.raises(NotFound, match=r"^no log at .*gone\.jsonl$"):
        read_event_at(tmp_path / "gone.jsonl", 0)


def test_an_offset_at_the_end_of_the_log_reads_nothing_and_stays(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1) + line(2))
    size = path.stat().st_size
    read = read_log(path, size, after_seq=2)
    assert (read.events, read.skipped, read.torn, read.end_offset) == ([], 0, False, size)
    assert read.last_seq == 2


# -- where things lie ---------------------------------------------------------------------------


def test_the_records_file_lies_beside_the_log_and_is_not_a_task(tmp_path: Path) -> None:
    log = tmp_path / "t-1.jsonl"
    assert records_path(log) == tmp_path / "t-1.records.ndjson"
    log.write_text("")
    records_path(log).write_text("")
    assert list_tasks(tmp_path) == ["t-1"]


def test_task_ids_of_files_that_are_not_task_ids_are_not_listed(tmp_path: Path) -> None:
    for name in ("ok.jsonl", "-x.jsonl", "sp ace.jsonl", ".jsonl", "ok.jsonl.bak"):
        (tmp_path / name).write_text("")
    assert list_tasks(tmp_path) == ["ok"]
    (tmp_path / "file").write_text("")
    assert list_tasks(tmp_path / "file") == []


# -- a task's meta ------------------------------------------------------------------------------


def test_a_meta_without_created_takes_the_logs_modification_time(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    log.write_text("")
    when = datetime(2026, 3, 4, 5, 6, 7, 891_000, tzinfo=UTC)
    os.utime(log, (when.timestamp(), when.timestamp()))
    meta_path(log).write_text(json.dumps({"title": "T", "archived": True, "root": "/r"}))
    meta = task_meta(log)
    assert (meta.title, meta.archived, meta.root) == ("T", True, "/r")
    assert meta.created == format_ts(when) == "2026-03-04T05:06:07.891Z"
    assert meta.problems == ()


def test_a_meta_field_of_the_wrong_type_is_named_and_only_it_defaults(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    body = {"title": "Keep", "created": 5, "archived": "yes", "root": ["x"]}
    meta_path(log).write_text(json.dumps(body))
    meta = task_meta(log)
    assert (meta.title, meta.created, meta.archived, meta.root) == ("Keep", "", False, None)
    notes = " | ".join(meta.problems)
    assert "created is int" in notes
    assert "archived is str" in notes
    assert "root is list" in notes
    assert len(meta.problems) == 3


def test_a_meta_with_null_root_and_false_archived_has_no_problem(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    written = write_task_meta(log, title="x", created="2026-01-01T00:00:00.000Z")
    assert written.created == "2026-01-01T00:00:00.000Z"
    meta = task_meta(log)
    assert (meta.archived, meta.root, meta.problems) == (False, None, ())
    assert meta == written


def test_a_meta_that_cannot_be_read_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    meta_path(log).mkdir()
    meta = task_meta(log)
    assert (meta.title, meta.created) == ("", "")
    assert len(meta.problems) == 1
    assert str(meta_path(log)) in meta.problems[0]


def event_line_of(size: int, seq: int, turn: int) -> bytes:
    """An event's line of exactly ``size`` bytes, its newline not counted."""
    short = json.dumps({"seq": seq, "kind": "plan", "turn": turn, "text": ""}).encode()
    out = json.dumps({"seq": seq, "kind": "plan", "turn": turn, "text": "x" * (size - len(short))})
    assert len(out) == size
    return out.encode()


def test_a_line_cut_by_the_tail_window_is_not_taken_for_an_event(tmp_path: Path) -> None:
    # The log's one line is not an event ("#" first), but all of it in the last 64 KiB, its
    # first byte only left out, is one.
    path = tmp_path / "t.jsonl"
    data = b"#" + event_line_of((1 << 16) - 1, 5, 2) + b"\n"
    assert len(data) == (1 << 16) + 1
    path.write_bytes(data)
    assert tail_of(path) == (0, 0)
    with LogWriter(path) as w:
        assert (w.next_seq, w.turn) == (1, 1)  # read whole: not an event either
    # Without the "#", the file is the window: the line is whole, and read.
    path.write_bytes(data[1:])
    assert tail_of(path) == (5, 2)


def test_a_writer_makes_every_missing_directory_on_its_way(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "tasks" / "t.jsonl"
    with LogWriter(path) as w:
        w.append("plan", 1)
    assert [e["seq"] for e in read_log(path).events] == [1]


def test_a_task_meta_is_a_value_its_problems_aside(tmp_path: Path) -> None:
    assert TaskMeta() == TaskMeta("", "", False, None)
    assert TaskMeta().archived is False
    log = tmp_path / "t.jsonl"
    meta_path(log).write_text(json.dumps({"title": "T", "created": "c", "archived": 1}))
    meta = task_meta(log)
    assert meta.problems == (f"{meta_path(log)}: archived is int",)
    assert meta == TaskMeta("T", "c", False, None)  # the notes do not make it another task
    with pytest.raises(AttributeError):
        meta.title = "changed"  # type: ignore[misc]


def test_a_meta_that_cannot_be_read_says_why_in_the_systems_words(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    meta_path(log).mkdir()
    assert task_meta(log).problems == (f"{meta_path(log)}: Is a directory",)


def test_a_task_meta_is_written_as_text_a_person_can_read(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    write_task_meta(log, title="Réparer le lien", created="2026-01-01T00:00:00.000Z")
    text = meta_path(log).read_text(encoding="utf-8")
    assert '"title": "Réparer le lien"' in text
    assert text.endswith("}\n")
    assert task_meta(log).title == "Réparer le lien"


def test_a_line_of_seq_0_is_no_event_anywhere(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1, turn=2) + line(0, turn=7))
    assert tail_of(path) == (1, 2)
    assert read_event_at(path, len(line(1, turn=2))) is None
    with LogWriter(path) as w:
        assert (w.next_seq, w.turn) == (2, 2)
    assert read_log(path).skipped == 1
