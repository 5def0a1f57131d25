"""How conversation results and a recall read, at their edges (retrieval/event_render.py, §8, §9):
the lines a result shows (never a search's own call, the same as the plain rule), results grouped
by turn and task, their JSON, and a recall's header, pages, pieces and cut."""

from __future__ import annotations

import random
from typing import Any

import pytest
from nodwyn_retrieval.retrieval.event_render import (
    LogHit,
    hit_json,
    matched_lines,
    render_hits,
    render_recall,
)
from nodwyn_retrieval.retrieval.events import Call, Card, event_text
from nodwyn_retrieval.retrieval.render import best_lines

from tests.test_events_edges import CANARY, ev


def plan(*lines: str, seq: int = 1) -> Any:
    return event_text(ev("plan", seq=seq, text="\n".join(lines)))


# -- the lines a result shows ---------------------------------------------------------------------


def test_no_query_words_show_no_lines() -> None:
    assert matched_lines(plan("alpha beta"), []) == []


def test_the_lines_are_the_best_three_in_the_events_order() -> None:
    et = plan("alpha", "beta gamma", "nothing", "alpha beta gamma", "gamma", "beta")
    assert matched_lines(et, ["alpha", "beta", "gamma"]) == [
        (1, "alpha"), (2, "beta gamma"), (4, "alpha beta gamma"),
    ]  # fmt: skip
    assert matched_lines(et, ["alpha", "beta", "gamma"], n=1) == [(4, "alpha beta gamma")]
    assert matched_lines(et, ["gamma"], n=2) == [(2, "beta gamma"), (4, "alpha beta gamma")]


def test_a_word_inside_another_is_no_match() -> None:
    et = plan("the parser", "sparse", "we parse", "parse it and parse again")
    assert matched_lines(et, ["parse"]) == [(3, "we parse"), (4, "parse it and parse again")]


def test_a_searchs_own_call_is_never_a_matched_line() -> None:
    reply = ev(
        "llm.resp",
        text="lantern is lit",
        calls=[
            {"id": "a", "name": "index-search", "args": {"query": "lantern"}},
            {"id": "b", "name": "fs-read", "args": {"path": "lantern.go"}},
        ],
    )
    et = event_text(reply)
    assert et.hidden == frozenset({2})
    assert matched_lines(et, ["lantern"]) == [(1, "lantern is lit"), (3, et.lines[2])]
    assert matched_lines(et, ["lantérn"]) == []  # the plain path leaves it out too
    only = event_text(ev("llm.resp", text="x", calls=[{"id": "a", "name": "recall", "args": "zq"}]))
    assert matched_lines(only, ["zq"]) == []


def test_a_long_line_is_matched_in_the_piece_that_holds_the_word() -> None:
    et = plan("z" * 3997 + " abc needl tail", "q here")
    assert et.lines[1] == "c needl tail"  # the line's second piece, numbered 2 as recall does
    assert matched_lines(et, ["needl"]) == [(2, "c needl tail")]
    assert matched_lines(et, ["abc"]) == []  # cut by the piece: "ab" and "c", no "abc"
    assert matched_lines(et, ["q"]) == [(3, "q here")]


def test_the_same_lines_as_the_plain_rule_with_hidden_lines() -> None:
    rng = random.Random(11)
    vocab = ["ab", "b", "abc", "Ab", "x_ab", "ab-b", "é", "zz", "b.ab", "AB"]
    for _ in range(300):
        text = "\n".join(
            " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 4)))
            for _ in range(rng.randint(0, 8))
        )
        calls = [
            {
                "id": str(i),
                "name": rng.choice(["index-search", "fs-read"]),
                "args": rng.choice(vocab),
            }
            for i in range(rng.randint(0, 3))
        ]
        et = event_text(ev("llm.resp", text=text, calls=calls))
        query = list(dict.fromkeys(rng.sample(["ab", "b", "abc", "x_ab", "zz", "é"], 3)))
        n = rng.randint(1, 4)
        shown = [(i, line) for i, line in enumerate(et.lines, 1) if i not in et.hidden]
        assert matched_lines(et, query, n) == best_lines(shown, query, n), (et.lines, query, n)


def test_a_word_ending_in_a_final_sigma_is_matched_where_the_line_lowercases_otherwise() -> None:
    # "ΑΣ" as a word is "ας" (a final sigma), but lowercased inside "ΑΣ.ΒΑ" it is "ασ"
    et = plan("ΑΣ.ΒΑ", "nothing", "ΣΑΣTest")
    assert "ας" not in "ΑΣ.ΒΑ".lower()
    assert matched_lines(et, ["ας"]) == [(1, "ΑΣ.ΒΑ")]
    assert matched_lines(et, ["σας", "test"]) == [(3, "ΣΑΣTest")]
    assert matched_lines(et, ["βα"]) == [(1, "ΑΣ.ΒΑ")]
    assert best_lines([(4, "ΑΣ.ΒΑ")], ["ας"]) == [(4, "ΑΣ.ΒΑ")]  # a repository result's lines


# -- results grouped by turn ----------------------------------------------------------------------


def card(turn: int, first: int = 1, last: int = 9) -> Card:
    return Card(turn, first, last, "2026-10-15T09:00:00Z", f"question {turn}", 1, 3)


def hit(seq: int, turn: int, **more: Any) -> LogHit:
    et = event_text(ev("plan", seq=seq, turn=turn, text=f"line of {seq}"))
    return LogHit(event=et, card=card(turn), lines=((1, f"line of {seq}"),), score=1.0, **more)


def test_results_are_grouped_under_their_turns_card_in_the_order_of_the_best() -> None:
    hits = [hit(5, 2), hit(2, 1), hit(6, 2, also=(7, 8, 10))]
    assert render_hits("3 results", hits).split("\n") == [
        "3 results",
        card(2).text(),
        "  seq 5 plan",
        "    1: line of 5",
        "  seq 6 plan · also seq 7-8, 10",
        "    1: line of 6",
        card(1).text(),
        "  seq 2 plan",
        "    1: line of 2",
    ]
    assert render_hits("nothing", []) == "nothing"


def test_an_earlier_tasks_results_name_the_task_its_date_and_title() -> None:
    a = hit(3, 1, task="t-1", date="2026-10-09", title="Fix the lantern", archived=True)
    b = hit(4, 1, task="t-2")
    c = hit(5, 1, task="t-3", title="x" * 150)
    text = render_hits("h", [a, b, c]).split("\n")
    assert text[1] == f'task t-1 (2026-10-09, archived) "Fix the lantern" · {card(1).text()}'
    assert text[4] == f"task t-2 · {card(1).text()}"  # same turn number, another task
    assert text[7] == f'task t-3 "{"x" * 99}…" · {card(1).text()}'
    d = hit(6, 1, task="t-4", archived=True)
    assert render_hits("h", [d]).split("\n")[1] == f"task t-4 (archived) · {card(1).text()}"


def test_a_results_json() -> None:
    res = event_text(
        ev("tool.result", seq=4, agent="explorer", name="fs-read", args={"p": 1}, output="o")
    )
    h = LogHit(event=res, card=card(1), lines=((1, "o"),), score=1.234567, also=(5,))
    assert hit_json(h) == {
        "seq": 4,
        "kind": "tool.result",
        "agent": "explorer",
        "turn": 1,
        "card": card(1).text(),
        "call": {"name": "fs-read", "args": {"p": 1}},
        "lines": [{"n": 1, "text": "o"}],
        "score": 1.2346,
        "also": [5],
        "provenance": "external:log",
    }
    t = hit_json(hit(3, 1, task="t-1", date="2026-10-09", title="T", archived=True))
    assert t["card"] == card(1).text()  # the task is said in its own fields
    assert t["call"] is None
    assert (t["task"], t["date"], t["archived"], t["title"]) == ("t-1", "2026-10-09", True, "T")
    assert "task" not in hit_json(hit(3, 1))


# -- a recall -------------------------------------------------------------------------------------


def recall(et: Any, **kw: Any) -> tuple[str, dict[str, Any]]:
    kw.setdefault("start", None)
    kw.setdefault("count", None)
    kw.setdefault("cap", 16_000)
    return render_recall(et, **kw)


def test_a_recalls_header_names_everything_known_of_the_event() -> None:
    res = event_text(
        ev(
            "tool.result",
            seq=7,
            turn=0,
            agent="explorer",
            name="fs-read",
            args={"key": CANARY},
            output=f"{CANARY}\nok",
            error=True,
        )
    )
    text, data = recall(res, task="t-9")
    head = text.split("\n")
    assert head[0] == "seq 7 of task t-9 · tool.result · explorer's context · 2026-10-15T09:00:00Z"
    assert head[1].startswith("result of fs-read ")
    assert head[1].endswith(" (error)")
    assert head[2] == "[2 credentials redacted]"
    assert data["task"] == "t-9"
    assert data["redacted"] == 2
    one = event_text(ev("plan", seq=2, text=f"{CANARY}"))
    assert recall(one)[0].split("\n")[1] == "[1 credential redacted]"
    att = event_text({"seq": 3, "kind": "attachment", "name": "bind.go", "text": "x"})
    assert recall(att)[0].split("\n")[:2] == ["seq 3 · attachment", "attachment bind.go"]
    assert "task" not in recall(att)[1]


def test_a_turns_first_message_is_recalled_with_its_card() -> None:
    msg = event_text(ev("person.message", seq=41, turn=3, text="Why?"))
    c = Card(3, 41, 44, "2026-10-15T09:00:00Z", "Why?", 0, 3)
    text, data = recall(msg, card=c, turn_seqs=[41, 42, 44])
    assert text.split("\n") == [
        "seq 41 · person.message · turn 3 · 2026-10-15T09:00:00Z",
        f"card: {c.text()}",
        "turn 3 holds seqs 41-42, 44",
        "Why?",
    ]
    assert data["card"] == c.text()
    assert data["turn_seqs"] == [41, 42, 44]


def test_a_replys_calls_name_their_results_or_say_there_is_none() -> None:
    reply = event_text(ev("llm.resp", text="ok"))
    text, data = recall(
        reply, results=[(Call("a", "git-status", None), 9), (Call("b", "x", {}), None)]
    )
    assert text.split("\n")[-2:] == [
        "[call git-status: its result is seq 9]",
        "[call x: no result in the log]",
    ]
    assert data["results"][1] == {"call": {"name": "x", "args": {}}, "seq": None}


def test_a_range_is_paged_and_the_last_line_is_the_events_last() -> None:
    et = plan(*(f"l{i}" for i in range(1, 11)))
    text, data = recall(et, start=9, count=5)
    assert text.split("\n")[1:] == ["[lines 9-10 of 10]", "l9", "l10"]
    assert data["lines"] == {"start": 9, "end": 10, "total": 10}
    assert data["cut"] is False
    text, _ = recall(et, start=1, count=1)
    assert text.split("\n")[1:] == ["[lines 1-1 of 10]", "l1"]
    text, _ = recall(et, start=None, count=2)
    assert text.split("\n")[1:] == ["[lines 1-2 of 10]", "l1", "l2"]
    whole, _ = recall(et)
    assert "[lines" not in whole


def test_an_empty_event_recalls_its_header_alone() -> None:
    text, data = recall(plan())
    assert text == "seq 1 · plan · turn 1 · 2026-10-15T09:00:00Z"
    assert data["lines"] == {"start": 1, "end": 0, "total": 0}
    assert data["cut"] is False


def test_a_recall_cut_at_its_cap_says_where_to_read_on() -> None:
    et = plan(*("y" * 99 for _ in range(50)))
    text, data = recall(et, cap=2_000, task="t-2")
    assert len(text) <= 2_000
    last = data["lines"]["end"]
    assert 1 <= last < 50
    assert data["cut"] is True
    assert text.split("\n")[-1] == (
        f"[cut at 2,000 characters: recall seq 1 with start {last + 1} and task t-2 to read on]"
    )
    assert text.split("\n")[1] == f"[lines 1-{last} of 50]"


def test_a_first_line_longer_than_the_cap_is_shown_cut() -> None:
    et = plan("w" * 5000, "next")
    text, data = recall(et, cap=1_000)
    assert len(text) <= 1_000
    body = text.split("\n")
    shown = next(line for line in body if line.startswith("w"))
    assert shown.endswith("…")
    assert data["lines"]["end"] == 1
    assert body[-1] == "[cut at 1,000 characters: recall seq 1 with start 2 to read on]"


def test_a_line_that_does_not_fit_after_the_first_ends_the_page() -> None:
    et = plan("short", "v" * 3000, "after")
    text, data = recall(et, cap=1_000)
    assert data["lines"]["end"] == 1
    assert "short" in text.split("\n")
    assert not any(line.startswith("v") for line in text.split("\n"))


def test_a_long_lines_pieces_are_said_above_the_lines() -> None:
    et = plan("a" * 9000, "b")
    text, data = recall(et)
    lines = text.split("\n")
    assert lines[1] == "[lines 1-3 are one line of 9,000 characters, in pieces of 4,000]"
    assert lines[2:] == ["a" * 4000, "a" * 4000, "a" * 1000, "b"]
    assert data["pieces"] == [{"start": 1, "end": 3, "chars": 9000}]
    # a page that holds none of a long line's pieces says nothing of it
    text, data = recall(et, start=4, count=1)
    assert text.split("\n")[1:] == ["[lines 4-4 of 4]", "b"]
    assert data["pieces"] == []


def test_at_most_three_long_lines_are_said_and_the_rest_counted() -> None:
    et = plan(*("c" * 4100 for _ in range(5)))
    text, data = recall(et, cap=100_000)
    lines = text.split("\n")
    assert lines[1:5] == [
        "[lines 1-2 are one line of 4,100 characters, in pieces of 4,000]",
        "[lines 3-4 are one line of 4,100 characters, in pieces of 4,000]",
        "[lines 5-6 are one line of 4,100 characters, in pieces of 4,000]",
        "[and 2 more long lines in pieces]",
    ]
    assert len(data["pieces"]) == 5
    four = plan(*("c" * 4100 for _ in range(4)))
    assert recall(four, cap=100_000)[0].split("\n")[4] == "[and 1 more long lines in pieces]"
    three = plan(*("c" * 4100 for _ in range(3)))
    assert not recall(three, cap=100_000)[0].split("\n")[4].startswith("[and")


@pytest.mark.parametrize("cap", [600, 1_500, 4_500, 9_000])
def test_a_recall_with_pieces_stays_within_its_cap(cap: int) -> None:
    et = plan(*("d" * 4100 for _ in range(6)))
    text, data = recall(et, cap=cap)
    assert len(text) <= cap
    assert data["cut"] is True


@pytest.mark.parametrize("task", [None, "t-2", "a-task-id-of-forty-characters-0123456789"])
@pytest.mark.parametrize("seq", [7, 9_876_543_210])
def test_a_recall_at_any_cap_stays_within_it_and_says_where_to_read_on(
    task: str | None, seq: int
) -> None:
    rng = random.Random(seq)
    text = "\n".join("y" * rng.randint(0, 120) for _ in range(200))
    et = event_text(ev("plan", seq=seq, text=text))
    for cap in range(1_000, 4_000, 7):
        shown, data = recall(et, cap=cap, task=task)
        assert len(shown) <= cap, cap
        end = data["lines"]["end"]
        assert shown.split("\n")[2 : 2 + end] == list(et.lines[:end])
        how = f"recall seq {seq} with start {end + 1}" + (f" and task {task}" if task else "")
        assert shown.split("\n")[-1] == f"[cut at {cap:,} characters: {how} to read on]"


@pytest.mark.parametrize(("start", "count"), [(None, None), (3, None), (5, 20)])
def test_a_replys_recall_with_long_lines_and_its_calls_stays_within_any_cap(
    start: int | None, count: int | None
) -> None:
    rng = random.Random(8)
    lines = ["z" * 4100 if i % 4 == 0 else "w" * rng.randint(0, 90) for i in range(40)]
    calls = [{"id": str(i), "name": "fs-read", "args": {"path": f"f{i}.go"}} for i in range(6)]
    et = event_text(ev("llm.resp", seq=12345, text="\n".join(lines), calls=calls))
    results = [(c, 100 + i if i % 2 else None) for i, c in enumerate(et.calls)]
    for cap in range(1_000, 30_000, 13):
        shown, _ = recall(et, start=start, count=count, cap=cap, results=results, task="t-7")
        assert len(shown) <= cap, cap
        assert shown.split("\n")[-6:] == [
            f"[call {c.text}: its result is seq {s}]"
            if s
            else f"[call {c.text}: no result in the log]"
            for c, s in results
        ]


@pytest.mark.parametrize("kind", ["plan", "llm.resp"])
def test_a_recalls_page_holds_every_line_that_fits(kind: str) -> None:
    rng = random.Random(5)
    text = "\n".join("y" * rng.randint(0, 60) for _ in range(300))
    calls = [{"id": str(i), "name": "fs-read", "args": {"path": f"f{i}.go"}} for i in range(6)]
    et = event_text(ev(kind, seq=3, text=text, calls=calls))
    results = [(c, 100 + i if i % 2 else None) for i, c in enumerate(et.calls)]
    for cap in range(4_000, 9_000):
        shown, data = recall(et, cap=cap, results=results)
        assert len(shown) <= cap, cap
        end = data["lines"]["end"]
        # pages ending at lines 100-299, numbered in as many digits as the event's last line: the
        # room kept for the page's marker and the line saying how to read on is exactly theirs
        assert 100 <= end < 300
        # the next line and its newline would pass the cap (all but one character of it is used)
        assert len(shown) + 1 + len(et.lines[end]) >= cap, cap


def test_the_first_line_is_shown_cut_from_the_first_character_that_fits() -> None:
    et = plan("abcdef", "xyz")
    caps = {}
    for cap in range(60, 200):
        shown, data = recall(et, cap=cap)
        if data["lines"]["end"] == 1:
            caps.setdefault(shown.split("\n")[2], cap)
    assert list(caps)[:3] == ["…", "a…", "ab…"]  # no room, then one character, then two
    first = caps["…"]
    shown, data = recall(et, cap=first - 1)
    assert data["lines"]["end"] == 0  # a cap one smaller shows none of it
    assert shown.split("\n")[1] == "[lines 1-0 of 2]"


def test_a_page_that_ends_or_begins_inside_a_long_line_says_so() -> None:
    et = plan("short", "a" * 9000, "end")  # the long line is lines 2-4
    note = "[lines 2-4 are one line of 9,000 characters, in pieces of 4,000]"
    for start, count in [(1, 2), (4, 2), (2, 1), (1, 5)]:
        shown, data = recall(et, start=start, count=count)
        assert shown.split("\n")[2] == note, (start, count)
        assert data["pieces"] == [{"start": 2, "end": 4, "chars": 9000}]
    shown, data = recall(et, start=5, count=1)
    assert note not in shown
    assert data["pieces"] == []
    shown, data = recall(et, start=1, count=1)
    assert note not in shown
