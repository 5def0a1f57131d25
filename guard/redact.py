"""Redaction of known credential shapes, before text is indexed or recorded (ADR 0050 §3).

§3: a file's text is redacted as the log redacts a tool result before it is cut into chunks, so the
index is built from the text the model would read and no known credential shape reaches it. What
is not a known shape (an unknown-shape secret) is not redacted: that is the ADR's stated limit.

Three families of shapes (docs/redaction.md lists them and what is left alone, and why):

- provider shapes (:mod:`guard.secret_rules`): a vendor's documented token format;
- generic shapes: a password in a URL, ``Authorization: Basic/Bearer ...`` headers, ``curl -u``;
- the assignment rule: a name holding a secret word (``password``, ``pwd``, ``token``, ``secret``,
  ``api_key``, ``auth``, ``credential``, ``private_key``), glued or not, given a literal value in
  any of the usual syntaxes (code, shell, ``.env``, INI, YAML, TOML, JSON, XML).

How it stays fast (the target is 50 MB/s of source code):

1. One scan finds every locator (a lowercase literal every match of a shape holds) and the
   case-sensitive prefixes of a few shapes (``SK``, ``SG.``): compiled (guard/_redact_native.c),
   one pass over the str as stored, its ASCII letters folded as read; else two Aho-Corasick
   automatons (``ahocorasick_rs``), over the lowered text and the text. Most source files hold
   few locators.
2. A place no match can be at is dropped there (the character before the match, the run after
   the literal, as each rule's expression says: guard._prefix); each shape's compiled pattern
   is tried with ``match`` only at the places kept.
3. One pass: provider shapes first, left to right (a tie goes to the shape listed first); then the
   generic shapes and assignments, skipping any part a provider shape took (a GitHub token assigned
   to ``GITHUB_TOKEN`` is a ``github-token``). The output is joined once.

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

import base64
import binascii
import bisect
import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ahocorasick_rs
from nodwyn_retrieval.guard._assignment import AWS_SECRET as _AWS_SECRET
from nodwyn_retrieval.guard._assignment import NAME_REST as _NAME_REST
from nodwyn_retrieval.guard._assignment import NAME_WORD as _NAME_WORD
from nodwyn_retrieval.guard._assignment import SECRET_LOCATORS as _SECRET_LOCATORS
from nodwyn_retrieval.guard._assignment import assignment as _assignment
from nodwyn_retrieval.guard._assignment import judgeable
from nodwyn_retrieval.guard._prefix import (
    NOT_BEFORE,
    before_test,
    body_run,
    literal_prefix,
    overlap_free,
    prefix_test,
)
from nodwyn_retrieval.guard.command_rules import COMMAND_RULES
from nodwyn_retrieval.guard.kubernetes import with_secret_data
from nodwyn_retrieval.guard.secret_rules import RULES, Rule, random_body
from nodwyn_retrieval.guard.secret_values import (
    B64_LIMIT,
    HEX_LIMIT,
    MARKER_PREFIX,
    entropy,
    high_entropy,
    is_placeholder,
)

__all__ = [
    "B64_LIMIT",
    "HEX_LIMIT",
    "KINDS",
    "Finding",
    "Redaction",
    "entropy",
    "high_entropy",
    "marker",
    "redact",
    "scan",
]

_MARKER_PREFIX = MARKER_PREFIX
_is_placeholder = is_placeholder


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


# --- Generic shapes: URLs, headers, curl ----------------------------------------------------------


def _not_placeholder(s: str) -> bool:
    return not _is_placeholder(s)


def _bearer_value(s: str) -> bool:
    """A token, not a word or a name: random-looking, with a digit or high entropy."""
    if not random_body(s) or _is_placeholder(s):
        return False
    humps = len(_NAME_WORD.findall(s))
    return any(c.isdigit() for c in s) or high_entropy(s) or humps * 4 >= len(s)


def _basic_value(s: str) -> bool:
    """Base64 of ``user:password`` with a real password."""
    try:
        raw = base64.b64decode(s + "=" * (-len(s) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    _user, sep, password = raw.partition(":")
    return bool(sep) and raw.isprintable() and len(password) >= 3 and not _is_placeholder(password)


def _url_password(s: str) -> bool:
    """A URL's password, not a placeholder. A "?" or "#" left unencoded in it is its own, as the
    drivers' parsers take it (SQLAlchemy's, libpq's: the password runs to the last "@"), unless
    what comes before it is a port: http://host:8080/?next=a@b and http://host:3000#/a@b are a
    host, its port and a query or a fragment holding an "@"."""
    if _is_placeholder(s):
        return False
    head = re.split(r"[?#]", s, maxsplit=1)[0]
    return head == s or (head != "" and not head.isdigit())


def _user_password(s: str) -> bool:
    return not _is_placeholder(s) and not s.isdigit() and len(s) >= 3


_GENERIC: tuple[Rule, ...] = (
    Rule(
        "url-password",
        # scheme://user:password@host: the scheme, user and host stay; the password goes. Anonymous
        # FTP takes an email address as its password by convention: not a secret. An '@' left
        # unencoded in the user or the password is theirs: the host follows the last '@' of the
        # authority, as URL parsers take it (p@ss left "ss" in the index, and an email address
        # as the user left the whole password). A "?" or "#" in it is its own too (_url_password).
        (
            r"""(?<=[A-Za-z0-9])://(?!(?i:anonymous):)[^\s:/?#"'<>]*:"""
            r"""(?P<v>(?P<b>[^\s/"'<>]+))@(?=[A-Za-z0-9\[])"""
        ),
        ("://",),
        0,
        _url_password,
    ),
    Rule(
        "bearer-token",
        (
            r"(?i:bearer)[ \t]+(?P<v>(?P<b>[A-Za-z0-9._~+/-]{16,}=*))(?![A-Za-z0-9._~+/=(\[-])"
        ),
        ("bearer",),
        0,
        _bearer_value,
    ),
    Rule(
        "basic-auth",
        r"(?i:basic)[ \t]+(?P<v>(?P<b>[A-Za-z0-9+/]{8,}={0,2}))(?![A-Za-z0-9+/=\[])",
        ("basic",),
        0,
        _basic_value,
    ),
    Rule(
        "authorization",
        (
            r"""(?i:authorization)["']?[ \t]*[:=][ \t]*["']?"""
            r"""(?:(?i:token|ssws|apikey|api-key|key)[ \t]+)?"""
            r"""(?P<v>(?P<b>[A-Za-z0-9._~+/-]{16,}=*))(?![A-Za-z0-9._~+/=(\[-])"""
        ),
        ("authorization",),
        0,
        _bearer_value,
    ),
    Rule(
        "basic-auth",
        # curl -u user:password, curl --user user:password: the user stays. On curl's line only:
        # git push -u main:main and the like are not a user and password.
        (
            r"""curl\b[^\n]{0,400}?[ \t](?:-u|--user)(?:[ \t]+|=)["']?[^\s:"'$]{1,64}:"""
            r"""(?P<v>(?P<b>[^\s"']{3,}))"""
        ),
        ("curl",),
        0,
        _user_password,
    ),
)

# --- The scanner ----------------------------------------------------------------------------------

_PROVIDERS: tuple[Rule, ...] = (*RULES, _AWS_SECRET, *COMMAND_RULES)
_ALL: tuple[Rule, ...] = (*_PROVIDERS, *_GENERIC)
_N_PROVIDERS = len(_PROVIDERS)
_ASSIGN = -1
"""The pseudo-rule index of the assignment rule's locators."""
_K8S = -2
"""The pseudo-rule index of a Kubernetes Secret's locator."""

KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [r.kind for r in _ALL]
        + ["kubernetes-secret", "password", "secret", "token", "api-key", "credential"]
    )
)
"""Every kind a marker can name."""


def _build() -> tuple[
    ahocorasick_rs.AhoCorasick,
    ahocorasick_rs.BytesAhoCorasick,
    list[tuple[int, ...]],
    tuple[int, ...],
    list[str],
]:
    by_literal: dict[str, list[int]] = {}
    for i, rule in enumerate(_ALL):
        for loc in rule.locators:
            by_literal.setdefault(loc, []).append(i)
    for loc in _SECRET_LOCATORS:
        by_literal.setdefault(loc, []).append(_ASSIGN)
    by_literal.setdefault("kind: secret", []).append(_K8S)
    literals = list(by_literal)
    direct = tuple(i for i, r in enumerate(_ALL) if not r.locators)
    # A DFA: three times the speed of the default NFA for a few hundred literals, little memory.
    dfa = ahocorasick_rs.Implementation.DFA
    return (
        ahocorasick_rs.AhoCorasick(literals, implementation=dfa),
        ahocorasick_rs.BytesAhoCorasick([x.encode() for x in literals], implementation=dfa),
        [tuple(by_literal[x]) for x in literals],
        direct,
        literals,
    )


_AUTOMATON, _BYTES_AUTOMATON, _RULES_OF, _DIRECT, _LITERALS = _build()


_DIRECT_PREFIX: tuple[str, ...] = tuple(literal_prefix(_ALL[ri].pattern) for ri in _DIRECT)
"""The prefilter of each rule without a locator: a text that does not hold its literal prefix
holds no match, and its expression is not run (a find costs a fraction of a search)."""


_Scan = tuple[ahocorasick_rs.AhoCorasick | None, ahocorasick_rs.BytesAhoCorasick | None, tuple[int, ...], tuple[int, ...]]  # fmt: skip  # noqa: E501


def _direct_scan() -> _Scan:
    """The rules without a locator split in two: those whose prefixes one case-sensitive scan
    finds (every occurrence of each: they cannot overlap), and the rest, each gated by its ``in``.
    The scan (for text, for ASCII bytes), the first part's places in _DIRECT, the second's."""
    scanned = [k for k, prefix in enumerate(_DIRECT_PREFIX) if prefix]
    while scanned and not overlap_free([_DIRECT_PREFIX[k] for k in scanned]):
        scanned.pop()  # a literal overlapping itself (a run of one letter) keeps its own gate
    rest = tuple(k for k in range(len(_DIRECT)) if k not in scanned)
    if not scanned:
        return None, None, (), rest
    literals = [_DIRECT_PREFIX[k] for k in scanned]
    first = ahocorasick_rs.MatchKind.LeftmostFirst  # with a prefilter: a fraction of Standard's
    text_scan = ahocorasick_rs.AhoCorasick(literals, matchkind=first)
    bytes_scan = ahocorasick_rs.BytesAhoCorasick([x.encode() for x in literals], matchkind=first)
    return text_scan, bytes_scan, tuple(scanned), rest


_DIRECT_AUTOMATON, _DIRECT_BYTES_AUTOMATON, _DIRECT_SCANNED, _DIRECT_REST = _direct_scan()


def _direct(text: str, raw: bytes | None = None) -> list[tuple[int, int]]:
    """(start, rule) of every match of the rules without a locator, as each rule's ``finditer``
    over text finds them: a match starts with its rule's literal prefix, so trying the rule at
    each occurrence of it, in order and not inside the match before, finds the same matches.
    raw: the text's ASCII bytes when the caller has them (an ASCII text's are its own)."""
    found: list[tuple[int, int]] = []
    if _DIRECT_AUTOMATON is not None and _DIRECT_BYTES_AUTOMATON is not None:
        if raw is None and text.isascii():
            raw = text.encode("ascii")
        if raw is not None:
            hits = _DIRECT_BYTES_AUTOMATON.find_matches_as_indexes(raw)
        else:
            hits = _DIRECT_AUTOMATON.find_matches_as_indexes(_scannable(text))
        if hits:
            ends = [0] * len(_DIRECT_SCANNED)
            for li, at, _end in hits:
                if at < ends[li]:
                    continue
                ri = _DIRECT[_DIRECT_SCANNED[li]]
                m = _ALL[ri].pattern.match(text, at)
                if m is not None:
                    found.append((at, ri))
                    ends[li] = m.end()
    found.extend(_direct_rest(text))
    return found


def _direct_rest(text: str) -> list[tuple[int, int]]:
    """(start, rule) of every match of the rules without a locator the scan does not find, each
    gated by its literal prefix's ``in``."""
    found: list[tuple[int, int]] = []
    for k in _DIRECT_REST:
        prefix = _DIRECT_PREFIX[k]
        if prefix and prefix not in text:
            continue
        ri = _DIRECT[k]
        for m in _ALL[ri].pattern.finditer(text):
            found.append((m.start(), ri))
    return found


def _prefixed(text: str, places: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, rule) of the matches at the places of the scanned prefixes, as :func:`_direct`
    finds them: in text order, a rule not tried inside its match before."""
    found: list[tuple[int, int]] = []
    ends: dict[int, int] = {}
    for at, ri in places:
        if at < ends.get(ri, 0):
            continue
        m = _ALL[ri].pattern.match(text, at)
        if m is not None:
            found.append((at, ri))
            ends[ri] = m.end()
    return found


# --- Places: one scan for every literal, and the places no match can be at dropped ---------------
#
# Each place a literal is found at goes to its rules (an entry a rule), each with the tests its
# expression needs there (guard._prefix): the character before the match outside a class (a
# token's left edge) or inside one (a URL's "://" after a letter or digit), and a run of so many
# characters of a class after the literal (a token's body: "AIza" then 35 of [0-9A-Za-z_-]). A
# generic shape's or a prefix's place failing them is dropped: its expression would not match
# there. A provider's is only counted, since a credential glued before it is judged as if a
# marker's "]" stood there: _spans goes through every place again when a credential is taken and
# a place was counted. An assignment's place is kept when the name around it may be followed by
# an operator or a blank (_MAY_JUDGE, a superset of judgeable()). The compiled scan
# (guard/_redact_native.c) walks the text once for all of it; _places_python gives the same.

try:  # built by `pip install .` where a C compiler is found; the Python path otherwise
    _redact_native: Any = importlib.import_module("nodwyn_retrieval.guard._redact_native")
except ImportError:  # pragma: no cover - depends on how the package was installed
    _redact_native = None
_PURE_PYTHON = "NODWYN_RETRIEVAL_PURE_PYTHON"
"""Set (not to ``0``), the compiled scan is not used though installed (retrieval.chunks'
PURE_PYTHON, which every compiled helper of the package asks)."""

_PROVIDER_PLACE, _GENERIC_PLACE, _ASSIGN_PLACE, _K8S_PLACE, _PREFIX_PLACE = range(5)
_NO_CLASS = bytes(16)
_Entry = tuple[int, int, int, int, bytes, str | None, bytes, int]
"""(where the place goes, rule, the test before, the rule's back, its class, the literal's
case-sensitive text, the class of the run after the literal, the run's least length)."""
_Places = tuple[
    list[tuple[int, int]],
    int,
    list[tuple[int, int]],
    list[int],
    list[int],
    list[tuple[int, int]],
]
"""Providers' places (start, rule); how many failed their tests; generic shapes' places; the
assignment rule's (offsets); Kubernetes Secrets' (offsets); the scanned prefixes' (start, rule)."""

_MAY_JUDGE = re.compile(r"""[A-Za-z0-9_-]*(?:[ \t"'`\]:=?,(>\\]|[\r\n][ \t\r\n"'-]*value)""")
"""What can follow a name judgeable() keeps: a blank, or what begins guard._assignment's
_OPERATOR (its closing quote escaped too, ``{\\"token\\": ...}``; after a line break, only
its ``value`` form)."""


def _tests(source: str, flags: int, literal: str, back: int) -> tuple[int, bytes, bytes, int]:
    before = before_test(source, flags, back)
    run = body_run(source, flags, literal, back)
    how, bits = before if before is not None else (0, _NO_CLASS)
    run_bits, run_min = run if run is not None else (_NO_CLASS, 0)
    return how, bits, run_bits, run_min


def _rule_entry(ri: int, literal: str) -> _Entry:
    if ri == _ASSIGN:
        return (_ASSIGN_PLACE, ri, 0, 0, _NO_CLASS, None, _NO_CLASS, 0)
    if ri == _K8S:
        return (_K8S_PLACE, ri, 0, 0, _NO_CLASS, None, _NO_CLASS, 0)
    rule = _ALL[ri]
    how, bits, run_bits, run_min = _tests(rule.source, rule.flags, literal, rule.back)
    code = _PROVIDER_PLACE if ri < _N_PROVIDERS else _GENERIC_PLACE
    return (code, ri, how, max(rule.back, 0), bits, None, run_bits, run_min)


def _prefix_entry(k: int) -> _Entry:
    ri = _DIRECT[k]
    rule = _ALL[ri]
    prefix = _DIRECT_PREFIX[k]
    bits = prefix_test(rule.source, rule.flags, prefix)
    how = NOT_BEFORE if bits is not None else 0
    run = body_run(rule.source, rule.flags, prefix.lower(), 0)
    run_bits, run_min = run if run is not None else (_NO_CLASS, 0)
    return (_PREFIX_PLACE, ri, how, 0, bits or _NO_CLASS, prefix, run_bits, run_min)


_ENTRIES: list[tuple[_Entry, ...]] = [
    tuple(_rule_entry(ri, lit) for ri in _RULES_OF[li]) for li, lit in enumerate(_LITERALS)
]
"""The entries of each locator, as the automatons number them."""
_PREFIX_ENTRIES: list[tuple[_Entry, ...]] = [(_prefix_entry(k),) for k in _DIRECT_SCANNED]
"""The entry of each scanned prefix, as the prefixes' automatons number them."""


def _in_class(bits: bytes, c: str) -> bool:
    o = ord(c)
    return o < 128 and (bits[o >> 3] >> (o & 7)) & 1 == 1


def _run(text: str, end: int, bits: bytes, least: int) -> bool:
    """Whether least characters of the class follow end."""
    stop = end + least
    if stop > len(text):
        return False
    return all(_in_class(bits, text[i]) for i in range(end, stop))


def _place(
    text: str,
    at: int,
    end: int,
    entries: tuple[_Entry, ...],
    out: list[Any],
    *,
    apart: list[tuple[int, int]] | None,
) -> None:
    for code, ri, how, back, bits, raw, run_bits, run_min in entries:
        if raw is not None and not text.startswith(raw, at):
            continue
        if code == _ASSIGN_PLACE:
            if _MAY_JUDGE.match(text, at) is not None:
                out[3].append(at)
            continue
        if code == _K8S_PLACE:
            out[4].append(at)
            continue
        ok = True
        if how:
            p = at - back - 1
            inside = p >= 0 and _in_class(bits, text[p])
            ok = not inside if how == NOT_BEFORE else inside
        if ok and run_min:
            ok = _run(text, end, run_bits, run_min)
        if code == _PROVIDER_PLACE:
            if ok:
                out[0].append((at, ri))
            else:
                out[1] += 1
                if apart is not None:
                    apart.append((at, ri))
        elif ok:
            out[2 if code == _GENERIC_PLACE else 5].append((at, ri))


def _apart(text: str) -> list[tuple[int, int]]:
    """The providers' places that failed their tests (the Python path's scan, for the rare text
    where they are tried: a credential taken, and such a place in the text)."""
    out: list[tuple[int, int]] = []
    _places_python(text, out)
    return out


def _places_python(text: str, apart: list[tuple[int, int]] | None = None) -> _Places | None:
    """The places of text (_Places) by the automatons and Python; None when there is none.
    apart: given, the providers' places that failed their tests are put in it."""
    if text.isascii():
        raw = text.encode("ascii")
        hits = _BYTES_AUTOMATON.find_matches_as_indexes(raw.lower(), overlapping=True)
        prefixes = (
            _DIRECT_BYTES_AUTOMATON.find_matches_as_indexes(raw)
            if _DIRECT_BYTES_AUTOMATON is not None
            else []
        )
    else:
        hits = _locate(_lowered(text))
        prefixes = (
            _DIRECT_AUTOMATON.find_matches_as_indexes(_scannable(text))
            if _DIRECT_AUTOMATON is not None
            else []
        )
    out: list[Any] = [[], 0, [], [], [], []]
    for li, at, end in hits:
        _place(text, at, end, _ENTRIES[li], out, apart=apart)
    for li, at, end in prefixes:
        _place(text, at, end, _PREFIX_ENTRIES[li], out, apart=apart)
    if not any(out):
        return None
    out[5].sort()
    return (out[0], out[1], out[2], out[3], out[4], out[5])


def _native_scan() -> Callable[[str], _Places | None] | None:
    """The compiled scan, built; None where it is not installed or the Python path is asked for
    (NODWYN_RETRIEVAL_PURE_PYTHON)."""
    if os.environ.get(_PURE_PYTHON, "") not in ("", "0"):
        return None
    return _build_native()


def _build_native() -> Callable[[str], _Places | None] | None:
    """The compiled scan built for these literals and entries; None where it is not installed."""
    if _redact_native is None:
        return None
    merged: dict[str, list[_Entry]] = {}
    for lit, entries in zip(_LITERALS, _ENTRIES, strict=True):
        merged.setdefault(lit, []).extend(entries)
    for k, entries in zip(_DIRECT_SCANNED, _PREFIX_ENTRIES, strict=True):
        merged.setdefault(_DIRECT_PREFIX[k].lower(), []).extend(entries)
    _redact_native.build(list(merged), list(merged.values()))
    scan: Callable[[str], _Places | None] = _redact_native.scan
    return scan


_NATIVE_SCAN = _native_scan()
NATIVE: bool = _NATIVE_SCAN is not None
"""Whether the compiled scan is used."""
_places: Callable[[str], _Places | None] = _NATIVE_SCAN or _places_python


def _locate(low: str) -> list[tuple[int, int, int]]:
    """(literal, start, end) of every locator in the lowered text, overlapping ones too."""
    if low.isascii():  # most source: bytes are characters, and the byte automaton skips decoding
        return _BYTES_AUTOMATON.find_matches_as_indexes(low.encode("ascii"), overlapping=True)
    return _AUTOMATON.find_matches_as_indexes(_scannable(low), overlapping=True)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _scannable(text: str) -> str:
    """text as the str automatons can read it: each lone surrogate (a name's byte that is not
    UTF-8, kept by surrogateescape or a JSON escape) as U+FFFD, one character for one, so every
    offset is the text's; no locator holds either. ahocorasick_rs takes only text UTF-8 can
    carry, and refused such a text whole (UnicodeEncodeError), where the compiled scan reads it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _lowered(text: str) -> str:
    """text.lower() with the same offsets: "İ" is the one character whose lowercase is two."""
    low = text.lower()
    if len(low) != len(text):
        low = text.replace("\u0130", "I").lower()
    return low


def _rule_span(text: str, rule: Rule, at: int) -> tuple[int, int, int] | None:
    """(replaced start, replaced end, match end) when rule matches at its locator's offset at."""
    if rule.back < 0:  # the digits before the locator: a Telegram bot token
        start = at
        while start > 0 and at - start < 16 and text[start - 1].isdigit():
            start -= 1
    else:
        start = at - rule.back
    if start < 0:
        return None
    m = rule.pattern.match(text, start)
    if m is None:
        return None
    groups = rule.pattern.groupindex
    if "b" in groups and m.group("b") is not None and not rule.check(m.group("b")):
        return None
    if "b" not in groups and not rule.check(m.group()):
        return None
    if "v" in groups:
        return m.start("v"), m.end("v"), m.end()
    return m.start(), m.end(), m.end()


def _in_marker(text: str, pos: int) -> bool:
    """True when pos is inside a marker: what redaction wrote is never taken again."""
    i = text.rfind(_MARKER_PREFIX, max(0, pos - 64), pos)
    return i >= 0 and "]" not in text[i:pos]


def _providers(text: str, provider: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """The provider shapes' credentials at these places, left to right (a tie goes to the shape
    listed first), none inside another."""
    taken: list[tuple[int, int, str]] = []
    pos = 0
    provider.sort()
    for at, ri in provider:
        rule = _ALL[ri]
        start = at - max(rule.back, 0)
        if start < pos:
            continue  # inside a credential already taken
        if taken and start == taken[-1][1] and start > 0:
            # Glued to a credential just taken: its left edge is judged as it will be once that
            # one is a marker (after "]"), so redacting the result again finds nothing new.
            span = _rule_span(text[: start - 1] + "]" + text[start:], rule, at)
        else:
            span = _rule_span(text, rule, at)
        if span is not None and not _in_marker(text, span[0]):
            taken.append((span[0], span[1], rule.kind))
            pos = span[2]
    return taken


def _spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each credential's replaced part, in text order."""
    places = _places(text)
    rest = _direct_rest(text) if _DIRECT_REST else []
    if places is None:
        if not rest:
            return []  # most texts: no place any shape can match at
        places = ([], 0, [], [], [], [])
    provider, apart, generic, assign_at, secrets_at, prefixed = places
    if not (provider or generic or assign_at or secrets_at or prefixed or rest):
        return []  # only places failing their tests, which nothing taken makes matter
    for at in assign_at:
        # A place with nothing after its name to judge is not kept (most of them).
        if judgeable(text, at):
            generic.append((at, _ASSIGN))
    provider.extend(_prefixed(text, prefixed))
    provider.extend(rest)
    taken = _providers(text, provider) if provider else []
    if taken and apart:
        # A place failing its tests can match only glued to a credential taken: all, in order.
        taken = _providers(text, provider + _apart(text))
    if secrets_at:
        taken = with_secret_data(text, secrets_at, taken)
    if not generic:
        return taken
    starts = [s for s, _, _ in taken]
    more: list[tuple[int, int, str]] = []
    pos = 0
    name_end = -1
    generic.sort()
    for at, ri in generic:
        if at < pos:
            continue
        found: tuple[int, int, str] | None = None
        if ri == _ASSIGN:
            if at < name_end:
                continue  # another secret word of a name already decided
            k = bisect.bisect_right(starts, at)
            floor = taken[k - 1][1] if k > 0 and taken[k - 1][1] <= at else 0
            got = _assignment(text, at, floor)
            if got is not None:
                found = (got[0], got[1], got[2])
                name_end = got[3]
            else:
                name_end = _NAME_REST.match(text, at).end()  # type: ignore[union-attr]
        else:
            span = _rule_span(text, _ALL[ri], at)
            if span is not None:
                found = (span[0], span[1], _ALL[ri].kind)
        if found is None or found[0] >= found[1] or _in_marker(text, found[0]):
            continue
        # A part a provider shape took stays that shape's: skip what overlaps it.
        k = bisect.bisect_left(starts, found[1])
        if k > 0 and taken[k - 1][1] > found[0]:
            continue
        more.append(found)
        pos = found[1]
    if not more:
        return taken
    return sorted(taken + more)


def scan(text: str) -> tuple[Finding, ...]:
    """Every credential :func:`redact` would replace, in text order, with its line."""
    found: list[Finding] = []
    line = 1
    last = 0
    for start, end, kind in _spans(text):
        line += text.count("\n", last, start)
        last = start
        found.append(Finding(kind, start, end, line))
    return tuple(found)


def redact(text: str) -> Redaction:
    """Replace every known credential shape in text by ``[REDACTED:kind]`` (§3).

    One scan for the shapes' literal markers, one pass over the places they occur. Lines are kept
    (a multi-line private key leaves its newlines behind the marker), and redacting the result
    again is a no-op.
    """
    spans = _spans(text)
    if not spans:
        return Redaction(text, 0, ())
    parts: list[str] = []
    kinds: list[str] = []
    last = 0
    for start, end, kind in spans:
        if start < last:
            continue
        parts.append(text[last:start])
        parts.append(marker(kind))
        newlines = text.count("\n", start, end)
        if newlines:
            parts.append("\n" * newlines)
        kinds.append(kind)
        last = end
    parts.append(text[last:])
    return Redaction("".join(parts), len(kinds), tuple(kinds))
