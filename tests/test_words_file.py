"""A file's record in one compiled call (``Memo.record``, retrieval/_words_file.h) against the
Python path of retrieval/analyze.py, which stays the reference.

The call finds the file's lines and chunks itself (``chunk_bounds`` gives them for these tests),
cuts the runs from the file's bytes rather than from their translation, counts each chunk's pairs
by a walk over a narrow range of ids or a sort, and builds the record's arrays: each of those is
held here to the Python path, on texts made to find its edges (a keyword before a character past
ASCII, a chunk of exactly 20 or 80 lines, runs across the 64-byte blocks the bytes are classified
in, chunks whose words' ids are scattered).
"""

from __future__ import annotations

import random

import msgpack
import numpy as np
import pytest
from nodwyn_retrieval.retrieval import analyze as A
from nodwyn_retrieval.retrieval import words as W
from nodwyn_retrieval.retrieval.chunks import (
    chunk_spans,
    cut,
    declaration_offsets_utf8,
    split_lines,
)

native = pytest.importorskip("nodwyn_retrieval.retrieval._words_native")
if not A.NATIVE:  # pragma: no cover - installed without the compiled pass, or turned off
    pytest.skip("the compiled pass is not in use", allow_module_level=True)


def _python_bounds(data: bytes) -> tuple[list[int], list[int], list[int], list[int]]:
    """(starts, ends, bounds, first_ends) as the Python path of analyze() computes them."""
    arr = np.frombuffer(data, dtype=np.uint8)
    line_starts = np.flatnonzero(arr == 0x0A) + 1
    if data and data[-1] != 0x0A:
        line_starts = np.append(line_starts, len(data))
    line_starts = np.concatenate(([0], line_starts)).astype(np.int64)
    n_lines = len(line_starts) - 1
    spans = cut(n_lines, np.searchsorted(line_starts, declaration_offsets_utf8(data)).tolist())
    lows = np.array([lo for lo, _ in spans], dtype=np.int64)
    ends = np.append(lows[1:], n_lines)
    bounds = line_starts[np.append(lows, n_lines)]
    first_ends = line_starts[lows + 1]
    return (lows + 1).tolist(), ends.tolist(), bounds.tolist(), first_ends.tolist()


def _native_bounds(data: bytes) -> tuple[list[int], ...]:
    return tuple(np.frombuffer(b, dtype=np.int64).tolist() for b in native.chunk_bounds(data))


# Line heads around §6's list: a keyword then a boundary or not, by a character of every kind.
_HEADS = [
    "def f():", "def", "def\r", "define = 1", "def_x", "def-x", "def9", "def é", "defé", "def²",
    "def٣", "def\u00a0x", "def\u2028", "def\ud800", "def\U0001f600", "def\U00010400x", "func",
    "function", "functions", "funcé", "type(x)", "types", "var", "variable", "const x", "constant",
    "(define x", "(define-syntax", "(defined", "class C:", "classes", "export default",
    "exporter", "#", "#!", "#include", "\\chapter{x}", "\\chapters", "\\section*{x}",
    "\\sectionmark", " def indented", "\tclass tabbed", "de", "fun", "(def", "\\sect", "x = 1",
    "", "é", "ÉCOLE def", "Def", "DEF", "CLASS",
]  # fmt: skip


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        lines = []
        for _ in range(rng.choice([1, 5, 19, 20, 21, 79, 80, 81, 150, 400])):
            pick = rng.randrange(8)
            if pick < 3:
                lines.append(rng.choice(_HEADS))
            elif pick < 4:
                lines.append("")
            else:
                lines.append("    x = y  # " + rng.choice(_HEADS))
        texts.append("\n".join(lines) + rng.choice(["", "\n", "\r\n", "\n\n"]))
    return texts


def test_each_head_decides_a_chunk_as_the_python_path_does() -> None:
    for head in _HEADS:
        # The head on line 21 starts a chunk exactly when §6's list says it may.
        text = "x\n" * 20 + head + "\n" + "y\n" * 5
        data = text.encode("utf-8", "surrogatepass")
        assert _native_bounds(data) == _python_bounds(data), head
        for tail in ("", "\n"):  # the head as the text's last bytes: nothing after the keyword
            data = ("x\n" * 20 + head + tail).encode("utf-8", "surrogatepass")
            assert _native_bounds(data) == _python_bounds(data), (head, tail)


@pytest.mark.parametrize("seed", range(5))
def test_chunk_bounds_equal_the_python_paths(seed: int) -> None:
    for text in _texts(seed, 40):
        data = text.encode("utf-8", "surrogatepass")
        starts, ends, bounds, first_ends = _native_bounds(data)
        assert (starts, ends, bounds, first_ends) == _python_bounds(data)
        if "\r" not in text and "\ud800" not in text:  # the str reference of the same chunks
            spans = chunk_spans(split_lines(text))
            assert list(zip(starts, ends, strict=True)) == [(lo + 1, hi) for lo, hi in spans]


def test_chunks_cut_at_20_and_80_lines_as_the_python_path_does() -> None:
    for gap in (1, 19, 20, 21, 79, 80, 81, 160, 161):
        text = ("def f():\n" + "x\n" * (gap - 1)) * 4 + "tail"
        data = text.encode()
        assert _native_bounds(data) == _python_bounds(data), gap
    assert _native_bounds(b"") == ([], [], [0], [])


def _encoded(record: A.FileRecord) -> bytes:
    return msgpack.packb(record.to_obj())


def _both(texts: list[str]) -> None:
    W.clear_memo()
    for text in texts * 2:  # the memo cold, then warm
        got = A._analyze(text, native=True)
        want = A._analyze(text, native=False)
        assert _encoded(got) == _encoded(want)
        assert got == want


@pytest.mark.parametrize("seed", range(3))
def test_records_of_hostile_heads_equal_the_python_paths(seed: int) -> None:
    _both(_texts(100 + seed, 30))


def test_runs_across_the_64_byte_blocks_give_the_python_paths_record() -> None:
    texts = []
    for length in (1, 2, 7, 8, 9, 63, 64, 65, 127, 128, 129, 200):
        for shift in (0, 1, 31, 62, 63, 64, 65):
            run = ("ab" * length)[:length]
            texts.append(" " * shift + run + "." + run + "\n" + run)  # no newline at the end
            texts.append("x" * shift + "-" + run + "é" + run + "\n")
    texts.append("a" * 5000)  # one run of many blocks, the whole text
    texts.append(".\n" * 100 + "z")
    _both(texts)


def test_chunks_of_scattered_words_give_the_python_paths_record() -> None:
    rng = random.Random(7)
    names = [f"name{i}" for i in range(3000)]
    lines = [" ".join(names[i : i + 10]) for i in range(0, 3000, 10)]  # ids 0..2999 in order
    for _ in range(300):  # then chunks that pick ids from all over the file, and new ones
        lines.append(" ".join(rng.choice(names) for _ in range(40)) + f" fresh{rng.random()}")
    texts = ["\n".join(lines), "\n".join(reversed(lines)), "\n".join(lines[::7])]
    _both(texts)


def test_definition_terms_land_in_their_names_chunks() -> None:
    text = "".join(f"def fn_{i}(x):\n" + "    body = 1\n" * (i % 30) for i in range(120))
    _both([text, "class A: pass\n" * 3, "x\n" * 100 + "def last(): pass"])


def test_record_refuses_what_does_not_fit() -> None:
    memo = native.Memo()
    table = W.WordTable()
    i64 = np.asarray
    none = b""
    with pytest.raises(ValueError, match="blanked"):
        memo.record(table, b"a b", b"a", none, none, none)
    with pytest.raises(ValueError, match="one start and one count"):
        memo.record(table, b"a b", None, i64([0], "i8"), none, none)
    for at, counts, terms in (
        ([5], [1], [0]),  # a name past the text
        ([-1], [1], [0]),
        ([2, 0], [1, 1], [0, 0]),  # starts not ascending
        ([0], [-1], []),
        ([0], [2], [0]),  # more terms than given
    ):
        with pytest.raises(ValueError, match="starts or counts"):
            memo.record(table, b"a b", None, i64(at, "i8"), i64(counts, "i8"), i64(terms, "i8"))
    with pytest.raises(ValueError, match="add up"):
        memo.record(table, b"a b", None, i64([0], "i8"), i64([1], "i8"), i64([0, 0], "i8"))
    with pytest.raises(ValueError, match="definition term"):  # an id past the table's words
        memo.record(table, b"a b", None, i64([0], "i8"), i64([1], "i8"), i64([99], "i8"))
    got = memo.record(table, b"b a b\nc", None, none, none, none)
    vocab, *arrays = got
    assert vocab == ("b", "a", "c")
    assert [np.frombuffer(a, dtype=np.uint32).tolist() for a in arrays] == [
        [1], [2], [0, 3], [0, 1, 2], [2, 1, 1], [2, 1, 0],
    ]  # fmt: skip
    # A text that may hold a blob is handed back as its looks' bits (here base64's run alone),
    # for the caller to blank it first.
    blob = b"x = '" + b"QUJD" * 40 + b"'\n"
    assert memo.record(table, blob, None, none, none, none) == 1
    assert memo.record(table, blob, b" " * len(blob), none, none, none) is not None


def test_the_python_path_asks_nothing_of_the_compiled_pass() -> None:
    # The Python path is the reference the compiled one is held to: were it to run the compiled
    # call itself, every comparison above would compare that call with itself.
    W.clear_memo()
    record = A._analyze("alpha beta_gamma\ndef f(): pass\n", native=False)
    assert W.word_table().native is None  # no memo was made: the compiled pass was not asked
    assert record.vocab[:3] == ("alpha", "beta_gamma", "beta")
    A._analyze("alpha", native=True)
    assert W.word_table().native is not None
