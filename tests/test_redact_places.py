"""Redaction's scan for places (guard.redact._places): the compiled scan (guard/_redact_native.c)
and the Python path find the same places, the tests of a place never drop a real match, and
redaction gives the same output whichever path finds them.

The texts: bench/secrets_corpus.py's samples (every shape, real matches), the same cut and glued
and sprinkled with the literals' characters, with the two characters whose lowercase is an ASCII
letter ("\\u0130", "\\u212a") and other non-ASCII ones, and this project's own sources."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from nodwyn_retrieval.guard import redact
from nodwyn_retrieval.guard._prefix import BEFORE, NOT_BEFORE, before_test, body_run

from bench.secrets_corpus import samples

R = sys.modules[redact.__module__]
ROOT = Path(__file__).resolve().parent.parent


def _norm(got: object) -> object:
    if got is None:
        return None
    assert isinstance(got, tuple)
    return tuple(x if isinstance(x, int) else sorted(x) for x in got)


def corpus() -> list[str]:
    texts = [s.text for s in samples(per_shape=3)]
    rng = random.Random(11)
    literals = [*R._LITERALS, *R._DIRECT_PREFIX]
    alphabet = "ABCKIaikz09-_./:=@ \t\n\"'`]()>,?\\"
    for t in list(texts):
        i = rng.randrange(len(t) + 1)
        texts.append(t[:i] + "".join(rng.choice(alphabet) for _ in range(30)) + t[i:])
        texts.append(t[i:] + rng.choice(texts)[: rng.randrange(200)])
        texts.append(t.replace("k", "\u212a").replace("K", "\u212a"))
        texts.append(t.replace("i", "\u0130", 3) + "\u00e9\u4e2d")
        texts.append(t.upper())
    for _ in range(400):  # literals glued to each other and to the characters their tests read
        parts = []
        for _ in range(rng.randrange(1, 8)):
            lit = rng.choice(literals)
            lit = "".join(c.upper() if rng.random() < 0.3 else c for c in lit)
            parts.append(rng.choice(["", *alphabet]) + lit)
            parts.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 50))))
        texts.append("".join(parts))
    for path in sorted((ROOT / "guard").glob("*.py")) + sorted(ROOT.glob("tests/test_redact*.py")):
        texts.append(path.read_text(encoding="utf-8"))
    texts += ["", "a", "sk", "SK", "pass", "pass\n", "token\n  value: x", "x://", "\u212a"]
    return texts


native = pytest.importorskip("nodwyn_retrieval.guard._redact_native")
R._build_native()  # where the Python path is asked for, the module is not built at the import


def test_the_compiled_scan_is_used_where_it_is_built() -> None:
    if os.environ.get(R._PURE_PYTHON, "") not in ("", "0"):
        assert not R.NATIVE
        assert R._places is R._places_python
        return
    assert R.NATIVE
    assert R._places is R._NATIVE_SCAN


def test_the_compiled_scan_finds_the_places_the_python_path_finds() -> None:
    texts = corpus()
    found = 0
    for t in texts:
        a, b = native.scan(t), R._places_python(t)
        assert _norm(a) == _norm(b), t[:200]
        found += a is not None
    assert found > len(texts) // 2  # most texts hold places: the comparison is not of Nones


def test_the_characters_whose_lowercase_is_ascii_are_read_as_the_lowered_text_reads_them() -> None:
    # "\u212a" (the Kelvin sign) lowers to "k" and "\u0130" to "i" plus a dot: a locator holding
    # them is found at the offset the lowered text (redact._lowered) has it at, and the rule
    # ignoring case matches there.
    body = "h7Gq2pLx9Zt4" * 7 + "ab=="
    for text in (f"x = 1\nAccount\u212aey={body}\n", "\u00e9 \u0130DENTIFIED BY 'h7Gq2pLx9Zt4'"):
        want = sorted(at for _, at, _ in R._locate(R._lowered(text)))
        got = native.scan(text)
        assert got is not None
        assert [at for at, _ in got[0]] == want
        assert _norm(got) == _norm(R._places_python(text))
        assert redact(text).count == 1
        assert redact(text) == _python_redact(text)


def _python_redact(text: str) -> object:
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(R, "_places", R._places_python)
        return redact(text)
    finally:
        mp.undo()


def test_redaction_is_the_same_whichever_path_finds_the_places(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = corpus()
    compiled = [redact(t) for t in texts]
    assert sum(r.count for r in compiled) > 500
    monkeypatch.setattr(R, "_places", R._places_python)
    assert [redact(t) for t in texts] == compiled


def test_a_place_failing_its_tests_is_tried_when_a_credential_is_glued_before_it() -> None:
    # The pypi token's left edge refuses a "-" before it; glued to a key block's dashes it is
    # judged as after the block's marker, and taken, on both paths.
    token = "pypi-" + "AgEIcHlwaS5vcmc" + "x7Kq2Lm9Pz4Rt8Vw3Ny6Bc1Df5Gh0Jk2Ls4Qa7We9Ty3Ui8Op2"
    text = "-----BEGIN" + " PRIVATE KEY-----" + token + "\n"
    got = native.scan(text)
    assert got is not None
    assert got[1] >= 1  # the token's place failed its test
    out = redact(text)
    assert out.text == "[REDACTED:private-key][REDACTED:pypi-token]\n"
    assert _python_redact(text) == out
    assert redact(out.text).text == out.text
    # Not glued, a dash before it is a word's, and the token is left; after a blank it is taken.
    assert redact("x-" + token).count == 0
    assert redact("x " + token).text == "x [REDACTED:pypi-token]"


def test_no_real_match_fails_its_place_s_tests() -> None:
    # Every match of every rule in the samples (and the texts around them): the place its
    # locator or prefix is at passes the tests the scan applies there.
    checked = 0
    for t in corpus():
        for li, at, end in R._locate(R._lowered(t)):
            for ri, entry in zip(R._RULES_OF[li], R._ENTRIES[li], strict=True):
                if ri < 0:
                    continue
                rule = R._ALL[ri]
                if R._rule_span(t, rule, at) is None:
                    continue
                out: list[object] = [[], 0, [], [], [], []]
                R._place(t, at, end, (entry,), out, apart=None)
                assert out[0] or out[2], (rule.kind, t[max(0, at - 20) : at + 40])
                checked += 1
    assert checked > 300


def test_the_tests_are_read_from_the_rules_expressions() -> None:
    no_word_before = before_test(r"(?<![A-Za-z0-9_])AIza(?P<b>[0-9A-Za-z_-]{35})", 0, 0)
    assert no_word_before is not None
    assert no_word_before[0] == NOT_BEFORE
    bits = no_word_before[1]
    assert all(R._in_class(bits, c) for c in "aZ09_")
    assert not R._in_class(bits, "-")
    after_letter = before_test(r"(?<=[A-Za-z0-9])://", 0, 0)
    assert after_letter is not None
    assert after_letter[0] == BEFORE
    run = body_run(r"(?<![A-Za-z0-9_])AIza(?P<b>[0-9A-Za-z_-]{35})", 0, "aiza", 0)
    assert run is not None
    assert run[1] == 35
    blank = body_run(r"(?i:basic)[ \t]+(?P<v>x)", 0, "basic", 0)
    assert blank is not None
    assert blank[1] == 1
    assert R._in_class(blank[0], "\t")
    # Not known to hold: flags, a negated or escaped class, a repeat that may be empty, a
    # literal other than the locator, a place found backwards.
    assert before_test(r"(?<![A-Za-z0-9_])x", 2, 0) is None  # re.IGNORECASE
    assert before_test(r"(?<![^a])x", 0, 0) is None
    assert before_test(r"(?<![\w])x", 0, 0) is None
    assert before_test(r"(?<![a-z])x", 0, -1) is None
    assert body_run(r"ab[0-9]*", 0, "ab", 0) is None
    assert body_run(r"ab[\d]{3}", 0, "ab", 0) is None
    assert body_run(r"ab[0-9]{3}", 0, "abc", 0) is None
    assert body_run(r"ab[0-9]{3}", 0, "ab", 4) is None


def test_a_literal_of_two_characters_at_the_text_s_end_is_found() -> None:
    for text in ("SK", "xSK", "a\nSK"):
        assert _norm(native.scan(text)) == _norm(R._places_python(text))


def test_build_refuses_what_the_scan_cannot_hold() -> None:
    keep = (list(R._LITERALS), None)
    with pytest.raises(ValueError, match="lowercase"):
        native.build(["ABC"], [[]])
    with pytest.raises(ValueError, match="two characters"):
        native.build(["a"], [[]])
    with pytest.raises(ValueError, match="distinct"):
        native.build(["ab", "ab"], [[], []])
    with pytest.raises(TypeError):
        native.scan(b"bytes")
    # The scan the module uses is built again, as at its import.
    assert keep[0] == R._LITERALS
    R._build_native()
    assert _norm(native.scan("api_key = 'h7Gq2pLx9Zt4'")) == _norm(
        R._places_python("api_key = 'h7Gq2pLx9Zt4'")
    )


SURROGATE_TEXTS = (
    "x \udcff y password=Tr0ub4dor3xq",
    "\udcffapi_key = 'h7Gq2pLx9Zt4'\n",
    "caf\u00e9 \ud800 AKIA" + "Q3EGRZK7JX4VBN2M" + " \udfff\n",
    "naïve \udcc3\udca9 token: ghp_" + "h7Gq2pLx9Zt4Wm8Rk3Vn6Bc1Df5Jy0Ts9Qa2" + "\n",
)


@pytest.mark.parametrize("text", SURROGATE_TEXTS)
def test_a_text_holding_a_lone_surrogate_is_redacted_the_same_by_both_paths(text: str) -> None:
    # A name's byte that is not UTF-8 (surrogateescape) or a JSON escape in a log gives a lone
    # surrogate: the compiled scan reads it, and the Python path's automatons (which take only
    # text UTF-8 can carry) read it as U+FFFD, at the same offsets.
    got = redact(text)
    assert got.count >= 1
    assert got == _python_redact(text)
    assert "\udcff" not in got.text or "\udcff" in text


def test_the_pure_python_path_redacts_a_text_holding_a_lone_surrogate(tmp_path: Path) -> None:
    # Where the compiled modules are not built (or are turned off), the whole Python path takes
    # such a text too, and gives what the compiled one gives.
    import json
    import subprocess

    script = (
        "import json, sys\n"
        "from nodwyn_retrieval.guard import redact\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps([[r.text, r.count] for r in map(redact, texts)]))\n"
    )
    env = {**os.environ, R._PURE_PYTHON: "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(list(SURROGATE_TEXTS)), env=env,
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    want = [[r.text, r.count] for r in map(redact, SURROGATE_TEXTS)]
    assert json.loads(out.stdout) == want
