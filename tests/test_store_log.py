"""store.log: the session log's writer and reader (docs/log-format.md, ADR 0050 §8, §9)."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import BadInput, FormatError, NotFound
from nodwyn_retrieval.store.log import (
    LogWriter,
    format_ts,
    list_tasks,
    log_path,
    meta_path,
    read_event_at,
    read_log,
    task_meta,
    write_task_meta,
)

FIXED = datetime(2026, 10, 15, 9, 0, 3, 120_000, tzinfo=UTC)


def clock() -> datetime:
    return FIXED


def test_the_writer_numbers_events_from_one_with_the_common_fields_first(tmp_path: Path) -> None:
    path = tmp_path / "tasks" / "t1.jsonl"
    with LogWriter(path, clock=clock) as w:
        first = w.append("person.message", 1, text="Why does the binding reject localhost?")
        w.append("turn.end", 1)
    assert first == {
        "seq": 1,
        "ts": "2026-10-15T09:00:03.120Z",
        "kind": "person.message",
        "turn": 1,
        "agent": "main",
        "text": "Why does the binding reject localhost?",
    }
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert list(json.loads(lines[0])) == ["seq", "ts", "kind", "turn", "agent", "text"]
    assert [e["seq"] for e in read_log(path).events] == [1, 2]


def test_a_timestamp_is_rfc3339_utc_with_z() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", format_ts(datetime.now(UTC)))
    with pytest.raises(ValueError, match=r"^a log time must be timezone-aware$"):
        format_ts(datetime(2026, 1, 1))


def test_the_writer_continues_seq_and_turn_of_an_existing_log(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        for turn in (1, 1, 2):
            w.append("note", turn, text="x" * 100_000)  # lines longer than a tail block
    with LogWriter(path) as w:
        assert w.next_seq == 4
        assert w.turn == 2
        assert w.append("note", 3)["seq"] == 4
    assert [e["seq"] for e in read_log(path).events] == [1, 2, 3, 4]


def test_the_writer_skips_a_trailing_line_that_is_not_an_event(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"seq":7,"ts":"x","kind":"plan","turn":2,"agent":"main","text":"p"}\n'
        "garbage line\n"
        '["not", "an", "object"]\n'
    )
    with LogWriter(path) as w:
        assert w.append("plan", 2)["seq"] == 8


def test_a_writer_after_a_torn_line_ends_it_and_starts_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        w.append("plan", 1, text="whole")
    with path.open("ab") as f:
        f.write(b'{"seq":2,"ts":"2026-10-15T09:00:00Z","kind":"pl' + b"x" * 100_000)
    assert read_log(path).torn
    with LogWriter(path) as w:
        assert w.append("plan", 1, text="next")["seq"] == 2
    read = read_log(path)
    assert [e["text"] for e in read.events] == ["whole", "next"]
    assert read.skipped == 1
    assert not read.torn


def test_the_reader_ignores_a_torn_last_line_and_counts_a_line_that_is_not_json(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    good = [
        {
            "seq": 1,
            "ts": "2026-10-15T09:00:00Z",
            "kind": "person.message",
            "turn": 1,
            "agent": "main",
            "text": "hello",
        },
        {
            "seq": 2,
            "ts": "2026-10-15T09:00:01Z",
            "kind": "llm.resp",
            "turn": 1,
            "agent": "main",
            "text": "hi",
            "calls": [],
        },
    ]
    body = (
        json.dumps(good[0])
        + "\n"
        + "this is not json\n"
        + "\n"
        + "[1, 2]\n"
        + '{"kind": "plan"}\n'
        + '{"seq": true, "kind": "plan"}\n'
        + '{"seq": 0, "kind": "plan"}\n'
        + '{"seq": 3, "kind": ""}\n'
        + json.dumps(good[1])
        + "\n"
        + '{"seq": 2, "kind": "plan"}\n'
        + "\xff\n"
    )
    torn = '{"seq": 3, "kind": "pl'
    path.write_bytes(body.encode("utf-8", "surrogateescape") + torn.encode())
    read = read_log(path)
    assert read.events == good
    assert read.skipped == 9
    assert read.torn
    assert read.end_offset == len(body.encode("utf-8"))
    assert read.last_seq == 2
    for event, offset in zip(read.events, read.offsets, strict=True):
        assert read_event_at(path, offset) == event
    assert read_event_at(path, read.offsets[1] + 1) is None  # not a line start
    assert read_event_at(path, read.end_offset) is None  # the torn line
    assert read_event_at(path, 10**9) is None


def test_end_offset_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    w = LogWriter(path)
    w.append("person.message", 1, text="one")
    first = read_log(path)
    w.append("llm.resp", 1, text="two", calls=[])
    with path.open("ab") as f:
        f.write(b'{"seq": 3, "kind": "pl')  # torn: not yet read
    second = read_log(path, first.end_offset, after_seq=first.last_seq)
    assert [e["text"] for e in second.events] == ["two"]
    assert second.torn
    with path.open("ab") as f:
        f.write(b'an", "turn": 1, "text": "three"}\n')
    third = read_log(path, second.end_offset, after_seq=second.last_seq)
    assert [e["text"] for e in third.events] == ["three"]
    assert third.end_offset == path.stat().st_size
    assert read_log(path, third.end_offset).events == []
    w.close()


def test_an_offset_not_at_a_line_start_means_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        w.append("plan", 1, text="abc")
    size = path.stat().st_size
    with pytest.raises(FormatError, match=r"no line break before offset 3: .*from the start$"):
        read_log(path, 3)
    with pytest.raises(FormatError, match=rf"no line break before offset {size + 10}"):
        read_log(path, size + 10)
    with pytest.raises(BadInput, match=r"^a log offset is at least 0, got -1$"):
        read_log(path, -1)


def test_a_missing_log_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=rf"^no log at {tmp_path / 'nope.jsonl'}$"):
        read_log(tmp_path / "nope.jsonl")


def test_the_writer_records_a_guard_decision_in_the_current_turn(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        w.append("person.message", 3, text="go")
        event = w.record_decision(
            {"path": "a.py", "verdict": "allow", "rule": "pin", "seq": 99, "ts": "old"}
        )
    assert event["kind"] == "guard.decision"
    assert event["turn"] == 3
    assert event["seq"] == 2
    assert event["path"] == "a.py"
    assert read_log(path).events[1] == event


@pytest.mark.parametrize(
    ("args", "fields", "message"),
    [
        (("", 1), {}, r"^an event's kind is a non-empty string, got ''$"),
        (("plan", 0), {}, r"^an event's turn is an integer of at least 1, got 0$"),
        (("plan", True), {}, r"^an event's turn is an integer of at least 1, got True$"),
        (("plan", 1, ""), {}, r"^an event's agent is a non-empty string, got ''$"),
        (("plan", 1), {"seq": 5}, r"^the writer assigns seq; do not pass them$"),
        (("plan", 1), {"x": {1, 2}}, r"^a plan event is not JSON: .*$"),
        (("plan", 1), {"x": float("nan")}, r"^a plan event is not JSON: .*$"),
    ],
)
def test_an_event_that_is_not_one_is_refused_and_uses_no_seq(
    tmp_path: Path, args: tuple[object, ...], fields: dict[str, object], message: str
) -> None:
    with LogWriter(tmp_path / "t.jsonl") as w:
        with pytest.raises(BadInput, match=message):
            w.append(*args, **fields)  # type: ignore[arg-type]
        assert w.append("plan", 1)["seq"] == 1


def test_text_with_a_lone_surrogate_is_written_as_json_that_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with LogWriter(path) as w:
        w.append("tool.result", 1, output="bad \udcff byte", call_id="c", name="x", args={})
        w.append("plan", 1, text="héllo")
    events = read_log(path).events
    assert events[0]["output"] == "bad \udcff byte"
    assert events[1]["text"] == "héllo"
    assert "héllo".encode() in path.read_bytes()


def test_appends_from_many_threads_get_distinct_seqs_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    w = LogWriter(path)

    def work(n: int) -> None:
        for i in range(200):
            w.append("note", 1, agent=f"a{n}", i=i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    read = read_log(path)
    assert [e["seq"] for e in read.events] == list(range(1, 1601))
    assert read.skipped == 0


def test_a_closed_writer_refuses_to_append(tmp_path: Path) -> None:
    w = LogWriter(tmp_path / "t.jsonl")
    w.close()
    assert w.closed
    assert "closed" in repr(w)
    with pytest.raises(BadInput, match=r"^the log writer of .* is closed$"):
        w.append("plan", 1)


def test_task_meta_round_trips_beside_its_log(tmp_path: Path) -> None:
    log = tmp_path / "t-1.jsonl"
    assert meta_path(log) == tmp_path / "t-1.meta.json"
    written = write_task_meta(log, title="Fix the binding", archived=True, root="/r")
    assert written.created.endswith("Z")
    assert task_meta(log) == written
    assert task_meta(meta_path(log)) == written
    assert task_meta(log).problems == ()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{not json", r"is not JSON"),
        (b"[1, 2]", r"is not a JSON object"),
        (b'{"title": 3, "archived": "yes"}', r"title is int"),
    ],
)
def test_a_corrupt_task_meta_gives_defaults(tmp_path: Path, body: bytes, problem: str) -> None:
    log = tmp_path / "t.jsonl"
    log.write_text("")
    meta_path(log).write_bytes(body)
    meta = task_meta(log)
    assert (meta.title, meta.archived, meta.root) == ("", False, None)
    assert meta.created.endswith("Z")  # the log's modification time
    assert any(re.search(problem, p) for p in meta.problems)


def test_a_missing_task_meta_without_a_log_is_all_defaults(tmp_path: Path) -> None:
    meta = task_meta(tmp_path / "gone.jsonl")
    assert (meta.title, meta.created, meta.archived, meta.root) == ("", "", False, None)


def test_task_ids_name_files_in_the_tasks_directory_only(tmp_path: Path) -> None:
    assert log_path(tmp_path, "2026-10-15_a.b") == tmp_path / "2026-10-15_a.b.jsonl"
    for bad in ("../x", "a/b", ".hidden", "-x", "", "x\n"):
        with pytest.raises(BadInput, match=r"^task id .* is not a task id: .*$"):
            log_path(tmp_path, bad)
    for name in ("b.jsonl", "a.jsonl", "a.meta.json", ".x.jsonl", "c.mem"):
        (tmp_path / name).write_text("")
    assert list_tasks(tmp_path) == ["a", "b"]
    assert list_tasks(tmp_path / "none") == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.builds(
                lambda s, k: json.dumps({"seq": s, "kind": k}).encode(),
                st.integers(-2, 6),
                st.sampled_from(["plan", "", 3]),
            ),
        ),
        max_size=12,
    ),
    st.binary(max_size=20),
)
def test_any_bytes_read_as_events_or_skipped_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes
) -> None:
    lines = [line.replace(b"\n", b" ") for line in lines]
    tail = tail.replace(b"\n", b" ")
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + tail)
    read = read_log(path)
    assert len(read.events) + read.skipped == len(lines)
    assert read.torn == bool(tail)
    seqs = [e["seq"] for e in read.events]
    assert seqs == sorted(set(seqs))
    with LogWriter(path) as w:
        nxt = w.append("plan", 1)["seq"]
    assert nxt > max(seqs, default=0)
    assert read_log(path).events[-1]["seq"] == nxt
