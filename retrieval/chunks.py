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

import re
from collections.abc import Sequence

__all__ = [
    "CHUNKER_VERSION",
    "MAX_LINES",
    "MIN_LINES",
    "chunk_spans",
    "cut",
    "declaration_lines",
    "declaration_offsets_utf8",
    "split_lines",
]

CHUNKER_VERSION: int = 1
"""Bumped whenever chunk_spans() cuts differently: it is part of the chunk store's key."""

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
