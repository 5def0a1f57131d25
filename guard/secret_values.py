"""Values that are, or are not, secrets: detect-secrets' entropy, and what is a placeholder.

:mod:`guard.redact` asks these of a value a shape or an assignment found: a random-looking value
of high entropy is a secret whatever its shape; a reference (``${VAR}``), a mask (``****``), a
colour (``#d0d0d0``), a constant's name or a placeholder word (``changeme``) is not.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "B64_LIMIT",
    "HEX_LIMIT",
    "MARKER_PREFIX",
    "REFERENCE",
    "entropy",
    "high_entropy",
    "is_placeholder",
]

MARKER_PREFIX = "[REDACTED:"
"""How every marker begins: a value holding one is never taken for a credential."""
_MARKER_PREFIX = MARKER_PREFIX

# --- Entropy, as detect-secrets measures it -------------------------------------------------------

_B64_CHARSET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/\\-_=")
_HEX_CHARSET = frozenset("0123456789abcdefABCDEF")
B64_LIMIT = 4.5
"""detect-secrets' Base64HighEntropyString default limit."""
HEX_LIMIT = 3.0
"""detect-secrets' HexHighEntropyString default limit."""


def entropy(data: str) -> float:
    """Shannon entropy of data in bits per character, as detect-secrets calculates it."""
    if not data:
        return 0.0
    n = len(data)
    counts: dict[str, int] = {}
    for c in data:
        counts[c] = counts.get(c, 0) + 1
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def high_entropy(value: str) -> bool:
    """True when detect-secrets' entropy plugins would report value with their default limits.

    A hex string over 3.0 bits a character (less 1.2 / log2(length) when it is all digits, as
    detect-secrets does), or a base64 one over 4.5. A value outside both alphabets is neither.
    """
    if not value:
        return False
    chars = set(value)
    if chars <= _HEX_CHARSET:
        e = entropy(value)
        if value.isdigit() and len(value) > 1:
            e -= 1.2 / math.log2(len(value))
        return e > HEX_LIMIT
    if chars <= _B64_CHARSET:
        return entropy(value) > B64_LIMIT
    return False


# --- What counts as a placeholder rather than a secret --------------------------------------------

# A value that refers to something else: ${VAR}, $VAR, $(command), {{ template }}, %VAR% anywhere;
# or the whole value {name}, <your token>, [PAD] (a tokenizer's special token, or a marker), %s.
_REFERENCE_IN = re.compile(
    r"\$\{|\$\(|\{\{|\$[A-Za-z_]|%[A-Za-z_]+%|\{%|#\{|(?<![A-Za-z0-9])%(?:\([^)]*\))?[sdr](?![A-Za-z0-9])|\{\w{0,30}(?:![rs])?\}"
)
_REFERENCE_WHOLE = re.compile(
    r"\{[^{}]*\}|<[^<>]*>|\[[^\[\]]*\]|%(?:\([^)]*\))?[-+ #0-9.]*[sdrixf]"
    r"|\$\d+|@[A-Za-z_]+@|:[A-Za-z_]\w*"
)
# Words that stand for a credential in examples, schemas and tests rather than being one.
_PLACEHOLDER_WORDS = frozenset(
    {
        "changeit", "changeme", "dummy", "example", "fake", "none", "null", "nil", "pass", "passwd",
        "password", "placeholder", "pwd", "redacted", "secret", "test", "token", "undefined",
        "string", "str", "bytes", "text", "required", "optional", "hidden", "masked", "sensitive",
        "true", "false", "yes", "no", "on", "off", "empty", "default", "notset", "unset", "todo",
        "fixme", "tbd", "sample", "your_password", "mypassword", "foo", "bar", "baz", "foobar",
        "value", "xxx", "na", "n/a", "auto", "basic", "bearer", "digest", "oauth", "oauth2",
        "keyring", "prompt", "ask", "env", "stdin", "file", "secrets", "credentials",
    }
)  # fmt: skip
# A value of letters and separators with a part naming what it stands for: "secret_key",
# "YOUR-SECRET-KEY", "home-pass", "myToken" (but not "monkey" or "supersecret").
_LETTERS = re.compile(r"[A-Za-z_.-]+")
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_NAMING_PARTS = frozenset(
    {"api", "key", "pass", "passwd", "password", "pwd", "secret", "token", "auth", "credential",
     "credentials", "your", "my", "here", "xxx", "dummy", "fake", "example", "test", "sample"}
)  # fmt: skip
# Masks: "****", "xxxx-xxxx", "•••", ":****" (a URL's password shown masked).
_MASK = re.compile(r"[*•●xX#._:/-]+|.*\*\*\*.*")
# A regular expression, not a value: r'[^\W\d]\w*', "(?i)...", ".*".
_REGEX = re.compile(r"\\[wdsWDSbB]|\[\^|\(\?|\.\*|\.\+|\\\.")
# A constant's name ('NONAUTH', 'PLAIN'), a version, an OID, an address or a time: not a secret.
_CONSTANT = re.compile(
    r"[A-Z]{2,}[0-9]*(?:[-_](?:[A-Z]{2,}[0-9]*|[0-9]+))*|[0-9]+(?:[.:/-][0-9]+)+-?|[0-9.]+-"
)
# A colour, as style maps hold them: "#d0d0d0", "bg:#ffffff", "ansired".
_COLOUR = re.compile(r"(?:(?:bg|fg|border):)?#[0-9A-Fa-f]{3,8}|ansi[a-z]+")


def _names_itself(v: str) -> bool:
    if _LETTERS.fullmatch(v) is None:
        return False
    parts = _PART.findall(v)
    # A placeholder is a few words (YOUR-SECRET-KEY, myToken); random letters split into many.
    return len(parts) <= 4 and any(p.lower() in _NAMING_PARTS for p in parts)


def _is_placeholder(value: str) -> bool:
    """True when a value is empty, a reference to something else, filler, a mask or a colour."""
    v = value.strip()
    if not v or v.startswith(_MARKER_PREFIX) or _MARKER_PREFIX in v:
        return True
    if len(set(v)) == 1:  # ***, xxxx, ...
        return True
    if v.lower() in _PLACEHOLDER_WORDS or _names_itself(v):
        return True
    if _MASK.fullmatch(v) is not None or _COLOUR.fullmatch(v) is not None:
        return True
    if _CONSTANT.fullmatch(v) is not None or _REGEX.search(v) is not None:
        return True
    return _REFERENCE_IN.search(v) is not None or _REFERENCE_WHOLE.fullmatch(v) is not None


is_placeholder = _is_placeholder
REFERENCE = _REFERENCE_IN
"""A reference anywhere in a value: ``${VAR}``, ``$(cmd)``, ``{{ x }}``, ``%s``..."""
