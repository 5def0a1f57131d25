"""Blobs are not words: base64, ``data:`` URIs, hex dumps and minified bundles (ADR 0050 §6).

A 2 MB image pasted as base64 into a tool result, a ``package-lock`` integrity line, an ``xxd``
dump or a minified bundle holds no word a person or a model would search for, and each of them
cut into words made an index as large as the text, with postings no query reads. This module
finds such spans in a text's UTF-8 bytes and blanks them before the text is split into words:
the conversation's events (retrieval.events, store.mem_fold) and the repository's files
(retrieval.analyze) both go through :func:`blank_blobs`. The text itself is untouched: recall
and a search's lines show the event or the file whole.

What is a blob, in one pass per shape (each a regular expression in C, anchored so that a
position inside a run is never tried again, and run only over a text that a faster look by
``bytes.translate`` and ``bytes.find`` says may hold one; see docs/benchmarks.md for the speed):

* **base64**: a run of at least 40 characters of the base64 alphabet (``A-Z a-z 0-9 + /``, then
  at most two ``=``), and the runs that follow it on the next lines (wrapped at any width, as
  MIME's 76 columns or PEM's 64, indented or quoted with ``>``) make one block. A block of 256
  characters or more is a blob; a shorter one of 64 or more is a blob when it reads as random:
  upper case, lower case and digits each present, and the character class changing at least
  every other character on average (a long camel-case name changes about every fourth; a path of
  lowercase words never mixes the three). A hash in hex of more than 64 digits (longer than a
  SHA-256) is a blob too.
* **``data:`` URIs**: ``data:<type>/<subtype>[;...],<payload>``: the payload is a blob whatever
  its encoding (base64 or percent-encoded), from 16 characters on; the media type stays a word.
* **hex dumps**: lines of ``xxd``, ``hexdump -C`` and ``od -x``: an offset of 4 to 16 hex digits
  (``0x`` or a ``:`` allowed) and then at least four groups of 2 to 8 hex digits; the whole line
  is a blob, its ASCII column included.
* **minified code**: a line of at least 1,000 characters with little white space (under 8%: a
  space after ``function``, ``return``, ``var``) and the punctuation of code (``;``, ``(``,
  ``)``, ``=``, at least 5% of it). Compact JSON, which
  has almost none of those, is not minified code: its keys are words.

Blanking keeps every byte's place (a blob's bytes become spaces, its newlines stay), so a line's
number and a chunk's lines are the same with or without it.
"""

from __future__ import annotations

import re

__all__ = [
    "ALL_LOOKS",
    "BLOBS_VERSION",
    "LOOK_BASE64",
    "LOOK_DATA",
    "LOOK_DUMP",
    "LOOK_LINE",
    "blank_blobs",
    "blob_spans",
    "may_hold_blobs",
]

BLOBS_VERSION = 2  # 2: dumps in groups of 8 digits or split by tabs; DATA: in capitals
"""Bumped whenever what is a blob changes: the words of an event or a file change with it."""

MIN_RUN = 40
"""The shortest run of base64 characters that starts a block."""
MIN_BLOCK = 64
"""The shortest block that can be a blob (when it reads as random)."""
SURE_BLOCK = 256
"""A block this long is a blob however it reads."""
MAX_HEX = 64
"""A hex run longer than this (a SHA-256 in hex is 64) is a blob."""
MIN_MINIFIED = 1000
"""The shortest line that can be minified code."""

# The runs that follow a block's first run on the next lines: each after a line break, then
# indentation or quoting, and each a run of at least MIN_RUN characters of the alphabet and at
# most two "=". Each is a whole run, as the finds cut the first (the greedy class cannot stop
# before a character of the alphabet, and what comes before a run is a line break, a blank or
# ">"); a block holds no byte of _GAPS but between its runs.
_B64 = rb"[A-Za-z0-9+/]{%d,}={0,2}" % MIN_RUN
_MORE = re.compile(rb"(?:\r?\n[ \t>]*" + _B64 + rb")*")
_GAPS = b"\r\n \t>"
_HEX_ONLY = re.compile(rb"[0-9a-fA-F]+")
_DATA_URI = re.compile(rb"(?i)(?<![\w])data:[a-z]+/[\w.+-]+(?:;[\w.=-]+)*,([^\s\"'()<>\\]{16,})")
_HEXDUMP = re.compile(
    rb"(?m)^[ \t>]*(?:0x)?[0-9a-fA-F]{4,16}:?(?:[ \t]{1,3}[0-9a-fA-F]{2,8}){4,}[^\n]*"
)

_UPPER = bytes(range(65, 91))
_LOWER = bytes(range(97, 123))
_DIGITS = b"0123456789"
# Each byte's character class, for counting how often the class changes.
_CLASS = bytes(
    (0x55 if 65 <= b <= 90 else 0x6C if 97 <= b <= 122 else 0x64 if 48 <= b <= 57 else 0x70)
    for b in range(256)
)
# The prefilters (module doc): the base64 alphabet as "a" and the rest as spaces, where a run is
# a find of 40 "a"; hex digits as "h", spaces and tabs as spaces and the rest as ".", where a
# dump's line shows as groups of "h" between spaces (of 2, 4 or 8 digits: od, xxd, xxd -g4).
_ALPHA_TABLE = bytes(
    0x61 if (65 <= b <= 90 or 97 <= b <= 122 or 48 <= b <= 57 or b in b"+/") else 0x20
    for b in range(256)
)
_RUN_HINT = b"a" * MIN_RUN
_HEX_TABLE = bytes(
    0x68 if chr(b) in "0123456789abcdefABCDEF" else 0x20 if b in b" \t" else 0x2E
    for b in range(256)
)
_DUMP_HINTS = (b"hh hh hh hh", b"hhhh hhhh hhhh", b"hhhhhhhh hhhhhhhh")
# Every byte but a newline as "x": a line of MIN_MINIFIED characters is a find.
_LINE_TABLE = bytes(0x0A if b == 0x0A else 0x78 for b in range(256))
_LINE_HINT = b"x" * MIN_MINIFIED
_BLANK = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))
_SAMPLE = 512


def _count(data: bytes, chars: bytes) -> int:
    return len(data) - len(data.translate(None, chars))


def _reads_as_random(block: bytes) -> bool:
    """Whether a block of base64 characters looks like encoded data rather than a long name."""
    s = block[:_SAMPLE]
    n = len(s)
    if not (_count(s, _UPPER) and _count(s, _LOWER) and _count(s, _DIGITS)):
        return False
    classes = s.translate(_CLASS)
    # Each pair of neighbours as one byte of the XOR of the classes shifted by one: zero where
    # the class stays (one integer operation, not a step a pair).
    pairs = n - 1
    same = (int.from_bytes(classes[1:]) ^ int.from_bytes(classes[:-1])).to_bytes(pairs).count(0)
    return (pairs - same) * 2 >= n


def _base64_spans(data: bytes) -> list[tuple[int, int]]:
    """The base64 blocks of data that are blobs (module doc). A block's first run is found by
    finds in the translated bytes, and the runs wrapped after it by one match of :data:`_MORE`
    (a wrapped image's 26,000 lines in one call, not a find and a match a line)."""
    t = data.translate(_ALPHA_TABLE)
    out: list[tuple[int, int]] = []
    pos = t.find(_RUN_HINT)
    while pos >= 0:
        start = t.rfind(b" ", 0, pos) + 1
        end = t.find(b" ", pos)
        if end < 0:
            end = len(t)
        k = 0
        while k < 2 and end < len(data) and data[end] == 0x3D:  # "="
            end += 1
            k += 1
        block = data[start:end]
        # A repetition: it matches, if only nothing (then the block is its first run).
        wrapped = _MORE.match(data, end).end()  # type: ignore[union-attr]
        if wrapped > end:
            end = wrapped
            block = data[start:end].translate(None, _GAPS)
        n = len(block.rstrip(b"="))
        if n >= SURE_BLOCK or (
            n >= MIN_BLOCK
            and (
                _reads_as_random(block)
                or (n > MAX_HEX and _HEX_ONLY.fullmatch(block.rstrip(b"=")) is not None)
            )
        ):
            out.append((start, end))
        pos = t.find(_RUN_HINT, end)
    return out


def _data_payloads(data: bytes) -> list[tuple[int, int]]:
    """The payload of every ``data:`` URI, as ``_DATA_URI.finditer`` finds them: a match begins
    with ``data:`` in any case, so the expression is tried only where the lowered bytes hold it
    (an expression of any case tried at every byte ran at 90 MB/s over code, where ``data:`` is
    an annotation), and the next is looked for after a match as finditer looks."""
    low = data.lower()
    out: list[tuple[int, int]] = []
    pos = low.find(b"data:")
    while pos >= 0:
        m = _DATA_URI.match(data, pos)
        if m is not None:
            out.append(m.span(1))
            pos = m.end()
        else:
            pos += 1
        pos = low.find(b"data:", pos)
    return out


def _dump_lines(data: bytes) -> list[tuple[int, int]]:
    """The hex dump lines: only the lines a hint was found in are tried."""
    hexes = data.translate(_HEX_TABLE)
    out: list[tuple[int, int]] = []
    tried: set[int] = set()
    for hint in _DUMP_HINTS:
        pos = hexes.find(hint)
        while pos >= 0:
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            if end < 0:
                end = len(data)
            if start not in tried:
                tried.add(start)
                m = _HEXDUMP.match(data, start, end)
                if m is not None:
                    out.append((m.start(), m.end()))
            pos = hexes.find(hint, end)
    return out


def _long_lines(data: bytes) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    if len(data) < MIN_MINIFIED or data.translate(_LINE_TABLE).find(_LINE_HINT) < 0:
        return out
    pos = 0
    for line in data.split(b"\n"):
        n = len(line)
        if n >= MIN_MINIFIED and _minified(line):
            out.append((pos, pos + n))
        pos += n + 1
    return out


def _minified(line: bytes) -> bool:
    n = len(line)
    white = _count(line, b" \t")
    code = _count(line, b";()=")
    return white * 100 < 8 * n and code * 100 >= 5 * n


def may_hold_blobs(data: bytes) -> bool:
    """Whether :func:`blob_spans` may find a blob in data: False when its first looks, made
    before any expression runs, find nothing (data shorter than :data:`MIN_RUN`, or holding no
    run of that many base64 characters, no ``ata:`` or ``ATA:``, no hex dump's hint and no line
    of :data:`MIN_MINIFIED` bytes), and then it finds none. The compiled pass makes these looks
    for many texts in one call (``_words_native.blob_hints``, held to this by its tests)."""
    if len(data) < MIN_RUN:
        return False
    if data.translate(_ALPHA_TABLE).find(_RUN_HINT) >= 0 or b"ata:" in data or b"ATA:" in data:
        return True
    hexes = data.translate(_HEX_TABLE)
    if any(hexes.find(hint) >= 0 for hint in _DUMP_HINTS):
        return True
    return data.translate(_LINE_TABLE).find(_LINE_HINT) >= 0


# The shapes' first looks, one bit each: blob_spans(data, looks) runs only the shapes whose bit
# is set. The compiled pass makes the four looks in one call (_words_native.blob_looks, the same
# bits, held to the looks below by tests/test_blobs_looks.py), so that a file one shape's look
# found something in is not translated and searched whole for the other three.
LOOK_BASE64 = 1
"""A run of MIN_RUN characters of base64's alphabet (``_base64_spans`` finds none without one)."""
LOOK_DATA = 2
"""``ata:`` or ``ATA:`` (no ``data:`` URI without one)."""
LOOK_DUMP = 4
"""A hex dump's hint (``_dump_lines`` tries no line without one)."""
LOOK_LINE = 8
"""A line of MIN_MINIFIED bytes or more (``_long_lines`` looks at no line without one)."""
ALL_LOOKS = LOOK_BASE64 | LOOK_DATA | LOOK_DUMP | LOOK_LINE


def blob_spans(data: bytes, looks: int = ALL_LOOKS) -> list[tuple[int, int]]:
    """The blobs of a text's UTF-8 bytes as ``(start, end)`` byte spans, sorted, not overlapping.

    Python's regular expressions run at about 40 MB/s over source code, so each shape is first
    looked for with ``bytes.translate`` and ``bytes.find`` (several hundred MB/s), and its
    expression runs only over a text that may hold one: most files hold none. ``looks`` leaves
    out the shapes whose bit (``LOOK_*``) is clear, for a caller that made their first looks
    already and found nothing there: the spans are then the same as with every shape.
    """
    if len(data) < MIN_RUN:
        return []  # shorter than any blob: most events' texts
    spans = _base64_spans(data) if looks & LOOK_BASE64 else []
    # data:, Data: or DATA: (the expression takes any case)
    if looks & LOOK_DATA and (b"ata:" in data or b"ATA:" in data):
        spans.extend(_data_payloads(data))
    if looks & LOOK_DUMP:
        spans.extend(_dump_lines(data))
    if looks & LOOK_LINE:
        spans.extend(_long_lines(data))
    if len(spans) < 2:
        return spans
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        la, lb = merged[-1]
        if a <= lb:
            merged[-1] = (la, max(lb, b))
        else:
            merged.append((a, b))
    return merged


def blank_blobs(data: bytes, looks: int = ALL_LOOKS) -> bytes:
    """data with every blob's bytes made spaces, its newlines kept: same length, same lines.
    ``looks`` as :func:`blob_spans` takes it."""
    spans = blob_spans(data, looks)
    if not spans:
        return data
    out = bytearray(data)
    for a, b in spans:
        out[a:b] = data[a:b].translate(_BLANK)
    return bytes(out)
