"""Chunks and definitions at their edges (retrieval/chunks.py, §6): where each kind of definition's
name begins (a chunk owns the names that begin in it), a definition on the very first byte, and a
keyword followed by a character of four bytes."""

from __future__ import annotations

import pytest
from nodwyn_retrieval.retrieval.chunks import (
    chunk_spans,
    cut,
    declaration_lines,
    declaration_offsets_utf8,
    definitions_utf8,
    split_lines,
)


@pytest.mark.parametrize(
    ("data", "found"),
    [
        # each shape of the rule, with the byte its name begins at
        (b"x\ndef parse(data):\n", [(6, b"parse")]),
        (b"x\nfunction* gen() {\n", [(12, b"gen")]),
        (b"x\nimpl<T> Box<T> {\n", [(10, b"Box")]),
        (b"x\nexport let h = 1\n", [(13, b"h")]),
        (b"x\nconst f = function() {}\n", [(8, b"f")]),
        (b"x\n  var k: Foo = async (a) => a\n", [(8, b"k")]),
        (b"x\nint main(int argc, char **argv)\n", [(6, b"main")]),
        (b"x\n  public void run() throws IOException\n", [(16, b"run")]),
        (b"x\nmain(void)\n", [(2, b"main")]),
        (b"x\n  render(props) {\n", [(4, b"render")]),
        (b"x\n  render(props): Node {\n", [(4, b"render")]),
    ],
)
def test_a_definitions_name_is_found_where_it_begins(data: bytes, found: list) -> None:
    assert definitions_utf8(data) == found


def test_a_definition_on_the_first_byte_is_found() -> None:
    assert definitions_utf8(b"main(void)\n") == [(0, b"main")]
    assert definitions_utf8(b"render(props) {\n") == [(0, b"render")]
    assert definitions_utf8(b"def f():\n") == [(4, b"f")]


def test_every_definition_of_a_text_is_found_in_order() -> None:
    data = b"class A:\n    def b(self):\n        pass\nfunc (r *R) C() {\n  d(x) {\n"
    assert [name for _, name in definitions_utf8(data)] == [b"A", b"b", b"C", b"d"]
    assert [at for at, _ in definitions_utf8(data)] == [6, 17, 51, 59]


def test_a_keyword_followed_by_a_wide_word_character_starts_nothing() -> None:
    wide = "\U00020000"  # a word character of four bytes
    lines = ["x", f"\\section{wide}", f"\\chapter{wide}x", f"function{wide}", "\\section\u3000x"]
    text = "\n".join(lines) + "\n"
    assert declaration_lines(lines) == [4]
    data = text.encode()
    assert declaration_offsets_utf8(data) == [data.index(b"\\section\xe3")]


def test_a_chunk_cut_at_80_lines_then_a_declaration_at_each_distance() -> None:
    # the first declaration after 80 lines, at 80, 99, 100, 160 and 181
    assert cut(200, [80]) == [(0, 80), (80, 160), (160, 200)]
    assert cut(200, [99]) == [(0, 80), (80, 160), (160, 200)]
    assert cut(200, [100]) == [(0, 80), (80, 100), (100, 180), (180, 200)]
    assert cut(200, [160]) == [(0, 80), (80, 160), (160, 200)]
    assert cut(200, [181]) == [(0, 80), (80, 160), (160, 181), (181, 200)]
    assert cut(0, []) == []
    assert cut(1, [0]) == [(0, 1)]


def test_a_file_of_many_short_functions_is_cut_every_20_lines_at_least() -> None:
    lines = split_lines("".join(f"def f{i}():\n    return {i}\n" for i in range(50)))
    spans = chunk_spans(lines)
    assert spans[0] == (0, 20)
    assert all(hi - lo == 20 for lo, hi in spans[:-1])
    assert spans[-1] == (80, 100)
