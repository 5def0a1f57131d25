"""Words at their edges (retrieval/words.py, §6 and the amendment of 2026-10-16): the 64-byte
limit in characters of every width, camel case outside ASCII, the stems of short words, a word's
other forms, and what a query writes as code."""

from __future__ import annotations

import pytest
from nodwyn_retrieval.retrieval.words import (
    clear_memo,
    form_prefix,
    identifiers,
    query_words,
    ranking_words,
    stem,
    weighted_query,
    word_counts,
    word_forms,
    words,
)

FOUR = "\U00020000"  # a CJK ideograph of 4 bytes in UTF-8, a word character
THREE = "変"  # 3 bytes
TWO = "é"  # 2 bytes


@pytest.mark.parametrize(
    ("char", "kept"),
    [(FOUR, 16), (THREE, 21), (TWO, 32)],
    ids=["4-byte", "3-byte", "2-byte"],
)
def test_a_word_of_wide_characters_is_kept_up_to_64_bytes(char: str, kept: int) -> None:
    assert words(char * kept) == [char * kept]
    assert words(char * (kept + 1)) == []
    assert words(f"x_{char * (kept + 1)}") == ["x"]  # the part too long gives nothing


def test_a_word_that_is_mostly_ascii_is_measured_in_bytes() -> None:
    assert words(TWO + "a" * 62) == [TWO + "a" * 62]  # 63 characters, 64 bytes
    assert words(TWO + "a" * 63) == []  # 64 characters, 65 bytes
    assert words(TWO + "_" + "a" * 64) == [TWO, "a" * 64]  # the part fits; the whole does not
    assert words(TWO + "_" + "a" * 65) == [TWO]


def test_an_ascii_name_and_its_parts_at_64_bytes() -> None:
    assert words("a" * 64) == ["a" * 64]
    assert words("a" * 65) == []
    assert words("A" * 64) == ["a" * 64]
    assert words("Ab" * 33) == []  # 66 bytes, and so no pieces either
    assert words("x_" + "a" * 64) == ["x", "a" * 64]
    assert words("x_" + "a" * 62) == ["x_" + "a" * 62, "x", "a" * 62]  # 64 bytes whole
    assert words("x_" + "a" * 63) == ["x", "a" * 63]  # 65 whole: dropped, its parts kept
    assert words("x_" + "B" * 65) == ["x"]
    assert words("x-" + "a" * 63) == ["x", "a" * 63]
    assert words("x-" + "a" * 62) == ["x-" + "a" * 62, "x", "a" * 62]  # 64 bytes with a dash
    assert words("X_" + "a" * 62) == ["x_" + "a" * 62, "x", "a" * 62]  # and with a capital
    assert words("x_" + "B" * 64) == ["x", "b" * 64]  # a part of 64 bytes is kept


def test_camel_case_outside_ascii_follows_the_ascii_rule() -> None:
    assert words("ÜberCafé") == ["übercafé", "über", "café"]
    assert words("ÜberCAFÉs") == ["übercafés", "über", "cafés"]  # a lone plural "s"
    assert words("ÜBERCafé") == ["übercafé", "über", "café"]  # the last capital begins a piece
    assert words("ÜBERSicht") == ["übersicht", "über", "sicht"]
    assert words("getÜRLs") == ["getürls", "get", "ürls"]
    assert words("naïveCase") == ["naïvecase", "naïve", "case"]
    assert words("ÉCOLE") == ["école"]
    assert words("naïve-Café") == ["naïve-café", "naïve", "café"]
    assert words("naïve_CaféBar") == ["naïve_cafébar", "naïve", "cafébar", "café", "bar"]
    assert words("__naïve__") == ["naïve"]
    assert words("x_é-") == ["x_é", "x", "é"]


def test_a_count_is_per_name_outside_ascii_too() -> None:
    assert word_counts("ÜberCafé ÜberCafé über") == {"übercafé": 2, "über": 3, "café": 2}
    assert word_counts("naïve naïve-x") == {"naïve": 2, "naïve-x": 1, "x": 1}


def test_a_name_of_one_joiner_or_none_is_no_word() -> None:
    for text in ("_", "__", "-", "_-_", "--", "_-", "-_"):
        assert words(text) == [], text
    assert words("_-x") == ["x"]
    assert words("é_-") == ["é"]
    assert words("“_”") == []  # a joiner between two non-ASCII separators
    assert words("_\u00a0_") == []


def test_a_run_without_words_counts_for_no_word_whatever_the_table_holds() -> None:
    clear_memo()
    words("x alpha")  # the table's last word is now "alpha"
    assert word_counts("__ x") == {"x": 1}
    assert word_counts("-- x __") == {"x": 1}
    assert word_counts("__") == {}


def test_query_words_keep_each_word_once_in_order() -> None:
    assert query_words("b a b c a") == ["b", "a", "c"]
    assert query_words("") == []


def test_words_shorter_than_four_letters_are_their_own_stem() -> None:
    assert stem("ids") == "ids"  # English stemming would make it "id"
    assert stem("abs") == "abs"
    assert stem("runs") == "run"  # four letters are stemmed
    assert stem("users") == stem("user") == "user"
    assert stem("run2") == "run2"
    assert stem("x-ray") == "x-ray"
    assert stem("ids") == "ids"  # the second time, from memory, the same


def test_a_words_forms_with_a_y_and_a_doubled_consonant() -> None:
    vocab = {"library", "libraries", "librarian", "copy", "copies", "copied", "copier"}
    assert word_forms("library", vocab.__contains__) == ["libraries"]
    assert word_forms("libraries", vocab.__contains__) == ["library"]
    assert sorted(word_forms("copy", vocab.__contains__)) == ["copied", "copies"]
    stops = {"stop", "stops", "stopping", "stopped", "stoping"}
    assert sorted(word_forms("stop", stops.__contains__)) == ["stopped", "stopping", "stops"]
    # a vowel is not doubled: "free" -> "freeing", never "freeeing"
    frees = {"frees", "freeing", "freeeing"}
    assert sorted(word_forms("free", frees.__contains__)) == ["freeing", "frees"]


def test_a_word_that_is_its_own_stem_may_still_have_forms() -> None:
    vocab = {"audit", "audits", "audited"}
    assert stem("audit") == "audit"
    assert sorted(word_forms("audit", vocab.__contains__)) == ["audited", "audits"]
    assert word_forms("ids", {"id", "ids"}.__contains__) == []  # short: no forms
    assert word_forms("run", {"runs", "running"}.__contains__) == []  # though "runs" stems to it
    tests = {"test", "tests", "tested", "testing"}
    assert sorted(word_forms("test", tests.__contains__)) == ["tested", "testing", "tests"]
    assert word_forms("sha256", {"sha256s"}.__contains__) == []  # a name: no forms


def test_the_forms_from_a_known_list_are_those_it_holds() -> None:
    known = ["audit", "audited", "auditor", "audits"]
    got = word_forms("auditing", lambda w: False, known)  # the list, not the callable, decides
    assert sorted(got) == ["audit", "audited", "audits"]
    assert form_prefix("audits") == "audit"
    assert form_prefix("copies") == "cop"


def test_what_a_query_writes_as_code() -> None:
    text = "e.g. see ab.c, x.y and _private, __init__, max_tokens, ScrubEnv; Calling run()"
    found = identifiers(text)
    assert found == ["ab.c", "run", "max_tokens", "ScrubEnv"]
    # backticks and a traceback's file and function come first, in that order
    tb = 'File "src/a.py", line 3, in go\n`plain words`'
    assert identifiers(tb)[:3] == ["plain words", "src/a.py", "go"]


def test_a_query_weighs_code_three_times_and_prose_once() -> None:
    q = weighted_query("e.g. the foo in ab.c")
    assert q == {"e": 1.0, "g": 1.0, "foo": 1.0, "ab": 3.0, "c": 3.0}
    assert weighted_query("call load() now") == {"call": 1.0, "load": 3.0, "now": 1.0}
    assert weighted_query("call load() now", identifier_weight=2.0)["load"] == 2.0
    assert weighted_query("just prose here") == {"just": 1.0, "prose": 1.0, "here": 1.0}
    # the stop words of the prose go; a code word that is one stays, weighed as code
    assert weighted_query("what is `is_in`") == {"is_in": 3.0}
    assert ranking_words("what is it") == ["what", "is", "it"]


@pytest.mark.parametrize("second", ["foobar", "foobar foobar"])
def test_a_run_that_spells_a_word_the_table_holds_first_counts_for_that_word(second: str) -> None:
    """The table's first word (id 0), found inside a camel-case run, is the same word when a
    later run spells it alone: one word of the vocabulary, its counts summed, not a second."""
    from nodwyn_retrieval.retrieval.analyze import _analyze

    n = 1 + len(second.split())
    clear_memo()
    assert word_counts(f"fooBar {second}") == {"foobar": n, "foo": 1, "bar": 1}
    for native in (False, True):
        clear_memo()
        record = _analyze(f"fooBar {second}\n", native=native)
        assert sorted(record.vocab) == ["bar", "foo", "foobar"]
        assert record.chunk_words(0)["foobar"] == (n, n)
