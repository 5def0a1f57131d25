"""Chunks by the line rule (ADR 0050 §6): no parser and no grammar.

A chunk starts at a line that begins, in its first column, one of the ADR's declarations or
headings: ``func``, ``type``, ``var``, ``const`` (Go), ``(define`` (Scheme), ``function``,
``class``, ``export`` (JavaScript), ``def`` and ``class`` (Python), ``#`` (Markdown), ``\\chapter``
and ``\\section`` (TeX), in any file, once the chunk before it has 20 lines; and a chunk has at most
80 lines, so the 81st line of a chunk starts the next one whatever it holds.

Decisions where §6 is silent, each keeping to its exact list:

- A keyword must end at a word boundary (the next character is not a word character, or the line
  ends): ``definitely = 1``, ``types = {}``, ``classes:`` and ``\\sectionmark`` start nothing, while
  ``def f():``, ``type(x)``, ``(define-syntax`` and ``\\section*{...}`` do. ``#`` needs no boundary,
  so a Python comment, ``#include`` and ``#!/bin/sh`` start a chunk as a Markdown heading does: the
  ADR's rule is "in any file", and this is the chunker its replay measured.
- Nothing outside the list starts a chunk: not ``async def``, ``@decorator``, ``interface``,
  ``struct``, an indented method or ``\\subsection``. A decorator therefore ends the chunk before
  its ``def``, and a file of methods indented in one class is cut at 80 lines.
- A chunk cut at 80 lines starts a new count: a declaration then starts a chunk only once that
  one has 20 lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

__all__ = [
    "CHUNKER_VERSION",
    "DEFINED",
    "MAX_LINES",
    "MIN_LINES",
    "chunk_spans",
    "cut",
    "declaration_lines",
    "declaration_offsets_utf8",
    "definitions_utf8",
    "split_lines",
]

CHUNKER_VERSION: int = 2
"""Bumped whenever chunk_spans() cuts differently or the definitions found change: it is part of
the chunk store's key. 2: each chunk also names what it defines (:func:`definitions_utf8`)."""

MIN_LINES = 20
"""§6: a declaration starts a chunk once the chunk before it has this many lines."""
MAX_LINES = 80
"""§6: a chunk has at most this many lines."""

# A cheap filter by first characters (str.startswith with a tuple runs in C), then the exact rule.
_PREFIXES = (
    "func",
    "type",
    "var",
    "const",
    "(define",
    "class",
    "export",
    "def",
    "#",
    "\\chapter",
    "\\section",
)
_START = re.compile(
    r"(?:func|function|type|var|const|\(define|class|export|def|\\chapter|\\section)\b|#"
)
_starts_here = _START.match
_UTF8_CANDIDATE = re.compile(
    b"\\n(?=" + b"|".join(re.escape(prefix.encode()) for prefix in _PREFIXES) + b")"
).finditer
# The longest keyword is 8 bytes and the character after it at most 4: 16 bytes decide a line.
_HEAD_BYTES = 16


def split_lines(text: str) -> list[str]:
    r"""The lines of text: split on "\n", a trailing "\r" dropped from each line.

    A final newline ends the last line rather than starting an empty one, and an empty text has no
    lines, so line numbers match an editor's and fs-read's.
    """
    if not text:
        return []
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def declaration_lines(lines: Sequence[str]) -> list[int]:
    """The 0-based numbers of the lines that may start a chunk (§6's list, in the first column)."""
    prefixes = _PREFIXES
    starts = _starts_here
    return [
        i for i, line in enumerate(lines) if line.startswith(prefixes) and starts(line) is not None
    ]


def declaration_offsets_utf8(data: bytes) -> list[int]:
    """Where the lines of UTF-8 data that may start a chunk begin: declaration_lines() on bytes.

    One regular expression finds the lines that begin with a prefix of §6's list, in C, far faster
    than a loop over the lines; each is then checked by the same rule as a str line, on its head
    decoded (a keyword and the character after it fit in 16 bytes). The first line is left out: it
    starts the first chunk whatever it holds.
    """
    check = _starts_here
    head = _HEAD_BYTES
    return [
        at
        for at in (match.end() for match in _UTF8_CANDIDATE(data))
        if check(data[at : at + head].decode("utf-8", "replace")) is not None
    ]


def cut(n_lines: int, declarations: Sequence[int]) -> list[tuple[int, int]]:
    """The chunks of a file of n_lines lines whose declarations are at the given ascending lines."""
    spans: list[tuple[int, int]] = []
    start = 0
    for line in declarations:
        while line - start > MAX_LINES:
            spans.append((start, start + MAX_LINES))
            start += MAX_LINES
        if line - start >= MIN_LINES:
            spans.append((start, line))
            start = line
    while n_lines - start > MAX_LINES:
        spans.append((start, start + MAX_LINES))
        start += MAX_LINES
    if start < n_lines:
        spans.append((start, n_lines))
    return spans


def chunk_spans(lines: Sequence[str]) -> list[tuple[int, int]]:
    """The chunks of a file as 0-based, half-open line ranges that cover every line in order."""
    return cut(len(lines), declaration_lines(lines))


# -- definitions ------------------------------------------------------------------------------

DEFINED = ">"
"""A chunk's record counts, beside its words, each word of a name it defines as this prefix and
the word (``>parse``): a character no word holds, so the two never meet."""

_MODIFIERS = (
    rb"(?:(?:export|default|pub(?:\([\w:]*\))?|public|private|protected|internal|static|final"
    rb"|abstract|async|unsafe|extern|declare|sealed|open|override|virtual|inline|synchronized"
    rb"|native|partial|const)[ \t]+)*"
)
# The words that the C, Java and C# alternatives below refuse as a line's first word and as the
# name before "(": statements and operators, not definitions.
_NOT_WORDS = (
    "if", "for", "while", "switch", "catch", "return", "new", "throw", "await", "yield", "else",
    "do", "case", "sizeof", "typeof", "delete", "assert", "raise", "print", "not", "and", "or",
    "in", "is", "elif", "with", "try", "defined", "goto",
)  # fmt: skip
_NOT_NAMES = rb"(?!(?:" + "|".join(_NOT_WORDS).encode() + rb")\b)"
_DEFINITION = re.compile(
    # A declaration keyword, after modifiers, in any column: def, class, func (with a Go
    # receiver), fn, struct, interface, type, impl, trait, enum, ... and the name after it.
    rb"^[ \t]*" + _MODIFIERS + rb"(?:def|class|func|function\*?|fn|struct|interface|type|impl"
    rb"|trait|enum|union|namespace|module|record|object|macro_rules!"
    rb"|typedef(?:[ \t]+(?:struct|enum|union))?)"
    rb"(?:[ \t]*<[^>\n]*>)?[ \t]+(?:\([^)\n]*\)[ \t]*)?(?:<[^>\n]*>[ \t]*)?([A-Za-z_$][\w$]*)"
    # A JavaScript binding: export const NAME, or const NAME = a function.
    rb"|^[ \t]*(?:export[ \t]+(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)"
    rb"|(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*(?::[^=\n]*)?=[ \t]*(?:async[ \t]*)?"
    rb"(?:\(|function\b|[A-Za-z_$][\w$]*[ \t]*=>))"
    # A C, Java or C# function: types then NAME( on a line that does not end a statement; in the
    # first column without a type (C's return type on the line before); or a method NAME(...) {.
    rb"|^[ \t]*"
    + _NOT_NAMES
    + rb"[A-Za-z_][\w<>\[\],.? \t]*[ \t*&]+"
    + _NOT_NAMES
    + rb"([A-Za-z_]\w*)[ \t]*\([^;\n]*(?:[){,][ \t]*|\bthrows\b[^;\n]*)$"
    rb"|^" + _NOT_NAMES + rb"([A-Za-z_]\w*)\([^;\n]*[){,][ \t]*$"
    rb"|^[ \t]*"
    + _NOT_NAMES
    + rb"([A-Za-z_$][\w$]*)[ \t]*\([^;\n]*\)[ \t]*(?::[^;{\n]*)?\{[ \t]*$",
    re.MULTILINE,
)


# What a line must begin with, after its indentation, for the first two alternatives above to
# match it: a modifier, a declaration keyword or a JavaScript binding's keyword (a prefix of each
# is enough: "func" for "function", "pub" for "pub(crate)", "type" for "typedef").
_FIRST_WORDS = (
    "abstract", "async", "class", "const", "declare", "def", "enum", "export", "extern", "final",
    "fn", "func", "impl", "inline", "interface", "internal", "let", "macro_rules", "module",
    "namespace", "native", "object", "open", "override", "partial", "private", "protected", "pub",
    "record", "sealed", "static", "struct", "synchronized", "trait", "type", "union", "unsafe",
    "var", "virtual",
)  # fmt: skip


def _trie(words: list[str]) -> str:
    """A regular expression for any of words, as a trie (one branch a first letter): the regex
    engine tries a branch's first letter cheaply, so few branches make a line's test fast."""
    by_first: dict[str, list[str]] = {}
    for word in words:
        by_first.setdefault(word[:1], []).append(word[1:])
    branches = [re.escape(c) + _trie(rest) for c, rest in sorted(by_first.items()) if c]
    if not branches:
        return ""
    found = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{found})?" if "" in by_first else found


# The lines _DEFINITION can match, or a few more: a line that begins with one of _FIRST_WORDS, or
# whose text up to a "(" holds only what the C, Java or C# alternatives allow there and which ends
# as they require (")", "{" or "," and blanks, or "throws" after the "("). Each alternative of
# _DEFINITION, its lookaheads left out, matches only a line that one of these branches matches
# (tests/test_chunks.py holds the two to the same definitions), and this expression has a literal
# first character, "\n", which the regex engine finds without trying every position: the whole
# of _DEFINITION tried at every line was a third of analyze()'s time.
_DEFINITION_LINE = re.compile(
    rb"\n(?:[ \t]*(?:"
    + _trie(list(_FIRST_WORDS)).encode()
    + rb"|[A-Za-z_][\w<>\[\],.?]*[ \t*&][\w<>\[\],.? \t*&]*\([^;\n]*(?:[){,][ \t]*$|throws)"
    rb"|[A-Za-z_$][\w$]*[ \t]*\([^;\n]*\{[ \t]*$)"
    rb"|[A-Za-z_]\w*\([^;\n]*[){,][ \t]*$)",
    re.MULTILINE,
)


_FIRST_WORDS_UTF8 = tuple(word.encode() for word in _FIRST_WORDS)
_NOT_WORDS_UTF8 = tuple(word.encode() for word in _NOT_WORDS)

PURE_PYTHON = "NODWYN_RETRIEVAL_PURE_PYTHON"
"""Set (not to ``0``), the compiled pass is not used though installed: the Python paths, which
give the same records (for a comparison, or a fault in the compiled code)."""


def pure_python() -> bool:
    """Whether :data:`PURE_PYTHON` asks for the Python paths: every compiled helper of the
    package (this module's filter, retrieval.analyze's pass, actors._stat's calls) asks it."""
    return os.environ.get(PURE_PYTHON, "") not in ("", "0")


try:  # the compiled line filter, built with retrieval.analyze's pass (retrieval/_words_native.c)
    from nodwyn_retrieval.retrieval._words_native import definition_heads as _native_heads
    from nodwyn_retrieval.retrieval._words_native import definition_lines as _native_lines
except ImportError:  # pragma: no cover - depends on how the package was installed
    _native_lines = None  # type: ignore[assignment]
    _native_heads = None  # type: ignore[assignment]
if pure_python():
    _native_lines = None  # type: ignore[assignment]
    _native_heads = None  # type: ignore[assignment]


def definitions_utf8(data: bytes) -> list[tuple[int, bytes]]:
    """Where the names that lines of UTF-8 data define begin, and the names (a line rule, §6's
    kind: no parser). ``def f``, ``class C``, ``func (r *T) Name``, ``pub fn name``, ``struct
    s``, ``interface I``, ``type T``, ``impl Trait``, ``export const x``, a C or Java function's
    ``name(`` after its types.

    What ``_DEFINITION.finditer(data)`` finds (a match never crosses a line, so it is the match
    at each line's start), computed by trying it only at the lines ``_DEFINITION_LINE`` finds.
    Where the compiled pass is installed, a loop in C picks the lines that expression matches
    (the same shapes, no regular expression tried at every line), less those whose first word
    _DEFINITION refuses; the definitions found are the same."""
    return _definitions_utf8(data, native=_native_lines is not None)


def _definition_lines(data: bytes, *, native: bool) -> list[int]:
    """The starts of the lines of data that _DEFINITION_LINE matches, ascending (those of a
    first word in _NOT_WORDS left out by the compiled filter: _DEFINITION matches none)."""
    if native and _native_lines is not None:
        # The same lines, less those whose first word _DEFINITION refuses (_NOT_WORDS).
        lines = _native_lines(data, _FIRST_WORDS_UTF8, _NOT_WORDS_UTF8)
        return memoryview(lines).cast("q").tolist()
    # The "\n" put before data makes the first line's start a match's start like any other's.
    buf = b"\n" + data
    return [m.start() for m in _DEFINITION_LINE.finditer(buf)]


def _definitions_utf8(data: bytes, *, native: bool) -> list[tuple[int, bytes]]:
    """definitions_utf8, its lines picked by the compiled filter or by the expression alone.

    The compiled pass also reads a ``def`` or ``class`` line's name itself
    (``_words_native.definition_heads``: the expression's first alternative, which matches such
    a line whatever follows), and the expression is tried only at the other lines."""
    found: list[tuple[int, bytes]] = []
    match = _DEFINITION.match
    if native and _native_lines is not None and _native_heads is not None:
        lines = _native_lines(data, _FIRST_WORDS_UTF8, _NOT_WORDS_UTF8)
        starts = memoryview(lines).cast("q").tolist()
        heads = memoryview(_native_heads(data, lines)).cast("q").tolist()
        for line, at, end in zip(starts, heads[::2], heads[1::2], strict=True):
            if at >= 0:
                found.append((at, data[at:end]))
                continue
            m = match(data, line)
            if m is not None:
                g = m.lastindex or 0
                found.append((m.start(g), m.group(g)))
        return found
    for line in _definition_lines(data, native=native):
        m = match(data, line)
        if m is not None:
            # Each group of _DEFINITION is in an alternative of its own and required there: the
            # one that took part is the last (and only) one matched.
            g = m.lastindex or 0
            found.append((m.start(g), m.group(g)))
    return found
