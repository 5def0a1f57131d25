"""A decision, once made, is what is recorded: nobody downstream can change it.

A recorder, a log writer or a checker holds the ``Decision`` and ``CheckResult`` objects the guard
made; if they could be altered after the guard decided, a refused read could be turned into an
allowed one after it was logged as refused (docs/guard.md: ``Decision`` is frozen and slotted).
"""

from __future__ import annotations

import dataclasses

import pytest
from nodwyn_retrieval.errors import GuardRefused
from nodwyn_retrieval.guard import CheckResult, Decision, ListRecorder, Verdict


def _refused() -> Decision:
    return Decision("secrets/.env", Verdict.DENY, "denylist", "path .env matches .env")


def test_a_decision_cannot_be_changed_once_made() -> None:
    d = _refused()
    for name, value in (("verdict", Verdict.ALLOW), ("answer", "yes"), ("rule", "pin")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(d, name, value)
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        d.extra = 1  # type: ignore[attr-defined]
    assert not hasattr(d, "__dict__")  # slotted: no attribute can be added beside the fields
    assert not d.allowed
    with pytest.raises(GuardRefused, match=r"read of secrets/\.env refused \(denylist\)"):
        d.raise_if_refused()


def test_a_recorded_decision_stays_as_recorded() -> None:
    rec = ListRecorder()
    d = _refused()
    rec(d)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.decisions[0].verdict = Verdict.ALLOW  # type: ignore[misc]
    assert rec.events()[0]["verdict"] == "deny"
    assert repr(rec) == "ListRecorder(decisions=1)"


def test_a_checkers_answer_cannot_be_changed_after_it_is_given() -> None:
    r = CheckResult.deny("holds customer data")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.verdict = Verdict.ALLOW  # type: ignore[misc]
    assert (r.verdict, r.reason) == (Verdict.DENY, "holds customer data")
    assert CheckResult("confirm", "big").verdict is Verdict.CONFIRM  # a string is converted


def test_a_confirm_is_allowed_only_once_a_person_said_yes() -> None:
    base = Decision("big.csv", Verdict.CONFIRM, "check", "large file", asked=True)
    assert not base.allowed
    with pytest.raises(GuardRefused, match="awaits a confirmation"):
        base.raise_if_refused()
    said_no = dataclasses.replace(base, answer="no")
    assert not said_no.allowed
    with pytest.raises(GuardRefused, match=r"refused \(check\): large file"):
        said_no.raise_if_refused()
    said_yes = dataclasses.replace(base, answer="yes")
    assert said_yes.allowed
    said_yes.raise_if_refused()
    assert said_yes.actor == "person"
    assert dataclasses.replace(base, asked=False).actor == "not asked"
    # A deny stays refused whatever its answer says.
    assert not dataclasses.replace(_refused(), answer="yes").allowed
