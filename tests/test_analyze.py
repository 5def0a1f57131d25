"""retrieval.analyze: a file's chunks and word counts, and their stored form (ADR 0050 §3-§6)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import BadInput, FormatError
from nodwyn_retrieval.retrieval import words as words_module
from nodwyn_retrieval.retrieval.analyze import ANALYZE_VERSION, FileRecord, analyze
from nodwyn_retrieval.retrieval.blobs import BLOBS_VERSION
from nodwyn_retrieval.retrieval.chunks import (
    CHUNKER_VERSION,
    DEFINED,
    chunk_spans,
    definitions_utf8,
    split_lines,
)
from nodwyn_retrieval.retrieval.words import WORDS_VERSION, words

PYTHON = (
    "import os\n"
    "\n"
    "def scrub_env(env):\n"
    '    """Drop credentials from ScrubEnv."""\n'
    "    return {k: v for k, v in env.items() if k != 'API_KEY'}\n"
    + ("    # padding\n" * 20)
    + "class ScrubEnv:\n"
    "    host = 'localhost'\n"
)

ARRAYS = ("starts", "ends", "offsets", "word", "body", "first")

Chunks = list[tuple[int, int, dict[str, tuple[int, int]]]]
"""Each chunk as (first line, last line, word → (count, count in the first line))."""


def reference(text: str) -> tuple[tuple[str, ...], Chunks]:
    """What analyze() must give, from the public functions, one chunk at a time."""
    lines = split_lines(text)
    spans = chunk_spans(lines)
    # What each chunk defines: each word of a defined name once more, as a definition term.
    data = text.encode("utf-8", "surrogatepass")
    defined: list[Counter[str]] = [Counter() for _ in spans]
    terms: list[str] = []
    for at, name in definitions_utf8(data):
        line = data[:at].count(b"\n")
        c = next(i for i, (lo, hi) in enumerate(spans) if lo <= line < hi)
        got = [DEFINED + w for w in dict.fromkeys(words(name.decode("utf-8")))]
        defined[c].update(got)
        terms += got
    chunks: Chunks = []
    for (lo, hi), defs in zip(spans, defined, strict=True):
        body = Counter(words("\n".join(lines[lo:hi])))
        first = Counter(words(lines[lo]))
        counts = {w: (n, first[w]) for w, n in body.items()}
        counts.update((w, (n, 0)) for w, n in defs.items())
        chunks.append((lo + 1, hi, counts))
    return tuple(dict.fromkeys(words(text) + terms)), chunks


def observed(record: FileRecord) -> tuple[tuple[str, ...], Chunks]:
    return record.vocab, [
        (int(record.starts[i]), int(record.ends[i]), record.chunk_words(i))
        for i in range(record.n_chunks)
    ]


def test_a_python_file_is_cut_at_its_declarations_and_counted() -> None:
    record = analyze(PYTHON)
    assert (record.starts.tolist(), record.ends.tolist()) == ([1, 26], [25, 27])
    chunk = record.chunk_words(0)
    assert chunk["scrubenv"] == (1, 0)
    assert chunk["env"] == (4, 0)  # scrub_env, env, ScrubEnv, env.items
    assert chunk["import"] == (1, 1)
    assert record.chunk_words(1) == {
        "class": (1, 1),
        "scrubenv": (1, 1),
        "scrub": (1, 1),
        "env": (1, 1),
        "host": (1, 0),
        "localhost": (1, 0),
        # class ScrubEnv defines scrubenv, scrub and env
        ">scrubenv": (1, 0),
        ">scrub": (1, 0),
        ">env": (1, 0),
    }
    assert observed(record) == reference(PYTHON)


def test_the_vocab_is_the_files_distinct_words_in_order_of_first_appearance() -> None:
    record = analyze(PYTHON)
    # then the definition terms, in the order of the definitions
    defined = (">scrub_env", ">scrub", ">env", ">scrubenv")
    assert record.vocab == tuple(dict.fromkeys(words(PYTHON))) + defined


def test_the_arrays_are_read_only_uint32_and_pairs_ascend_within_a_chunk() -> None:
    record = analyze(PYTHON)
    for name in ARRAYS:
        array = getattr(record, name)
        assert array.dtype == np.uint32
        assert not array.flags.writeable
    for i in range(record.n_chunks):
        ids = record.word[record.offsets[i] : record.offsets[i + 1]].tolist()
        assert ids == sorted(set(ids))
    assert int(record.offsets[-1]) == len(record.word)


@pytest.mark.parametrize(
    ("text", "starts", "ends"),
    [
        pytest.param("", [], [], id="empty"),
        pytest.param("\n", [1], [1], id="one-empty-line"),
        pytest.param("   \n\t\n", [1], [2], id="blank-lines"),
        pytest.param("__ ___ -- _-_\n", [1], [1], id="runs-with-no-words"),
        pytest.param("x" * 200, [1], [1], id="one-long-word-dropped"),
    ],
)
def test_a_text_without_words_has_chunks_and_no_pairs(
    text: str, starts: list[int], ends: list[int]
) -> None:
    record = analyze(text)
    assert (record.starts.tolist(), record.ends.tolist()) == (starts, ends)
    assert record.vocab == ()
    assert record.offsets.tolist() == [0] * (len(starts) + 1)
    assert len(record.word) == len(record.body) == len(record.first) == 0


def test_crlf_and_lf_give_the_same_record() -> None:
    assert analyze(PYTHON.replace("\n", "\r\n")) == analyze(PYTHON)


def test_a_word_in_the_first_line_is_counted_in_the_body_too() -> None:
    record = analyze("def f(x):\n    return f(x)\n")
    assert record.chunk_words(0) == {
        "def": (1, 1),
        "f": (2, 1),
        "x": (2, 1),
        "return": (1, 0),
        ">f": (1, 0),
    }


def test_a_run_of_two_tokens_and_a_token_of_many_words_are_counted_as_words() -> None:
    text = "a--a a_b_a\nScrubEnv scrub\n"
    assert observed(analyze(text)) == reference(text)


def test_the_version_combines_the_words_the_chunks_and_the_blobs() -> None:
    assert ANALYZE_VERSION == (WORDS_VERSION * 1000 + CHUNKER_VERSION) * 100 + BLOBS_VERSION


def test_chunk_words_out_of_range_says_so() -> None:
    with pytest.raises(BadInput, match=r"^chunk 2 is out of range: the file has 2 chunks$"):
        analyze(PYTHON).chunk_words(2)


def test_a_record_shows_its_size_and_is_equal_by_value_not_hashable() -> None:
    record = analyze(PYTHON)
    assert repr(record) == (
        f"FileRecord(chunks=2, lines=27, words={len(record.vocab)}, pairs={len(record.word)})"
    )
    assert record == analyze(PYTHON)
    assert record != analyze(PYTHON + "more\n")
    assert record != "a record"
    with pytest.raises(TypeError):
        hash(record)


def test_a_record_round_trips_through_msgpack() -> None:
    record = analyze(PYTHON)
    obj = record.to_obj()
    assert isinstance(obj["vocab"], list)
    assert all(isinstance(obj[name], bytes) for name in ARRAYS)
    assert obj["starts"] == np.array([1, 26], dtype="<u4").tobytes()
    back = FileRecord.from_obj(msgpack.unpackb(msgpack.packb(obj)))
    assert back == record
    assert not back.word.flags.writeable


def test_threads_analysing_at_once_get_what_one_thread_gets() -> None:
    texts = [PYTHON.replace("scrub", f"scrub{t}") * (t + 1) for t in range(4)]
    expected = [analyze(t) for t in texts]
    got: dict[int, FileRecord] = {}

    def work(t: int) -> None:
        for _ in range(20):
            got[t] = analyze(texts[t])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [got[t] for t in range(4)] == expected


def test_a_word_table_replaced_between_files_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = analyze(PYTHON)
    monkeypatch.setattr(words_module, "_MEMO_LIMIT", 3)
    for _ in range(3):
        assert analyze(PYTHON) == expected


# from_obj: everything off is a FormatError that says to rebuild.


def _good() -> dict[str, Any]:
    return analyze(PYTHON).to_obj()


def _u32(*values: int) -> bytes:
    return np.array(values, dtype="<u4").tobytes()


def _with(**changes: Any) -> dict[str, Any]:
    obj = _good()
    obj.update(changes)
    return obj


def _small(**changes: Any) -> dict[str, Any]:
    """A hand-made record: chunks of lines 1-2 and 3; pairs a:2/1, b:1/0 | a:1/1."""
    obj: dict[str, Any] = {
        "vocab": ["a", "b"],
        "starts": _u32(1, 3),
        "ends": _u32(2, 3),
        "offsets": _u32(0, 2, 3),
        "word": _u32(0, 1, 0),
        "body": _u32(2, 1, 1),
        "first": _u32(1, 0, 1),
    }
    obj.update(changes)
    return obj


def test_the_hand_made_record_is_valid() -> None:
    record = FileRecord.from_obj(_small())
    assert record.chunk_words(0) == {"a": (2, 1), "b": (1, 0)}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param([], "a file record is a map, got list", id="not-a-map"),
        pytest.param(
            {k: v for k, v in _small().items() if k != "first"},
            "a file record's keys are wrong (missing ['first'], unexpected [])",
            id="missing-key",
        ),
        pytest.param(
            _small(extra=1),
            "a file record's keys are wrong (missing [], unexpected [\"'extra'\"])",
            id="unexpected-key",
        ),
        pytest.param(_small(vocab="ab"), "vocab is a list, got str", id="vocab-not-a-list"),
        pytest.param(
            _small(vocab=["a", 2]), "vocab holds something that is not a word", id="vocab-not-str"
        ),
        pytest.param(
            _small(vocab=["a", ""]), "vocab holds something that is not a word", id="empty-word"
        ),
        pytest.param(_small(vocab=["a", "a"]), "vocab holds a word twice", id="duplicate-word"),
        pytest.param(_small(word=[0, 1, 0]), "word is bytes, got list", id="array-not-bytes"),
        pytest.param(
            _small(body=b"\x01\x00\x00"),
            "body is 3 bytes, not a whole number of uint32",
            id="torn-array",
        ),
        pytest.param(_small(ends=_u32(2)), "ends has 1 entries, expected 2", id="ends-short"),
        pytest.param(
            _small(offsets=_u32(0, 3)), "offsets has 2 entries, expected 3", id="offsets-short"
        ),
        pytest.param(_small(first=_u32(1, 0)), "first has 2 entries, expected 3", id="first-short"),
        pytest.param(
            _small(offsets=_u32(1, 2, 3)),
            "offsets run from 1 to 3, not 0 to 3",
            id="offsets-not-from-0",
        ),
        pytest.param(
            _small(offsets=_u32(0, 2, 2)),
            "offsets run from 0 to 2, not 0 to 3",
            id="offsets-not-to-the-end",
        ),
        pytest.param(_small(offsets=_u32(0, 4, 3)), "offsets go backwards", id="offsets-backwards"),
        pytest.param(
            _small(starts=_u32(2, 3)),
            "the first chunk starts at line 2, not 1",
            id="first-chunk-not-at-line-1",
        ),
        pytest.param(
            _small(starts=_u32(1, 3), ends=_u32(2, 2)),
            "a chunk ends before it starts",
            id="ends-before-start",
        ),
        pytest.param(
            _small(starts=_u32(1, 4), ends=_u32(2, 5)),
            "the chunks do not follow each other line by line",
            id="gap-between-chunks",
        ),
        pytest.param(
            _small(word=_u32(0, 2, 0)), "a word id is 2, past the 2 words", id="word-id-past-vocab"
        ),
        pytest.param(
            _small(body=_u32(2, 0, 1), first=_u32(0, 0, 1)),
            "a count is out of range 1 to 2147483647",
            id="zero-count",
        ),
        pytest.param(
            _small(body=_u32(2, 2**31, 1)),
            "a count is out of range 1 to 2147483647",
            id="count-past-31-bits",
        ),
        pytest.param(
            _small(first=_u32(3, 0, 1)),
            "a first line counts a word more often than its chunk",
            id="first-more-than-body",
        ),
        pytest.param(
            _small(word=_u32(1, 0, 0)),
            "a chunk lists a word twice or out of order",
            id="words-out-of-order",
        ),
        pytest.param(
            _small(word=_u32(0, 0, 0)),
            "a chunk lists a word twice or out of order",
            id="word-twice-in-a-chunk",
        ),
    ],
)
def test_from_obj_refuses_a_record_that_is_off(obj: object, message: str) -> None:
    with pytest.raises(FormatError) as caught:
        FileRecord.from_obj(obj)
    assert str(caught.value) == f"file record: {message}: rebuild"


def test_from_obj_checks_lengths_before_it_builds_anything() -> None:
    """A record claiming a huge chunk count in a short array fails on the lengths, cheaply."""
    obj = _with(ends=b"\0" * 4 * 10_000_000)
    expected = r"^file record: ends has 10000000 entries, expected 2: rebuild$"
    with pytest.raises(FormatError, match=expected):
        FileRecord.from_obj(obj)


def test_a_word_may_begin_each_chunk_again() -> None:
    record = FileRecord.from_obj(_small(word=_u32(0, 1, 1)))
    assert record.chunk_words(1) == {"b": (1, 1)}


# Properties over random text that looks like code.

_ATOM = st.sampled_from(
    [
        "def f(x):", "class C:", "# Title", "func main() {", "\\section{A}", "ScrubEnv",
        "max_result_tokens", "index-grep", "a--a", "__init__", "naïve_café", "変数名", "x" * 70,
        "HTTPServer", "    return x", "(define (g))", "", " ", "\t", "é", "\r",
    ]
)  # fmt: skip
_CODE = st.lists(
    st.lists(st.one_of(_ATOM, st.text(max_size=6)), max_size=6).map(" ".join),
    max_size=150,
).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(_CODE)
def test_analyze_counts_what_words_finds_in_each_chunk(text: str) -> None:
    assert observed(analyze(text)) == reference(text)


@settings(max_examples=200, deadline=None)
@given(_CODE)
def test_a_record_round_trips_through_to_obj_and_from_obj(text: str) -> None:
    record = analyze(text)
    assert FileRecord.from_obj(msgpack.unpackb(msgpack.packb(record.to_obj()))) == record


_KEYS = ["vocab", *ARRAYS]


@st.composite
def _mutated(draw: st.DrawFn) -> object:
    obj: dict[Any, Any] = draw(_CODE.map(lambda t: analyze(t).to_obj()))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(_KEYS))
        kind = draw(st.sampled_from(["drop", "junk", "flip", "cut", "grow", "vocab"]))
        if kind == "drop":
            obj.pop(key, None)
        elif kind == "junk":
            obj[key] = draw(
                st.one_of(st.none(), st.integers(), st.text(max_size=4), st.binary(max_size=12))
            )
        elif kind == "vocab":
            obj["vocab"] = draw(
                st.lists(st.one_of(st.text(max_size=3), st.integers(), st.binary(max_size=2)))
            )
        elif isinstance(obj.get(key), bytes):
            data: bytes = obj[key]
            if kind == "flip" and data:
                at = draw(st.integers(0, len(data) - 1))
                data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
            elif kind == "cut" and data:
                data = data[: draw(st.integers(0, len(data) - 1))]
            else:
                data += draw(st.binary(min_size=1, max_size=8))
            obj[key] = data
    if draw(st.booleans()):
        obj[draw(st.sampled_from(["extra", 1, b"x"]))] = 0
    return draw(st.sampled_from([obj, obj, obj, list(obj.values()), None]))


@settings(max_examples=500, deadline=None)
@given(_mutated())
def test_from_obj_of_a_mutated_record_raises_only_format_error(obj: object) -> None:
    try:
        FileRecord.from_obj(obj)
    except FormatError as error:
        message = str(error)
    else:
        return  # the mutation left a valid record
    assert message.endswith(": rebuild")
