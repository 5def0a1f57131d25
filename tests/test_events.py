"""retrieval.events: what is ranked, an event's lines and words, cards, and how results and recalls
read (ADR 0050 §8, LOG-FORMAT.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.retrieval.chunks import split_lines
from nodwyn_retrieval.retrieval.event_render import matched_lines, render_recall
from nodwyn_retrieval.retrieval.events import (
    CALL_WEIGHT,
    NEVER_RANKED,
    SELF_TOOLS,
    Card,
    CardMaker,
    event_counts,
    event_text,
    is_ranked,
    seq_ranges,
    text_counts,
    unread_reason,
)
from nodwyn_retrieval.retrieval.render import best_lines
from nodwyn_retrieval.retrieval.words import word_counts

CANARY = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2  # 40 letters and digits after ghp_


def ev(
    kind: str, seq: int = 1, turn: int = 1, agent: str = "main", **fields: Any
) -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": "2026-10-15T09:00:00Z",
        "kind": kind,
        "turn": turn,
        "agent": agent,
        **fields,
    }


def result(output: str, name: str = "fs-read", args: object = None, **more: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "call_id": "c1",
        "name": name,
        "args": {"path": "keychain/bind.go"} if args is None else args,
        "output": output,
        "error": False,
        **more,
    }
    return ev("tool.result", **fields)


def test_a_tool_results_call_counts_three_times_its_output() -> None:
    counts = event_counts(result("binding binding", args={"path": "host.go"}))
    assert counts is not None
    assert counts["binding"] == 2
    assert counts["host"] == CALL_WEIGHT
    assert counts["fs-read"] == CALL_WEIGHT


@pytest.mark.parametrize("kind", sorted(NEVER_RANKED))
def test_a_kind_that_is_never_ranked_is_not_ranked(kind: str) -> None:
    assert not is_ranked(ev(kind, text="credential binding"))
    assert event_counts(ev(kind, text="credential binding")) is None


def test_an_unknown_kind_is_not_ranked() -> None:
    assert unread_reason(ev("telemetry", text="x")) == "a telemetry"


def test_nodwyns_message_in_a_helpers_context_is_left_out() -> None:
    assert is_ranked(ev("nodwyn.message", text="the request"))
    assert unread_reason(ev("nodwyn.message", agent="explorer", text="the request")) == (
        "a nodwyn.message in explorer's context"
    )


@pytest.mark.parametrize("tool", sorted(SELF_TOOLS))
def test_a_result_of_a_search_or_recall_is_never_ranked(tool: str) -> None:
    assert unread_reason(result("seq 4 tool.result", name=tool)) == f"a result of {tool}"


def test_a_reply_is_ranked_by_its_text_and_other_calls_but_not_a_searchs_call() -> None:
    reply = ev(
        "llm.resp",
        text="Let me look.",
        calls=[
            {"id": "c1", "name": "index-search", "args": {"query": "credential binding"}},
            {"id": "c2", "name": "fs-read", "args": {"path": "keychain/bind.go"}},
        ],
    )
    counts = event_counts(reply)
    assert counts is not None
    assert "credential" not in counts
    assert counts["look"] == 1
    assert counts["bind"] == 1
    et = event_text(reply)
    assert et.lines == (
        "Let me look.",
        'call index-search {"query": "credential binding"}',
        'call fs-read {"path": "keychain/bind.go"}',
    )
    assert et.hidden == frozenset({2})


def test_an_events_words_are_the_words_of_the_lines_recall_shows() -> None:
    message = ev(
        "person.message",
        text="Why does ScrubEnv\nreject localhost?",
        attachments=[{"name": "notes.md", "text": "the binding\nrule"}],
    )
    et = event_text(message)
    assert et.lines == (
        "Why does ScrubEnv",
        "reject localhost?",
        "[attachment notes.md]",
        "the binding",
        "rule",
    )
    assert event_counts(message) == word_counts("\n".join(et.lines))


def test_a_credential_is_redacted_in_the_text_and_never_counted() -> None:
    event = result(f"token: {CANARY}\nok", args={"token": CANARY})
    et = event_text(event)
    assert CANARY not in "\n".join(et.lines)
    assert et.call is not None
    assert CANARY not in et.call.text
    assert et.redacted == 2
    counts = event_counts(event)
    assert counts is not None
    assert not any(CANARY.lower() in w or "a1b2" in w for w in counts)


def test_a_non_string_output_is_shown_as_indented_json() -> None:
    et = event_text(result({"files": ["a.go"]}))  # type: ignore[arg-type]
    assert et.lines == ("{", '  "files": [', '    "a.go"', "  ]", "}")


def test_a_result_is_described_by_its_kind_agent_and_call() -> None:
    et = event_text(result("x", agent="explorer", error=True))
    assert et.describe() == 'tool.result (explorer) of fs-read {"path": "keychain/bind.go"} (error)'


def test_a_compaction_is_named_as_a_note() -> None:
    assert event_text(ev("compaction", note="Earlier: the binding")).describe() == "compaction note"


def test_an_attached_files_name_counts_three_times() -> None:
    counts = event_counts(ev("attachment", name="bind.go", text="package keychain"))
    assert counts is not None
    assert counts["bind"] == 3
    assert counts["keychain"] == 1


def test_text_counts_remember_a_text_seen_before() -> None:
    memo: dict[str, dict[str, int]] = {}
    first = text_counts("the same file", memo)
    assert text_counts("the same file", memo) is first


def test_a_card_holds_its_turns_first_message_line_cut_at_100_characters() -> None:
    maker = CardMaker()
    maker.add(ev("person.message", seq=4, turn=2, text="\n" + "x" * 120 + "\nsecond"))
    maker.add(ev("person.message", seq=5, turn=2, text="later"))
    maker.add(ev("turn.end", seq=6, turn=2))
    (card,) = maker.cards()
    assert card.line == "x" * 99 + "…"
    assert (card.turn, card.first, card.last, card.whole) == (2, 4, 6, True)


def test_a_card_counts_tool_calls_and_names_its_compactions() -> None:
    maker = CardMaker()
    maker.add(ev("person.message", seq=1, text="Why?"))
    maker.add(ev("llm.resp", seq=2, calls=[{"id": "a"}, {"id": "b"}]))
    maker.add(ev("llm.resp", seq=3, agent="explorer", calls=[{"id": "c"}]))
    maker.add(ev("compaction", seq=4, note="n"))
    (card,) = maker.cards()
    assert card.text() == (
        'turn 1 · seq 1-4 · 2026-10-15 09:00 · "Why?" · 3 tool calls · compacted at seq 4'
        " · not finished"
    )


def test_a_card_round_trips_and_refuses_what_is_not_one() -> None:
    card = Card(3, 41, 87, "2026-10-15T09:00:00Z", "Why?", 12, 47, (80,))
    assert Card.from_obj(card.to_obj()) == card
    with pytest.raises(ValueError, match=r"^a card's numbers are whole numbers$"):
        Card.from_obj([3, 41, -1, "", "", 0, 0, []])


def test_seq_ranges_read_as_runs() -> None:
    assert seq_ranges([64, 41, 42, 43, 62, 65]) == "41-43, 62, 64-65"


lines_strategy = st.lists(
    st.text(alphabet="abc ScrubEnv_-.\tXY", max_size=30), min_size=0, max_size=25
)


@settings(max_examples=200, deadline=None)
@given(lines=lines_strategy, query=st.lists(st.sampled_from(["a", "b", "scrub", "env", "x", "c"])))
def test_matched_lines_pick_what_best_lines_picks(lines: list[str], query: list[str]) -> None:
    et = event_text(ev("plan", text="\n".join(lines)))
    numbered = list(enumerate(et.lines, 1))
    assert matched_lines(et, list(dict.fromkeys(query))) == best_lines(
        numbered, list(dict.fromkeys(query))
    )


def test_recall_shows_a_short_event_whole_under_its_header() -> None:
    et = event_text(result("line one\nline two", agent="explorer"))
    text, data = render_recall(et, start=None, count=None, cap=16_000)
    assert text == (
        "seq 1 · tool.result · explorer's context · turn 1 · 2026-10-15T09:00:00Z\n"
        'result of fs-read {"path": "keychain/bind.go"}\n'
        "line one\nline two"
    )
    assert data["lines"] == {"start": 1, "end": 2, "total": 2}
    assert data["provenance"] == "external:log"


def test_recall_pages_a_range_as_a_ranged_read_does() -> None:
    et = event_text(result("\n".join(f"l{i}" for i in range(1, 121))))
    text, _ = render_recall(et, start=3, count=2, cap=16_000)
    assert text.splitlines()[2:] == ["[lines 3-4 of 120]", "l3", "l4"]


def test_recall_cuts_at_the_cap_and_says_how_to_read_on() -> None:
    et = event_text(result("\n".join("y" * 99 for _ in range(400))))
    text, data = render_recall(et, start=None, count=None, cap=2_000)
    assert len(text) <= 2_000
    last = data["lines"]["end"]
    assert text.splitlines()[2] == f"[lines 1-{last} of 400]"
    assert text.splitlines()[-1] == (
        f"[cut at 2,000 characters: recall seq 1 with start {last + 1} to read on]"
    )
    assert data["cut"] is True


def test_a_reply_recalled_names_each_calls_result() -> None:
    reply = event_text(ev("llm.resp", text="ok", calls=[{"id": "c1", "name": "git-status"}]))
    text, data = render_recall(
        reply, start=None, count=None, cap=16_000, results=[(reply.calls[0], 7)]
    )
    assert text.splitlines()[-1] == "[call git-status: its result is seq 7]"
    assert data["results"] == [{"call": {"name": "git-status", "args": None}, "seq": 7}]


def test_split_lines_is_how_an_event_is_cut() -> None:
    # The lines recall numbers are the lines a ranged file read numbers.
    text = "a\r\nb\n\nc\n"
    assert event_text(ev("plan", text=text)).lines == tuple(split_lines(text))
    assert Counter(event_counts(ev("plan", text=text)) or {}) == Counter(word_counts(text))
