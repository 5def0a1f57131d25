"""Literal prefixes of regular expressions, for the redaction rules' prefilter (guard.redact).

A rule whose every match starts with the same characters need not run its expression over a text
that does not hold them; several such prefixes that can never overlap are found together by one
scan of the text, each occurrence of each reported.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = [
    "BEFORE",
    "NOT_BEFORE",
    "before_test",
    "body_run",
    "literal_prefix",
    "overlap_free",
    "prefix_test",
]


def literal_prefix(pattern: re.Pattern[str]) -> str:
    """The characters every match of pattern starts with: its leading literals as the regular
    expression parser reads them ("" when it starts otherwise, or ignores case)."""
    if pattern.flags & re.IGNORECASE:
        return ""
    try:  # the standard library's parser, private: without it, no prefilter
        parser: Any = importlib.import_module("re._parser")
        literal = importlib.import_module("re._constants").LITERAL
        parsed = list(parser.parse(pattern.pattern, pattern.flags))
    except (ImportError, AttributeError, TypeError, re.error):
        return ""
    out: list[str] = []
    for item in parsed:
        op, av = item
        if op is not literal or not isinstance(av, int):
            break
        out.append(chr(av))
    return "".join(out)


def overlap_free(literals: list[str]) -> bool:
    """True when no two occurrences of these literals can overlap in any text: no literal holds
    another, and no literal's proper suffix begins another (or itself). A leftmost scan for them
    then reports every occurrence of each."""
    for a in literals:
        for b in literals:
            if a != b and b in a:
                return False
            if any(b.startswith(a[k:]) for k in range(1, len(a))):
                return False
    return True


# --- What a match needs around a place: the scanner's tests of it (guard.redact) -----------------

NOT_BEFORE = 1
"""The character before the match is not in the class (a negative lookbehind at its start)."""
BEFORE = 2
"""The character before the match is in the class (a positive lookbehind at its start)."""

_LOOKBEHIND = re.compile(r"\(\?<(?P<sign>[!=])\[(?P<cls>[^\]]*)\]\)")
_PREFIX_BEHIND = re.compile(r"(?P<lit>[^(\[\\]+(?:\\\.)?)\(\?<!\[(?P<cls>[^\]]*)\](?P=lit)\)")
_PLAIN_CLASS = re.compile(r"(?:[ -\[\]-~]|\\t)+")


def _class_bits(cls: str) -> bytes | None:
    """The 128 bits of the ASCII characters in the class [cls], when it holds ASCII only (literals,
    ranges, ``\\t``; not negated, no class escapes): None otherwise."""
    if not _PLAIN_CLASS.fullmatch(cls) or cls.startswith("^") or "[" in cls:
        return None
    one = re.compile(f"[{cls}]")
    bits = bytearray(16)
    for c in range(128):
        if one.match(chr(c)):
            bits[c >> 3] |= 1 << (c & 7)
    return bytes(bits)


def before_test(source: str, flags: int, back: int) -> tuple[int, bytes] | None:
    """(:data:`NOT_BEFORE` or :data:`BEFORE`, class) when the expression source starts with a
    lookbehind of one class of ASCII characters, tried ``back`` characters before a place; None
    otherwise (flags, a class holding more, a place found by a backward scan)."""
    if flags or back < 0:
        return None
    m = _LOOKBEHIND.match(source)
    if m is None:
        return None
    bits = _class_bits(m.group("cls"))
    return None if bits is None else (NOT_BEFORE if m.group("sign") == "!" else BEFORE, bits)


def prefix_test(source: str, flags: int, prefix: str) -> bytes | None:
    """The class the character before prefix must not be in, when source is ``prefix`` then a
    negative lookbehind of one class and prefix again (``SK(?<![A-Za-z0-9_-]SK)``): None else."""
    m = _PREFIX_BEHIND.match(source)
    if flags or m is None or m.group("lit").replace("\\", "") != prefix:
        return None
    return _class_bits(m.group("cls"))


def _set_bits(items: list[Any], literal: int, in_: int, range_: int) -> bytes | None:
    bits = bytearray(16)
    for op, av in items:
        if op is literal and isinstance(av, int) and av < 128:
            bits[av >> 3] |= 1 << (av & 7)
        elif op is range_ and av[1] < 128:
            for c in range(av[0], av[1] + 1):
                bits[c >> 3] |= 1 << (c & 7)
        else:
            return None
    return bytes(bits)


def body_run(source: str, flags: int, locator: str, back: int) -> tuple[bytes, int] | None:
    """(class, n) when every match of source found at a place of locator (``back`` 0) holds n
    characters or more of the class right after the locator: the expression is the locator's
    characters (after a lookbehind, in either case), then a repeat of one class of ASCII
    characters at least n times (``AIza(?P<b>[0-9A-Za-z_-]{35})``). None when not known."""
    if flags or back != 0:
        return None
    try:  # the standard library's parser, as literal_prefix reads it
        parser: Any = importlib.import_module("re._parser")
        c: Any = importlib.import_module("re._constants")
        items = list(parser.parse(source, flags))
    except (ImportError, AttributeError, TypeError, re.error):
        return None
    chars: list[str] = []
    k = 0
    while k < len(items):
        op, av = items[k]
        if op is c.ASSERT_NOT or op is c.ASSERT:
            k += 1
            continue
        if op is c.LITERAL:
            chars.append(chr(av))
        elif op is c.SUBPATTERN and av[0] is None and av[1] in (0, re.IGNORECASE) and av[2] == 0:
            inner = list(av[3])
            if not inner or any(x is not c.LITERAL for x, _ in inner):
                break
            chars.extend(chr(y) for _, y in inner)
        else:
            break
        k += 1
    if "".join(chars).lower() != locator or k >= len(items):
        return None
    op, av = items[k]
    if op is c.SUBPATTERN and av[1] == 0 and av[2] == 0 and av[3]:
        op, av = next(iter(av[3]))
    if op not in (c.MAX_REPEAT, c.MIN_REPEAT) or av[0] < 1 or len(av[2]) != 1:
        return None
    what, arg = next(iter(av[2]))
    if what is c.IN:
        bits = _set_bits(list(arg), c.LITERAL, c.IN, c.RANGE)
    elif what is c.LITERAL and arg < 128:
        bits = _set_bits([(what, arg)], c.LITERAL, c.IN, c.RANGE)
    else:
        return None
    return None if bits is None else (bits, int(av[0]))
