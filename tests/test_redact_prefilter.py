"""The prefilter of the redaction rules without a locator (guard.redact._DIRECT_PREFIX): a text
without a rule's literal prefix is not searched with its expression, and redaction gives the same
output as the full pass, which searches every text with every such expression."""

from __future__ import annotations

import random
import re
import sys

import pytest
from nodwyn_retrieval.guard import redact
from nodwyn_retrieval.guard._prefix import literal_prefix, overlap_free

from bench.secrets_corpus import samples

R = sys.modules[redact.__module__]


def corpus() -> list[str]:
    texts = [s.text for s in samples(per_shape=3)]
    rng = random.Random(7)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.%= \n"
    for t in list(texts):
        # Each text cut, glued to another and sprinkled with the prefixes' characters.
        i = rng.randrange(len(t) + 1)
        texts.append(t[:i] + "".join(rng.choice(alphabet) for _ in range(40)) + t[i:])
        texts.append(t[i:] + rng.choice(texts)[: rng.randrange(200)])
    for prefix in R._DIRECT_PREFIX:
        for _ in range(20):  # the prefix followed by near misses of a body
            body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(10, 130)))
            texts.append(f"x {prefix}{body} y")
    return texts


def test_every_rule_without_a_locator_has_a_prefix_its_matches_start_with() -> None:
    assert R._DIRECT, "no rule without a locator: the prefilter is not exercised"
    texts = corpus()
    for ri, prefix in zip(R._DIRECT, R._DIRECT_PREFIX, strict=True):
        rule = R._ALL[ri]
        assert prefix, f"{rule.kind}: no literal prefix found"
        for t in texts:
            for m in rule.pattern.finditer(t):
                assert t.startswith(prefix, m.start()), rule.kind


def test_redaction_with_the_prefilter_equals_the_full_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = corpus()
    fast = [redact(t) for t in texts]
    found = {k for r in fast for k in r.kinds}
    kinds = {R._ALL[ri].kind for ri in R._DIRECT}
    assert kinds <= found, f"shapes of the corpus not redacted: {sorted(kinds - found)}"
    # The full pass: every such expression's finditer over every text, no scan, no prefix.
    monkeypatch.setattr(R, "_DIRECT_PREFIX", ("",) * len(R._DIRECT))
    monkeypatch.setattr(R, "_DIRECT_AUTOMATON", None)
    monkeypatch.setattr(R, "_DIRECT_SCANNED", ())
    monkeypatch.setattr(R, "_DIRECT_REST", tuple(range(len(R._DIRECT))))
    assert [redact(t) for t in texts] == fast


def test_a_pattern_ignoring_case_or_starting_otherwise_has_no_prefix() -> None:
    assert literal_prefix(re.compile(r"(?i)SK[0-9a-f]{32}")) == ""
    assert literal_prefix(re.compile(r"SK|AK[0-9]+")) == ""
    assert literal_prefix(re.compile(r"[A-Z]SK")) == ""
    assert literal_prefix(re.compile(r"SKx?[0-9]")) == "SK"
    assert literal_prefix(re.compile(r"SG\.(?P<b>x)")) == "SG."
    # an anchor or a word boundary first: no literal before it (their codes are ints too)
    assert literal_prefix(re.compile(r"\bSK[0-9]")) == ""
    assert literal_prefix(re.compile(r"^ghp_x")) == ""


def _finditer_all(text: str) -> list[tuple[int, int]]:
    return sorted((m.start(), ri) for ri in R._DIRECT for m in R._ALL[ri].pattern.finditer(text))


def test_the_prefixes_scan_finds_every_match_each_rules_finditer_finds() -> None:
    # Glued repeats (a match right after a match), a prefix inside a body, near misses, text that
    # is not ASCII (the scan of characters rather than bytes): the same starts, rule by rule.
    rng = random.Random(11)
    hexes = "0123456789abcdefABCDEF"
    texts = corpus()
    for _ in range(3000):
        parts = []
        for _ in range(rng.randrange(1, 7)):
            prefix = rng.choice([*R._DIRECT_PREFIX, "xSK", "-pat", "\u00e9", "."])
            if rng.random() < 0.5:  # a body the shapes take: hex, then a dot and more hex
                n = rng.choice([14, 22, 26, 32, 80])
                body = "".join(rng.choice(hexes) for _ in range(n))
                if rng.random() < 0.4:
                    body += "." + "".join(rng.choice(hexes[:16]) for _ in range(64))
            else:
                body = "".join(rng.choice(hexes + "XYZ.-") for _ in range(rng.randrange(10, 130)))
            parts.append(prefix + body + rng.choice(["", " ", "-", "SK", "\n", "\u00e9", "."]))
        texts.append("".join(parts))
    found: set[int] = set()
    for t in texts:
        want = _finditer_all(t)
        assert sorted(R._direct(t)) == want, t
        found.update(ri for _, ri in want)
    assert len(found) >= 4  # the texts do hold matches, of several rules
    assert len(R._DIRECT_SCANNED) >= 4, "the scan holds too few of the prefixes to matter"


def test_a_literal_that_can_overlap_itself_or_another_is_not_scanned() -> None:
    assert overlap_free(["SK", "pat", "key-"]) is True
    assert overlap_free(["AAAA"]) is False  # AAAAA holds it at 0 and 1
    assert overlap_free(["ab", "ba"]) is False  # aba: ab at 0, ba at 1
    assert overlap_free(["abc", "b"]) is False  # one inside another
    assert overlap_free(["abab"]) is False  # ababab: at 0 and 2
    scanned = [R._DIRECT_PREFIX[k] for k in R._DIRECT_SCANNED]
    assert overlap_free(scanned)
    for k in R._DIRECT_REST:  # what the scan leaves keeps its own gate and finditer
        assert not R._DIRECT_PREFIX[k] or not overlap_free([*scanned, R._DIRECT_PREFIX[k]])


def test_rules_without_a_prefix_are_all_left_to_their_own_finditer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(R, "_DIRECT_PREFIX", ("",) * len(R._DIRECT))
    automaton, byte_automaton, scanned, rest = R._direct_scan()
    assert (automaton, byte_automaton, scanned) == (None, None, ())
    assert rest == tuple(range(len(R._DIRECT)))


def test_a_provider_token_as_a_url_s_password_is_redacted_as_the_token() -> None:
    # The provider's shape is judged first, and the URL's password rule does not take what it
    # took: the marker names the token's kind, once.
    token = next(s.secret for s in samples(per_shape=2) if s.shape == "github-pat")
    got = redact(f"git clone https://bot:{token}@github.com/o/r.git\n")
    assert got.text == "git clone https://bot:[REDACTED:github-token]@github.com/o/r.git\n"
    assert got.kinds == ("github-token",)
