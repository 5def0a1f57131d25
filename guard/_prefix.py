"""Literal prefixes of regular expressions, for the redaction rules' prefilter (guard.redact).

A rule whose every match starts with the same characters need not run its expression over a text
that does not hold them; several such prefixes that can never overlap are found together by one
scan of the text, each occurrence of each reported.
"""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=64)  # a few classes, each in many rules
def _class_bits(cls: str) -> bytes | None:
    """The 128 bits of the ASCII characters in the class [cls], when it holds ASCII only (literals,
    ranges, ``\\t``; not negated, no class escapes): None otherwise. Read as the expression
    parser reads such a class: ``a-z`` a range, a ``-`` first or last itself."""
    if not _PLAIN_CLASS.fullmatch(cls) or cls.startswith("^") or "[" in cls:
        return None
    chars = [9 if x == "\\t" else ord(x) for x in re.findall(r"\\t|.", cls)]
    bits = bytearray(16)
    k = 0
    while k < len(chars):
        lo = hi = chars[k]
        if k + 2 < len(chars) and chars[k + 1] == ord("-"):
            hi = chars[k + 2]
            k += 3
        else:
            k += 1
        if lo > hi:
            return None
        for c in range(lo, hi + 1):
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


_RUN_SHAPE = re.compile(
    r"(?:\(\?<[!=]\[[^\]]*\]\))?"  # a lookbehind of one class
    r"(?P<lit>(?:[A-Za-z0-9_~=:;,@%&'\"/#<> -]|\\[.\-$+/?*|()\[\]{}^])+"  # the literal, or
    r"|\(\?i:[A-Za-z0-9 _-]+\)|\(\?:(?:[A-Za-z0-9_~=:;,@%&'\"/#<> -]|\\[.\-$+/?*])+\))"  # a group
    r"(?:\(\?<!\[[^\]]*\](?:[A-Za-z0-9_-]|\\.)+\))?"  # a prefix's lookbehind after it
    r"(?:\(\?P<[a-z]+>)?"  # a named group opens
    r"\[(?P<cls>[^\]]*)\](?:(?P<plus>\+)|\{(?P<n>[1-9][0-9]*)(?:,[0-9]*)?\})"  # the repeat
)
_ESCAPE = re.compile(r"\\(.)")
_GROUP = re.compile(r"\([^()]*\)")
_CLASS = re.compile(r"\[[^\]]*\]")


def _branches(source: str) -> bool:
    """Whether the expression is an alternation at its top level (escapes, classes and groups
    taken out, a "|" is left)."""
    s = _CLASS.sub("", _ESCAPE.sub("", source))
    prev = None
    while prev != s:
        prev, s = s, _GROUP.sub("", s)
    return "|" in s


def body_run(source: str, flags: int, locator: str, back: int) -> tuple[bytes, int] | None:
    """(class, n) when every match of source found at a place of locator (``back`` 0) holds n
    characters or more of the class right after the locator: the expression is the locator's
    characters (after a lookbehind, in either case, in a group), then a repeat of one class of
    ASCII characters at least n times (``AIza(?P<b>[0-9A-Za-z_-]{35})``), and no alternation at
    its top level. None when not known."""
    if flags or back != 0:
        return None
    m = _RUN_SHAPE.match(source)
    if m is None:
        return None
    lit = m.group("lit")
    if lit.startswith(("(?i:", "(?:")):
        lit = lit[lit.index(":") + 1 : -1]
    if _ESCAPE.sub(r"\1", lit).lower() != locator or _branches(source):
        return None
    bits = _class_bits(m.group("cls"))
    if bits is None:
        return None
    return bits, 1 if m.group("plus") else int(m.group("n"))
