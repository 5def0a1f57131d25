"""A log as one search sees it (store.mem's LogView) at its edges: a path that is no log, a view
that may not write, a damaged ``.mem`` with nothing to build in its place or found damaged only
when it is extended, the events after the ``.mem`` (ranked or not), and an event read again from
where the ``.mem`` places it after the log changed under it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.errors import FormatError, NotFound
from nodwyn_retrieval.store.atomic import file_lock
from nodwyn_retrieval.store.mem import (
    LOCK_NAME,
    LogView,
    MemIndex,
    mem_path,
    postings_of,
)

from tests.support import Log
from tests.test_mem import reference as mem_reference


def reference(path: Path) -> dict[int, dict[int, int]]:
    """Every ranked event's words as event_counts gives them, keyed as a .mem keys them."""
    return mem_reference(path)[0]


def two_turns(path: Path) -> Log:
    lg = Log(path)
    lg.add("person.message", text="Why does the binding reject localhost?")
    lg.result("func Bind(host string)", path="bind.go")
    lg.add("guard.decision", path="bind.go", verdict="allow")
    lg.end_turn()
    lg.add("person.message", text="Rename ScrubEnv")
    lg.result("func ScrubEnv(env []string)", path="env.go")
    lg.end_turn()
    return lg


def test_a_directory_is_no_log(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").mkdir()
    with pytest.raises(NotFound, match=r"^no log at .*t\.jsonl: it is a directory$"):
        LogView.open(tmp_path / "t.jsonl")
    assert not mem_path(tmp_path / "t.jsonl").exists()


def test_a_mem_is_beside_its_log_named_after_it(tmp_path: Path) -> None:
    assert mem_path(tmp_path / "task-1.jsonl") == tmp_path / "task-1.mem"
    assert mem_path(tmp_path / "task-1.log") == tmp_path / "task-1.log.mem"


def test_a_view_that_may_not_write_searches_from_memory_and_leaves_no_file(tmp_path: Path) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    with LogView.open(lg.path, write=False) as view:
        assert view.mem is not None
        assert not view.wrote
        assert postings_of(view.mem) == reference(lg.path)
        assert view.mem.segment(["scrubenv"]).n_postings == 2
    assert not mem_path(lg.path).exists()
    with LogView.open(lg.path) as view:
        assert view.wrote
    assert mem_path(lg.path).exists()


def test_a_view_given_the_logs_stat_reads_as_one_that_takes_it(tmp_path: Path) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    LogView.open(lg.path).close()
    lg.add("person.message", text="an open turn")
    with LogView.open(lg.path, st=os.stat(lg.path)) as view:
        assert view.mem is not None
        assert [le.event["seq"] for le in view.tail] == [lg.seq]
        assert (view.first_seq, view.last_seq, view.n_events) == (1, lg.seq, lg.seq)


@pytest.mark.parametrize("write", [True, False])
def test_a_damaged_mem_of_a_log_without_a_whole_turn_is_removed_when_writing(
    tmp_path: Path, write: bool
) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="an open turn")
    mem_path(lg.path).write_bytes(b"not a .mem at all, " * 40)
    with LogView.open(lg.path, write=write) as view:
        assert view.mem is None
        assert not view.wrote
        assert [le.event["text"] for le in view.tail] == ["an open turn"]
        assert view.n_ranked == 1
    assert mem_path(lg.path).exists() is not write


def test_a_missing_mem_is_built_without_being_said_rebuilt(tmp_path: Path) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    with LogView.open(lg.path) as view:
        assert (view.rebuilt, view.wrote) == (None, True)
    mem_path(lg.path).unlink()
    with LogView.open(lg.path) as view:
        assert (view.rebuilt, view.wrote) == (None, True)
        assert view.mem is not None
        assert postings_of(view.mem) == reference(lg.path)


def test_a_mem_found_damaged_only_when_extended_is_built_again_from_the_log(
    tmp_path: Path,
) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    LogView.open(lg.path).close()
    mp = mem_path(lg.path)
    data = bytearray(mp.read_bytes())
    at = data.index(b"Rename ScrubEnv")  # a card's first line: read when the cards are
    data[at] ^= 0x20
    mp.write_bytes(bytes(data))
    with LogView.open(lg.path) as view:  # opened and checked: the cards are not read
        assert (view.rebuilt, view.wrote) == (None, False)
    lg.add("person.message", text="a third turn")
    lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.rebuilt is not None
        assert "cards" in view.rebuilt
        assert view.wrote
        assert view.tail == []
        mem = view.mem
        assert mem is not None
        assert postings_of(mem) == reference(lg.path)
        assert [c.line for c in mem.cards()] == [
            "Why does the binding reject localhost?",
            "Rename ScrubEnv",
            "a third turn",
        ]
    with MemIndex.open(mp) as mem:
        assert mem.covered == lg.path.stat().st_size
        assert mem.n_events == lg.seq


def test_the_events_after_the_mem_are_ranked_but_for_those_never_ranked(tmp_path: Path) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    LogView.open(lg.path).close()
    first = lg.add("person.message", text="what about the axolotl")
    lg.add("guard.decision", path="x.go", verdict="allow")
    lg.result("axolotl axolotl here", path="x.go")
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        assert [le.event["seq"] for le in view.tail] == [first, first + 1, first + 2, first + 3]
        # The message, the reply and the result; not the guard's record.
        assert view.tail_docs == [0, 2, 3]
        seg = view.tail_segment
        assert seg is not None
        assert seg.n_docs == 3
        assert view.n_ranked == view.mem.n_docs + 3
        assert view.n_events == lg.seq


def test_an_open_turn_of_unranked_events_has_no_tail_segment(tmp_path: Path) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    lg.add("guard.decision", path="x.go", verdict="deny")
    with LogView.open(lg.path) as view:
        assert len(view.tail) == 1
        assert view.tail_docs == []
        # (an empty segment, or none: nothing of the tail is ranked either way)
        assert view.tail_segment is None or view.tail_segment.n_docs == 0
        assert view.mem is not None
        assert view.n_ranked == view.mem.n_docs


def test_a_log_of_no_event_has_no_seqs(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"not an event\n")
    with LogView.open(path) as view:
        assert view.mem is None
        assert (view.first_seq, view.last_seq, view.n_events, view.n_ranked) == (0, 0, 0, 0)
        assert view.tail_segment is None


def test_an_event_is_read_again_from_where_the_mem_places_it_or_refused(tmp_path: Path) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    with LogView.open(lg.path) as view:
        mem = view.mem
        assert mem is not None
        ev = mem.events()
        i = ev.find(6)
        assert i is not None
        off, n = int(ev.off[i]), int(ev.length[i])
        assert view.read_event(off, n, 6)["text"] == "Rename ScrubEnv"
        assert view.read_line(off, n) == lg.path.read_bytes()[off : off + n]
        with pytest.raises(FormatError, match=r"no longer holds seq 5 where its \.mem says"):
            view.read_event(off, n, 5)
        with pytest.raises(FormatError, match=r"no longer holds seq 6 where its \.mem says"):
            view.read_event(off + 1, n, 6)
        size = lg.path.stat().st_size
        with pytest.raises(FormatError, match=r"no longer holds seq 6 where its \.mem says"):
            view.read_event(size - 4, n, 6)  # the line would pass the log's end


def test_a_log_stat_vouches_for_still_has_the_events_after_its_mem_read(tmp_path: Path) -> None:
    # Changed over 2 s before the build, the log is trusted by its stat alone at the next search,
    # which still reads the open turn after what the .mem covers.
    lg = two_turns(tmp_path / "t.jsonl")
    lg.add("person.message", text="an open turn about the axolotl")
    time.sleep(2.2)
    with LogView.open(lg.path) as view:
        assert view.wrote
        assert view.mem is not None
        assert view.mem.check.unchanged(os.stat(lg.path))
        covered = view.mem.covered
    assert covered < lg.path.stat().st_size
    with LogView.open(lg.path) as view:
        assert (view.rebuilt, view.wrote) == (None, False)
        assert [le.event["text"] for le in view.tail] == ["an open turn about the axolotl"]
        assert view.tail_segment is not None
        assert view.mem is not None
        assert view.n_ranked == view.mem.n_docs + 1


class _Waiting(logging.Handler):
    """Set when filelock says a lock it tries is held by another (its debug log)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "not acquired" in record.getMessage():
            self.seen.set()


def test_a_mem_another_writer_wrote_while_this_one_waited_for_the_lock_is_left(
    tmp_path: Path,
) -> None:
    lg = two_turns(tmp_path / "t.jsonl")
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(lg.path, other / "t.jsonl")
    LogView.open(other / "t.jsonl").close()  # the other writer's .mem, of the same bytes
    lock = file_lock(tmp_path / LOCK_NAME, timeout=30)
    got: list[Any] = []
    waiting = _Waiting()
    flog = logging.getLogger("filelock")
    level = flog.level
    flog.addHandler(waiting)
    flog.setLevel(logging.DEBUG)
    try:
        _race(lock, lg, other, waiting, got)
    finally:
        flog.removeHandler(waiting)
        flog.setLevel(level)
    assert got == [(False, None, lg.path.stat().st_size)]
    assert mem_path(lg.path).read_bytes() == mem_path(other / "t.jsonl").read_bytes()


def _race(lock: Any, lg: Log, other: Path, waiting: _Waiting, got: list[Any]) -> None:
    with lock:

        def search() -> None:
            try:
                with LogView.open(lg.path) as view:
                    assert view.mem is not None
                    got.append((view.wrote, view.rebuilt, view.mem.covered))
            except BaseException as exc:  # noqa: BLE001  said by the test
                got.append(exc)

        worker = threading.Thread(target=search)
        worker.start()
        assert waiting.seen.wait(30)
        # The search built its .mem and waits for the lock: the other writer's lands first.
        shutil.copy(mem_path(other / "t.jsonl"), lg.path.parent / "incoming")
        os.replace(lg.path.parent / "incoming", mem_path(lg.path))
        theirs = mem_path(lg.path).stat().st_ino
    worker.join(30)
    assert not worker.is_alive()
    assert mem_path(lg.path).stat().st_ino == theirs
