"""The turn's read budget (ADR 0050 §3 and §5).

§5: an index build runs inside a tool call, so the turn's limits check every read it makes (a read
is counted and checked, as the loop's own budget does). A :class:`Budget` is that limit: a number of
reads and a number of bytes, either unbounded. The loop makes one per turn (or calls
:meth:`Budget.reset`); a guard and its ``without_asking`` twin share it.
"""

from __future__ import annotations

import threading

from nodwyn_retrieval.errors import BadInput

__all__ = ["Budget"]


def _limit(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"{name} must be an integer of at least 0 or None, got {value!r}")
    return value


class Budget:
    """How many reads, and how many bytes, this turn may still read.

    Only an allowed read consumes it: one read and its size. Taking is atomic (a lock), so reads
    checked from several threads never overspend it.
    """

    __slots__ = ("_bytes_used", "_lock", "_reads_used", "bytes", "reads")

    # ``bytes`` shadows the built-in inside __init__ only: it is the contract's field name.
    def __init__(self, reads: int | None = None, bytes: int | None = None) -> None:
        self.reads = _limit("reads", reads)
        """At most this many reads in the turn; None for no bound."""
        self.bytes = _limit("bytes", bytes)
        """At most this many bytes read in the turn; None for no bound."""
        self._reads_used = 0
        self._bytes_used = 0
        self._lock = threading.Lock()

    @property
    def reads_used(self) -> int:
        """Reads allowed so far this turn."""
        return self._reads_used

    @property
    def bytes_used(self) -> int:
        """Bytes of the reads allowed so far this turn."""
        return self._bytes_used

    def refusal(self, size: int) -> str | None:
        """Why a read of size bytes would not fit, or None when it would. Consumes nothing."""
        if self.reads is not None and self._reads_used + 1 > self.reads:
            return f"the turn's read budget is spent: {self._reads_used} of {self.reads} reads"
        if self.bytes is not None and self._bytes_used + size > self.bytes:
            return (
                f"the turn's read budget is spent: {self._bytes_used} of {self.bytes} bytes read,"
                f" this read is {size}"
            )
        return None

    def take(self, size: int) -> str | None:
        """Consume one read of size bytes if it fits; otherwise consume nothing and say why."""
        with self._lock:
            why = self.refusal(size)
            if why is None:
                self._reads_used += 1
                self._bytes_used += size
            return why

    def reset(self) -> None:
        """Start a new turn: nothing used."""
        with self._lock:
            self._reads_used = 0
            self._bytes_used = 0

    def __repr__(self) -> str:
        reads = "unbounded" if self.reads is None else str(self.reads)
        size = "unbounded" if self.bytes is None else str(self.bytes)
        return f"Budget(reads={self._reads_used}/{reads}, bytes={self._bytes_used}/{size})"
