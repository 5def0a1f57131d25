"""A log's ``.mem`` at its edges: the shapes of postings a real log makes (a word in one event or
in many, said once or hundreds of times), events found by seq at the ends of the log, every turn's
card, and a ``.mem`` damaged anywhere refused or read right, never read wrong (ADR 51).

Everything is checked against what the log itself says (its events, event_counts of each), and
through what a search reads (store.mem's LogView and MemIndex), not against the file's layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.bm25 import Part, SegmentBuilder, search_all
from nodwyn_retrieval.retrieval.events import event_counts
from nodwyn_retrieval.store.mem import (
    LogView,
    MemIndex,
    build_mem,
    mem_path,
    postings_of,
    word_key,
)

from tests.support import Log


def shaped_log(path: Path, turns: int = 3) -> Log:
    """Turns whose words make every shape of postings block: a word in one event, in about 50
    (a block read as integers or as arrays), said once, 300 times (two-byte frequencies)."""
    lg = Log(path)
    for t in range(turns):
        lg.add("person.message", text=f"turn{t} question about the parser")
        for i in range(25):
            lg.result(f"common line {i} unique{t}x{i}", path=f"f{i}.py")
        lg.result("loud " * 300 + "quiet", path="loud.py")
        lg.add("person.message", text="many " * 70_000, agent="sub")  # four-byte frequencies
        lg.end_turn()
    return lg


def reference(path: Path) -> tuple[dict[int, dict[int, int]], list[int], list[int]]:
    """Every ranked event's word counts keyed as a .mem keys them, each ranked event's length
    and the seqs of all events, from the log's lines."""
    out: dict[int, dict[int, int]] = {}
    lengths: list[int] = []
    seqs: list[int] = []
    d = 0
    for line in path.read_bytes().splitlines():
        event = json.loads(line)
        seqs.append(event["seq"])
        counts = event_counts(event)
        if counts is None:
            continue
        for w, c in counts.items():
            out.setdefault(word_key(w), {})[d] = c
        lengths.append(sum(counts.values()))
        d += 1
    return out, lengths, seqs


def scores(segment: Any, query: list[str]) -> list[tuple[int, float]]:
    return [(h.doc, round(h.score, 9)) for h in search_all([Part(segment)], query, 50)]


def reference_segment(path: Path) -> Any:
    b = SegmentBuilder()
    for line in path.read_bytes().splitlines():
        counts = event_counts(json.loads(line))
        if counts is not None:
            b.add(counts)
    return b.build()


QUERY = ["common", "loud", "quiet", "many", "unique1x3", "turn2", "parser", "absent"]


def test_every_shape_of_postings_reads_back_as_the_log_says(tmp_path: Path) -> None:
    lg = shaped_log(tmp_path / "t.jsonl")
    want, lengths, seqs = reference(lg.path)
    with LogView.open(lg.path) as view:
        assert view.wrote
        assert view.mem is not None
        assert postings_of(view.mem) == want
    with LogView.open(lg.path) as view:  # the file written is used as it is
        assert (view.rebuilt, view.wrote, view.tail) == (None, False, [])
        mem = view.mem
        assert mem is not None
        assert postings_of(mem) == want
        assert mem.lengths().tolist() == lengths
        assert mem.events().seq.tolist() == seqs
        assert (mem.first_seq, mem.last_seq, mem.n_events) == (seqs[0], seqs[-1], len(seqs))
        assert scores(mem.segment(QUERY), QUERY) == scores(reference_segment(lg.path), QUERY)
        for word in ("common", "loud", "many", "unique0x0"):
            docs, tfs = mem.postings(word)
            expect = want[word_key(word)]
            assert docs.tolist() == sorted(expect)
            assert tfs.tolist() == [expect[d] for d in sorted(expect)]
        assert mem.postings("absent")[0].size == 0


def test_a_word_in_48_49_and_50_events_reads_back(tmp_path: Path) -> None:
    # Around the size from which a block is read with arrays instead of integers.
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="start")
    for i in range(50):
        words = ["all"] + (["most"] if i < 49 else []) + (["many"] if i < 48 else [])
        lg.result(" ".join(words * (i + 1)), path=f"f{i}.py")
    lg.end_turn()
    want = reference(lg.path)[0]
    LogView.open(lg.path).close()
    with LogView.open(lg.path) as view:
        assert view.rebuilt is None
        mem = view.mem
        assert mem is not None
        for word, n in (("all", 50), ("most", 49), ("many", 48)):
            docs, tfs = mem.postings(word)
            assert docs.size == n
            assert dict(zip(docs.tolist(), tfs.tolist(), strict=True)) == want[word_key(word)]


def test_a_mem_extended_turn_by_turn_reads_as_one_built_at_once(tmp_path: Path) -> None:
    whole = shaped_log(tmp_path / "whole.jsonl")
    LogView.open(whole.path).close()
    grown = Log(tmp_path / "grown.jsonl")
    lines = whole.path.read_bytes().splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if b'"turn.end"' in line]
    done = 0
    for end in ends:
        with grown.path.open("ab") as f:
            f.writelines(lines[done : end + 1])
        done = end + 1
        with LogView.open(grown.path) as view:
            assert view.rebuilt is None
            assert view.tail == []
    with MemIndex.open(mem_path(whole.path)) as a, MemIndex.open(mem_path(grown.path)) as b:
        assert postings_of(a) == postings_of(b)
        assert a.lengths().tolist() == b.lengths().tolist()
        assert a.doc_events().tolist() == b.doc_events().tolist()
        assert [c.to_obj() for c in a.cards()] == [c.to_obj() for c in b.cards()]
        assert (a.kinds, a.agents) == (b.kinds, b.agents)
        ea, eb = a.events(), b.events()
        for name in ("seq", "off", "length", "turn", "kind", "agent"):
            assert getattr(ea, name).tolist() == getattr(eb, name).tolist(), name


def test_events_are_found_by_seq_at_both_ends_and_nowhere_else(tmp_path: Path) -> None:
    lg = shaped_log(tmp_path / "t.jsonl", turns=2)
    seqs = reference(lg.path)[2]
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        ev = mem.events()
        for i, seq in enumerate(seqs):
            assert ev.find(seq) == i
        for seq in (0, -1, seqs[-1] + 1, 2**64, 2**64 + seqs[0]):
            assert ev.find(seq) is None
        # Each event's line is where the log holds it, and its kind and agent are named.
        data = lg.path.read_bytes()
        for i in (0, len(seqs) // 2, len(seqs) - 1):
            at, n = int(ev.off[i]), int(ev.length[i])
            event = json.loads(data[at : at + n])
            assert event["seq"] == seqs[i]
            assert mem.kinds[int(ev.kind[i])] == event["kind"]
            assert mem.agents[int(ev.agent[i])] == event["agent"]
            assert int(ev.turn[i]) == event["turn"]


def test_every_turn_has_its_card_and_no_other_turn_has_one(tmp_path: Path) -> None:
    lg = shaped_log(tmp_path / "t.jsonl", turns=3)
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        cards = mem.cards()
        assert [c.turn for c in cards] == [1, 2, 3]
        for c in cards:
            one = mem.card(c.turn)
            assert one is not None
            assert one.to_obj() == c.to_obj()
            assert one.line == f"turn{c.turn - 1} question about the parser"
        for turn in (0, 4, 99, -1):
            assert mem.card(turn) is None


def test_a_log_with_one_turn_of_one_event_has_a_mem_of_it(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="only words")
    lg.end_turn()
    LogView.open(lg.path).close()
    with LogView.open(lg.path) as view:
        assert view.rebuilt is None
        mem = view.mem
        assert mem is not None
        assert (mem.n_events, mem.n_docs, mem.first_seq, mem.last_seq) == (2, 1, 1, 2)
        assert mem.doc_events().tolist() == [0]
        assert postings_of(mem) == reference(lg.path)[0]
        assert [c.turn for c in mem.cards()] == [1]


def test_a_turn_without_words_has_a_mem_without_postings(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("plan", text="")
    lg.end_turn()
    LogView.open(lg.path).close()
    with LogView.open(lg.path) as view:
        assert view.rebuilt is None
        mem = view.mem
        assert mem is not None
        assert mem.n_words == 0
        assert postings_of(mem) == {}
        assert mem.postings("anything")[0].size == 0
        assert mem.segment(["anything"]).n_postings == 0
        assert mem.events().seq.tolist() == [1, 2]


# -- damage anywhere: refused, or read exactly as it was -----------------------------------------


def everything(mem: MemIndex) -> list[Any]:
    """What a search, a recall and an extension read, as plain values."""
    ev = mem.events()
    return [
        mem.covered,
        mem.n_events,
        mem.n_docs,
        mem.first_seq,
        mem.last_seq,
        postings_of(mem),
        mem.lengths().tolist(),
        mem.doc_events().tolist(),
        [getattr(ev, n).tolist() for n in ("seq", "off", "length", "turn", "kind", "agent")],
        list(mem.kinds),
        list(mem.agents),
        [c.to_obj() for c in mem.cards()],
        [None if (c := mem.card(t)) is None else c.to_obj() for t in (1, 2, 3)],
        [(w, mem.postings(w)[0].tolist(), mem.postings(w)[1].tolist()) for w in QUERY],
        scores(mem.segment(QUERY), QUERY),
    ]


def read_or_refused(data: bytes) -> list[Any] | None:
    try:
        with MemIndex.from_bytes(data) as mem:
            return everything(mem)
    except FormatError as exc:
        assert str(exc).startswith(".mem ")  # noqa: PT017  the property: nothing but this
        assert str(exc).endswith(": rebuild")  # noqa: PT017
        return None


@pytest.fixture(scope="module")
def small_mem(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    lg = Log(tmp_path_factory.mktemp("mem") / "t.jsonl")
    lg.add("person.message", text="loud question")
    lg.result("loud " * 300 + "common many", path="a.py")
    lg.result("common quiet", path="b.py")
    lg.end_turn()
    lg.add("person.message", text="second turn2 common", agent="sub")
    lg.end_turn()
    LogView.open(lg.path).close()
    return mem_path(lg.path).read_bytes()


def test_a_byte_changed_anywhere_is_refused_or_changes_nothing_read(small_mem: bytes) -> None:
    whole = read_or_refused(small_mem)
    assert whole is not None
    changed = 0
    for at in range(len(small_mem)):
        for flip in (0x01, 0x80):
            data = bytearray(small_mem)
            data[at] ^= flip
            got = read_or_refused(bytes(data))
            if got is not None:
                assert got == whole, (at, flip)
                changed += 1
    # What a change may leave unread: padding, and the log's own stat fields (they decide only
    # whether the log is hashed again, and a rebuild follows a mismatch).
    assert changed < len(small_mem) // 4


def test_every_cut_of_a_mem_is_refused(small_mem: bytes) -> None:
    whole = read_or_refused(small_mem)
    for at in range(len(small_mem)):
        got = read_or_refused(small_mem[:at])
        assert got is None or (got == whole and not any(small_mem[at:])), at


def test_a_damaged_mem_under_a_log_is_rebuilt_to_what_the_log_says(tmp_path: Path) -> None:
    lg = shaped_log(tmp_path / "t.jsonl", turns=2)
    LogView.open(lg.path).close()
    good = mem_path(lg.path).read_bytes()
    want = reference(lg.path)[0]
    rng = np.random.default_rng(5)
    for at in sorted(rng.choice(len(good), size=40, replace=False).tolist()):
        data = bytearray(good)
        data[at] ^= 0xFF
        mem_path(lg.path).write_bytes(bytes(data))
        with LogView.open(lg.path) as view:
            assert view.mem is not None
            try:
                got = postings_of(view.mem)
            except FormatError:
                continue  # refused at the use: the next search rebuilds
            assert got == want, at


def _said(word: str, times: int) -> str:
    """A message in which ``word`` counts exactly ``times`` (as event_counts weighs it)."""
    one = event_counts({"seq": 1, "kind": "person.message", "turn": 1, "text": word})
    assert one is not None
    weight = one[word]
    assert times % weight == 0
    return " ".join([word] * (times // weight))


@pytest.mark.parametrize("times", [255, 256, 65_535, 65_536])
def test_a_frequency_at_each_storage_width_reads_back(tmp_path: Path, times: int) -> None:
    # A word said 255 or 65,535 times fits one width, one time more the next one.
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text=_said("edge", times) + " other")
    lg.add("person.message", text="edge other")
    lg.end_turn()
    want = reference(lg.path)[0]
    assert want[word_key("edge")][0] == times
    LogView.open(lg.path).close()
    with LogView.open(lg.path) as view:
        assert view.rebuilt is None
        mem = view.mem
        assert mem is not None
        docs, tfs = mem.postings("edge")
        assert (docs.tolist(), tfs.tolist()) == ([0, 1], [times, 1])
        assert postings_of(mem) == want


# -- a .mem written wrong, its checksums right: refused, never read wrong -------------------------


class _Written:
    """What build_mem extends, holding a fold as a writer with a bug would have made it."""

    def __init__(self, fold: Any) -> None:
        self._fold = fold
        self.skipped = 0

    def fold(self) -> Any:
        return self._fold


def _rewritten(small: bytes, change: Any) -> bytes:
    with MemIndex.from_bytes(small) as mem:
        fold = mem.fold()
        check = mem.check
    change(fold)
    return build_mem([], check=check, base=_Written(fold)).data  # type: ignore[arg-type]


def _set(name: str, i: int, value: Any) -> Any:
    def change(fold: Any) -> None:
        arr = np.array(getattr(fold, name) if not name.startswith("ev_") else fold.ev[name])
        arr[i] = value
        if name.startswith("ev_"):
            fold.ev[name] = arr
        else:
            setattr(fold, name, arr)

    return change


def test_the_encoder_unchanged_writes_a_mem_that_reads_as_the_first(small_mem: bytes) -> None:
    assert read_or_refused(_rewritten(small_mem, lambda fold: None)) == read_or_refused(small_mem)


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("two documents of one event", lambda f: _set("doc_event", 1, f.doc_event[0])(f)),
        ("a document of an event past the last", lambda f: _set("doc_event", -1, f.n_events)(f)),
        ("a seq repeated", lambda f: _set("ev_seq", 1, f.ev["ev_seq"][0])(f)),
        ("a line past what is covered", _set("ev_off", -1, 10**6)),
        ("a kind not named", lambda f: _set("ev_kind", 0, len(f.kinds))(f)),
        ("an agent not named", lambda f: _set("ev_agent", 0, len(f.agents))(f)),
    ],
)
def test_a_mem_written_wrong_with_its_checks_right_is_refused(
    small_mem: bytes, what: str, change: Any
) -> None:
    assert read_or_refused(_rewritten(small_mem, change)) is None, what


def test_an_event_line_ending_where_the_mem_ends_is_refused(small_mem: bytes) -> None:
    # Every covered line ends before the covered bytes do: its newline is covered too.
    with MemIndex.from_bytes(small_mem) as mem:
        covered = mem.covered

    def end_at(offset: int) -> Any:
        def change(fold: Any) -> None:
            off = np.array(fold.ev["ev_off"])
            length = np.array(fold.ev["ev_len"])
            off[-1] = offset - int(length[-1])
            fold.ev["ev_off"] = off

        return change

    assert read_or_refused(_rewritten(small_mem, end_at(covered - 1))) is not None
    assert read_or_refused(_rewritten(small_mem, end_at(covered))) is None
