"""Redaction of known credential shapes, before text is indexed or recorded (ADR 0050 §3).

§3: a file's text is redacted as the log redacts a tool result before it is cut into chunks, so the
index is built from the text the model would read and no known credential shape reaches it. What
is not a known shape (an unknown-shape secret) is not redacted: that is the ADR's stated limit.

How it stays fast (the target is 50 MB/s of source code):

1. Gates. About ten C-speed substring checks (``in``, or a regex with a literal prefix, which the
   regex engine searches for as fast; the case-insensitive ones on one lowercased copy) say which
   families of shapes can occur at all. Most source files open no gate and cost only these checks.
2. Locators. Every match of a shape starts at one of its literal locators (``AKIA``, ``ghp_``,
   ``://``, the keyword ``password``...). The locators of the open shapes are found with
   ``str.find``, and each shape's compiled pattern is tried (``match``) only there.
3. One pass. The candidates are visited once, left to right (a tie goes to the shape listed first);
   a candidate inside a credential already taken is skipped, and the output is joined once.

Invariants the rest of the system relies on:

- Lines are kept: a replacement never adds or removes a newline (a private key block spanning
  several lines becomes the marker followed by the same number of newlines). Chunks (§6) are cut
  from the redacted text, and their line numbers must be those of the file, which a search reads
  live (§7).
- Idempotence: redacting redacted text changes nothing. Markers (``[REDACTED:kind]``) match no
  shape, and a value that already is a marker is never taken for a credential.
- It never raises on any ``str``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KINDS", "Finding", "Redaction", "marker", "redact", "scan"]

_MARKER_PREFIX = "[REDACTED:"


def marker(kind: str) -> str:
    """The text that replaces a credential of this kind: ``[REDACTED:kind]``."""
    return f"{_MARKER_PREFIX}{kind}]"


@dataclass(frozen=True, slots=True)
class Redaction:
    """The result of :func:`redact`."""

    text: str
    """The text with every credential found replaced by its marker; lines are kept."""
    count: int
    """How many credentials were replaced."""
    kinds: tuple[str, ...]
    """The kind of each replacement, in text order (so ``len(kinds) == count``)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One credential found by :func:`scan`: what :func:`redact` replaces."""

    kind: str
    """The shape's name, as in its marker (``github-token``)."""
    start: int
    """Offset of the replaced part in the text (the value only, for an assignment or a URL)."""
    end: int
    """Offset just past the replaced part."""
    line: int
    """1-based line of ``start``."""


# --- What counts as a placeholder rather than a secret --------------------------------------------

# A value that refers to something else: ${VAR}, $VAR, $(command), {{ template }} anywhere in it;
# or the whole value {name}, <your token>, [PAD] (a tokenizer's special token, or a marker), %s.
_REFERENCE_IN = re.compile(r"\$\{|\$\(|\{\{|\$[A-Za-z_]")
_REFERENCE_WHOLE = re.compile(r"\{[^{}]*\}|<[^<>]*>|\[[^\[\]]*\]|%(?:\([^)]*\))?[sdr]")
# Words that stand for a credential in examples and tests rather than being one.
_PLACEHOLDER_WORDS = frozenset(
    {
        "changeme",
        "dummy",
        "example",
        "fake",
        "none",
        "null",
        "pass",
        "passwd",
        "password",
        "placeholder",
        "pwd",
        "redacted",
        "secret",
        "test",
        "token",
        "undefined",
    }
)
# A value of letters and separators with a part naming what it stands for: "secret_key",
# "YOUR-SECRET-KEY", "home-pass", "myToken" (but not "monkey" or "supersecret").
_LETTERS = re.compile(r"[A-Za-z_.-]+")
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_NAMING_PARTS = frozenset({"api", "key", "pass", "passwd", "password", "pwd", "secret", "token"})


def _names_itself(v: str) -> bool:
    if _LETTERS.fullmatch(v) is None:
        return False
    return any(p.lower() in _NAMING_PARTS for p in _PART.findall(v))


def _is_placeholder(value: str) -> bool:
    """True when a value is empty, a reference to something else, filler, or already redacted."""
    v = value.strip()
    if not v or v.startswith(_MARKER_PREFIX):
        return True
    if len(set(v)) == 1:  # ***, xxxx, ...
        return True
    if v.lower() in _PLACEHOLDER_WORDS or _names_itself(v):
        return True
    return _REFERENCE_IN.search(v) is not None or _REFERENCE_WHOLE.fullmatch(v) is not None


def _starts_word(text: str, start: int) -> bool:
    """True when no letter, digit, ``_`` or ``-`` runs into the match from the left.

    Token shapes begin with a literal prefix (``ghp_``, ``sk-``); without this, ``task-...`` would
    hold ``sk-...`` and ``UNAKIA...`` an access key id.
    """
    if start == 0:
        return True
    ch = text[start - 1]
    return not (ch.isascii() and (ch.isalnum() or ch in "_-"))


# --- The shapes -----------------------------------------------------------------------------------

Accept = Callable[[str, "re.Match[str]"], bool]
"""(text, match) -> whether the match is a credential."""


@dataclass(frozen=True, slots=True)
class _Shape:
    kind: str
    pattern: re.Pattern[str]
    """Tried with ``match`` at each locator. A ``v`` group, when present, is the part replaced."""
    locators: tuple[str, ...]
    """Literals at which every match starts."""
    lowered: bool
    """The locators are lowercase and found in the lowercased text."""
    accept: Accept


def _shape(
    kind: str, pattern: str, locators: tuple[str, ...], accept: Accept, *, lowered: bool = False
) -> _Shape:
    return _Shape(kind, re.compile(pattern), locators, lowered, accept)


def _word_start(text: str, m: re.Match[str]) -> bool:
    return _starts_word(text, m.start())


def _always(text: str, m: re.Match[str]) -> bool:
    return True


def _mixed(s: str) -> bool:
    """Two or more of lowercase, uppercase and digits: random keys are, kebab-case words not."""
    kinds = (
        any(c.islower() for c in s),
        any(c.isupper() for c in s),
        any(c.isdigit() for c in s),
    )
    return sum(kinds) >= 2


def _accept_openai(text: str, m: re.Match[str]) -> bool:
    if not _starts_word(text, m.start()):
        return False
    body = m.group(0)[3:]
    # A project, service-account or admin key says so; an older key is 48 letters and digits,
    # which a long lowercase word is not.
    return body.startswith(("proj-", "svcacct-", "admin-")) or _mixed(body)


def _accept_slack(text: str, m: re.Match[str]) -> bool:
    # Slack tokens hold numeric team and user ids: xoxb-1234-5678-abcdef.
    return _starts_word(text, m.start()) and any(c.isdigit() for c in m.group(0))


def _accept_url(text: str, m: re.Match[str]) -> bool:
    start = m.start()
    # A scheme before "://" ends in a letter or digit.
    if start == 0 or not (text[start - 1].isascii() and text[start - 1].isalnum()):
        return False
    # Anonymous FTP takes an email address as its password by convention: not a secret.
    if m.group("u").lower() == "anonymous":
        return False
    return not _is_placeholder(m.group("v"))


_MIN_PASSWORD = 4
"""A quoted password shorter than this is a tokenizer's token or a flag, not a password."""
_MIN_KEY = 8
"""A token, secret or API key shorter than this must hold a digit to be taken for one."""


def _accept_assignment(text: str, m: re.Match[str]) -> bool:
    value = m.group("v")
    if len(value) < _MIN_PASSWORD or _is_placeholder(value):
        return False
    # A value holding whitespace is prose or code ("Enter your password", "Token: " + x + "),
    # not a credential: the price is that a passphrase with spaces is not caught.
    if any(c.isspace() for c in value):
        return False
    # The name must not run on from a longer word to the left (``untoken``): only a separator or a
    # lowercase-to-uppercase step (``authToken``) may come before the keyword.
    start = m.start()
    if start > 0:
        before = text[start - 1]
        camel = before.islower() and text[start].isupper()
        if before.isascii() and before.isalpha() and not camel:
            return False
    return True


def _accept_key_assignment(text: str, m: re.Match[str]) -> bool:
    # Machine-made keys are long or hold digits; "quit", "config" and "bearer" are not keys.
    value = m.group("v")
    if len(value) < _MIN_KEY and not any(c.isdigit() for c in value):
        return False
    return _accept_assignment(text, m)


# A quoted value on one line: the opening quote is matched again; backslash escapes are skipped.
_QUOTED = r"""(?P<q>["'`])(?P<v>(?:\\.|(?!(?P=q))[^\\\n])*)(?P=q)"""
# After the name: an optional closing quote or bracket of a key (d["password"], "password": ...),
# an optional type annotation, then = : := or => (never ==), then an optional b/r/u string prefix.
_ASSIGN = (
    r"""["'`]?\]?(?:[ \t]*:[ \t]*(?:str|bytes|Optional\[str\]|str[ \t]*\|[ \t]*None))?"""
    r"""[ \t]*(?::=|=>|=(?!=)|:)[ \t]*[bBrRuU]{0,2}"""
)

_SHAPES: tuple[_Shape, ...] = (
    _shape(
        "private-key",
        # To the END line; a block cut short (no END) is redacted through its base64 lines. Both
        # real newlines and the "\n" escapes of a key held in a JSON string are followed.
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:[ \t]*(?:\r?\n|\\n)[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*))*)",
        ("-----BEGIN",),
        _always,
    ),
    _shape(
        "aws-access-key",
        r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA"),
        _word_start,
    ),
    _shape(
        "aws-secret-key",
        # Quoted or bare: ~/.aws/credentials and .env files hold it bare.
        r"(?i:secret_?access_?key)"
        + _ASSIGN
        + r"""["']?(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])""",
        ("secret_access_key", "secretaccesskey"),
        _always,
        lowered=True,
    ),
    _shape(
        "github-token",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _word_start,
    ),
    _shape("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",), _word_start),
    _shape(
        "openai-key",
        r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})(?![A-Za-z0-9_-])",
        ("sk-",),
        _accept_openai,
    ),
    _shape("slack-token", r"xox[abposr]-[A-Za-z0-9-]{10,}", ("xox",), _accept_slack),
    _shape("google-api-key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", ("AIza",), _word_start),
    _shape("stripe-key", r"(?:sk|rk)_live_[0-9A-Za-z]{20,}", ("sk_live_", "rk_live_"), _word_start),
    _shape(
        "jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ("eyJ",), _word_start
    ),
    _shape(
        "url-password",
        # scheme://user:password@host: the scheme, user and host stay; the password goes.
        r"""://(?P<u>[^\s:/@?#"'<>]*):(?P<v>[^\s/@?#"'<>]+)@(?=[A-Za-z0-9\[])""",
        ("://",),
        _accept_url,
    ),
    _shape(
        "password",
        r"(?i:password|passwd)" + _ASSIGN + _QUOTED,
        ("password", "passwd"),
        _accept_assignment,
        lowered=True,
    ),
    _shape(
        "secret",
        # secret, client_secret, SECRET_KEY, secretKey
        r"(?i:secret(?:_?key)?)" + _ASSIGN + _QUOTED,
        ("secret",),
        _accept_key_assignment,
        lowered=True,
    ),
    _shape(
        "token",
        r"(?i:token)" + _ASSIGN + _QUOTED,
        ("token",),
        _accept_key_assignment,
        lowered=True,
    ),
    _shape(
        "api-key",
        r"(?i:api[_-]?key)" + _ASSIGN + _QUOTED,
        ("api_key", "apikey", "api-key"),
        _accept_key_assignment,
        lowered=True,
    ),
)

KINDS: tuple[str, ...] = tuple(s.kind for s in _SHAPES)
"""Every kind a marker can name, in the order a tie at one position is decided."""


# --- Gates ----------------------------------------------------------------------------------------

_Gate = Callable[[str], bool]


def _has(needle: str) -> _Gate:
    return lambda hay: needle in hay


def _found(pattern: str) -> _Gate:
    search = re.compile(pattern).search
    return lambda hay: search(hay) is not None


def _both(first: _Gate, then: _Gate) -> _Gate:
    return lambda hay: first(hay) and then(hay)


_GATES: tuple[tuple[_Gate, bool, frozenset[str]], ...] = (
    # (test, whether on the lowercased text, the kinds it opens)
    (_has("PRIVATE KEY"), False, frozenset({"private-key"})),
    (_found("A(?:KIA|SIA|Iza)"), False, frozenset({"aws-access-key", "google-api-key"})),
    (_found("g(?:h[pousr]_|ithub_pat_)"), False, frozenset({"github-token"})),
    (_found("k(?:-|_live_)"), False, frozenset({"anthropic-key", "openai-key", "stripe-key"})),
    (_has("xox"), False, frozenset({"slack-token"})),
    (_has("eyJ"), False, frozenset({"jwt"})),
    # "@" is one character (a memchr); then the userinfo's shape, so that a file of decorators and
    # e-mail addresses opens nothing.
    (_both(_has("@"), _found(r"://[^\s/:@]*:[^\s/@]+@")), False, frozenset({"url-password"})),
    (_has("passw"), True, frozenset({"password"})),
    (_has("secret"), True, frozenset({"secret", "aws-secret-key"})),
    (_has("token"), True, frozenset({"token"})),
    (_found("api[_-]?key"), True, frozenset({"api-key"})),
)


def _candidates(text: str) -> list[tuple[int, int]]:
    """(offset, shape index) of every locator of every shape whose gate opened, in text order."""
    low: str | None = None
    opened: set[str] = set()
    for test, lowered, kinds in _GATES:
        if lowered:
            if low is None:
                low = text.lower()
            hay = low
        else:
            hay = text
        if test(hay):
            opened |= kinds
    if not opened:
        return []
    # Offsets found in the lowercased copy hold in the text only when lowercasing kept every
    # character one character (it does for all but a few, such as "İ"); else look in the text for
    # each spelling the keyword shapes match: lower, Capitalised and UPPER.
    aligned = low is not None and len(low) == len(text)
    out: list[tuple[int, int]] = []
    for i, shape in enumerate(_SHAPES):
        if shape.kind not in opened:
            continue
        hay = text
        forms: tuple[str, ...] = shape.locators
        if shape.lowered:
            if aligned and low is not None:
                hay = low
            else:
                forms = tuple(f for loc in forms for f in _case_forms(loc))
        for form in forms:
            at = hay.find(form)
            while at >= 0:
                out.append((at, i))
                at = hay.find(form, at + 1)
    out.sort()
    return out


def _case_forms(word: str) -> tuple[str, ...]:
    """lower, Capitalised and UPPER: the spellings code gives a keyword."""
    return tuple(dict.fromkeys((word, word[:1].upper() + word[1:], word.upper())))


def _spans(text: str) -> list[tuple[int, int, int]]:
    """(start, end, shape index) of each credential's replaced part, in text order."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    for at, i in _candidates(text):
        if at < pos:
            continue  # inside a credential already taken
        shape = _SHAPES[i]
        m = shape.pattern.match(text, at)
        if m is None or not shape.accept(text, m):
            continue
        if "v" in shape.pattern.groupindex:
            out.append((m.start("v"), m.end("v"), i))
        else:
            out.append((m.start(), m.end(), i))
        pos = m.end()
    return out


def scan(text: str) -> tuple[Finding, ...]:
    """Every credential :func:`redact` would replace, in text order, with its line."""
    found: list[Finding] = []
    line = 1
    last = 0
    for start, end, i in _spans(text):
        line += text.count("\n", last, start)
        last = start
        found.append(Finding(_SHAPES[i].kind, start, end, line))
    return tuple(found)


def redact(text: str) -> Redaction:
    """Replace every known credential shape in text by ``[REDACTED:kind]`` (§3).

    One pass over the places where the shapes' literal markers occur. Lines are kept (a multi-line
    private key leaves its newlines behind the marker), and redacting the result again is a no-op.
    """
    spans = _spans(text)
    if not spans:
        return Redaction(text, 0, ())
    parts: list[str] = []
    kinds: list[str] = []
    last = 0
    for start, end, i in spans:
        kind = _SHAPES[i].kind
        parts.append(text[last:start])
        parts.append(marker(kind))
        newlines = text.count("\n", start, end)
        if newlines:
            parts.append("\n" * newlines)
        kinds.append(kind)
        last = end
    parts.append(text[last:])
    return Redaction("".join(parts), len(kinds), tuple(kinds))
