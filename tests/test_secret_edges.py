"""What makes a value a secret: a provider token's random body, entropy, and placeholders.

The boundaries of guard/secret_rules.py's and guard/secret_values.py's tests, seen where they
matter: a filler that must not be taken for a GitHub token, a random body that must be, an entropy
at exactly its limit, a placeholder one word too long to be one. The canaries are assembled from
pieces, so this file holds no string a secret scanner would take for a live credential.
"""

from __future__ import annotations

import string

import pytest
from nodwyn_retrieval.guard import Redaction, redact
from nodwyn_retrieval.guard.redact import entropy, high_entropy

GITHUB = "gh" + "p_"  # 36 characters of body follow
HUGGING_FACE = "h" + "f_"  # 34 letters follow


# --- A provider token's body must look machine-made --------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "ab1" * 12,  # three distinct characters are enough
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",  # lowercase and uppercase
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",  # uppercase and digits
        # Each end of each character range counts: a body of one letter and digits.
        "a01" * 12,
        "z01" * 12,
        "A01" * 12,
        "Z01" * 12,
        "0ab" * 12,
        "9ab" * 12,
    ],
)
def test_a_random_body_makes_a_token(body: str) -> None:
    text = f"export GITHUB_TOKEN={GITHUB}{body}\n"
    assert redact(text).kinds == ("github-token",)


@pytest.mark.parametrize(
    "body",
    [
        "a1" * 18,  # two distinct characters: a filler
        "aB" * 18,
        "x" * 36,
        "abcdefghijklmnopqrstuvwxyzabcdefghij",  # one kind of character: a word
        "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ",
        "012345678901234567890123456789012345",
    ],
)
def test_a_filler_body_is_not_a_token(body: str) -> None:
    text = f"{GITHUB}{body}"
    assert redact(text) == Redaction(text, 0, ())


def test_a_letters_only_token_needs_eight_letters_of_both_cases() -> None:
    taken = HUGGING_FACE + "abcdEFGH" * 4 + "ab"
    assert redact(taken).kinds == ("huggingface-token",)
    for body in ("abcdEFG" * 4 + "abcdEF", "abcdefgh" * 4 + "ab", "ABCDEFGH" * 4 + "AB"):
        assert redact(HUGGING_FACE + body).count == 0, body


# --- Entropy, as detect-secrets measures it ----------------------------------------------------


def test_entropy_of_nothing_and_of_one_character_is_zero() -> None:
    assert entropy("") == 0.0
    assert high_entropy("") is False  # a bool, as the public function promises
    assert not high_entropy("7")  # one digit: no division by log2(1)
    assert entropy("abcdefgh") == 3.0


def test_hex_at_exactly_three_bits_is_not_high() -> None:
    assert entropy("abcdef12") == 3.0
    assert not high_entropy("abcdef12")
    assert high_entropy("abcdef123")  # 9 distinct: 3.17


def test_base64_at_exactly_four_and_a_half_bits_is_not_high() -> None:
    # 8 characters twice and 16 once in 32: 8 * 2/32 * 4 + 16 * 1/32 * 5 = 4.5 exactly.
    at_limit = "AABBCCDDEEFFGGHH" + "ijklmnopqrstuvwx"
    assert entropy(at_limit) == 4.5
    assert not high_entropy(at_limit)
    assert high_entropy(at_limit + "yz")  # 4.56


def test_long_random_digits_are_high_even_after_their_penalty() -> None:
    # 3.32 bits, less 1.2 / log2(100) = 0.18: still over 3.0 (a PIN is not; a card number is).
    assert high_entropy("0123456789" * 10)
    assert not high_entropy("0123456789")  # less 1.2 / log2(10) = 0.36: 2.96


def test_every_character_of_an_alphabet_belongs_to_it() -> None:
    # All 22 hex characters are hex (4.46 bits: over hex's limit, under base64's).
    assert high_entropy("0123456789abcdefABCDEF")
    # All 67 characters of detect-secrets' base64 set are base64 (6.07 bits).
    assert high_entropy(string.ascii_letters + string.digits + "+/\\-_=")
    assert high_entropy(string.ascii_letters + string.digits + "!") is False  # outside both


def test_a_high_entropy_value_given_bare_after_a_space_is_taken() -> None:
    value = "kQ7vXpL2mN9rT4wY8zB3cF6hJ1dG5sA0"
    assert redact(f"password: {value}").kinds == ("password",)


# --- Placeholders -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "your-secret-key-here",  # four words naming what they stand for
        "YOUR_SECRET_KEY_HERE",
        "myToken",
        "secret_key",
        "home-pass",
        "****",
        "aaaa",  # one character repeated
        "1111",
        "xxxx-xxxx",
        "•••",
        "#d0d0d0",
        "bg:#ffffff",
        "ansired",
        "NONAUTH",
        "CRAM-MD5",
        "1.3.6.1.5.5.7.3.1",
        "3.0-",
        "${DB_PASSWORD}",
        "$(cat pw)",
        "$DB_PASSWORD",
        "{{ password }}",
        "%DB_PASSWORD%",
        "#{password}",
        "{0}",
        "%s",
        "%(password)s",
        "<your password>",
        "[PAD]",
        "$1",
        "@DB_PASSWORD@",
        ":password",
        "changeme",
        "CHANGEME",
        "[REDACTED:password]",
        "a[REDACTED:password]b",
    ],
)
def test_a_placeholder_is_left(value: str) -> None:
    text = f'password = "{value}"'
    assert redact(text) == Redaction(text, 0, ()), value


@pytest.mark.parametrize(
    "value",
    [
        "your-secret-key-here-now",  # five words: not a placeholder's few
        "monkey",  # holds "key", but is not words naming a key
        "supersecret",
        "hunter2x",
        "Passw0rd-Prod",
        "aaaab",  # not one character repeated
        "#d0d0d0zz",  # not a colour
        "NONAUTHx",  # not a constant's name
    ],
)
def test_a_value_that_only_resembles_a_placeholder_is_taken(value: str) -> None:
    assert redact(f'password = "{value}"').kinds == ("password",), value


def test_a_token_must_start_a_word() -> None:
    body = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYzaB3dE5fG7hJ9kL2m"  # 48
    assert redact("s" + "k-" + body).kinds == ("openai-key",)
    for glued in ("ta" + "sk-" + body, "x_" + "sk-" + body, "9" + "sk-" + body):
        assert redact(glued).count == 0, glued


def test_a_provider_prefix_with_a_filler_body_is_left() -> None:
    for filler in ("sk" + "_live_" + "0" * 24, GITHUB + "x" * 36, "xo" + "xb-" + "0" * 40):
        assert redact(filler).count == 0, filler
