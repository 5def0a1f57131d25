"""What the guard decides about one read, and how it is recorded (ADR 0050 §3).

§3: every read the index makes goes through the guard and logs its ``guard.decision`` (about 300
bytes). This module holds the value types: the verdict, the decision with its log event body, the
answer a register-check checker gives, and the recorder a decision is handed to. Writing the session
log is not done here: ``store/log.py`` provides the recorder that appends the events.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from nodwyn_retrieval.errors import BadInput, GuardRefused

__all__ = [
    "ACTOR_NOT_ASKED",
    "ACTOR_PERSON",
    "CheckResult",
    "Checker",
    "Decision",
    "ListRecorder",
    "Recorder",
    "Verdict",
]

ACTOR_PERSON = "person"
"""The actor of a decision someone was asked about: the person at the loop."""
ACTOR_NOT_ASKED = "not asked"
"""The actor of every decision nobody was asked about (§3, ``without_asking``)."""


class Verdict(StrEnum):
    """What a rule says about a read."""

    ALLOW = "allow"
    CONFIRM = "confirm"
    """Ask the person first; under ``without_asking`` a refusal nobody is asked for."""
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class Decision:
    """The guard's answer about one read, and the body of the ``guard.decision`` event."""

    path: str
    """The path as the caller gave it."""
    verdict: Verdict
    """The verdict of the rule that decided (a refused confirm stays ``confirm``)."""
    rule: str
    """The rule that decided: ``pin``, ``denylist``, ``check`` or ``budget``. An allowed read says
    ``pin``: inside the repository and refused by nothing."""
    reason: str
    """Why, in words a person reads in the log."""
    asked: bool = False
    """Whether the person is asked: only a confirm in a guard that asks."""
    answer: str | None = None
    """``"no"`` for a confirm refused unasked, ``None`` while an asked confirm awaits its answer,
    ``"yes"`` once a person said yes."""

    @property
    def allowed(self) -> bool:
        """Whether the read may go ahead now."""
        if self.verdict is Verdict.ALLOW:
            return True
        return self.verdict is Verdict.CONFIRM and self.answer == "yes"

    @property
    def actor(self) -> str:
        """Who answered: the person when asked, otherwise ``"not asked"``."""
        return ACTOR_PERSON if self.asked else ACTOR_NOT_ASKED

    def to_event(self) -> dict[str, object]:
        """The ``guard.decision`` event body (LOG-FORMAT: the log writer adds seq, ts, turn, agent).

        About 300 bytes as JSON for a usual path and reason (§3: 701 files is about 210 KB).
        """
        return {
            "kind": "guard.decision",
            "path": self.path,
            "verdict": self.verdict.value,
            "rule": self.rule,
            "reason": self.reason,
            "asked": self.asked,
            "answer": self.answer,
            "actor": self.actor,
        }

    def raise_if_refused(self) -> None:
        """Raise :class:`GuardRefused` unless the read is allowed.

        For a read the caller cannot do without: §3, a live read of a search result that the guard
        refuses stops the search with the refusal as the answer.
        """
        if self.allowed:
            return
        if self.verdict is Verdict.CONFIRM and self.answer is None:
            raise GuardRefused(
                f"read of {self.path} awaits a confirmation ({self.rule}): {self.reason}"
            )
        raise GuardRefused(f"read of {self.path} refused ({self.rule}): {self.reason}")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A register-check checker's answer about one read (§3: the person's checkers)."""

    verdict: Verdict
    """allow, confirm (ask the person) or deny."""
    reason: str = ""
    """Why, for the log; a refusal without one is recorded with the checker's name."""

    def __post_init__(self) -> None:
        # A checker written against plain strings ("deny") is accepted; anything else is a bug in
        # the checker, said exactly. (The annotation says Verdict; callers without a type checker
        # pass what they like, so the value is looked at as an object.)
        verdict: object = self.verdict
        if not isinstance(verdict, Verdict):
            try:
                object.__setattr__(self, "verdict", Verdict(str(verdict)))
            except ValueError:
                raise BadInput(
                    f"verdict must be one of allow, confirm, deny, got {verdict!r}"
                ) from None

    @classmethod
    def allow(cls) -> CheckResult:
        """Nothing against this read."""
        return cls(Verdict.ALLOW)

    @classmethod
    def confirm(cls, reason: str) -> CheckResult:
        """Ask the person before this read."""
        return cls(Verdict.CONFIRM, reason)

    @classmethod
    def deny(cls, reason: str) -> CheckResult:
        """Refuse this read."""
        return cls(Verdict.DENY, reason)


Checker = Callable[[str, int], "CheckResult | Awaitable[CheckResult]"]
"""A register-check checker: ``(path, size)``, the path relative to the root in POSIX form with
links resolved (the file that would be read), answering synchronously or as an awaitable."""


class Recorder(Protocol):
    """Receives each decision :meth:`Guard.check_read` makes, once, in order (§3)."""

    def __call__(self, decision: Decision) -> None: ...


@dataclass(slots=True)
class ListRecorder:
    """A recorder that keeps the decisions in memory: for tests and for a loop that logs itself."""

    decisions: list[Decision] = field(default_factory=list)
    """Every decision recorded, oldest first."""

    def __call__(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def events(self) -> list[dict[str, object]]:
        """The ``guard.decision`` event bodies, oldest first."""
        return [d.to_event() for d in self.decisions]

    def __repr__(self) -> str:
        return f"ListRecorder(decisions={len(self.decisions)})"
