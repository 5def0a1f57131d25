"""The fold of a log's events into a ``.mem`` at its edges: the word keys the format stores, a
``.mem`` extended by turns that bring new kinds and agents or go on with a turn already closed
(read as one built at once, and as the log says), turn numbers past what small integers hold,
and more kinds than the format names.

Everything is read back through what a search and a recall read (LogView, MemIndex).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.retrieval.events import event_counts
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path, postings_of, word_key

from tests.support import Log
from tests.test_mem import reference as mem_reference


def reference(path: Path) -> dict[int, dict[int, int]]:
    """Every ranked event's words as event_counts gives them, keyed as a .mem keys them."""
    return mem_reference(path)[0]


def test_word_keys_are_the_ones_a_mem_already_written_holds() -> None:
    # The keys are part of the file: a changed hash would make every .mem written before find
    # nothing for its words, with no version to say so.
    assert word_key("") == 0xEFD01F60BA992926
    assert word_key("a") == 0x82A2A958A9BECE5B
    assert word_key("scrubenv") == 0x890C3683A0BA94B2
    assert word_key("héllo") == 0xC185412747A0264D
    assert word_key("\udcff") == 0x4E92B5A2408EE808  # a lone surrogate, as a log may hold


def everything(mem: MemIndex) -> list[object]:
    ev = mem.events()
    return [
        mem.covered,
        (mem.n_events, mem.n_docs, mem.first_seq, mem.last_seq),
        postings_of(mem),
        mem.lengths().tolist(),
        mem.doc_events().tolist(),
        [getattr(ev, n).tolist() for n in ("seq", "off", "length", "turn")],
        [mem.kinds[k] for k in ev.kind.tolist()],
        [mem.agents[a] for a in ev.agent.tolist()],
        [c.to_obj() for c in mem.cards()],
    ]


def grown_turn_by_turn(lines: list[bytes], path: Path) -> None:
    """Write ``lines`` to ``path`` a whole turn at a time, a search after each."""
    done = 0
    for i, line in enumerate(lines):
        if b'"turn.end"' in line:
            with path.open("ab") as f:
                f.writelines(lines[done : i + 1])
            done = i + 1
            with LogView.open(path) as view:
                assert view.rebuilt is None
                assert view.tail == []
                assert view.wrote


def test_turns_bringing_new_kinds_and_agents_extend_the_mem_as_one_built_at_once(
    tmp_path: Path,
) -> None:
    lg = Log(tmp_path / "whole.jsonl")
    lg.add("person.message", text="first question")
    lg.end_turn()
    lg.add("person.message", text="second question", agent="helper")
    lg.add("plan", text="a plan of steps", agent="planner")
    lg.result("output of the read", path="a.py")
    lg.end_turn()
    lg.add("summary", text="what was done", agent="helper")
    lg.add("compaction", note="compacted the turns", agent="reviewer")
    lg.add("person.message", text="third question")
    lg.end_turn()
    grown = tmp_path / "grown.jsonl"
    grown_turn_by_turn(lg.path.read_bytes().splitlines(keepends=True), grown)
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as a, MemIndex.open(mem_path(grown)) as b:
        got = everything(b)
        assert got == everything(a)
    kinds, agents = got[6], got[7]
    assert kinds == [
        "person.message",
        "turn.end",
        "person.message",
        "plan",
        "llm.resp",
        "tool.result",
        "turn.end",
        "summary",
        "compaction",
        "person.message",
        "turn.end",
    ]
    main, helper = "main", "helper"
    assert agents == [
        main,
        main,
        helper,
        "planner",
        main,
        main,
        main,
        helper,
        "reviewer",
        main,
        main,
    ]


def test_a_turn_going_on_after_its_end_is_one_card_extended_or_built_at_once(
    tmp_path: Path,
) -> None:
    lg = Log(tmp_path / "whole.jsonl")
    lg.add("person.message", text="the first line\nand more")  # seq 1
    lg.result("first output", path="a.py")  # 2, 3
    lg.end_turn()  # 4
    lg.turn = 1  # the log goes on with turn 1
    lg.add("person.message", text="a later message of the same turn")  # 5
    lg.result("second output", path="b.py")  # 6, 7
    lg.call("shell", "third output", cmd="ls")  # 8, 9
    lg.add("compaction", note="compacted")  # 10
    lg.end_turn()  # 11
    lg.add("person.message", text="turn two")  # 12
    lg.end_turn()  # 13
    grown = tmp_path / "grown.jsonl"
    grown_turn_by_turn(lg.path.read_bytes().splitlines(keepends=True), grown)
    LogView.open(lg.path).close()
    for path in (lg.path, grown):
        with MemIndex.open(mem_path(path)) as mem:
            cards = [c.to_obj() for c in mem.cards()]
            one = mem.card(1)
            assert one is not None
            assert (one.turn, one.first, one.last) == (1, 1, 11), path
            assert (one.line, one.calls, one.events) == ("the first line", 3, 11), path
            assert (one.compactions, one.whole) == ((10,), True), path
            assert one.start == lg.ts(1)
            two = mem.card(2)
            assert two is not None
            assert (two.first, two.last, two.line, two.calls, two.events) == (
                12,
                13,
                "turn two",
                0,
                2,
            )
        if path == lg.path:
            want = cards
        else:
            assert cards == want


def test_a_turn_past_small_integers_is_stored_as_it_is_and_one_past_32_bits_at_the_most(
    tmp_path: Path,
) -> None:
    lg = Log(tmp_path / "t.jsonl")
    for t in (70, 65_537, 2**32 - 1, 2**40):
        lg.turn = t
        lg.add("person.message", text=f"turn {t}")
        lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        turns = view.mem.events().turn.tolist()
    top = 2**32 - 1
    assert turns == [70, 70, 65_537, 65_537, top, top, top, top]


def test_past_255_kinds_the_rest_share_the_last_name(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="many kinds follow")
    for i in range(300):
        lg.add(f"custom.kind{i:03d}")
    lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        kinds = view.mem.kinds
        ev = view.mem.events()
        named = [kinds[k] for k in ev.kind.tolist()]
    assert len(kinds) == 255
    assert named[:2] == ["person.message", "custom.kind000"]
    assert named[253] == "custom.kind252"
    assert named[254:] == ["custom.kind253"] * 48  # the 254th kind on: the last name


@pytest.mark.parametrize(
    "texts",
    [
        ["fooFoo ab_ab", "ab_ab barBar fooFoo"],  # every run two words: the whole and one part
        ["__ _ ___", "_"],  # runs of no word at all
        ["plain words", "__ x1y scrubEnv ab_ab"],  # one, none, three and two words a run
    ],
    ids=["two words a run", "no word a run", "mixed"],
)
def test_runs_of_any_number_of_words_are_counted_as_event_counts_does(
    tmp_path: Path, texts: list[str]
) -> None:
    lg = Log(tmp_path / "t.jsonl")
    for text in texts:
        lg.add("person.message", text=text)
    lg.end_turn()
    with LogView.open(lg.path) as view:
        assert view.mem is not None
        assert postings_of(view.mem) == reference(lg.path)
        lengths = view.mem.lengths().tolist()
    want = [sum(c.values()) for t in texts if (c := event_counts(message(t))) is not None]
    assert lengths == want


def message(text: str) -> dict[str, object]:
    return {"seq": 1, "kind": "person.message", "turn": 1, "agent": "main", "text": text}
