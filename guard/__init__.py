"""The read guard and redaction (ADR 0050 §3).

Every file the index reads goes through a :class:`Guard` (the repository pin, the denylist, the
person's register-check checkers and the turn's budget), and each read's :class:`Decision` is
recorded as a ``guard.decision`` event. The text read is passed through :func:`redact` before it is
cut into chunks, so no known credential shape reaches the index. See docs/guard.md.
"""

from __future__ import annotations

from .budget import Budget
from .decision import (
    ACTOR_NOT_ASKED,
    ACTOR_PERSON,
    Checker,
    CheckResult,
    Decision,
    ListRecorder,
    Recorder,
    Verdict,
)
from .denylist import DEFAULT_DENY, Denylist
from .guard import DefaultGuard, Guard, default_guard, precheck_all
from .redact import KINDS, Finding, Redaction, marker, redact, scan

__all__ = [
    "ACTOR_NOT_ASKED",
    "ACTOR_PERSON",
    "DEFAULT_DENY",
    "KINDS",
    "Budget",
    "CheckResult",
    "Checker",
    "Decision",
    "DefaultGuard",
    "Denylist",
    "Finding",
    "Guard",
    "ListRecorder",
    "Recorder",
    "Redaction",
    "Verdict",
    "default_guard",
    "marker",
    "precheck_all",
    "redact",
    "scan",
]
