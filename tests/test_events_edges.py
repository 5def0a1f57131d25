"""An event's fields, lines, words and card at their edges (retrieval/events.py, §8, LOG-FORMAT.md):
what a field that is missing or of the wrong type reads as, why an event is not read, lines past
4,000 characters, a search's own calls hidden, the weights, a card's line and its stored form."""

from __future__ import annotations

from typing import Any

import pytest
from nodwyn_retrieval.retrieval.blobs import BLOBS_VERSION
from nodwyn_retrieval.retrieval.event_render import matched_lines
from nodwyn_retrieval.retrieval.events import (
    CALL_CHARS,
    CALL_WEIGHT,
    CARD_LINE_CHARS,
    EVENTS_VERSION,
    MAIN,
    NAME_WEIGHT,
    PIECE_CHARS,
    Call,
    Card,
    CardMaker,
    agent_of,
    conversation_terms,
    conversation_words,
    event_counts,
    event_fields,
    event_text,
    is_ranked,
    kind_of,
    seq_ranges,
    text_counts,
    turn_of,
    unread_reason,
)

CANARY = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2


def ev(kind: str, seq: int = 1, turn: int = 1, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "ts": "2026-10-15T09:00:00Z", "kind": kind, "turn": turn, **fields}


def test_the_numbers_of_section_8() -> None:
    assert (CALL_WEIGHT, NAME_WEIGHT) == (3, 3)
    assert (CARD_LINE_CHARS, PIECE_CHARS, CALL_CHARS) == (100, 4000, 160)
    assert MAIN == "main"


def test_a_field_missing_or_of_the_wrong_type_reads_as_nothing() -> None:
    assert kind_of({}) == kind_of({"kind": 3}) == ""
    assert agent_of({}) == agent_of({"agent": ""}) == agent_of({"agent": 7}) == "main"
    assert agent_of({"agent": "explorer"}) == "explorer"
    assert turn_of({"turn": 4}) == 4
    for bad in (0, -2, True, "3", 2.0, None):
        assert turn_of({"turn": bad}) == 0, bad
    et = event_text({"kind": "plan", "seq": "7", "ts": 12, "text": None})
    assert (et.seq, et.ts, et.turn, et.agent, et.lines) == (0, "", 0, "main", ())
    assert event_text({"kind": "plan", "seq": 7, "text": "x"}).seq == 7


def test_why_an_event_is_not_read() -> None:
    assert unread_reason({"kind": "note"}) == "a note"
    assert unread_reason({}) == "an event without a kind"
    assert unread_reason({"kind": "mystery"}) == "a mystery"
    helper = {"kind": "nodwyn.message", "agent": "explorer", "text": "do it"}
    assert unread_reason(helper) == "a nodwyn.message in explorer's context"
    assert unread_reason({"kind": "nodwyn.message", "text": "hi"}) is None
    assert unread_reason({"kind": "tool.result", "name": "recall"}) == "a result of recall"
    assert unread_reason({"kind": "tool.result", "name": "fs-read"}) is None
    assert unread_reason({"kind": "tool.result", "name": ["recall"]}) is None
    # a helper's reply and result are read; only nodwyn's messages to it are left out
    assert is_ranked({"kind": "llm.resp", "agent": "explorer", "text": "x"})
    assert is_ranked({"kind": "tool.result", "agent": "explorer", "name": "fs-read"})


def test_a_call_reads_as_its_name_and_arguments() -> None:
    assert Call("1", "fs-read", {"path": "a.go"}).text == 'fs-read {"path": "a.go"}'
    assert Call("1", "git-status", None).text == "git-status"
    assert Call("1", "git-status", {}).text == "git-status"
    assert Call("1", "", None).text == "an unnamed call"
    assert Call("1", "run", ["a", 1]).text == 'run ["a", 1]'
    assert Call("1", "run", {"x": "é"}).text == 'run {"x": "é"}'  # not escaped
    assert Call("1", "n", {"a": 1}).to_json() == {"name": "n", "args": {"a": 1}}


def test_a_result_answers_its_call_and_a_reply_lists_its_own() -> None:
    res = event_text(ev("tool.result", call_id=9, name="fs-read", args={"p": 1}, output="o"))
    assert res.call == Call("9", "fs-read", {"p": 1})
    res = event_text(ev("tool.result", name=5, output="o"))
    assert res.call == Call("", "", None)
    reply = event_text(ev("llm.resp", text="t", calls=[{"id": "a", "name": "x"}, "junk"]))
    assert reply.calls == (Call("a", "x", None), Call("", "", None))
    assert event_text(ev("llm.resp", text="t", calls={"id": "a"})).calls == ()


def test_the_lines_of_each_kind() -> None:
    assert event_text(ev("compaction", note="n1\nn2")).lines == ("n1", "n2")
    att = event_text(ev("attachment", name="bind.go", text="package x"))
    assert (att.lines, att.title) == (("package x",), "bind.go")
    assert att.describe() == "attachment bind.go"
    assert event_text(ev("attachment", name=3, text="t")).title == ""
    msg = ev(
        "person.message",
        text="see these",
        attachments=[{"name": "a.txt", "text": "alpha"}, "junk", {"name": 4, "text": "beta"}],
    )
    assert event_text(msg).lines == (
        "see these", "[attachment a.txt]", "alpha", "[attachment ]", "beta",
    )  # fmt: skip
    # only a person's message carries attachments
    plan = ev("plan", text="p", attachments=[{"name": "a.txt", "text": "alpha"}])
    assert event_text(plan).lines == ("p",)
    reply = event_text(ev("llm.resp", text="done\n", calls=[{"id": "a", "name": "git-status"}]))
    assert reply.lines == ("done", "call git-status")


def test_a_description_names_the_agent_the_call_and_an_error() -> None:
    res = ev("tool.result", agent="explorer", name="fs-read", args={"path": "x"}, output="o")
    assert event_text(res).describe() == 'tool.result (explorer) of fs-read {"path": "x"}'
    assert event_text({**res, "error": True}).describe().endswith(" (error)")
    assert not event_text({**res, "error": "yes"}).error  # only true is an error
    assert event_text(ev("plan", text="x")).describe() == "plan"
    assert event_text(ev("plan", agent="main", text="x")).describe() == "plan"
    long = event_text(ev("tool.result", name="w", args={"c": "z" * 400}, output="o"))
    shown = long.describe().removeprefix("tool.result of ")
    assert len(shown) == CALL_CHARS
    assert shown.endswith("…")
    att = event_text(ev("attachment", name="n" * 300, text="t"))
    assert len(att.describe()) == len("attachment ") + CALL_CHARS


def test_a_line_past_4000_characters_is_numbered_as_its_pieces() -> None:
    at_the_bound = event_text(ev("plan", text="a" * 4000 + "\nb"))
    assert at_the_bound.lines == ("a" * 4000, "b")
    assert at_the_bound.pieces == ()
    one_past = event_text(ev("plan", text="x\n" + "a" * 4001 + "\nb"))
    assert one_past.lines == ("x", "a" * 4000, "a", "b")
    assert one_past.pieces == ((2, 3, 4001),)
    three = event_text(ev("plan", text="c" * 12_000))
    assert three.lines == ("c" * 4000,) * 3
    assert three.pieces == ((1, 3, 12_000),)


def test_a_searchs_own_call_is_shown_and_never_ranked() -> None:
    reply = ev(
        "llm.resp",
        text="looking\nfurther",
        calls=[
            {"id": "a", "name": "index-search", "args": {"query": "secretive"}},
            {"id": "b", "name": "fs-read", "args": {"path": "p.go"}},
            {"id": "c", "name": "recall", "args": {"seq": 1}},
        ],
    )
    et = event_text(reply)
    assert et.lines[2] == 'call index-search {"query": "secretive"}'
    assert et.hidden == frozenset({3, 5})
    counts = event_counts(reply)
    assert counts is not None
    assert "secretive" not in counts
    assert "index" not in counts
    assert "recall" not in counts
    assert counts["looking"] == counts["further"] == 1
    assert counts["fs-read"] == 1
    assert counts["call"] == 1  # the ranked call line only
    (body,) = event_fields(reply) or []
    assert body == ('looking\nfurther\ncall fs-read {"path": "p.go"}', 1)


def test_hidden_lines_count_a_long_lines_pieces() -> None:
    reply = ev(
        "llm.resp",
        text="w" * 8001,
        calls=[{"id": "a", "name": "index-search", "args": {"q": 1}}],
    )
    et = event_text(reply)
    assert len(et.lines) == 4  # three pieces of the text, then the call
    assert et.hidden == frozenset({4})
    empty = event_text(ev("llm.resp", text="", calls=[{"id": "a", "name": "recall"}]))
    assert empty.lines == ("", "call recall")
    assert empty.hidden == frozenset({2})


def test_a_results_call_and_an_attachments_name_weigh_three_times() -> None:
    res = ev("tool.result", name="fs-read", args={"path": "lantern.go"}, output="lantern lit")
    fields = event_fields(res)
    assert fields == [("lantern lit", 1), ('fs-read {"path": "lantern.go"}', 3)]
    counts = event_counts(res)
    plain = text_counts("lantern lit")
    call = text_counts('fs-read {"path": "lantern.go"}')
    assert counts == {w: plain.get(w, 0) + 3 * call.get(w, 0) for w in {*plain, *call}}
    att = ev("attachment", name="lantern.go", text="lit")
    assert event_fields(att) == [("lit", 1), ("lantern.go", 3)]
    assert event_fields(ev("attachment", name="", text="lit")) == [("lit", 1)]
    assert event_fields(ev("note", text="x")) is None
    assert event_counts(ev("note", text="x")) is None


def test_counts_are_of_the_redacted_text_and_redactions_are_counted() -> None:
    res = ev(
        "tool.result",
        name="fs-read",
        args={"token": CANARY},
        output=f"key {CANARY}\nagain {CANARY}",
    )
    et = event_text(res)
    assert CANARY not in "\n".join(et.lines)
    assert et.call is not None
    assert CANARY not in et.call.text
    assert et.redacted == 3
    counts = event_counts(res) or {}
    assert not any("a1b2c3" in w for w in counts)
    assert text_counts("") == {}
    clean = event_text(ev("tool.result", name="fs-read", args={"path": "a"}, output="o"))
    assert clean.redacted == 0
    assert clean.call == Call("", "fs-read", {"path": "a"})


def test_a_conversation_query_leaves_out_the_words_of_a_question() -> None:
    assert conversation_words("what did I get when we ran the tests") == ["ran", "tests"]
    assert conversation_words("what did I get") == ["what", "did", "i", "get"]


def test_a_cards_line_reads_its_turn_seqs_time_message_and_calls() -> None:
    card = Card(3, 41, 41, "2026-10-15T09:00:03.120Z", "Why?", 1, 1)
    assert card.text() == 'turn 3 · seq 41 · 2026-10-15 09:00 · "Why?" · 1 tool call'
    card = Card(3, 41, 87, "2026-10-15 09:00:03", "", 0, 9, (50, 60), whole=False)
    assert card.text() == (
        "turn 3 · seq 41-87 · 2026-10-15 09:00 · no message from the person · 0 tool calls"
        " · compacted at seq 50, 60 · not finished"
    )
    assert Card(1, 1, 1, "", "x", 2, 1).text() == 'turn 1 · seq 1 · "x" · 2 tool calls'
    assert Card(1, 1, 1, "yesterday", "x", 2, 1).text().split(" · ")[2] == "yesterday"
    assert Card(1, 1, 1, "2026-10-15", "x", 2, 1).text().split(" · ")[2] == "2026-10-15"
    odd = Card(1, 1, 1, "2026-10-15X09:00:00Z", "x", 0, 1).text().split(" · ")[2]
    assert odd == "2026-10-15X09:00:00Z"
    long = Card(1, 1, 1, "y" * 40, "x", 0, 1).text().split(" · ")[2]
    assert long == "y" * 31 + "…"


def test_a_card_is_made_from_its_turns_events_in_order() -> None:
    maker = CardMaker()
    maker.add(ev("plan", seq=7, turn=0, text="no turn"))  # left out
    maker.add(ev("person.message", seq=10, turn=2, text="   \n  first words  \nmore"))
    maker.add(ev("llm.resp", seq=12, turn=2, calls=[{"id": "a"}], text="r"))
    maker.add(ev("person.message", seq=11, turn=2, text="second message"))
    maker.add(ev("person.message", seq=3, turn=1, text=f"token {CANARY}"))
    maker.add(ev("turn.end", seq=4, turn=1))
    one, two = maker.cards()
    assert (one.turn, one.first, one.last, one.events, one.whole) == (1, 3, 4, 2, True)
    assert CANARY not in one.line
    assert one.line.startswith("token ")
    assert (two.turn, two.first, two.last, two.events, two.whole) == (2, 10, 12, 3, False)
    assert two.line == "first words"
    assert two.calls == 1
    assert CardMaker().cards() == []
    silent = CardMaker()
    silent.add(ev("plan", seq=1, turn=1, text="x"))
    (card,) = silent.cards()
    assert card.line == ""
    assert card.start == "2026-10-15T09:00:00Z"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ("card", "a card is a list of 8 fields"),
        ([1, 2, 3, "", "", 0, 0], "a card is a list of 8 fields"),
        ([1, 2, 3, "", "", 0, 0, [], 9], "a card is a list of 8 fields"),
        ([1, 2, 3, "", "", 0, True, []], "a card's numbers are whole numbers"),
        ([1, 2, 3.0, "", "", 0, 0, []], "a card's numbers are whole numbers"),
        ([1, 2, 2**63, "", "", 0, 0, []], "a card's numbers are whole numbers"),
        ([-1, 2, 3, "", "", 0, 0, []], "a card's numbers are whole numbers"),
        ([1, 2, 3, 4, "", 0, 0, []], "a card's fields have the wrong types"),
        ([1, 2, 3, "", None, 0, 0, []], "a card's fields have the wrong types"),
        ([1, 2, 3, "", "", 0, 0, (1,)], "a card's fields have the wrong types"),
        ([1, 2, 3, "", "", 0, 0, [-1]], "a card's compactions are seqs"),
        ([1, 2, 3, "", "", 0, 0, [2**63]], "a card's compactions are seqs"),
        ([1, 2, 3, "", "", 0, 0, [False]], "a card's compactions are seqs"),
    ],
)
def test_a_stored_card_that_is_off_is_refused(obj: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        Card.from_obj(obj)


def test_a_card_at_its_bounds_round_trips() -> None:
    card = Card(0, 0, 2**63 - 1, "", "", 0, 0, (0, 2**63 - 1))
    back = Card.from_obj(card.to_obj())
    assert back == card
    assert back.whole  # the stored form keeps no "not finished": a loaded card is whole


def test_seqs_read_as_runs() -> None:
    assert seq_ranges([]) == ""
    assert seq_ranges([5]) == "5"
    assert seq_ranges([5, 5, 6]) == "5-6"
    assert seq_ranges([1, 3, 5]) == "1, 3, 5"
    assert seq_ranges([9, 8, 7, 1]) == "1, 7-9"


def test_the_version_is_the_events_own_number_and_the_blobs() -> None:
    assert type(EVENTS_VERSION) is int
    assert divmod(EVENTS_VERSION, 100) == (2, BLOBS_VERSION)


def test_a_call_whose_arguments_are_not_json_reads_as_python_shows_them() -> None:
    assert Call("1", "run", {1, 2}).text == "run {1, 2}"
    assert Call("1", "run", {(1, 2): "x"}).text == "run {(1, 2): 'x'}"


@pytest.mark.parametrize(
    "event",
    [
        ev("tool.result", name="fs-read", args={"path": "a.go"}, output="the lantern\nis lit"),
        ev("compaction", note="the lantern\nis lit"),
        ev("attachment", name="notes.txt", text="the lantern\nis lit"),
        ev("plan", text="the lantern\nis lit"),
        ev("summary", text="the lantern\nis lit"),
        ev("llm.resp", text="the lantern\nis lit", calls=[{"id": "a", "name": "recall"}]),
        ev("person.message", text="the lantern\nis lit", attachments=[{"name": "a", "text": "b"}]),
    ],
)
def test_the_body_of_every_kind_is_ranked_and_shown_as_a_match(event: dict[str, Any]) -> None:
    et = event_text(event)
    assert et.lines[:2] == ("the lantern", "is lit")
    assert not {1, 2} & et.hidden
    counts = event_counts(event) or {}
    assert counts["lantern"] >= 1
    assert matched_lines(et, ["lantern"]) == [(1, "the lantern")]


def test_a_reply_with_one_call_is_ranked_by_that_call_too() -> None:
    reply = ev("llm.resp", text="reading", calls=[{"id": "a", "name": "fs-read",
                                                   "args": {"path": "lantern.go"}}])  # fmt: skip
    counts = event_counts(reply) or {}
    assert counts["reading"] == 1
    assert counts["lantern"] == 1
    assert event_fields(reply) == [('reading\ncall fs-read {"path": "lantern.go"}', 1)]


def test_a_line_of_exactly_4000_characters_beside_a_longer_one_is_one_line() -> None:
    et = event_text(ev("plan", text="a" * 4000 + "\n" + "b" * 4001))
    assert et.lines == ("a" * 4000, "b" * 4000, "b")
    assert et.pieces == ((2, 3, 4001),)


def test_a_credential_in_an_attachments_name_is_redacted_and_counted() -> None:
    att = event_text(ev("attachment", name=f"{CANARY}.txt", text="nothing here"))
    assert CANARY not in att.title
    assert att.redacted == 1
    both = event_text(ev("attachment", name=f"{CANARY}.txt", text=f"token {CANARY}"))
    assert both.redacted == 2


HELD = {"decide", "decided", "decision", "divide", "division", "fail", "failure", "failures",
        "figure", "figures", "acting", "acts", "absolute", "absorbed"}  # fmt: skip


def forms(query: str, **kw: Any) -> list[tuple[str, int, float]]:
    """The terms a query ranks by, against logs holding the words of HELD."""
    terms = conversation_terms(query.split(), lambda ws: [w for w in ws if w in HELD], **kw)
    return [(t.word, t.of, t.weight) for t in terms]


def test_a_derivation_relates_the_words_of_two_stems_both_ways() -> None:
    assert forms("decision") == [("decision", 0, 1.0), ("decide", 0, 0.5), ("decided", 0, 0.5)]
    assert forms("decide") == [("decide", 0, 1.0), ("decided", 0, 0.5), ("decision", 0, 0.5)]
    assert forms("divide") == [("divide", 0, 1.0), ("division", 0, 0.5)]
    assert forms("decision", derivations=False) == [("decision", 0, 1.0)]
    assert forms("decision fail") == [
        ("decision", 0, 1.0), ("fail", 1, 1.0), ("decide", 0, 0.5), ("decided", 0, 0.5),
        ("failure", 1, 0.5), ("failures", 1, 0.5),
    ]  # fmt: skip


def test_a_word_of_four_letters_has_derived_forms_and_one_of_three_none() -> None:
    assert forms("fail") == [("fail", 0, 1.0), ("failure", 0, 0.5), ("failures", 0, 0.5)]
    assert forms("fig") == [("fig", 0, 1.0)]  # not "figure": a word under four letters


def test_a_stem_that_does_not_end_as_a_derivation_has_no_derived_forms() -> None:
    assert forms("activate") == [("activate", 0, 1.0)]  # not "acting" nor "acts"
    assert forms("absorb") == [("absorb", 0, 1.0), ("absorbed", 0, 0.5)]  # not "absolute"


def test_a_cards_time_of_16_characters_is_read_and_one_of_15_shown_as_it_is() -> None:
    at_16 = Card(1, 1, 1, "2026-10-15T09:00", "x", 0, 1).text().split(" · ")[2]
    assert at_16 == "2026-10-15 09:00"
    at_15 = Card(1, 1, 1, "2026-10-15T09:0", "x", 0, 1).text().split(" · ")[2]
    assert at_15 == "2026-10-15T09:0"


def test_a_turn_whose_message_is_blank_has_no_line_on_its_card() -> None:
    maker = CardMaker()
    maker.add(ev("person.message", seq=1, turn=1, text="  \n\t\n"))
    maker.add(ev("person.message", seq=2, turn=1, text="later words"))
    (card,) = maker.cards()
    assert card.line == ""
    assert card.text().split(" · ")[3] == "no message from the person"  # not "later words"
