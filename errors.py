"""The one exception hierarchy of nodwyn-retrieval.

Every error the library raises on purpose is a :class:`RetrievalError`. Below it are categories a
caller can catch as a whole (bad input, a guard refusal, the store, a disabled feature, the actor
runtime), each also a subclass of the built-in exception whose meaning it shares, so that code
written against the built-ins keeps working.

Every class takes one message and nothing else, so every error pickles and crosses the process pool
unchanged. The command line maps :class:`BadInput` to exit status 2 and everything else to 1.
"""

from __future__ import annotations

__all__ = [
    "ActorDead",
    "BadInput",
    "DeadlineExceeded",
    "Disabled",
    "EngineClosed",
    "FormatError",
    "GuardRefused",
    "NotFound",
    "RetrievalError",
    "StoreError",
    "WorkerCrashed",
    "WorkerError",
    "WrongLoop",
]


class RetrievalError(Exception):
    """The root of every error this library raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BadInput(RetrievalError, ValueError):
    """The caller's input is wrong: an empty query, an unknown scope, a limit out of range.

    The message says exactly what was wrong and, where it helps, what to do instead.
    """


class NotFound(BadInput, LookupError):
    """The input names something that does not exist: a path, a log, a seq, a task."""


class GuardRefused(RetrievalError, PermissionError):
    """The read guard refused a read that the caller cannot do without (a live read of a result)."""


class Disabled(RetrievalError):
    """A feature that is off (earlier tasks, embeddings); the message says how to turn it on."""


class StoreError(RetrievalError, OSError):
    """The data directory could not be read or written (a full disk, a permission)."""


class FormatError(StoreError):
    """A stored file is truncated, corrupt, foreign or of another version: rebuild it."""


class ActorDead(RetrievalError, RuntimeError):
    """A message was sent to an actor that has stopped, or was still queued when it stopped."""


class EngineClosed(ActorDead):
    """An Engine was called after its close, or after the event loop it was opened in ended."""


class WrongLoop(RetrievalError, RuntimeError):
    """An Engine was called from an event loop other than the one it was opened in, which still
    runs (in another thread, or suspended): the call would never be answered."""


class DeadlineExceeded(RetrievalError, TimeoutError):
    """Work was not started, or not finished, before its deadline."""


class WorkerError(RetrievalError):
    """A function raised in a worker process; the message names the original type and text."""


class WorkerCrashed(WorkerError):
    """A worker process died (killed, out of memory) while it held the work."""
