"""Word forms in the conversation and earlier tasks: the repository's stemming (``audits`` finds
``Auditing``), the derivations it leaves apart (``reproduction`` finds ``reproduce_bug``), names
kept whole, and another form weighing less than the word itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.events import (
    FORM_WEIGHT,
    Term,
    conversation_terms,
    conversation_words,
)
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path, word_keys
from nodwyn_retrieval.store.transcripts import NODWYN, reader_for

from tests.support import Log
from tests.test_conversation import search
from tests.test_earlier import read, write_task
from tests.test_earlier import search as search_earlier

AUDIT = "\n".join(
    [
        "Auditing 214 packages for known vulnerabilities",
        "found 0 vulnerabilities in 214 packages",
    ]
)
NOISE = "\n".join(f"compiled module {i} of 12 without warnings" for i in range(12))


def audit_log(path: Path, *, finish: bool = True) -> tuple[Log, int]:
    lg = Log(path)
    lg.add("person.message", text="check the dependencies")
    lg.result(NOISE, name="shell", cmd="make build")
    _, audit = lg.call("shell", AUDIT, cmd="npm audit")
    lg.add("llm.resp", text="The build is clean.", calls=[])
    if finish:
        lg.end_turn()
    return lg, audit


@pytest.mark.asyncio
@pytest.mark.parametrize("finish", [True, False], ids=["in the mem", "in the open turn"])
async def test_audits_finds_the_result_that_says_auditing(tmp_path: Path, finish: bool) -> None:
    lg, audit = audit_log(tmp_path / "t.jsonl", finish=finish)
    assert mem_path(lg.path).exists() is False
    out = await search(lg.path, "audits")
    assert [h["seq"] for h in out.hits][:1] == [audit]
    # The line shown is the one holding the form.
    assert [x["n"] for x in out.hits[0]["lines"]][:1] == [1]
    assert mem_path(lg.path).exists() is finish


@pytest.mark.asyncio
async def test_reproduction_finds_the_script_named_reproduce_bug(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="the parser drops the last row")
    lg.result(NOISE, name="shell", cmd="make build")
    _, made = lg.call("fs-write", "wrote 12 lines", path="reproduce_bug.py")
    lg.add("llm.resp", text="Now run it.", calls=[])
    lg.end_turn()
    out = await search(lg.path, "the reproduction")
    # The write's result, then the reply that made the call: nothing else holds the name.
    assert [h["seq"] for h in out.hits] == [made, made - 1]


@pytest.mark.asyncio
async def test_a_name_is_found_whole_before_the_forms_of_its_parts(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="the parser drops the last row")
    _, forms = lg.call("shell", "reproducing the bugs takes two runs", cmd="make check")
    _, named = lg.call("shell", "ran reproduce_bug: 3 rows", cmd="python x.py")
    lg.end_turn()
    out = await search(lg.path, "reproduce_bug")
    seqs = [h["seq"] for h in out.hits]
    assert seqs[0] == named
    assert forms in seqs  # its parts' forms still find the other, below it


@pytest.mark.asyncio
async def test_the_word_itself_weighs_more_than_another_form(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="look at the tests")
    _, form = lg.call("shell", "auditing the lockfile now", cmd="make a")
    _, word = lg.call("shell", "audits the lockfile now", cmd="make b")
    lg.end_turn()
    out = await search(lg.path, "audits")
    assert [h["seq"] for h in out.hits] == [word, form]
    assert out.hits[1]["score"] < out.hits[0]["score"]


@pytest.mark.asyncio
async def test_earlier_tasks_find_other_forms_in_every_log(tmp_path: Path) -> None:
    d = tmp_path / "projects" / "p" / "tasks"
    ask = [("person.message", {"text": "check it"})]
    write_task(d, "t-a", [[*ask, *read("Auditing 3 packages", "a.txt")]], day=3)
    write_task(d, "t-b", [[*ask, *read("the audited lockfile", "b.txt")]], day=5)
    write_task(d, "t-c", [[*ask, *read("nothing of interest", "c.txt")]], day=7)
    write_task(d, "t-current", [[("person.message", {"text": "now"})]], day=12)
    out = await search_earlier(d, "audits")
    assert sorted(h["task"] for h in out.hits) == ["t-a", "t-b"]


def test_the_terms_are_the_words_then_the_forms_the_logs_hold() -> None:
    asked: list[list[str]] = []

    def held(words: list[str] | tuple[str, ...]) -> set[str]:
        asked.append(list(words))
        return {w for w in words if w in {"auditing", "audited", "reproduce", "reproducing"}}

    terms = conversation_terms(conversation_words("audits of the reproduction"), held)
    assert len(asked) == 1  # one question for every candidate
    assert terms[:2] == [Term("audits", 0, 1.0), Term("reproduction", 1, 1.0)]
    forms = {(t.word, t.of) for t in terms[2:]}
    assert forms == {("auditing", 0), ("audited", 0), ("reproduce", 1), ("reproducing", 1)}
    assert {t.weight for t in terms[2:]} == {FORM_WEIGHT}
    # Without the derivations, reproduction has no form the logs hold.
    plain = conversation_terms(["audits", "reproduction"], held, derivations=False)
    assert {t.word for t in plain} == {"audits", "reproduction", "auditing", "audited"}


def test_names_short_words_and_numbers_have_no_forms() -> None:
    def held(words: list[str] | tuple[str, ...]) -> list[str]:
        return list(words)  # the logs hold every candidate: only the rule keeps them out

    for word in ("reproduce_bug", "sha256", "index-grep", "env", "404"):
        assert conversation_terms([word], held) == [Term(word, 0, 1.0)]


def test_a_mem_says_which_keys_it_holds(tmp_path: Path) -> None:
    lg, _ = audit_log(tmp_path / "t.jsonl")
    LogView.open(lg.path).close()
    words = ["auditing", "vulnerabilities", "audits", "npm", "zebra"]
    with MemIndex.open(mem_path(lg.path)) as mem:
        got = mem.holds(word_keys(words))
        assert got.tolist() == [True, True, False, True, False]
        assert mem.holds(np.zeros(0, dtype=np.uint64)).shape == (0,)


def test_a_words_index_reads_the_postings_its_word_reads(tmp_path: Path) -> None:
    lg, _ = audit_log(tmp_path / "t.jsonl")
    LogView.open(lg.path).close()
    words = ["auditing", "packages", "zebra"]
    with MemIndex.open(mem_path(lg.path)) as mem:
        at = mem.find_keys(word_keys(words)).tolist()
        assert at[2] == -1
        assert min(at[:2]) >= 0
        for w, i in zip(words[:2], at[:2], strict=True):
            d1, t1 = mem.postings(w)
            d2, t2 = mem.postings_at(i)
            assert (d1.tolist(), t1.tolist()) == (d2.tolist(), t2.tolist())
            assert d1.size
        for bad in (-1, mem.n_words):
            with pytest.raises(FormatError, match="rebuild"):
                mem.postings_at(bad)


def test_which_agent_reads_a_log_follows_the_environment_at_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agents' directories are remembered for the environment they were made from.
    log = tmp_path / "one" / "projects" / "p" / "s.jsonl"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "one"))
    assert reader_for(log) is not NODWYN
    assert mem_path(log).parent != log.parent  # a transcript's .mem is in the data directory
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "two"))
    assert reader_for(log) is NODWYN
    assert mem_path(log) == log.with_suffix(".mem")
    rollout = tmp_path / "cx" / "sessions" / "r.jsonl"
    assert reader_for(rollout) is NODWYN
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    assert reader_for(rollout) is not NODWYN
