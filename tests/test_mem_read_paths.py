"""The shorter ways a later search reads: a small postings block as plain integers
(MemIndex.postings_many), a directory's reader known once (store.transcripts.plain_dir), and
the view told its reader; each gives what the full path gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path, word_keys
from nodwyn_retrieval.store.transcripts import NODWYN, place, plain_dir, reader_for, unplace
from nodwyn_retrieval.store.transcripts.claude import CLAUDE

from tests.support import Log


def _log(path: Path, outputs: int) -> Log:
    lg = Log(path)
    lg.add("person.message", text="Why does the binding reject localhost?")
    for i in range(outputs):
        # "common" in every result (a big block); "only{i}" in one (a small block)
        lg.result(f"common words here only{i} " + "filler " * (i % 7), path=f"f{i}.go")
    lg.end_turn()
    return lg


def test_postings_many_of_one_word_adds_what_postings_at_gives(tmp_path: Path) -> None:
    lg = _log(tmp_path / "t1.jsonl", 120)
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        small = big = 0
        for i in range(mem.n_words):
            docs, tfs = mem.postings_at(i)
            got_d: list[int] = [7]
            got_t: list[int] = [9]
            if not mem.postings_many([(i, got_d, got_t)], 1000):
                small += 1
                assert got_d == [7, *(int(d) + 1000 for d in docs)]
                assert got_t == [9, *map(int, tfs)]
                plain_d: list[int] = []
                plain_t: list[int] = []
                assert mem.postings_many([(i, plain_d, plain_t)], 0) == []
                assert np.array_equal(np.array(plain_d), docs)
            else:
                big += 1
                assert docs.shape[0] > 48
                assert (got_d, got_t) == ([7], [9])  # nothing added
        assert small
        assert big


def test_postings_many_of_many_words_adds_what_each_alone_adds_and_names_the_big_blocks(
    tmp_path: Path,
) -> None:
    lg = _log(tmp_path / "t1.jsonl", 120)
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        order = [*range(mem.n_words - 1, -1, -2), *range(0, mem.n_words, 2)]
        wanted: list[tuple[int, list[int], list[int]]] = [(i, [1], []) for i in order]
        big = mem.postings_many(wanted, 5)
        want_big = []
        for i, docs, tfs in wanted:
            d: list[int] = [1]
            t: list[int] = []
            if not mem.postings_many([(i, d, t)], 5):
                assert (docs, tfs) == (d, t)
            else:
                want_big.append(i)
                assert (docs, tfs) == ([1], [])
        assert big == want_big
        assert big
        with pytest.raises(FormatError, match="has no word"):
            mem.postings_many([(mem.n_words, [], [])], 0)


def test_a_damaged_small_block_is_found_by_postings_many(tmp_path: Path) -> None:
    lg = _log(tmp_path / "t1.jsonl", 3)
    LogView.open(lg.path).close()
    mp = mem_path(lg.path)
    with MemIndex.open(mp) as mem:
        off, length, _ = mem._sec[4]  # the postings
        n = mem.n_words
    data = bytearray(mp.read_bytes())
    for i in range(off, off + length):
        data[i] ^= 0x21
    mp.write_bytes(bytes(data))
    with MemIndex.open(mp) as mem:
        failed = 0
        for i in range(n):
            with pytest.raises(FormatError, match=r"^\.mem (postings of word \d+ fail|posting)"):
                mem.postings_at(i)
            with pytest.raises(FormatError, match=r"^\.mem (postings of word \d+ fail|posting)"):
                mem.postings_many([(i, [], [])], 0)
            failed += 1
        assert failed == n
        with pytest.raises(FormatError, match="has no word"):
            mem.postings_at(n)


def test_plain_dir_says_what_reader_for_says_of_each_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    assert plain_dir(tasks)
    assert reader_for(tasks / "t1.jsonl") is NODWYN
    projects = tmp_path / "claude" / "projects" / "p"
    projects.mkdir(parents=True)
    assert not plain_dir(projects)
    assert not plain_dir(tmp_path / "claude" / "projects")
    assert reader_for(projects / "s.jsonl") is not NODWYN
    assert plain_dir(tmp_path / "claude")  # its own logs are not an agent's transcripts
    placed = tasks / "placed.jsonl"
    place(placed, CLAUDE, tmp_path / "mems")
    try:
        assert plain_dir(tasks) is False  # a bool, as its signature says, not a falsy value
        assert reader_for(placed) is not NODWYN
        assert plain_dir(tmp_path / "tas")  # a name that starts the same is another directory
    finally:
        unplace(placed)
    assert plain_dir(tasks)


def test_a_view_told_its_reader_is_the_view_that_finds_it(tmp_path: Path) -> None:
    lg = _log(tmp_path / "t1.jsonl", 5)
    with LogView.open(lg.path) as a:
        assert a.mem is not None
        want = (a.mem.n_words, a.n_events, a.reader)
    with LogView.open(str(lg.path), reader=NODWYN, st=lg.path.stat()) as b:  # type: ignore[arg-type]
        assert b.mem is not None
        assert not b.wrote
        assert (b.mem.n_words, b.n_events, b.reader) == want
        assert isinstance(b.path, Path)


def test_found_keys_says_what_find_keys_says(tmp_path: Path) -> None:
    lg = _log(tmp_path / "t1.jsonl", 30)
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        words = ["common", "only3", "absent", "filler", "only29", "nowhere", "common"]
        keys = word_keys(words)
        at = mem.find_keys(keys)
        hit, where = mem.found_keys(keys)
        assert hit == [j for j in range(len(words)) if at[j] >= 0]
        assert where == [int(at[j]) for j in hit]
        assert [words[j] for j in hit] == ["common", "only3", "filler", "only29", "common"]
        assert mem.found_keys(word_keys([])) == ([], [])
        assert mem.found_keys(word_keys(["absent"])) == ([], [])



def test_postings_many_read_first_in_a_process_gives_what_postings_at_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A search's first read of small blocks in a new process goes through postings_many: the
    # readers of each block's shape are made there, not by postings_at before it.
    from nodwyn_retrieval.store import mem_format

    lg = _log(tmp_path / "t1.jsonl", 60)
    LogView.open(lg.path).close()
    monkeypatch.setattr(mem_format, "_SMALL_STRUCTS", {})
    with MemIndex.open(mem_path(lg.path)) as mem:
        wanted: list[tuple[int, list[int], list[int]]] = [(i, [], []) for i in range(mem.n_words)]
        big = mem.postings_many(wanted, 0)
        assert len(big) < mem.n_words
        for i, docs, tfs in wanted:
            want_d, want_t = mem.postings_at(i)
            if i not in big:
                assert (docs, tfs) == (want_d.tolist(), want_t.tolist())
