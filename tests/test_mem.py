"""store.mem: a log's .mem, checked against its log, rebuilt when off, extended when the log grows,
decoded a word at a time and never trusted when damaged (ADR 51, ADR 0050's amendments)."""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import FormatError, NotFound
from nodwyn_retrieval.retrieval.bm25 import Part, SegmentBuilder, search_all
from nodwyn_retrieval.retrieval.events import event_counts
from nodwyn_retrieval.store.mem import (
    MAGIC,
    LogView,
    MemIndex,
    mem_path,
    postings_of,
    word_key,
    word_keys,
)

from tests.support import Log

CANARY = "ghp_" + "Zq9" * 12  # a GitHub token shape: ghp_ and 36 letters and digits


def turn(log: Log, message: str, *outputs: str) -> None:
    log.add("person.message", text=message)
    for i, out in enumerate(outputs):
        log.result(out, path=f"f{i}.go")
    log.add("guard.decision", path="f0.go", verdict="allow")
    log.end_turn()


@pytest.fixture
def log(tmp_path: Path) -> Log:
    lg = Log(tmp_path / "t1.jsonl")
    turn(lg, "Why does the credential binding reject localhost?", "func Bind(host string)")
    turn(lg, "Rename ScrubEnv", "func ScrubEnv(env []string) []string", "ScrubEnv is used twice")
    return lg


def reference(path: Path) -> tuple[dict[int, dict[int, int]], list[int]]:
    """Every ranked event's words, as event_counts gives them, keyed as a .mem keys them."""
    out: dict[int, dict[int, int]] = {}
    lengths: list[int] = []
    d = 0
    for line in path.read_bytes().splitlines():
        event = json.loads(line)
        counts = event_counts(event)
        if counts is None:
            continue
        for w, c in counts.items():
            out.setdefault(word_key(w), {})[d] = c
        lengths.append(sum(counts.values()))
        d += 1
    return out, lengths


def test_a_mem_holds_each_ranked_events_words_as_event_counts_gives_them(log: Log) -> None:
    with LogView.open(log.path) as view:
        assert view.mem is not None
        assert postings_of(view.mem) == reference(log.path)[0]
        assert view.mem.lengths().tolist() == reference(log.path)[1]


def test_empty_texts_and_names_of_many_words_are_counted_as_event_counts_does(
    tmp_path: Path,
) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="ScrubEnv max_result_tokens getHTTPServer")
    lg.add("llm.resp", text="", calls=[])
    lg.add("plan", text="")
    lg.end_turn()
    lg.add("summary", text="ScrubEnv")
    lg.add("llm.resp", text="", calls=[])
    lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        assert postings_of(view.mem) == reference(lg.path)[0]
        assert view.mem.lengths().tolist() == reference(lg.path)[1]


def test_a_mem_is_beside_its_log_and_deleting_it_loses_nothing(log: Log) -> None:
    with LogView.open(log.path) as view:
        assert view.wrote
        first = postings_of(view.mem) if view.mem else {}
    assert mem_path(log.path) == log.path.with_name("t1.mem")
    mem_path(log.path).unlink()
    with LogView.open(log.path) as view:
        assert view.mem is not None
        assert postings_of(view.mem) == first


def test_a_mem_covers_whole_turns_and_folds_the_rest_at_the_search(log: Log) -> None:
    covered = log.path.stat().st_size
    log.add("person.message", text="an open turn")
    with LogView.open(log.path) as view:
        assert view.mem is not None
        assert view.mem.covered == covered
        assert [le.event["text"] for le in view.tail] == ["an open turn"]
        assert view.n_events == log.seq


def test_a_log_without_a_whole_turn_has_no_mem(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="hello")
    with LogView.open(lg.path) as view:
        assert view.mem is None
        assert view.n_ranked == 1
    assert not mem_path(lg.path).exists()


def test_a_torn_last_line_waits_until_it_is_completed(log: Log) -> None:
    with open(log.path, "ab") as f:
        f.write(b'{"seq":99,"ts":"x","kind":"person.message","turn":3,"agent":"main","te')
    with LogView.open(log.path) as view:
        assert view.last_seq == log.seq
    with open(log.path, "ab") as f:
        f.write(b'xt":"finished"}\n')
    with LogView.open(log.path) as view:
        assert view.last_seq == 99


def test_a_log_grown_by_whole_turns_extends_its_mem_as_a_build_from_scratch_would(
    log: Log,
) -> None:
    LogView.open(log.path).close()
    turn(log, "a third turn", "func third()", "ScrubEnv once more")
    with LogView.open(log.path) as view:
        assert view.wrote
        assert view.rebuilt is None
        extended = view.mem.fold() if view.mem else None
    mem_path(log.path).unlink()
    with LogView.open(log.path) as view:
        fresh = view.mem.fold() if view.mem else None
    assert extended is not None
    assert fresh is not None
    assert postings_of(MemIndex.open(mem_path(log.path))) == reference(log.path)[0]
    assert extended.doc_len.tolist() == fresh.doc_len.tolist()
    assert extended.doc_event.tolist() == fresh.doc_event.tolist()
    assert extended.cards == fresh.cards
    for name in ("ev_seq", "ev_off", "ev_len", "ev_turn"):
        assert extended.ev[name].tolist() == fresh.ev[name].tolist()


def test_a_partial_segment_scores_as_the_whole_collection(log: Log) -> None:
    query = ["scrubenv", "env", "binding", "absent"]
    with LogView.open(log.path) as view:
        assert view.mem is not None
        got = search_all([Part(view.mem.segment(query))], query, 10)
    b = SegmentBuilder()
    for line in log.path.read_bytes().splitlines():
        counts = event_counts(json.loads(line))
        if counts is not None:
            b.add(counts)
    want = search_all([Part(b.build())], query, 10)
    assert [(h.doc, round(h.score, 9)) for h in got] == [(h.doc, round(h.score, 9)) for h in want]


def rebuilt_from(log: Log, damage: Any) -> LogView:
    LogView.open(log.path).close()
    mp = mem_path(log.path)
    mp.write_bytes(damage(mp.read_bytes()))
    return LogView.open(log.path)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b[: len(b) // 2], r"shorter|outside|lengths"),
        (lambda b: b"\x89PNG\r\n\x1a\n" + b"\0" * 4000, r"not a \.mem"),
        (lambda b: b[:4] + b"\x00\x09" + b[6:], r"format version 9"),
        (lambda b: b[:40] + bytes([b[40] ^ 0xFF]) + b[41:], r"head fails its check"),
    ],
    ids=["truncated", "foreign", "another version", "corrupt head"],
)
def test_a_damaged_mem_is_rebuilt(log: Log, damage: Any, why: str) -> None:
    with rebuilt_from(log, damage) as view:
        assert view.rebuilt is not None
        assert re.search(why, view.rebuilt)
        assert view.mem is not None
        assert postings_of(view.mem) == reference(log.path)[0]


def test_damaged_postings_are_found_when_read(log: Log) -> None:
    LogView.open(log.path).close()
    mp = mem_path(log.path)
    with MemIndex.open(mp) as mem:
        off, length, _ = mem._sec[4]  # the postings
    data = bytearray(mp.read_bytes())
    for i in range(off, off + length):
        data[i] ^= 0x5A
    mp.write_bytes(bytes(data))
    with LogView.open(log.path) as view:
        assert view.mem is not None
        with pytest.raises(FormatError, match=r"^\.mem postings of word \d+ fail their check"):
            view.mem.segment(["scrubenv"])


@pytest.mark.parametrize("how", ["rewritten", "cut"])
def test_a_log_that_was_rewritten_or_cut_rebuilds_its_mem(log: Log, how: str) -> None:
    LogView.open(log.path).close()
    data = log.path.read_bytes()
    if how == "rewritten":  # the same size, the same lines, another word
        log.path.write_bytes(data.replace(b"localhost", b"remoteside"))
    else:
        log.path.write_bytes(data[: data.index(b'"turn.end"')].rsplit(b"\n", 1)[0] + b"\n")
    with LogView.open(log.path) as view:
        if how == "rewritten":
            assert view.rebuilt == "the log no longer holds what it was built from"
            assert view.mem is not None
            assert postings_of(view.mem) == reference(log.path)[0]
        else:
            assert view.mem is None
    if how == "cut":
        assert not mem_path(log.path).exists()


def test_a_canary_credential_never_reaches_the_mem(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text=f"my token is {CANARY}")
    lg.result(f"GITHUB_TOKEN={CANARY}\n", name="shell", cmd=f"echo {CANARY}")
    lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        keys = set(postings_of(view.mem))
    data = mem_path(lg.path).read_bytes()
    assert CANARY.encode() not in data
    assert CANARY[4:].encode() not in data
    assert word_key(CANARY.lower()) not in keys
    assert word_key(CANARY[4:].lower()) not in keys
    assert word_key("redacted") in keys


def test_a_mem_holds_no_text_but_its_cards_first_lines(log: Log) -> None:
    LogView.open(log.path).close()
    data = mem_path(log.path).read_bytes()
    assert b"Rename ScrubEnv" in data  # the second turn's card
    assert b"func ScrubEnv" not in data
    assert b"func Bind" not in data
    assert b"Let me look" not in data


@given(words=st.lists(st.text(max_size=70), max_size=30))
@settings(max_examples=100, deadline=None)
def test_word_keys_of_many_words_are_each_words_key(words: list[str]) -> None:
    assert word_keys(words).tolist() == [word_key(w) for w in words]


def test_a_missing_log_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"^no log at .*nope\.jsonl$"):
        LogView.open(tmp_path / "nope.jsonl")


def _good_mem(tmp_path: Path) -> bytes:
    lg = Log(tmp_path / "fuzz.jsonl")
    turn(lg, "credential binding", "func Bind(host string)", "ScrubEnv")
    turn(lg, "second", "more output")
    LogView.open(lg.path).close()
    return mem_path(lg.path).read_bytes()


GOOD: dict[str, bytes] = {}


QUERY = ["credential", "binding", "scrubenv", "absent"]


def _use(mem: MemIndex) -> None:
    """Everything a search, a recall or an extension reads."""
    mem.segment(QUERY)
    mem.events()
    mem.cards()
    mem.card(1)
    _ = mem.kinds
    mem.doc_events()
    mem.fold()


def _exercise(data: bytes) -> bool:
    """Decode data and use what decoded: only FormatError may come out, at the open or at a use.
    True when every use succeeded."""
    try:
        mem = MemIndex.from_bytes(data)
    except FormatError:
        return False
    try:
        _use(mem)
    except FormatError:
        return False
    finally:
        mem.close()
    return True


def test_the_fuzz_helper_uses_a_good_mem_whole_and_refuses_garbage(tmp_path: Path) -> None:
    good = _good_mem(tmp_path)
    assert _exercise(good)
    with MemIndex.from_bytes(good) as mem:
        assert mem.segment(QUERY).n_docs > 0
        assert mem.n_events == 12
        assert [c.turn for c in mem.cards()] == [1, 2]
    assert not _exercise(b"")
    assert not _exercise(MAGIC + b"\x00\x01\x00\x00" + bytes(600))
    # Every cut is refused but those of the zero padding that aligns the file to 8 bytes.
    kept = [at for at in range(len(good)) if _exercise(good[:at])]
    assert len(kept) < 8
    assert not kept or (kept == list(range(kept[0], len(good))) and not any(good[kept[0] :]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=600))
def test_decoding_random_bytes_never_crashes(data: bytes) -> None:
    # 600 random bytes never hold a valid .mem (its head alone is longer): refused, not a crash.
    assert not _exercise(MAGIC + b"\x00\x01\x00\x00" + data)
    assert not _exercise(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(min_value=0, max_value=10_000), flips=st.lists(st.integers(0, 10**6)))
def test_decoding_a_cut_or_flipped_mem_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flips: list[int]
) -> None:
    if "mem" not in GOOD:
        GOOD["mem"] = _good_mem(tmp_path_factory.mktemp("fuzz"))
    good = bytearray(GOOD["mem"])
    at = cut % (len(good) + 1)
    # Whole, it decodes and is used; cut into its content (not only its padding), it is refused;
    # flipped, either.
    if at == len(good):
        assert _exercise(bytes(good))
    elif at <= len(good) - 8:
        assert not _exercise(bytes(good[:at]))
    for f in flips:
        good[(f // 8) % len(good)] ^= 1 << (f % 8)
    _exercise(bytes(good))


def test_a_huge_count_in_a_head_allocates_nothing(tmp_path: Path) -> None:
    data = bytearray(_good_mem(tmp_path))
    # events at offset 12 + 3 * 8 in the fixed head: claim 2**60 of them, with a fresh head CRC.
    struct.pack_into("<Q", data, 12 + 24, 2**60)
    head_end = 12 + struct.calcsize("<QQQQQQQQQB7xQQqqq32s32sII" + "QQI" * 15)
    struct.pack_into("<I", data, 8, zlib.crc32(bytes(data[12:head_end])))
    with pytest.raises(FormatError, match=r"^\.mem counts pass what the file could hold: rebuild$"):
        MemIndex.from_bytes(bytes(data))


def test_a_mem_written_elsewhere_is_left_when_it_covers_as_much(log: Log) -> None:
    LogView.open(log.path).close()
    before = os.stat(mem_path(log.path)).st_ino
    with LogView.open(log.path) as view:
        assert not view.wrote
    assert os.stat(mem_path(log.path)).st_ino == before


def test_a_mem_that_cannot_be_written_is_searched_from_memory(log: Log) -> None:
    mem_path(log.path).mkdir()  # in the way of the write, as a full disk would be
    with LogView.open(log.path) as view:
        assert view.mem is not None
        assert not view.wrote
        assert view.mem.segment(["scrubenv"]).n_postings == 3


def test_doc_lengths_are_quantities_up_to_2_to_the_31(tmp_path: Path) -> None:
    lg = Log(tmp_path / "big.jsonl")
    lg.add("person.message", text="word " * 70_000)
    lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        assert view.mem.lengths().tolist() == [70_000]
        docs, tfs = view.mem.postings("word")
        assert (docs.tolist(), tfs.tolist()) == ([0], [70_000])
    assert np.uint32(70_000) == 70_000
