"""A ``.mem``'s check against its log at its edges (docs/conversation.md, "Checked, and rebuilt
when off"): the covered bytes' first 4 KiB and last 64 KiB hashed, the log's ``stat`` trusted
alone only when its change time is more than 2 s older than the build, and the ``.mem`` covering
whole turns only.

What is checked is what a search sees: whether the ``.mem`` was kept or rebuilt, and the words it
then holds; or, for the check itself, whether it says a log is the one it was made of.
"""

from __future__ import annotations

import gc
import json
import os
import threading
from pathlib import Path

from nodwyn_retrieval.store.mem import (
    LogCheck,
    LogView,
    MemIndex,
    covered_end,
    mem_path,
    parse_lines,
    postings_of,
    word_key,
)

from tests.support import Log

KIB = 1024


def long_turn(path: Path, size: int) -> Log:
    """One whole turn whose tool output is ``size`` bytes of distinct words (w000000 w000001 ...)
    then a second turn's opening message, not closed."""
    lg = Log(path)
    lg.add("person.message", text="read the long file")
    words = " ".join(f"w{i:06d}" for i in range(size // 8))
    lg.result(words, path="long.txt")
    lg.end_turn()
    return lg


def covered_of(lg: Log) -> int:
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        assert view.wrote
        return view.mem.covered


def rewrite_word_at(path: Path, at: int) -> str:
    """Replace, in place and at the same size, the word ``wNNNNNN`` holding byte ``at`` by
    ``xNNNNNN``; the word replaced."""
    data = bytearray(path.read_bytes())
    start = data.rindex(b" w", 0, at + 1) + 1
    word = data[start : start + 7].decode()
    assert word.startswith("w")
    assert start <= at <= start + 7  # in the word, or the space after it
    data[start] = ord("x")
    with open(path, "r+b") as f:  # the same inode, the same size: only the bytes differ
        f.write(bytes(data))
    return word


def found_again(lg: Log, word: str) -> bool:
    """Whether the next search rebuilt the ``.mem`` and it holds the rewritten word."""
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        keys = postings_of(view.mem)
        if view.rebuilt is None:
            assert word_key(word) in keys  # kept: the old word is still there
            return False
        assert view.rebuilt == "the log no longer holds what it was built from"
        assert word_key("x" + word[1:]) in keys
        assert word_key(word) not in keys
        return True


def test_a_rewrite_anywhere_in_the_last_64_kib_of_what_is_covered_rebuilds_the_mem(
    tmp_path: Path,
) -> None:
    for n, back in enumerate((40 * KIB, 64 * KIB - 10, 3 * KIB)):
        lg = long_turn(tmp_path / f"t{n}.jsonl", 200 * KIB)
        covered = covered_of(lg)
        assert covered > 200 * KIB
        word = rewrite_word_at(lg.path, covered - back)
        assert found_again(lg, word), back


def test_a_rewrite_in_the_first_4_kib_rebuilds_the_mem_and_one_between_the_ends_does_not(
    tmp_path: Path,
) -> None:
    # The documented bounds of the check: the first 4,096 bytes and the last 65,536 (a rewrite
    # between them, at the same size, is not looked for).
    lg = long_turn(tmp_path / "head.jsonl", 200 * KIB)
    covered_of(lg)
    assert found_again(lg, rewrite_word_at(lg.path, 4 * KIB - 3))
    lg = long_turn(tmp_path / "middle.jsonl", 200 * KIB)
    covered = covered_of(lg)
    assert not found_again(lg, rewrite_word_at(lg.path, covered - 64 * KIB - 40))
    assert not found_again(lg, rewrite_word_at(lg.path, 4 * KIB + 40))


def test_a_log_only_touched_keeps_its_mem_unwritten(tmp_path: Path) -> None:
    # The covered bytes are the whole log: its stat changed, its hashes did not.
    lg = long_turn(tmp_path / "t.jsonl", 8 * KIB)
    covered = covered_of(lg)
    assert covered == lg.path.stat().st_size
    before = mem_path(lg.path).stat().st_ino
    st = lg.path.stat()
    os.utime(lg.path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    with LogView.open(lg.path) as view:
        assert (view.rebuilt, view.wrote, view.tail) == (None, False, [])
        assert view.mem is not None
        assert view.mem.covered == covered
    assert mem_path(lg.path).stat().st_ino == before


def test_a_log_cut_inside_what_is_covered_fails_the_check(tmp_path: Path) -> None:
    lg = long_turn(tmp_path / "t.jsonl", 8 * KIB)
    covered = covered_of(lg)
    with MemIndex.open(mem_path(lg.path)) as mem:
        check = mem.check
    assert check.covered == covered
    with open(lg.path, "rb") as f:
        assert check.hashes_match(f)
        assert check.holds(f)
    with open(lg.path, "r+b") as f:
        f.truncate(covered - 1)
    with open(lg.path, "rb") as f:
        assert not check.hashes_match(f)
        assert not check.holds(f)


def _check_of(path: Path) -> tuple[LogCheck, os.stat_result]:
    st = os.stat(path)
    with open(path, "rb") as f:
        return LogCheck.of(f, st.st_size, st), st


def test_stat_alone_is_trusted_only_when_the_log_changed_over_2_s_before_the_build(
    tmp_path: Path,
) -> None:
    lg = long_turn(tmp_path / "t.jsonl", KIB)
    check, st = _check_of(lg.path)
    assert (check.ino, check.size, check.mtime_ns, check.ctime_ns) == (
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )
    # Just written: the log changed within 2 s of the build, so it is hashed at every check.
    assert not check.unchanged(os.stat(lg.path))
    ctime = st.st_ctime_ns
    assert not check._replace(built_ns=ctime + 2_000_000_000).unchanged(st)
    old = check._replace(built_ns=ctime + 2_000_000_001)
    assert old.unchanged(st)
    assert old.unchanged(os.stat(lg.path))
    # Any of the inode, the size and the two times changed: not unchanged.
    for name, value in (
        ("ino", st.st_ino + 1),
        ("size", st.st_size + 1),
        ("mtime_ns", st.st_mtime_ns - 1),
        ("ctime_ns", st.st_ctime_ns - 1),
    ):
        assert not old._replace(**{name: value}).unchanged(st), name


def test_a_log_stat_shows_unchanged_is_not_hashed_and_one_it_does_not_is(tmp_path: Path) -> None:
    lg = long_turn(tmp_path / "t.jsonl", KIB)
    check, st = _check_of(lg.path)
    wrong = check._replace(head_sha=b"\0" * 32, tail_sha=b"\0" * 32)
    with open(lg.path, "rb") as f:
        assert check.holds(f)  # racy, hashed: they match
        assert not wrong.holds(f)  # racy, hashed: they do not
        assert wrong._replace(built_ns=st.st_ctime_ns + 3_000_000_000).holds(f)  # stat alone


def test_the_hashes_are_of_the_first_4_kib_and_the_last_64_kib_of_what_is_covered(
    tmp_path: Path,
) -> None:
    import hashlib

    lg = long_turn(tmp_path / "t.jsonl", 100 * KIB)
    data = lg.path.read_bytes()
    covered = len(data) - 100
    st = os.stat(lg.path)
    with open(lg.path, "rb") as f:
        check = LogCheck.of(f, covered, st)
        short = LogCheck.of(f, 1000, st)
    assert check.head_sha == hashlib.sha256(data[:4096]).digest()
    assert check.tail_sha == hashlib.sha256(data[covered - 65536 : covered]).digest()
    assert short.head_sha == short.tail_sha == hashlib.sha256(data[:1000]).digest()


# -- whole turns only ----------------------------------------------------------------------------


def line(seq: int, kind: str = "note") -> bytes:
    return json.dumps({"seq": seq, "kind": kind, "turn": 1, "agent": "main"}).encode() + b"\n"


def test_what_is_covered_ends_just_past_the_last_turn_end_line() -> None:
    data = line(1) + line(2, "turn.end") + line(3) + line(4, "turn.end") + line(5)
    events, _, _ = parse_lines(data, 1000, 0)
    assert covered_end(events, 1000) == (1000 + len(data) - len(line(5)), 4)
    # The first event the only turn.end: one event covered.
    events, _, _ = parse_lines(line(1, "turn.end") + line(2), 0, 0)
    assert covered_end(events, 0) == (len(line(1, "turn.end")), 1)
    # None closes a turn: nothing more covered than before.
    events, _, _ = parse_lines(line(1) + line(2), 77, 0)
    assert covered_end(events, 77) == (77, 0)
    assert covered_end([], 5) == (5, 0)


def test_a_log_opening_with_a_turn_end_has_a_mem_of_that_line_alone(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1, "turn.end") + line(2, "person.message")[:-2] + b',"text":"open"}\n')
    with LogView.open(path) as view:
        assert view.mem is not None
        assert view.mem.covered == len(line(1, "turn.end"))
        assert (view.mem.n_events, view.mem.first_seq, view.mem.last_seq) == (1, 1, 1)
        assert [le.event["text"] for le in view.tail] == ["open"]
        assert (view.first_seq, view.last_seq, view.n_events, view.n_ranked) == (1, 2, 2, 1)


def _busy_log(path: Path) -> Log:
    lg = Log(path)
    for i in range(400):  # thousands of containers made and dropped: collections run
        lg.result(" ".join(f"w{i}x{j}" for j in range(30)), path=f"f{i}.txt")
        lg.end_turn()
    return lg


def test_a_build_leaves_the_host_s_collector_running_and_collecting(tmp_path: Path) -> None:
    lg = _busy_log(tmp_path / "t.jsonl")
    seen: list[bool] = []

    def during(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(gc.isenabled())

    gc.collect()
    gc.callbacks.append(during)
    try:
        with LogView.open(lg.path) as view:  # the build, in this thread, as a host calls it
            assert view.mem is not None
            assert (view.mem.n_events, view.mem.n_docs) == (1200, 800)
    finally:
        gc.callbacks.remove(during)
    # The collector ran during the build (a library does not switch off its host's) and was on.
    assert len(seen) > 5
    assert all(seen)
    assert gc.isenabled()


def test_a_host_that_turns_the_collector_off_during_a_build_finds_it_off(tmp_path: Path) -> None:
    lg = _busy_log(tmp_path / "t.jsonl")
    started, stop = threading.Event(), threading.Event()
    states: list[bool] = []

    def host() -> None:  # the host's own thread switches its collector off while a build runs
        started.wait(10)
        gc.disable()
        while not stop.is_set():
            states.append(gc.isenabled())
            stop.wait(0.001)

    worker = threading.Thread(target=host)
    worker.start()
    try:
        started.set()
        with LogView.open(lg.path) as view:
            assert view.mem is not None
        stop.set()
        worker.join(10)
        assert not gc.isenabled()  # left as the host set it, not turned on again
        assert states
        assert not any(states)
    finally:
        stop.set()
        worker.join(10)
        gc.enable()


def test_a_collector_turned_off_stays_off_after_a_build(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.result("one two", path="a.txt")
    lg.end_turn()
    gc.disable()
    try:
        covered_of(lg)
        assert not gc.isenabled()
    finally:
        gc.enable()
