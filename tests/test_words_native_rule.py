"""The compiled pass's word rule for ASCII runs gives the Python rule's words, numbered alike.

retrieval/_words_native.c expands a run of ASCII bytes seen for the first time itself (camel
case, digits, ``-`` and ``_``, the 64-byte bound) instead of asking the word table's
``__missing__``. Here both are given the same runs in the same order, each into a fresh table,
and must leave the tables equal: the same words under the same ids, the same several-word
tuples, the same codes kept. Equal tables make every record the same byte for byte, whichever
path built it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from nodwyn_retrieval.retrieval import analyze as A
from nodwyn_retrieval.retrieval.chunks import DEFINED
from nodwyn_retrieval.retrieval.words import MAX_WORD_BYTES, NO_WORDS, WordTable, translate

native = pytest.importorskip("nodwyn_retrieval.retrieval._words_native")


class CountingTable(WordTable):
    """A word table that counts the runs its own (Python) expansion was asked for."""

    __slots__ = ("asked",)

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[bytes] = []

    def __missing__(self, run: bytes) -> int:
        self.asked.append(run)
        return super().__missing__(run)


def hostile_names() -> list[str]:
    """Names made to find the rule's edges: case runs, digits, joiners at the ends and doubled,
    the 64-byte bound on either side, long and many-part names, and non-ASCII beside ASCII."""
    names = [
        "ABCDef", "ABCdef", "ABCs", "getURLs", "getURLsFor", "URLs2", "HTTPServer", "IOError",
        "scrubEnv", "ScrubEnv", "base64Encode", "sha256", "utf8Decoder", "x86_64", "v2API",
        "a-b-", "-a-b", "a--b", "a--a", "a-a", "a_a", "foo_foo", "__x__", "___", "_-x", "x-_",
        "__init__", "_Private_Name_", "MAX_RESULT_TOKENS", "max-Result_tokens", "index-grep",
        "a-B-c_D", "Ss", "sS", "S", "s", "AsB", "ABs", "ABsC", "ABsc", "AbCdEfGh", "aBCDe",
        "0", "404", "0x1F", "0XFF", "1a", "a1B2c3", "9Lives", "under_score9_Nine",
        "--", "-", "_", "a---b---c", "x_-_y", "X-Y-Z", "XMLHttpRequest2Handler",
    ]  # fmt: skip
    for n in (MAX_WORD_BYTES - 1, MAX_WORD_BYTES, MAX_WORD_BYTES + 1, 100, 200):
        names += ["a" * n, "A" * n, "aB" * (n // 2) + "c" * (n % 2), "7" * n]
        names += ["x_" + "b" * n, "b" * n + "-Cd", "Q" * n + "_ok_Ok", "z" * n + "__"]
    names += ["_".join(["Part"] * 70), "-".join(f"p{i}" for i in range(80))]
    names += ["--".join(["aB"] * 300), "a" * 1024, "aB" * 512, "aB" * 513, "x" * 3000]
    names += ["caféBar", "naïve_name", "über-Café", "x_変数名", "a\u00a0b", "ÜberCafé-x"]
    return names


def random_runs(seed: int, count: int) -> list[bytes]:
    """count random runs of the bytes a translated ASCII run holds, of many lengths."""
    rng = random.Random(seed)
    alphabets = ("aAbBsSzZ019_-", "aA_", "aA-", "sS", "aA1", "abcXYZ-_", "Aa-_0")
    lengths = (1, 2, 3, 4, 5, 8, 12, 20, 40, 63, 64, 65, 66, 129, 200)
    found = []
    for _ in range(count):
        alphabet = rng.choice(alphabets)
        n = rng.choice(lengths)
        found.append("".join(rng.choice(alphabet) for _ in range(n)).encode())
    return found


def _bounds(data: bytes) -> bytes:
    return np.array([0, len(data)], dtype=np.int64).tobytes()


def _through_count_texts(runs: list[bytes]) -> CountingTable:
    table = CountingTable()
    data = b" ".join(runs)
    table.native = native.Memo()  # the fold's memo is its table's, as record()'s is
    table.native.count_texts(table, data, _bounds(data))
    return table


def _through_record(runs: list[bytes]) -> CountingTable:
    table = CountingTable()
    data = b" ".join(runs)
    none = np.zeros(0, dtype=np.int64).tobytes()
    # The text given as its own blanked form: no blob is looked for, every run is looked up.
    table.native = native.Memo()
    table.native.record(table, data, data, none, none, none)
    return table


def _through_python(runs: list[bytes]) -> WordTable:
    table = WordTable()
    for run in runs:
        table[run]  # the lookup expands the run into the table
    return table


def _same(got: WordTable, want: WordTable, runs: list[bytes]) -> None:
    assert got.words == want.words
    assert got.word_id == want.word_id
    assert got.multi == want.multi
    if got.native is None:  # count_texts: the runs kept in the table as __missing__ keeps them
        assert dict(got) == dict(want)
        return
    # record: a run the compiled rule expanded is kept in the memo only; the table holds the
    # runs its own expansion was asked for, with the codes the Python path gives them ...
    kept = dict(got)
    assert set(kept) <= set(want)
    assert all(kept[run] == want[run] for run in kept)
    assert isinstance(got, CountingTable)
    assert set(kept) == {run for run in got.asked if len(run) <= 128}  # before the lookups
    assert got.native.size() == len({run for run in runs if len(run) <= 128})
    assert got.full is False
    # ... and a lookup of the others expands them again, to the same words under the same ids.
    assert [got.ids(got[run]) for run in runs] == [want.ids(want[run]) for run in runs]
    assert got.words == want.words


def _runs_of(names: list[str]) -> list[bytes]:
    return translate(" ".join(names).encode("utf-8", "surrogatepass")).split()


@pytest.mark.parametrize("through", [_through_count_texts, _through_record])
def test_hostile_names_give_the_python_rules_table(through: object) -> None:
    runs = _runs_of(hostile_names())
    got = through(runs)  # type: ignore[operator]
    asked = list(got.asked)
    _same(got, _through_python(runs), runs)
    # The compiled rule did the ASCII runs itself: Python was asked only for what it leaves to it
    # (a byte past ASCII, a run past 1,024 bytes, a token of more than 256 words).
    for run in asked:
        assert not run.isascii() or len(run) > 1024 or run.count(b"_") + run.count(b"-") >= 128


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_ascii_runs_give_the_python_rules_table(seed: int) -> None:
    runs = random_runs(seed, 6000)
    got = _through_count_texts(runs)
    assert not got.asked  # every one of these is the compiled rule's own
    _same(got, _through_python(runs), runs)


def test_words_of_chosen_runs() -> None:
    """A few runs' words, written out: the rule itself, not only its agreement with Python."""
    runs = [b"getURLsFor", b"a--a", b"__x__-Yz", b"ABCDef", b"a-b-", b"q" * 65, b"___"]
    table = _through_count_texts(runs)
    assert not table.asked  # the compiled rule's own (a lookup below expands a run again)

    def words_of(run: bytes) -> list[str]:
        return [table.words[i] for i in table.ids(table[run])]

    assert words_of(b"getURLsFor") == ["geturlsfor", "get", "urls", "for"]
    assert words_of(b"a--a") == ["a", "a"]
    assert words_of(b"__x__-Yz") == ["x__-yz", "x", "yz"]
    assert words_of(b"ABCDef") == ["abcdef", "abc", "def"]
    assert words_of(b"a-b-") == ["a-b", "a", "b"]
    assert table[b"q" * 65] == NO_WORDS
    assert table[b"___"] == NO_WORDS


def test_a_file_of_hostile_names_is_one_record_through_both_paths() -> None:
    """analyze() on a file of them: the compiled pass's record and the Python path's are equal,
    byte for byte as the store encodes them, with the same words in the table. (The compiled pass
    looks the definition terms up before the runs, so the two number them in another order.)"""
    import msgpack

    names = hostile_names()
    text = "\n".join(
        f"def {a}({b}, {c}):\n    return {a}_{b}.{c}-{a}\n"
        for a, b, c in zip(names, names[1:] + names[:1], names[2:] + names[:2], strict=True)
    )
    native_table, python_table = WordTable(), WordTable()
    from nodwyn_retrieval.retrieval import words as W

    saved = getattr(W._local, "table", None)
    try:
        W._local.table = native_table
        a = A._analyze(text, native=True)
        W._local.table = python_table
        b = A._analyze(text, native=False)
    finally:
        W._local.table = saved
    assert msgpack.packb(a.to_obj()) == msgpack.packb(b.to_obj())
    assert sorted(native_table.words) == sorted(python_table.words)

    def terms(table: WordTable) -> dict[bytes, list[str]]:
        return {name: [table.words[i] for i in ids] for name, ids in table.defined.items()}

    assert terms(native_table) == terms(python_table)
    assert native_table.defined  # the file defines names, and both paths kept their terms


def test_definition_terms_of_names_as_the_python_path_gives_them() -> None:
    """Memo.definition_terms: each name's terms once each, in order, kept in table.defined; a
    name asked again is answered from there."""
    names = [b"getURLs_for", b"a--a", b"x.y", b"___", b"caf\xc3\xa9Bar", b"getURLs_for"]
    table = WordTable()
    ids, counts = native.Memo().definition_terms(table, names, DEFINED)
    got = np.frombuffer(ids, dtype=np.int64).tolist()
    sizes = np.frombuffer(counts, dtype=np.int64).tolist()
    assert sizes == [5, 1, 2, 0, 3, 5]
    first = [">geturls_for", ">geturls", ">get", ">urls", ">for"]
    assert [table.words[i] for i in got[:5]] == first
    assert [table.words[i] for i in got[5:8]] == [">a", ">x", ">y"]
    assert [table.words[i] for i in got[8:11]] == [">cafébar", ">café", ">bar"]
    assert got[11:] == got[:5]
    reference = WordTable()
    for name in names:
        A._definition_ids(name, reference)
    assert table.words == reference.words
    assert table.defined == reference.defined


def test_definition_terms_refuses_what_is_not_a_name() -> None:
    table = WordTable()
    with pytest.raises(TypeError, match="a name is not bytes"):
        native.Memo().definition_terms(table, ["text"], DEFINED)
    with pytest.raises(TypeError):
        native.Memo().definition_terms(table, (b"x",), DEFINED)


def test_the_runs_kept_in_the_memo_count_toward_the_tables_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run the compiled rule expanded is kept in the memo, not in the table's dict: the table's
    bound counts the memo's runs, or a pass over distinct runs of few words would never replace
    its table."""
    import nodwyn_retrieval.retrieval.words as W

    table = _through_record([b"a", b"A", b"aA"])  # three runs, two words
    assert len(table.words) == 2
    assert len(table) == 0
    assert table.native is not None
    assert table.native.size() == 3
    monkeypatch.setattr(W, "_MEMO_LIMIT", 2)
    assert table.full
    monkeypatch.setattr(W, "_MEMO_LIMIT", 3)
    assert not table.full
