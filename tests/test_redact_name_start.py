"""Where the name around a credential's locator begins (guard._assignment.assignment): the run of
name characters before the locator, at most 80 of them, read back from the locator."""

from __future__ import annotations

import pytest
from nodwyn_retrieval.guard.redact import redact

VALUE = '"Zq81xHunter2kT"'


def named(before: int) -> str:
    """A csrf token's name with ``before`` characters before its locator ``token``."""
    middle = "a" * (before - len("csrf__"))
    return f"csrf_{middle}_token = {VALUE}\n"


@pytest.mark.parametrize("before", [12, 79, 80])
def test_a_name_read_whole_says_what_it_is(before: int) -> None:
    # The whole name is read: it names a csrf token, which is not a credential.
    assert redact(named(before)).count == 0


def test_a_name_past_the_bound_is_read_from_the_bound() -> None:
    # 81 characters before the locator: the name read begins at "srf_", no longer csrf's.
    got = redact(named(81))
    assert got.count == 1
    assert "Zq81xHunter2kT" not in got.text


@pytest.mark.parametrize("stop", [" ", "\n", ".", "(", '"', "é"])
def test_the_name_begins_after_a_character_no_name_holds(stop: str) -> None:
    text = f"csrf{stop}x_token = {VALUE}\n"
    assert redact(text).count == 1  # the name is x_token: csrf is not part of it
    assert redact(f"csrf_x_token = {VALUE}\n").count == 0


def test_a_name_glued_to_a_taken_credential_begins_after_it() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----"
    got = redact(f"{pem}--password {VALUE[1:-1]}\n")
    assert "Zq81xHunter2kT" not in got.text
