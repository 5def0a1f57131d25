"""retrieval.words: words as code names them (ADR 0050 §6 and its amendment of 2026-10-16)."""

from __future__ import annotations

import base64
import random
import re
import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.retrieval import words as words_module
from nodwyn_retrieval.retrieval.words import (
    MAX_WORD_BYTES,
    NO_WORDS,
    WORDS_VERSION,
    query_words,
    runs,
    word_counts,
    word_table,
    words,
)

SHA256_HEX = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
SHA512_HEX = (
    "ee26b0dd4af7e749aa1a8ee3c10ae9923f618980772e473f8819a5d4940e0db2"
    "7ac185f8a0e1d5f84f88bc887fd67b143732c304cc5fa9ad8e6f57f50028a8ff"
)
LONG_SNAKE = "_".join(["segment"] * 12)  # 95 characters of short parts
LONG_CAMEL = "Segment" * 12  # one part of 84 characters

CASES = [
    # The ADR's own examples.
    pytest.param("ScrubEnv", ["scrubenv", "scrub", "env"], id="pascal-ScrubEnv"),
    pytest.param("index-grep", ["index-grep", "index", "grep"], id="kebab-index-grep"),
    pytest.param(
        "max_result_tokens",
        ["max_result_tokens", "max", "result", "tokens"],
        id="snake-max_result_tokens",
    ),
    pytest.param("models.list", ["models", "list"], id="dotted-models.list"),
    # Acronyms.
    pytest.param("HTTPServer", ["httpserver", "http", "server"], id="acronym-HTTPServer"),
    pytest.param(
        "getHTTPServer", ["gethttpserver", "get", "http", "server"], id="acronym-getHTTPServer"
    ),
    pytest.param(
        "XMLHttpRequest",
        ["xmlhttprequest", "xml", "http", "request"],
        id="acronym-XMLHttpRequest",
    ),
    pytest.param("IOError", ["ioerror", "io", "error"], id="acronym-IOError"),
    pytest.param("getURLs", ["geturls", "get", "urls"], id="acronym-plural-getURLs"),
    pytest.param("HTTP", ["http"], id="acronym-alone"),
    # Digits stay with the letters before them.
    pytest.param("sha256", ["sha256"], id="digits-sha256"),
    pytest.param("utf8", ["utf8"], id="digits-utf8"),
    pytest.param("v2", ["v2"], id="digits-v2"),
    pytest.param("base64Encode", ["base64encode", "base64", "encode"], id="digits-base64Encode"),
    pytest.param("HTTP2Server", ["http2server", "http2", "server"], id="digits-HTTP2Server"),
    pytest.param("int32_t", ["int32_t", "int32", "t"], id="digits-int32_t"),
    pytest.param("x86_64", ["x86_64", "x86", "64"], id="digits-x86_64"),
    pytest.param("deadbeef42", ["deadbeef42"], id="digits-lowercase-hex-whole"),
    # Non-ASCII identifiers.
    pytest.param("naïve_café", ["naïve_café", "naïve", "café"], id="unicode-naïve_café"),
    pytest.param("größe", ["größe"], id="unicode-größe"),
    pytest.param("Größe", ["größe"], id="unicode-Größe-lowercased"),
    pytest.param("変数名", ["変数名"], id="unicode-変数名-uncased"),
    pytest.param("ÜberCafé", ["übercafé", "über", "café"], id="unicode-camel-ÜberCafé"),
    pytest.param("“quoted”\u00a0text", ["quoted", "text"], id="unicode-punctuation-separates"),
    # The cases of code.
    pytest.param("snake_case", ["snake_case", "snake", "case"], id="snake_case"),
    pytest.param("kebab-case", ["kebab-case", "kebab", "case"], id="kebab-case"),
    pytest.param("camelCase", ["camelcase", "camel", "case"], id="camelCase"),
    pytest.param("PascalCase", ["pascalcase", "pascal", "case"], id="PascalCase"),
    pytest.param("SCREAMING_CASE", ["screaming_case", "screaming", "case"], id="SCREAMING_CASE"),
    pytest.param("__init__", ["init"], id="dunder-init"),
    pytest.param("__init__.py", ["init", "py"], id="dunder-init-file"),
    pytest.param("_private", ["private"], id="leading-underscore"),
    pytest.param("--verbose -x", ["verbose", "x"], id="leading-dashes"),
    pytest.param("a--b", ["a", "b"], id="double-dash-separates"),
    pytest.param("foo_foo", ["foo_foo", "foo"], id="repeated-part-once"),
    pytest.param("a/b/c.py", ["a", "b", "c", "py"], id="path"),
    pytest.param("C++ and c#", ["c", "and", "c"], id="plus-and-hash-separate"),
    # Single characters and numbers are words.
    pytest.param("x = 0", ["x", "0"], id="single-character-and-zero"),
    pytest.param("HTTP 404", ["http", "404"], id="number"),
    # Long words (amendment 2026-10-16).
    pytest.param(SHA256_HEX, [SHA256_HEX], id="hex-hash-64-bytes-kept"),
    pytest.param(SHA512_HEX, [], id="hex-hash-128-bytes-dropped"),
    pytest.param(LONG_SNAKE, ["segment"], id="long-token-short-parts-kept"),
    pytest.param(LONG_CAMEL, [], id="long-part-pieces-dropped"),
    pytest.param("é" * 33, [], id="long-in-bytes-not-characters"),
    pytest.param("é" * 32, ["é" * 32], id="64-bytes-of-two-byte-characters-kept"),
    # Text that is not an identifier.
    pytest.param("alice.smith@example.com", ["alice", "smith", "example", "com"], id="email"),
    pytest.param(
        "https://github.com/foo-bar/baz_qux?x=1",
        ["https", "github", "com", "foo-bar", "foo", "bar", "baz_qux", "baz", "qux", "x", "1"],
        id="url",
    ),
    pytest.param(
        "var a=function(b){return b.c?b.d(e):f}",
        ["var", "a", "function", "b", "return", "b", "c", "b", "d", "e", "f"],
        id="minified-javascript",
    ),
    pytest.param("", [], id="empty"),
    pytest.param(" ,.;:!?()[]{}<>+*/=&|^~%$@'\"`\\ \t\r\n", [], id="punctuation-only"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_words_split_names_as_code_does(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_the_constants_are_the_amendments() -> None:
    assert MAX_WORD_BYTES == 64
    assert isinstance(WORDS_VERSION, int)


def test_each_word_of_a_token_counts_once_per_occurrence_of_the_token() -> None:
    assert word_counts("ScrubEnv(ScrubEnv)") == {"scrubenv": 2, "scrub": 2, "env": 2}
    assert word_counts("foo_foo foo") == {"foo_foo": 1, "foo": 2}


def test_names_that_differ_in_case_count_as_one_word() -> None:
    assert word_counts("Env env ENV") == {"env": 3}


def test_query_words_are_distinct_in_order_of_first_appearance() -> None:
    assert query_words("ScrubEnv scrub the env, ScrubEnv again") == [
        "scrubenv",
        "scrub",
        "env",
        "the",
        "again",
    ]
    assert query_words("   ") == []


def _random_base64_line(size: int, *, keep_slash_and_plus: bool) -> str:
    data = random.Random(50).randbytes(size * 3 // 4)
    line = base64.b64encode(data)
    if not keep_slash_and_plus:
        line = line.replace(b"+", b"A").replace(b"/", b"B")
    return line.decode("ascii")


def test_a_megabyte_of_base64_without_slash_or_plus_gives_no_words() -> None:
    line = _random_base64_line(1 << 20, keep_slash_and_plus=False)
    assert words(line) == []
    assert word_counts(line) == {}


def test_base64_with_slashes_and_pluses_is_cut_into_words_of_about_30_characters() -> None:
    line = _random_base64_line(1 << 20, keep_slash_and_plus=True)
    segments = [s for s in re.split(r"[+/=]+", line) if s]
    found = word_counts(line)
    kept = [s.lower() for s in segments if len(s) <= MAX_WORD_BYTES]
    assert all(s in found for s in kept)
    # A base64 character is "/" or "+" one time in 32: a segment is 32 characters on average,
    # and seven in eight are at most 64.
    assert len(kept) > 0.8 * len(segments)
    assert 20 < sum(map(len, segments)) / len(segments) < 40
    assert max(len(w) for w in found) <= MAX_WORD_BYTES


def test_a_long_run_is_not_kept_in_the_table() -> None:
    table = word_table()
    long_run = SHA512_HEX + "0"
    assert words(long_run + " " + LONG_SNAKE) == ["segment"]
    assert long_run.encode() not in table
    assert LONG_SNAKE.encode() in table


def test_runs_and_the_table_give_the_same_words_as_words() -> None:
    text = "def scrub_env(env): return ScrubEnv(env, a--b, __x__, " + SHA512_HEX + ")"
    table = word_table()
    via_table = [table.words[i] for run in runs(text) for i in table.ids(table[run])]
    assert via_table == words(text)
    assert table[b"__"] == NO_WORDS


def test_a_table_past_its_bound_is_replaced_and_words_stay_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(words_module, "_MEMO_LIMIT", 10)
    words_module.clear_memo()
    first = word_table()
    text = " ".join(f"name{i}_Part{i}" for i in range(50))
    expected = [w for i in range(50) for w in (f"name{i}_part{i}", f"name{i}", f"part{i}")]
    assert words(text) == expected
    assert word_table() is not first
    assert words(text) == expected


def test_each_thread_has_its_own_table() -> None:
    tables: list[object] = []
    thread = threading.Thread(target=lambda: tables.append(word_table()))
    thread.start()
    thread.join()
    assert tables[0] is not word_table()


def test_threads_splitting_at_once_get_the_same_words() -> None:
    texts = [" ".join(f"T{t}Name{i}_x{i}" for i in range(2000)) for t in range(4)]
    expected = [words(t) for t in texts]
    words_module.clear_memo()
    got: dict[int, list[str]] = {}

    def work(t: int) -> None:
        words_module.clear_memo()
        for _ in range(3):
            got[t] = words(texts[t])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [got[t] for t in range(4)] == expected


def test_a_lone_surrogate_is_not_an_error() -> None:
    assert words("bad\ud800name ok") == ["bad", "name", "ok"]


# Text that looks like code: names in every case, digits, unicode, punctuation, long runs.
_ATOMS = st.sampled_from(
    [
        "ScrubEnv", "HTTPServer", "getURLs", "max_result_tokens", "index-grep", "__init__",
        "x86_64", "naïve_café", "ÜberCafé", "変数名", "a--b", "_-x", "foo_", "-", "_", "İstanbul",
        "ǅemal", "ß", "v2", "0", SHA512_HEX, LONG_CAMEL, LONG_SNAKE, "é" * 33,
    ]
)  # fmt: skip
_SEPARATORS = st.sampled_from([" ", "\n", ".", "/", "+", "(", "\r\n"])
_TEXT = st.lists(st.one_of(_ATOMS, st.text(max_size=12), _SEPARATORS), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_word_counts_count_what_words_lists(text: str) -> None:
    assert word_counts(text) == Counter(words(text))


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_every_word_is_lowercase_and_at_most_64_bytes(text: str) -> None:
    for word in words(text):
        assert word
        assert word == word.lower()
        assert len(word.encode("utf-8", "surrogatepass")) <= MAX_WORD_BYTES


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_words_are_the_words_of_the_tokens_of_the_unicode_rule(text: str) -> None:
    """The bytes fast path finds exactly the tokens the str regular expression finds."""
    tokens = re.findall(r"\w+(?:-\w+)*", text)
    expected: list[str] = []
    for token in tokens:
        expected.extend(words(token))
    assert words(text) == expected


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="aAbBsSzZ019", min_size=1, max_size=12))
def test_the_ascii_camel_expression_follows_the_unicode_rule(part: str) -> None:
    assert words_module._ascii_camel(part) == words_module._unicode_camel(part)


def test_a_repository_query_ranks_without_english_stop_words() -> None:
    from nodwyn_retrieval.retrieval.words import ranking_words

    assert ranking_words("How are the routes registered in Flask?") == [
        "routes", "registered", "flask",
    ]  # fmt: skip
    assert ranking_words("the") == ["the"]  # nothing but stop words: kept
    # A name stays whole; only its pieces that are stop words drop.
    assert ranking_words("is_in for_each") == ["is_in", "for_each", "each"]


def test_a_word_s_stem_is_english_and_a_name_keeps_its_form() -> None:
    from nodwyn_retrieval.retrieval.words import stem

    assert stem("auditing") == stem("audits") == stem("audit")
    assert stem("libraries") == stem("library")
    # Names with digits or joiners and short words are their own stems.
    assert stem("sha256") == "sha256"
    assert stem("max_tokens") == "max_tokens"
    assert stem("env") == "env"


def test_the_forms_of_a_word_are_those_the_index_holds_with_its_stem() -> None:
    from nodwyn_retrieval.retrieval.words import form_prefix, word_forms

    vocab = {"audit", "audits", "audited", "auditing", "auditorium", "run", "running", "runs"}
    assert sorted(word_forms("auditing", vocab.__contains__)) == ["audit", "audited", "audits"]
    assert sorted(word_forms("runs", vocab.__contains__)) == ["run", "running"]
    assert word_forms("scrubenv", vocab.__contains__) == []
    # From a list of the vocabulary's words that begin with the stem's prefix: the same.
    known = sorted(w for w in vocab if w.startswith(form_prefix("auditing")))
    assert sorted(word_forms("auditing", vocab.__contains__, known)) == [
        "audit", "audited", "audits",
    ]  # fmt: skip
    assert form_prefix("libraries") == "librar"


def test_a_query_weighs_the_words_it_writes_as_code_more_than_its_prose() -> None:
    from nodwyn_retrieval.retrieval.words import IDENTIFIER_WEIGHT, identifiers, weighted_query

    text = (
        "Calling Ledger.close_books() fails for `readURLs` in books/ledger.py\n"
        'File "src/app/cli.py", line 12, in main\n'
    )
    found = identifiers(text)
    for name in ("Ledger.close_books", "close_books", "readURLs", "books/ledger.py"):
        assert name in found
    assert "src/app/cli.py" in found
    assert "main" in found
    q = weighted_query(text)
    assert q["close_books"] == q["ledger"] == q["main"] == IDENTIFIER_WEIGHT
    assert q["calling"] == q["fails"] == 1.0
    assert weighted_query(text, identifier_weight=1.0)["ledger"] == 1.0


def test_the_tables_flat_arrays_are_its_runs_of_several_words_as_they_grow() -> None:
    """WordTable.multi_arrays, which analyze() indexes, holds every tuple of multi in order, and
    is extended, not rebuilt wrong, as new runs of several words arrive between two calls."""
    from nodwyn_retrieval.retrieval.words import WordTable

    table = WordTable()
    for batch in ([b"getHTTPServer", b"max_result_tokens", b"plain"], [b"a--b", b"ScrubEnv"]):
        for run in batch:
            table[run]
        start, size, flat = table.multi_arrays()
        assert len(start) == len(size) == len(table.multi) > 0
        for k, ids in enumerate(table.multi):
            assert tuple(flat[start[k] : start[k] + size[k]].tolist()) == ids
