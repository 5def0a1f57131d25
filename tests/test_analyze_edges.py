"""A file record at its edges (retrieval/analyze.py, §3, §6): stored records that are right at each
bound are taken (a count of 2**31-1, a first line holding all of a word, a chunk of one line,
chunks without words anywhere), a chunk out of range either way is refused, and big files of many
chunks and words count what the plain rule counts."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any
from unittest import mock

import numpy as np
import pytest
from nodwyn_retrieval.errors import BadInput, FormatError
from nodwyn_retrieval.retrieval.analyze import FileRecord, analyze
from nodwyn_retrieval.retrieval.chunks import chunk_spans, split_lines
from nodwyn_retrieval.retrieval.words import words


def u32(*values: int) -> bytes:
    return np.array(values, dtype="<u4").tobytes()


def record(**fields: Any) -> dict[str, Any]:
    """Chunks of lines 1-2 and 3; pairs a:2/1, b:1/0 | a:1/1, unless told."""
    obj: dict[str, Any] = {
        "vocab": ["a", "b"],
        "starts": u32(1, 3),
        "ends": u32(2, 3),
        "offsets": u32(0, 2, 3),
        "word": u32(0, 1, 0),
        "body": u32(2, 1, 1),
        "first": u32(1, 0, 1),
    }
    obj.update(fields)
    return obj


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"body": u32(2**31 - 1, 1, 1)}, id="a-count-of-2**31-1"),
        pytest.param({"first": u32(2, 1, 1)}, id="a-first-line-holding-every-occurrence"),
        pytest.param({"starts": u32(1, 2), "ends": u32(1, 3)}, id="a-chunk-of-one-line"),
        pytest.param({"word": u32(0, 1, 1)}, id="the-last-word-id"),
        pytest.param(
            {"offsets": u32(0, 0, 2), "word": u32(0, 1), "body": u32(1, 1), "first": u32(0, 0)},
            id="a-first-chunk-without-words",
        ),
        pytest.param(
            {"offsets": u32(0, 2, 2), "word": u32(0, 1), "body": u32(2, 1), "first": u32(1, 0)},
            id="a-last-chunk-without-words",
        ),
        pytest.param(
            {
                "starts": u32(1, 2, 3),
                "ends": u32(1, 2, 3),
                "offsets": u32(0, 2, 2, 3),
            },
            id="a-middle-chunk-without-words",
        ),
    ],
)
def test_a_stored_record_right_at_a_bound_is_taken(fields: dict[str, Any]) -> None:
    got = FileRecord.from_obj(record(**fields))
    assert FileRecord.from_obj(got.to_obj()) == got


def test_a_word_may_come_after_a_higher_one_only_in_a_new_chunk() -> None:
    ok = record(offsets=u32(0, 1, 3), word=u32(1, 0, 1), body=u32(1, 1, 1), first=u32(0, 0, 0))
    got = FileRecord.from_obj(ok)
    assert got.chunk_words(0) == {"b": (1, 0)}
    assert got.chunk_words(1) == {"a": (1, 0), "b": (1, 0)}
    bad = record(offsets=u32(0, 2, 3), word=u32(1, 0, 1))
    with pytest.raises(FormatError, match="a chunk lists a word twice or out of order"):
        FileRecord.from_obj(bad)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"body": u32(2**31, 1, 1)}, "a count is out of range 1 to 2147483647"),
        ({"first": u32(3, 0, 1)}, "a first line counts a word more often than its chunk"),
        ({"starts": u32(1, 4), "ends": u32(3, 3)}, "a chunk ends before it starts"),
        ({"starts": u32(1, 2), "ends": u32(2, 3)}, "the chunks do not follow each other"),
        ({"word": u32(0, 2, 0)}, "a word id is 2, past the 2 words"),
        ({"offsets": u32(0, 3, 3), "word": u32(0, 1, 0)}, "twice or out of order"),
        (
            {"offsets": u32(0, 0, 2), "word": u32(1, 1), "body": u32(1, 1), "first": u32(0, 0)},
            "twice or out of order",
        ),
    ],
)
def test_a_stored_record_one_past_a_bound_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(FormatError, match=message):
        FileRecord.from_obj(record(**fields))


def test_a_record_without_chunks_is_taken_and_shows_no_lines() -> None:
    empty = {
        "vocab": [],
        "starts": b"",
        "ends": b"",
        "offsets": u32(0),
        "word": b"",
        "body": b"",
        "first": b"",
    }
    got = FileRecord.from_obj(empty)
    assert got == analyze("")
    assert repr(got) == "FileRecord(chunks=0, lines=0, words=0, pairs=0)"
    with pytest.raises(BadInput, match=r"^chunk 0 is out of range: the file has 0 chunks$"):
        got.chunk_words(0)


def test_a_chunk_before_the_first_is_out_of_range() -> None:
    got = analyze("a b\n")
    assert got.chunk_words(0) == {"a": (1, 1), "b": (1, 1)}
    with pytest.raises(BadInput, match=r"^chunk -1 is out of range: the file has 1 chunks$"):
        got.chunk_words(-1)


def plain(text: str) -> list[Counter[str]]:
    """Each chunk's words counted one chunk at a time, without definition terms."""
    lines = split_lines(text)
    return [Counter(words("\n".join(lines[lo:hi]))) for lo, hi in chunk_spans(lines)]


def counted(rec: FileRecord) -> list[Counter[str]]:
    return [
        Counter({w: b for w, (b, _) in rec.chunk_words(i).items() if not w.startswith(">")})
        for i in range(rec.n_chunks)
    ]


def test_a_file_of_many_chunks_each_of_its_own_words_counts_what_the_rule_counts() -> None:
    # 300 chunks of 80 lines with 8 words each that no other chunk holds: far more possible
    # (chunk, word) pairs than words in the file
    text = "".join(
        f"w{c}x{k} and_{c}_{k}\n" if i < 4 else "\n"
        for c in range(300)
        for i in range(80)
        for k in ([i] if i < 4 else [0])
    )
    rec = analyze(text)
    assert rec.n_chunks == 300
    assert counted(rec) == plain(text)
    assert rec.chunk_words(299)["w299x3"] == (1, 0)
    assert rec.chunk_words(0)["w0x0"] == (1, 1)


def test_a_file_of_many_words_then_a_small_one_count_right() -> None:
    big = " ".join(f"v{i}" for i in range(30_000)) + "\n"
    assert counted(analyze(big)) == plain(big)
    small = "alpha beta alpha\n"
    assert analyze(small).chunk_words(0) == {"alpha": (2, 2), "beta": (1, 1)}


def test_records_are_equal_only_when_their_words_and_their_counts_are() -> None:
    assert analyze("alpha beta\n") == analyze("alpha beta\n")
    assert analyze("alpha beta\n") != analyze("gamma delta\n")  # the same arrays, other words
    assert analyze("alpha beta\n") != analyze("alpha alpha beta\n")  # the same words, other counts
    assert analyze("alpha beta\n") != analyze("alpha beta\n\n")  # and another line
    record = analyze("alpha beta\n")
    assert (record == "alpha beta") is False
    assert (record != 1) is True
    assert record == mock.ANY  # a comparison with another type is left to the other side


def test_a_record_cannot_be_changed() -> None:
    record = analyze("alpha beta\n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.vocab = ("gamma",)  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        record.body[0] = 7
    assert record.chunk_words(0) == {"alpha": (1, 1), "beta": (1, 1)}
