"""The fold's texts counted by the compiled pass (store.mem_fold._text_words_native, the pass's
``Memo.count_texts``) give the ``.mem`` the Python path gives, byte for byte, and the pass's own
expansion of a lowercase run seen for the first time gives the words the word table's
``__missing__`` gives."""

from __future__ import annotations

import base64
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.retrieval.words import WordTable, clear_memo, translate, word_table
from nodwyn_retrieval.store import mem_fold
from nodwyn_retrieval.store.mem_encode import _encode, _postings_bytes, _postings_sorted
from nodwyn_retrieval.store.mem_fold import _sum_repeats
from nodwyn_retrieval.store.mem_log import LogCheck, parse_lines

from tests.test_earlier import read, write_task

native = pytest.importorskip("nodwyn_retrieval.retrieval._words_native")

# Runs of every kind the table's __missing__ tells apart, and the edges between them.
RUNS = [
    b"word", b"abc123", b"404", b"0", b"x", b"a" * 64, b"a" * 65, b"b" * 129, b"9" * 70,
    b"snake_case", b"_under", b"__init__", b"trailing_", b"a_a_b", b"foo__bar", b"1_a", b"1_2",
    b"_1_", b"___", b"_", b"x" * 70 + b"_y", b"y_" + b"z" * 65, b"p_" * 70 + b"q",
    b"_".join(b"w%d" % i for i in range(80)), b"Camel", b"camelCase", b"HTTPServer", b"ScrubEnv_x",
    b"fs-read", b"a-b", b"-", b"caf\xc3\xa9", b"na\xc3\xafve_x", b"MAX_WORD", b"snake_Case",
]  # fmt: skip


def words_of(table: WordTable, run: bytes) -> list[str]:
    return [table.words[i] for i in table.ids(table[run])]


def count_texts(table: WordTable, texts: list[bytes]) -> list[dict[str, int]]:
    """Each text's words and counts, by one count_texts call (the texts translated)."""
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) + 1 for t in texts], out=bounds[1:])
    memo = native.Memo()
    distinct, offsets, word, counts = memo.count_texts(
        table, translate(b" ".join([*texts, b""])), bounds.tobytes()
    )
    ids = np.frombuffer(distinct, dtype=np.int64).tolist()
    off = np.frombuffer(offsets, dtype=np.int64).tolist()
    w = np.frombuffer(word, dtype=np.int64).tolist()
    c = np.frombuffer(counts, dtype=np.int64).tolist()
    out = []
    for i in range(len(texts)):
        got: dict[str, int] = {}
        for k in range(off[i], off[i + 1]):
            word_ = table.words[ids[w[k]]]
            assert word_ not in got  # each word once a text
            got[word_] = c[k]
        out.append(got)
    return out


def python_counts(texts: list[bytes]) -> list[dict[str, int]]:
    table = WordTable()
    out = []
    for t in texts:
        got: Counter[str] = Counter()
        for run in translate(t).split():
            got.update(words_of(table, run))
        out.append(dict(got))
    return out


def test_a_new_run_gets_the_words_the_table_gives_it() -> None:
    ours, theirs = WordTable(), WordTable()
    count_texts(ours, RUNS)
    for run in RUNS:
        key = translate(run).split()
        for r in key:
            assert words_of(ours, r) == words_of(theirs, r), r
    # The runs the pass expanded itself are kept in the table as __missing__ keeps them.
    for run in RUNS:
        for r in translate(run).split():
            assert (r in ours) == (r in theirs), r


def test_many_texts_are_counted_as_each_alone() -> None:
    rng = random.Random(7)
    texts = [b" ".join(rng.choice(RUNS) for _ in range(rng.randrange(0, 40))) for _ in range(200)]
    texts += [b"", b"   ", b"\n\t", b"same_word same_word Same_word"]
    assert count_texts(WordTable(), texts) == python_counts(texts)


def test_a_table_already_holding_runs_gives_the_same_counts() -> None:
    table = WordTable()
    for run in RUNS[::2]:
        table[run]  # a lookup fills the table
    assert count_texts(table, RUNS) == python_counts(RUNS)


def test_bad_bounds_are_refused_with_a_clear_error() -> None:
    memo = native.Memo()
    with pytest.raises(ValueError, match="text bounds out of order or range"):
        memo.count_texts(WordTable(), b"ab cd", np.array([0, 9], dtype=np.int64).tobytes())
    with pytest.raises(ValueError, match="text bounds of int64"):
        memo.count_texts(WordTable(), b"ab", b"\0" * 5)
    with pytest.raises(TypeError):
        memo.count_texts({"a": 1}.keys(), b"ab", np.array([0, 2], dtype=np.int64).tobytes())


def turns() -> list[list[tuple[str, dict[str, Any]]]]:
    image = base64.b64encode(random.Random(3).randbytes(3000)).decode()
    wrapped = "\n".join(image[i : i + 76] for i in range(0, len(image), 76))
    secret = 'DB_PASSWORD = "hunter2-Zq81x"\napi_key: sk-test-0123456789abcdef\ntoken=abc'
    return [
        [("person.message", {"text": "Fix the credential binding in scrub_env and ScrubEnv"})],
        read("def scrub_env(): pass\nclass ScrubEnv: binding = 2", "env.py"),
        read(secret + "\n" + "x" * 70 + "_y naïve café déjà-vu", "cfg.env"),
        read("data:image/png;base64," + image + "\n" + wrapped, "img.txt"),
        read("def scrub_env(): pass\nclass ScrubEnv: binding = 2", "env.py"),  # read again
        read("", "empty.txt"),
        [("llm.resp", {"text": "The __init__ of a_a_b and 1_2 reads HTTPServer " * 20})],
        [("llm.resp", {"text": "runs of no word: __ " + "a" * 70 + " ___"})],
    ]


def mem_bytes(path: Path, check: LogCheck, *, native_pass: bool) -> bytes:
    """The .mem's bytes (check, which holds the build's time, made once for the log)."""
    events, _, _ = parse_lines(path.read_bytes(), 0, 0)
    return _encode(mem_fold.fold_events(events, native=native_pass), check, 0)


def plain_turns() -> list[list[tuple[str, dict[str, Any]]]]:
    """Runs of one word each: none of several words, none of no word."""
    return [
        [("person.message", {"text": "fix the binding now"})],
        [("llm.resp", {"text": "one two three two one 404 x"})],
        [("llm.resp", {"text": "done " * 30})],
    ]


@pytest.mark.parametrize("fresh_table", [True, False])
@pytest.mark.parametrize("make", [turns, plain_turns])
def test_a_built_log_gives_the_same_mem_by_both_paths(
    tmp_path: Path, fresh_table: bool, make: Any
) -> None:
    log = write_task(tmp_path / "tasks", "a", make(), day=1)
    assert json.loads(log.read_bytes().splitlines()[0])  # a real log of real events
    with log.open("rb") as f:
        check = LogCheck.of(f, log.stat().st_size, os.fstat(f.fileno()))
    clear_memo()
    by_native = mem_bytes(log, check, native_pass=True)
    if fresh_table:
        clear_memo()
    by_python = mem_bytes(log, check, native_pass=False)
    assert by_native == by_python
    clear_memo()
    assert mem_bytes(log, check, native_pass=False) == by_native
    assert word_table().native is None  # the Python path made no pass's memo


@pytest.mark.parametrize(
    ("n_words", "order"),
    [
        (50, "docs"),
        (1 << 16, "docs"),
        (50, "shuffled"),
        (50, "descending"),
        ((1 << 16) + 1, "docs"),
        ((1 << 16) + 9, "docs"),
    ],
)
def test_postings_sorted_by_words_alone_are_what_a_sort_of_the_keys_gives(
    n_words: int, order: str
) -> None:
    rng = np.random.default_rng(5)
    n, n_docs = 20_000, 300
    word = rng.integers(0, n_words, n).astype(np.int64)
    word[:9] = np.arange(n_words - 9, n_words)  # the highest words, past 16 bits for the last
    doc = rng.integers(0, n_docs, n).astype(np.int64)
    if order == "docs":
        doc = np.sort(doc)
    elif order == "descending":  # every document once, last first
        n = n_docs
        word, doc = word[:n], np.arange(n_docs - 1, -1, -1, dtype=np.int64)
    tf = rng.integers(1, 9, n).astype(np.int64)
    got_k, got_v = _postings_sorted(word, doc, tf, n_words, n_docs)
    want_k, want_v = _sum_repeats(word * n_docs + doc, tf)
    assert got_k.tolist() == want_k.tolist()
    assert got_v.tolist() == want_v.tolist()
    assert int(got_v.sum()) == int(tf.sum())


@pytest.mark.parametrize("dw", [2, 4])
def test_the_postings_section_is_the_same_by_both_paths(dw: int) -> None:
    rng = np.random.default_rng(9)
    counts = rng.integers(0, 6, 400).astype(np.int64)
    n = int(counts.sum())
    wr = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
    docs = rng.integers(0, 1 << (8 * dw), n).astype(np.int64)
    width = rng.choice([1, 2, 4], counts.shape[0]).astype(np.int64)
    tfs = (rng.integers(1, 1 << 30, n) % (1 << (8 * width[wr]))).astype(np.int64)
    poff = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts * (dw + width), out=poff[1:])
    args = {"counts": counts, "width": width, "poff": poff, "dw": dw}
    by_native = _postings_bytes(wr, docs, tfs, **args, native=True)
    assert by_native == _postings_bytes(wr, docs, tfs, **args, native=False)
    assert len(by_native) == int(poff[-1])
    # The first word with postings: its first document, little-endian, at its block's start.
    w = int(np.flatnonzero(counts)[0])
    assert int.from_bytes(by_native[poff[w] : poff[w] + dw], "little") == int(docs[0])
    none = np.zeros(0, dtype=np.int64)
    empty = {"counts": none, "width": none, "poff": np.zeros(1, dtype=np.int64), "dw": dw}
    assert _postings_bytes(none, none, none, **empty, native=True) == b""


def test_bad_postings_are_refused_with_a_clear_error() -> None:
    one = np.ones(1, dtype=np.int64).tobytes()
    with pytest.raises(ValueError, match="document width of 2 or 4"):
        native.postings_bytes(one, one, one, one, 3)
    with pytest.raises(ValueError, match="count or width is out of range"):
        native.postings_bytes(one, one, one, np.array([3], dtype=np.int64).tobytes(), 2)
    with pytest.raises(ValueError, match="counts are not the postings"):
        native.postings_bytes(one, one, np.array([2], dtype=np.int64).tobytes(), one, 2)
