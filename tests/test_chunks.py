"""retrieval.chunks: lines, and chunks by the line rule (ADR 0050 §6)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.retrieval.chunks import (
    CHUNKER_VERSION,
    MAX_LINES,
    MIN_LINES,
    chunk_spans,
    declaration_lines,
    declaration_offsets_utf8,
    split_lines,
)


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        pytest.param("", [], id="empty-text-no-lines"),
        pytest.param("\n", [""], id="one-empty-line"),
        pytest.param("a", ["a"], id="no-final-newline"),
        pytest.param("a\n", ["a"], id="final-newline-ends-the-line"),
        pytest.param("a\n\n", ["a", ""], id="blank-last-line"),
        pytest.param("a\r\nb\r\n", ["a", "b"], id="crlf"),
        pytest.param("a\r\nb", ["a", "b"], id="crlf-no-final-newline"),
        pytest.param("a\rb\n", ["a\rb"], id="lone-cr-is-not-a-line-end"),
        pytest.param("a\r\r\n", ["a\r"], id="only-one-cr-dropped"),
        pytest.param("a\u2028b\x0cc\n", ["a\u2028b\x0cc"], id="only-newline-cuts"),
    ],
)
def test_lines_end_at_newlines_without_their_cr(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines


def _lines(n: int, at: dict[int, str] | None = None) -> list[str]:
    """n lines of plain code, with the given lines replaced."""
    lines = [f"    x = {i}" for i in range(n)]
    for i, line in (at or {}).items():
        lines[i] = line
    return lines


@pytest.mark.parametrize(
    ("lines", "spans"),
    [
        pytest.param([], [], id="empty-file"),
        pytest.param(_lines(1), [(0, 1)], id="one-line"),
        pytest.param(_lines(200), [(0, 80), (80, 160), (160, 200)], id="no-declarations-cut-at-80"),
        pytest.param(_lines(80), [(0, 80)], id="exactly-80-lines"),
        pytest.param(_lines(81), [(0, 80), (80, 81)], id="81-lines"),
        pytest.param(
            _lines(40, {0: "def a():", 10: "def b():", 25: "def c():", 30: "def d():"}),
            [(0, 25), (25, 40)],
            id="declarations-closer-than-20-lines",
        ),
        pytest.param(_lines(30, {20: "def f():"}), [(0, 20), (20, 30)], id="exactly-20-lines"),
        pytest.param(_lines(30, {19: "def f():"}), [(0, 30)], id="19-lines-too-few"),
        pytest.param(
            _lines(120, {85: "def f():"}),
            [(0, 80), (80, 120)],
            id="a-cut-at-80-starts-a-new-count",
        ),
        pytest.param(
            _lines(120, {100: "def f():"}),
            [(0, 80), (80, 100), (100, 120)],
            id="declaration-20-after-a-cut-at-80",
        ),
        pytest.param(
            _lines(70, {0: "# Title", 5: "## Intro", 22: "# Usage", 30: "## Options", 50: "# End"}),
            [(0, 22), (22, 50), (50, 70)],
            id="markdown-headings",
        ),
        pytest.param(
            _lines(
                90,
                {
                    0: "\\documentclass{book}",
                    21: "\\chapter{One}",
                    42: "\\subsection{Not a start}",
                    50: "\\section*{Two}",
                    71: "\\sectionmark{not one either}",
                    75: "\\section{Three}",
                },
            ),
            [(0, 21), (21, 50), (50, 75), (75, 90)],
            id="tex",
        ),
        pytest.param(["x" * (1 << 20)], [(0, 1)], id="one-megabyte-line"),
    ],
)
def test_chunks_start_at_declarations_past_20_lines_and_end_by_80(
    lines: list[str], spans: list[tuple[int, int]]
) -> None:
    assert chunk_spans(lines) == spans


def test_crlf_and_a_missing_final_newline_cut_as_lf_does() -> None:
    lf = "".join(f"{line}\n" for line in _lines(100, {30: "func main() {", 60: "type T int"}))
    crlf = lf.replace("\n", "\r\n")
    expected = [(0, 30), (30, 60), (60, 100)]
    assert chunk_spans(split_lines(lf)) == expected
    assert chunk_spans(split_lines(crlf)) == expected
    assert chunk_spans(split_lines(lf.rstrip("\n"))) == expected


@pytest.mark.parametrize(
    "line",
    [
        "func main() {",
        "func",
        "type T struct{}",
        "var x = 1",
        "const N = 2",
        "(define (f x) x)",
        "(define-syntax swap!",
        "function f() {}",
        "class C:",
        "export default f",
        "def f():",
        "def",
        "# Heading",
        "#include <stdio.h>",
        "#!/bin/sh",
        "#",
        "\\chapter{One}",
        "\\section{Two}",
        "\\section*{Three}",
        "type(x)",
        "def\u00a0f",
    ],
)
def test_a_declaration_in_the_first_column_may_start_a_chunk(line: str) -> None:
    assert declaration_lines(["x", line]) == [1]
    assert chunk_spans(_lines(40, {20: line})) == [(0, 20), (20, 40)]


@pytest.mark.parametrize(
    "line",
    [
        "definitely = 1",
        "types = {}",
        "classes: list[str] = []",
        "functional = True",
        "exporter.run()",
        "variable = 2",
        "constant = 3",
        "(defines x)",
        "defé = 1",
        "def_x = 1",
        "    def method(self):",
        "\tfunc inner() {",
        "async def f():",
        "@decorator",
        "interface I {}",
        "struct S {};",
        "\\subsection{Not in the list}",
        "\\sectionmark{x}",
        " # indented comment",
        "",
    ],
)
def test_other_lines_never_start_a_chunk(line: str) -> None:
    assert declaration_lines([line]) == []
    assert chunk_spans(_lines(40, {20: line})) == [(0, 40)]


def test_the_constants_are_the_adrs() -> None:
    assert (MIN_LINES, MAX_LINES) == (20, 80)
    assert isinstance(CHUNKER_VERSION, int)


_DECLARATION = re.compile(
    r"(?:func|function|type|var|const|\(define|class|export|def|\\chapter|\\section)\b|#"
)


def _reference(lines: list[str]) -> list[tuple[int, int]]:
    """§6 read one line at a time."""
    spans: list[tuple[int, int]] = []
    start = 0
    for i, line in enumerate(lines):
        since = i - start
        if since >= MAX_LINES or (since >= MIN_LINES and _DECLARATION.match(line)):
            spans.append((start, i))
            start = i
    if start < len(lines):
        spans.append((start, len(lines)))
    return spans


_LINE = st.one_of(
    st.sampled_from(
        [
            "def f():", "    return x", "class C:", "#", "# Title", "func", "funcs", "(define x",
            "\\section{A}", "definitely", "type(x)", "", "é", "defé", "def\u00e9", "def\u3000x",
            "typeΩ", "var\u00a0x",
        ]
    ),
    st.text(max_size=10).map(lambda s: s.replace("\n", " ")),
    st.text(max_size=10).map(lambda s: s.replace("\n", " ") + "\r"),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, max_size=400))
def test_chunk_spans_cover_every_line_by_the_rule(lines: list[str]) -> None:
    spans = chunk_spans(lines)
    assert spans == _reference(lines)
    assert [lo for lo, _ in spans[1:]] == [hi for _, hi in spans[:-1]]
    assert all(0 < hi - lo <= MAX_LINES for lo, hi in spans)
    if lines:
        assert (spans[0][0], spans[-1][1]) == (0, len(lines))
    else:
        assert spans == []


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, max_size=200), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_declarations_found_in_bytes_are_those_found_in_lines(
    lines: list[str], end: str, final: bool
) -> None:
    text = end.join(lines) + (end if final and lines else "")
    data = text.encode("utf-8", "surrogatepass")
    starts = [0, *(match.end() for match in re.finditer(b"\n", data))]
    expected = [starts[i] for i in declaration_lines(split_lines(text)) if i > 0]
    assert declaration_offsets_utf8(data) == expected


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("def parse(data):", "parse"),
        ("    async def fetch(self):", "fetch"),
        ("class Ledger(Base):", "Ledger"),
        ("func (s *Shelf) Stack(b Box) error {", "Stack"),
        ("func main() {", "main"),
        ("type Shelf struct {", "Shelf"),
        ("pub fn plant<T>(seed: T) -> Sprout<T>", "plant"),
        ("pub(crate) struct Inner {", "Inner"),
        ("impl<T> Grow for Sprout<T> {", "Grow"),
        ("pub trait Soil {", "Soil"),
        ("export interface Kettle {", "Kettle"),
        ("export function boilWater(params) {", "boilWater"),
        ("export const steep = (params) => new Teapot(params);", "steep"),
        ("const parse = async (input) => input;", "parse"),
        ("  public String toRecipe(Object src) {", "toRecipe"),
        ("static int oven_preheat(struct oven *o,", "oven_preheat"),
        ("oven_bake(struct oven *o)", "oven_bake"),
        ("typedef struct oven oven_t;", "oven"),
    ],
)
def test_a_definition_line_names_what_it_defines(line: str, name: str) -> None:
    from nodwyn_retrieval.retrieval.chunks import definitions_utf8

    data = f"x = 1\n{line}\n".encode()
    assert [n.decode() for _, n in definitions_utf8(data)] == [name]


@pytest.mark.parametrize(
    "line",
    [
        "    result = parse(data)",
        "    parse(data)",
        "    return parse(data,",
        "    if (ready) {",
        "    } else if (ready) {",
        "    x.parse(data,",
        "classes = {}",
        "definitely = 1",
        "    call(x);",
    ],
)
def test_a_use_is_not_a_definition(line: str) -> None:
    from nodwyn_retrieval.retrieval.chunks import definitions_utf8

    assert definitions_utf8(f"x = 1\n{line}\n".encode()) == []


# Pieces of lines for the test below: every keyword and modifier of the definition rule, words
# that are not, and the punctuation its C, Java and JavaScript alternatives look at.
_PIECES = (
    "def", "class", "func", "function", "function*", "fn", "struct", "interface", "type", "impl",
    "trait", "enum", "union", "namespace", "module", "record", "object", "macro_rules!",
    "typedef", "export", "default", "pub", "pub(crate)", "public", "private", "protected",
    "internal", "static", "final", "abstract", "async", "unsafe", "extern", "declare", "sealed",
    "open", "override", "virtual", "inline", "synchronized", "native", "partial", "const", "let",
    "var", "return", "if", "for", "new", "print", "throws", "definitely", "types", "classes",
    "Name", "name_2", "$el", "x", "T", "int", "void", "<T>", "<K, V>", "[]", "(", ")", "()",
    "(a, b)", "{", "}", ",", ";", "=", "=>", ":", "*", "&", ".", "?", "#", "\\", "é", "\r",
)  # fmt: skip
_GLUE = ("", "", " ", " ", "\t", "  ")


_MODIFIER_WORDS = (
    "export", "default", "pub", "pub(crate)", "public", "private", "protected", "internal",
    "static", "final", "abstract", "async", "unsafe", "extern", "declare", "sealed", "open",
    "override", "virtual", "inline", "synchronized", "native", "partial", "const",
)  # fmt: skip
_KEYWORDS = (
    "def", "class", "func", "function", "function*", "fn", "struct", "interface", "type", "impl",
    "trait", "enum", "union", "namespace", "module", "record", "object", "macro_rules!",
    "typedef", "typedef struct", "typedef enum", "typedef union",
)  # fmt: skip


def _line_of_pieces(rng: random.Random) -> str:
    """A line of random pieces, or one shaped like a definition of some kind, made a little off."""
    indent = rng.choice(("", "", " ", "    ", "\t"))
    shape = rng.randrange(6)
    name = rng.choice(("Name", "name_2", "$el", "x", "_t"))
    if shape == 0:  # modifiers, a keyword, maybe generics or a receiver, a name
        mods = " ".join(rng.choice(_MODIFIER_WORDS) for _ in range(rng.randint(0, 2)))
        head = f"{mods} {rng.choice(_KEYWORDS)}" if mods else rng.choice(_KEYWORDS)
        generic = rng.choice(("", "", "<T>", " <K, V>"))
        receiver = rng.choice(("", "", "(r *T) "))
        line = f"{indent}{head}{generic} {receiver}{name}{rng.choice(('', '(', ' {', ':'))}"
    elif shape == 1:  # a JavaScript binding
        kw = rng.choice(("const", "let", "var", "export const", "export let", "export var"))
        value = rng.choice(("(a) => a", "function () {", "async () => 1", "f => f", "1", "g()"))
        line = f"{indent}{kw} {name}{rng.choice(('', ': T'))} = {value}"
    elif shape == 2:  # a C, Java or C# function, or a call
        types = rng.choice(("int", "static void", "public String", "char *", "List<T>", "return"))
        args = rng.choice(("(a, b)", "(struct o *o,", "(x)", "() throws E", "(x);", "(a) {"))
        line = f"{indent}{types} {name}{rng.choice(('', ' '))}{args}"
    elif shape == 3:  # a name and its arguments in the first column, or a method
        args = rng.choice(("a", "a, b", ""))
        end = rng.choice(("", " {", ",", ";", " : T {"))
        line = f"{rng.choice(('', indent))}{name}({args}){end}"
    else:
        parts = [indent]
        for _ in range(rng.randint(1, 7)):
            parts.append(rng.choice(_PIECES))
            parts.append(rng.choice(_GLUE))
        line = "".join(parts)
    if rng.random() < 0.2:  # a piece dropped or added somewhere
        at = rng.randrange(len(line) + 1)
        line = line[:at] + rng.choice(("", " ", "(", ";", "{", "\t", "=")) + line[at + 1 :]
    return line


def test_definitions_are_the_whole_rule_tried_at_every_line() -> None:
    """definitions_utf8 tries the definition rule only at lines a cheaper expression picks: on a
    built corpus of declaration-like lines it finds what the rule tried at every line finds."""
    from nodwyn_retrieval.retrieval.chunks import _DEFINITION, definitions_utf8

    def reference(data: bytes) -> list[tuple[int, bytes]]:
        found = []
        for m in _DEFINITION.finditer(data):
            g = next(g for g in range(1, 7) if m.start(g) >= 0)
            found.append((m.start(g), m.group(g)))
        return found

    rng = random.Random(15)
    lines = [_line_of_pieces(rng) for _ in range(40_000)]
    total = 0
    for start in range(0, len(lines), 500):
        data = "\n".join(lines[start : start + 500]).encode()
        want = reference(data)
        assert definitions_utf8(data) == want
        assert definitions_utf8(data + b"\n") == want
        total += len(want)
    assert total > 10_000  # the corpus holds definitions of every alternative's kind
