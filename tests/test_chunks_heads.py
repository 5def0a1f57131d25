"""The compiled pass reads a ``def`` or ``class`` line's name itself
(``_words_native.definition_heads``) and leaves every other line the filter picks to
``chunks._DEFINITION``: the definitions found are the expression's, line by line, on hand-made
edges around the two words, on generated lines and on this package's own sources."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.retrieval import chunks as C

native = pytest.importorskip("nodwyn_retrieval.retrieval._words_native")

EDGES = [
    b"def f():", b"def  f():", b"def\tf(x)", b"    def _private(self):", b"\tclass A(B):",
    b"class Foo:", b"class  Foo", b"class\tFoo_1$x(y)", b"def f$g(h)", b"def x", b"def _",
    b"def 1x():", b"def (x):", b"def <T> f():", b"def $x():", b"def", b"def ", b"class",
    b"class ", b"defx y():", b"classy x:", b"def_x(y):", b"class_ = f(x,", b"def\xc3\xa9 x()",
    b"def x\xc3\xa9():", b"def f(): return 1", b"async def f():", b"pub fn def_x()",
    b"  def  ", b"def\t", b"class A; int x(y) {", b"def f(x, y,", b"deff(x, y,", b"def:",
    b"class Meta(type):  # def g()", b"def f():\r", b"class\r", b"x = def_y(z)",
]  # fmt: skip


def _by_expression(data: bytes) -> list[tuple[int, bytes]]:
    return C._definitions_utf8(data, native=False)


def _check(data: bytes) -> None:
    assert C._definitions_utf8(data, native=True) == _by_expression(data), data[:200]


def test_the_edges_around_def_and_class() -> None:
    for line in EDGES:
        for before in (b"", b"x = 1\n", b"  \n"):
            for after in (b"", b"\n", b"\nz\n"):
                _check(before + line + after)


def test_heads_are_read_only_for_def_and_class_lines() -> None:
    data = b"def f():\n    x = g(a,\nclass C:\nasync def h():\n"
    lines = native.definition_lines(data, C._FIRST_WORDS_UTF8, C._NOT_WORDS_UTF8)
    heads = np.frombuffer(native.definition_heads(data, lines), dtype=np.int64).tolist()
    starts = np.frombuffer(lines, dtype=np.int64).tolist()
    assert starts == [0, 22, 31]
    assert heads == [4, 5, 28, 29, -1, -1]


def test_a_line_start_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError):
        native.definition_heads(b"def f", np.array([6], dtype=np.int64).tobytes())


@pytest.mark.parametrize("seed", range(4))
def test_generated_lines(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [b"def", b"class", b" ", b"\t", b"f", b"_x", b"$", b"1", b"(", b")", b":", b"<T>",
              b"\n", b"async ", b"A", b"\xc3\xa9", b"{", b",", b";", b"pub "]  # fmt: skip
    for _ in range(300):
        _check(b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30))))


def test_this_packages_sources() -> None:
    root = Path(C.__file__).resolve().parent.parent
    files = sorted(root.glob("**/*.py"))[:200]
    assert files
    for path in files:
        _check(path.read_bytes())
