"""The indexer's work on a file's bytes, its measure of the machine, and its snapshot's file.

What a caller of ``actors/_work.py`` sees: which bytes are indexed and which skipped, the content
address of the redacted text, what is written to the chunk store and what a store that cannot be
written says, the postings of a batch, a chunk's lines, the slowdown measured by the kernel's own
accounting of this process's threads, and a snapshot read back, dropped when damaged and left
alone when missing or unreadable. Written for the module's mutation run (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._results import redacted_lines
from nodwyn_retrieval.actors._work import (
    BINARY_SNIFF,
    SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
    Contention,
    analyze_batch,
    analyze_blob,
    analyze_packed,
    cpu_seconds,
    load_factor,
    load_snapshot,
    read_snapshot,
    sched_times,
)
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.tree import TreeSegment
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.codec import encode

SOURCE = b"def heron_wing(x):\n    return x + 1\n\n\nclass Plover:\n    pass\n"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _burn(seconds: float) -> None:
    """Use this thread's CPU for at least ``seconds`` of its own run time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


# -- which bytes are indexed -----------------------------------------------------------------------


def test_git_s_sniff_is_8000_bytes() -> None:
    assert BINARY_SNIFF == 8000


def test_a_nul_within_the_first_8000_bytes_skips_the_file_and_one_after_them_does_not() -> None:
    inside = b"x" * 7999 + b"\0" + b"\nheron\n"
    assert analyze_blob("a.py", inside, None).skip == "binary"
    at_start = b"\0heron\n"
    assert analyze_blob("b.py", at_start, None).skip == "binary"
    after = b"x" * 8000 + b"\0" + b"\nheron\n"
    got = analyze_blob("c.py", after, None)
    assert got.skip is None
    assert got.record is not None
    assert "heron" in got.record.vocab


def test_bytes_that_are_not_utf8_are_skipped_and_said_so() -> None:
    got = analyze_blob("latin.txt", b"caf\xe9 au lait\n", None)
    assert (got.path, got.skip, got.record, got.key) == ("latin.txt", "not_utf8", None, "")


def test_a_text_file_is_analyzed_with_its_size_and_its_content_address() -> None:
    got = analyze_blob("m.py", SOURCE, None)
    assert got.skip is None
    assert got.record == analyze(SOURCE.decode())
    assert got.text_bytes == len(SOURCE)
    assert got.redactions == 0
    assert got.key == ChunkStore.key(hashlib.sha256(SOURCE).hexdigest())
    assert not got.stored  # no store given: nothing written


def test_the_address_is_of_the_redacted_text_and_the_credential_is_not_indexed() -> None:
    one = f"API = '{TOKEN}'\ndef plover():\n    pass\n".encode()
    other = one.replace(b"A1b2C3", b"Z9y8X7")
    a = analyze_blob("a.py", one, None)
    b = analyze_blob("b.py", other, None)
    assert a.redactions == b.redactions == 1
    assert a.key == b.key  # the same redacted text, whatever the secret was
    assert a.record is not None
    assert not any(TOKEN.lower()[4:10] in w for w in a.record.vocab)
    assert a.text_bytes == len(one)  # the size of the file's own text


# -- the chunk store -------------------------------------------------------------------------------


def test_a_new_record_is_written_when_asked_and_not_otherwise(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    store = ChunkStore(chunks)
    kept = analyze_blob("m.py", SOURCE, str(chunks))
    assert not kept.stored
    assert not store.exists(kept.key)
    written = analyze_blob("m.py", SOURCE, str(chunks), store=True)
    assert written.stored
    assert written.store_error is None
    assert store.get(written.key) == written.record


def test_a_record_the_store_holds_is_not_made_again(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    first = analyze_blob("m.py", SOURCE, str(chunks), store=True)
    again = analyze_blob("n.py", SOURCE, str(chunks), store=True)
    assert again.record is None  # nothing to write
    assert (again.path, again.skip, again.key) == ("n.py", None, first.key)
    assert again.text_bytes == len(SOURCE)


def test_a_store_that_cannot_be_written_is_said_and_the_record_kept(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    chunks = blocker / "chunks"
    got = analyze_blob("m.py", SOURCE, str(chunks), store=True)
    assert not got.stored
    assert got.store_error is not None
    assert "chunks" in got.store_error
    assert got.record == analyze(SOURCE.decode())  # still indexed, in memory
    batch = analyze_batch([("m.py", SOURCE)], str(chunks))
    assert batch[0].store_error is not None
    assert batch[0].record is not None


def test_a_batch_is_analyzed_in_order_and_its_new_records_stored(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    items = [("a.py", SOURCE), ("b.bin", b"\0\1\2"), ("c.py", b"def lapwing():\n    pass\n")]
    got = analyze_batch(items, str(chunks))
    assert [(a.path, a.skip) for a in got] == [("a.py", None), ("b.bin", "binary"), ("c.py", None)]
    assert got[0].stored
    assert got[2].stored
    store = ChunkStore(chunks)
    assert store.get(got[2].key) == got[2].record


def test_a_packed_batch_gives_each_indexed_files_postings_in_order(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    two_chunks = b"".join(f"def tern_{i}():\n    pass\n".encode() for i in range(2))
    items = [("a.py", SOURCE), ("b.bin", b"\0x"), ("c.py", two_chunks), ("d.txt", b"\xff\n")]
    out, pairs = analyze_packed(items, str(chunks))
    assert [(a.path, a.skip) for a in out] == [
        ("a.py", None), ("b.bin", "binary"), ("c.py", None), ("d.txt", "not_utf8"),
    ]  # fmt: skip
    indexed = [a for a in out if a.skip is None]
    assert all(a.packed and a.stored and a.record is None for a in indexed)
    assert all(not a.packed for a in out if a.skip is not None)
    recs = [analyze(SOURCE.decode()), analyze(two_chunks.decode())]
    assert pairs.n_chunks.tolist() == [r.n_chunks for r in recs]
    assert pairs.n_docs == sum(r.n_chunks for r in recs)
    assert "heron" in pairs.words
    assert "tern" in pairs.words
    store = ChunkStore(chunks)
    assert [store.get(a.key) for a in indexed] == recs


def test_a_packed_batch_reads_and_touches_a_stored_record(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    first = analyze_blob("a.py", SOURCE, str(chunks), store=True)
    path = ChunkStore(chunks).path(first.key)
    os.utime(path, (1_000_000, 1_000_000))  # old: the collection's next candidate
    out, pairs = analyze_packed([("a.py", SOURCE)], str(chunks))
    assert out[0].stored
    assert out[0].packed
    assert out[0].skip is None
    assert pairs.n_chunks.tolist() == [first.record.n_chunks if first.record else -1]
    assert path.stat().st_mtime > time.time() - 3600  # touched: the collection spares it


def test_a_stored_record_that_no_longer_decodes_is_made_again_and_put_back(
    tmp_path: Path,
) -> None:
    chunks = tmp_path / "chunks"
    first = analyze_blob("a.py", SOURCE, str(chunks), store=True)
    store = ChunkStore(chunks)
    store.path(first.key).write_bytes(b"NRCK damaged")
    out, pairs = analyze_packed([("a.py", SOURCE)], str(chunks))
    assert out[0].stored
    assert out[0].store_error is None
    assert pairs.n_chunks.tolist() == [analyze(SOURCE.decode()).n_chunks]
    assert ChunkStore(chunks).get(first.key) == analyze(SOURCE.decode())  # put back whole


# -- a chunk's lines -------------------------------------------------------------------------------


def chunk_lines(data: bytes, start: int, end: int) -> list[str]:
    """A search's lines start to end (1-based, inclusive) of a file: cut from the file redacted
    whole (actors/_results.py)."""
    return redacted_lines(data)[start - 1 : end]


def test_a_chunks_lines_are_its_lines_one_based_and_inclusive() -> None:
    data = b"one\ntwo\r\nthree\nfour\nfive"
    assert chunk_lines(data, 1, 1) == ["one"]
    assert chunk_lines(data, 2, 3) == ["two", "three"]
    assert chunk_lines(data, 4, 5) == ["four", "five"]  # the last line has no newline
    assert chunk_lines(data, 1, 5) == ["one", "two", "three", "four", "five"]
    assert chunk_lines(data, 5, 9) == ["five"]  # a file shorter than its chunk now
    assert chunk_lines(data, 6, 8) == []
    assert chunk_lines(b"a\nb\n", 3, 3) == []  # the final newline starts no line
    assert chunk_lines(b"caf\xe9\nok\n", 1, 2) == ["caf\ufffd", "ok"]


# -- the machine -----------------------------------------------------------------------------------


def test_the_kernel_counts_this_processs_run_time() -> None:
    before = sched_times()
    assert before is not None
    _burn(0.05)
    after = sched_times()
    assert after is not None
    assert after[0] - before[0] >= 40_000_000  # nanoseconds run, at least most of the burn
    assert after[1] >= before[1]


def test_a_threads_cpu_time_counts_its_work_and_not_its_sleep() -> None:
    t0 = cpu_seconds()
    time.sleep(0.2)
    slept = cpu_seconds() - t0
    t1 = cpu_seconds()
    _burn(0.1)
    worked = cpu_seconds() - t1
    assert slept < 0.05
    assert worked >= 0.1


def test_the_load_factor_is_the_load_per_core_between_1_and_32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = len(os.sched_getaffinity(0))
    for load, want in [
        (3.0 * cores, 3.0),
        (0.2, 1.0),
        (1000.0 * cores, 32.0),
        (32.5 * cores, 32.0),
    ]:
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        assert load_factor() == pytest.approx(want)


def test_without_a_load_average_the_load_factor_is_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_load_average() -> tuple[float, float, float]:
        raise OSError("no load average on this system")

    monkeypatch.setattr(os, "getloadavg", no_load_average)
    assert load_factor() == 1.0


def test_too_little_run_time_to_tell_gives_the_fallback_at_least_1() -> None:
    assert Contention(lambda: 3.5).factor() == 3.5
    assert Contention(lambda: 0.25).factor() == 1.0
    c = Contention(lambda: 7.0)
    _burn(0.01)  # a fifth of the 0.05 s a window needs
    assert c.factor() == 7.0


def test_a_window_long_enough_is_measured_and_kept_for_the_next_short_one() -> None:
    never = 1e9  # no slowdown this large can be measured over a window of seconds
    c = Contention(lambda: never)
    _burn(0.1)
    measured = c.factor()
    assert 1.0 <= measured < never
    c.start()  # the window just ended is the figure until the new one has enough run time
    assert c.factor() < never


def test_sharing_a_core_with_a_busy_process_is_measured_as_a_slowdown() -> None:
    cpu = min(os.sched_getaffinity(0))
    was = os.sched_getaffinity(0)
    loop = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nprint(flush=True)\nwhile True: pass"
    with subprocess.Popen([sys.executable, "-c", loop], stdout=subprocess.PIPE) as hog:
        try:
            os.sched_setaffinity(0, {cpu})
            assert hog.stdout is not None
            hog.stdout.readline()  # the hog is on the core, and spinning from now on
            c = Contention(lambda: 1.0)
            _burn(0.3)
            # Half the core at most (more when anything else runs there): runnable as long as
            # run.
            assert c.factor() >= 1.5
        finally:
            os.sched_setaffinity(0, was)
            hog.kill()


# -- the snapshot's file ---------------------------------------------------------------------------


def _segment() -> TreeSegment:
    return TreeSegment.build([("m.py", ChunkStore.key("0" * 64), analyze(SOURCE.decode()))])


def test_the_snapshots_file_is_named_nrts_version_3() -> None:
    assert (SNAPSHOT_MAGIC, SNAPSHOT_VERSION) == (b"NRTS", 3)


def test_a_version_2_snapshot_is_dropped_to_be_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "t.snap"
    path.write_bytes(encode(b"NRTS", 2, _segment().to_obj()))
    assert read_snapshot(path) == (None, True)
    assert not path.exists()


def test_a_snapshot_reads_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "t.snap"
    path.write_bytes(encode(b"NRTS", 3, _segment().to_obj()))
    seg, dropped = read_snapshot(path)
    assert not dropped
    assert seg is not None
    assert list(seg.files) == ["m.py"]
    assert seg.n_docs == analyze(SOURCE.decode()).n_chunks
    assert load_snapshot(path) is not None
    assert path.exists()


def test_a_missing_snapshot_is_none_and_not_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nodwyn_retrieval.actors.indexer"):
        assert read_snapshot(tmp_path / "none.snap") == (None, False)
        assert load_snapshot(tmp_path / "none.snap") is None
    assert not caplog.records


def test_a_snapshot_that_is_a_directory_or_a_fifo_is_dropped_and_cleared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the library writes a snapshot, and always as a file: anything else at its path is
    damage, dropped (said rebuilt) and removed so the next write is made; a FIFO is never
    waited on."""
    for path, make in ((tmp_path / "t.snap", Path.mkdir), (tmp_path / "f.snap", os.mkfifo)):
        make(path)
        with caplog.at_level(logging.INFO, logger="nodwyn_retrieval.actors.indexer"):
            assert read_snapshot(path) == (None, True)
        assert not path.exists()
        assert any(
            "dropped" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records
        )


@pytest.mark.parametrize(
    "data",
    [
        b"NRTS damaged",
        encode(b"NRTS", 1, {"old": 1}),  # the format before: rebuilt, not misread
        encode(b"NRTS", 4, {"new": 1}),
        encode(b"NRCK", 2, {"segment": 1}),  # another kind of file
        encode(b"NRTS", 3, {"segment": "not one"}),
    ],
)
def test_a_damaged_snapshot_is_dropped_deleted_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, data: bytes
) -> None:
    path = tmp_path / "t.snap"
    path.write_bytes(data)
    with caplog.at_level(logging.INFO, logger="nodwyn_retrieval.actors.indexer"):
        assert read_snapshot(path) == (None, True)
    assert not path.exists()
    assert any("dropped" in r.getMessage() for r in caplog.records)
    path.write_bytes(data)
    assert load_snapshot(path) is None
    assert not path.exists()
