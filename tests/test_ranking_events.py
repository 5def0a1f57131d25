"""What ranks first in the conversation: the event before its echo, a log's setup weighing
little, near-duplicates collapsed into one result that names the others' seqs, and the words of a
question that every event holds left out of the ranking."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.actors import conversation
from nodwyn_retrieval.retrieval.events import conversation_words

from tests.support import Log
from tests.test_conversation import search

OUTPUT = "\n".join(
    [
        "=================== FAILURES ===================",
        "___ test_refund_rounding ___",
        "E   AssertionError: refund of 10.005 rounded to 10.00, expected 10.01",
        "tests/test_billing.py:42: AssertionError",
        "1 failed, 37 passed in 0.41s",
    ]
)


def restating_log(path: Path) -> tuple[Log, int, int]:
    lg = Log(path)
    lg.add("person.message", text="run the billing tests")
    _reply, result = lg.call("shell", OUTPUT, cmd="pytest tests/test_billing.py")
    echo = lg.add(
        "llm.resp", text="The refund rounding test fails: 10.005 rounded to 10.00.", calls=[]
    )
    lg.end_turn()
    return lg, result, echo


@pytest.mark.asyncio
async def test_the_result_ranks_before_the_models_restatement_of_it(tmp_path: Path) -> None:
    lg, result, echo = restating_log(tmp_path / "t.jsonl")
    out = await search(lg.path, "refund rounding")
    seqs = [h["seq"] for h in out.hits]
    assert seqs.index(result) < seqs.index(echo)


@pytest.mark.asyncio
async def test_without_the_rule_the_restatement_would_rank_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check above is not vacuous: BM25 alone puts the shorter restatement first.
    lg, result, echo = restating_log(tmp_path / "t.jsonl")
    monkeypatch.setattr(conversation, "ECHO_SHARE", float("inf"))
    out = await search(lg.path, "refund rounding")
    seqs = [h["seq"] for h in out.hits]
    assert seqs.index(echo) < seqs.index(result)


@pytest.mark.asyncio
async def test_a_restatement_that_says_more_than_the_result_keeps_its_rank(
    tmp_path: Path,
) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="run the billing tests")
    _, result = lg.call("shell", OUTPUT, cmd="pytest tests/test_billing.py")
    echo = lg.add(
        "llm.resp", text="The refund rounding fails because of banker's rounding.", calls=[]
    )
    lg.end_turn()
    out = await search(lg.path, "refund rounding banker")
    assert out.hits[0]["seq"] == echo  # it holds a word the result does not
    assert result in [h["seq"] for h in out.hits]


def setup_log(path: Path) -> tuple[Log, int, int]:
    lg = Log(path)
    setup = lg.add(
        "nodwyn.message", text="Read the files, run the tests; read the files, run the tests."
    )
    lg.add("person.message", text="fix the failing test")
    noise = "\n".join(f"compiling module {i} of 40" for i in range(40))
    _, result = lg.call("shell", noise + "\ntests failed: two files were not read", cmd="make")
    lg.end_turn()
    return lg, setup, result


@pytest.mark.asyncio
async def test_a_logs_setup_weighs_little(tmp_path: Path) -> None:
    lg, setup, result = setup_log(tmp_path / "t.jsonl")
    out = await search(lg.path, "read the files tests")
    seqs = [h["seq"] for h in out.hits]
    assert seqs.index(result) < seqs.index(setup)  # still found, below


@pytest.mark.asyncio
async def test_without_the_setup_weight_the_setup_would_rank_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg, setup, result = setup_log(tmp_path / "t.jsonl")
    monkeypatch.setattr(conversation, "SETUP_WEIGHT", 1.0)
    out = await search(lg.path, "read the files tests")
    seqs = [h["seq"] for h in out.hits]
    assert seqs.index(setup) < seqs.index(result)


@pytest.mark.asyncio
async def test_near_duplicates_are_one_result_naming_the_others(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="watch the deploy")
    same = "deploy pending: waiting for the canary in region west\n" * 3
    seqs = [lg.result(same, name="shell", cmd="deploy status") for _ in range(4)]
    other = lg.result("deploy finished: canary healthy", name="shell", cmd="deploy status")
    lg.end_turn()
    out = await search(lg.path, "canary deploy")
    shown = [h["seq"] for h in out.hits]
    assert other in shown
    collapsed = [h for h in out.hits if h["seq"] in seqs]
    assert len(collapsed) == 1
    assert sorted([collapsed[0]["seq"], *collapsed[0]["also"]]) == seqs
    lines = out.text.splitlines()
    first = collapsed[0]["seq"]
    rest = sorted(set(seqs) - {first})
    line = next(x for x in lines if x.startswith(f"  seq {first} "))
    assert line.endswith(" · also seq " + ", ".join(map(str, rest)))


def test_the_words_of_a_question_that_every_event_holds_are_left_out() -> None:
    assert conversation_words("what did I get when I ran the billing tests") == [
        "ran",
        "billing",
        "tests",
    ]
    assert conversation_words("what was it") == ["what", "was", "it"]  # nothing else is left
