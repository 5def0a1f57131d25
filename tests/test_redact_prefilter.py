"""The prefilter of the redaction rules without a locator (guard.redact._DIRECT_PREFIX): a text
without a rule's literal prefix is not searched with its expression, and redaction gives the same
output as the full pass, which searches every text with every such expression."""

from __future__ import annotations

import random
import re
import sys

import pytest
from nodwyn_retrieval.guard import redact

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
    monkeypatch.setattr(R, "_DIRECT_PREFIX", ("",) * len(R._DIRECT))
    assert [redact(t) for t in texts] == fast


def test_a_pattern_ignoring_case_or_starting_otherwise_has_no_prefix() -> None:
    assert R._literal_prefix(re.compile(r"(?i)SK[0-9a-f]{32}")) == ""
    assert R._literal_prefix(re.compile(r"SK|AK[0-9]+")) == ""
    assert R._literal_prefix(re.compile(r"[A-Z]SK")) == ""
    assert R._literal_prefix(re.compile(r"SKx?[0-9]")) == "SK"
    assert R._literal_prefix(re.compile(r"SG\.(?P<b>x)")) == "SG."
