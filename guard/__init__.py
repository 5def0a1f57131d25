"""The read guard and redaction (ADR 0050 §3).

Every file the index reads goes through a :class:`Guard` (the repository pin, the denylist, the
person's register-check checkers and the turn's budget), and each read's :class:`Decision` is
recorded as a ``guard.decision`` event. The text read is passed through :func:`redact` before it is
cut into chunks, so no known credential shape reaches the index. See docs/guard.md and
docs/redaction.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodwyn_retrieval._lazy import load

# Imported at once: the name redact is both this function and its module, and a worker that
# reads files needs it anyway.
from .redact import KINDS, Finding, Redaction, marker, redact, scan

if TYPE_CHECKING:
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

# The rest is imported on first use: a worker process that needs redaction and the no-link reads
# does not pay for the guard's decisions and their recorders.
_WHERE = {
    "Budget": "nodwyn_retrieval.guard.budget",
    "ACTOR_NOT_ASKED": "nodwyn_retrieval.guard.decision",
    "ACTOR_PERSON": "nodwyn_retrieval.guard.decision",
    "Checker": "nodwyn_retrieval.guard.decision",
    "CheckResult": "nodwyn_retrieval.guard.decision",
    "Decision": "nodwyn_retrieval.guard.decision",
    "ListRecorder": "nodwyn_retrieval.guard.decision",
    "Recorder": "nodwyn_retrieval.guard.decision",
    "Verdict": "nodwyn_retrieval.guard.decision",
    "DEFAULT_DENY": "nodwyn_retrieval.guard.denylist",
    "Denylist": "nodwyn_retrieval.guard.denylist",
    "DefaultGuard": "nodwyn_retrieval.guard.guard",
    "Guard": "nodwyn_retrieval.guard.guard",
    "default_guard": "nodwyn_retrieval.guard.guard",
    "precheck_all": "nodwyn_retrieval.guard.guard",
}

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


def __getattr__(name: str) -> Any:
    return load(__name__, _WHERE, globals(), name)
