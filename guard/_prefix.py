"""Literal prefixes of regular expressions, for the redaction rules' prefilter (guard.redact).

A rule whose every match starts with the same characters need not run its expression over a text
that does not hold them; several such prefixes that can never overlap are found together by one
scan of the text, each occurrence of each reported.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["literal_prefix", "overlap_free"]


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
