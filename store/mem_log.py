"""A ``.mem``'s view of its log: the events of the log's complete lines, where each lies,
and the check that tells a log that only grew from one rewritten or cut (see store.mem)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from nodwyn_retrieval.store.log import line_events

HEAD_BYTES = 4096
"""The check hashes the covered bytes' first this many bytes..."""
TAIL_BYTES = 64 * 1024
"""...and their last this many: a rewrite or a cut of the log shows in one or the other."""
RACY_NS = 2_000_000_000
"""A log whose change time is within this of the build is hashed at every check (module doc)."""


# -- reading the log ---------------------------------------------------------------------------


class LoggedEvent(NamedTuple):
    """One event of a log and where its line lies. (A named tuple: a build makes one an event,
    at a third less than a frozen dataclass's.)"""

    event: dict[str, Any]
    """The event as the line holds it."""
    offset: int
    """The byte offset of its line in the log."""
    length: int
    """The line's length in bytes, without its newline."""


def parse_lines(data: bytes, base: int, after_seq: int) -> tuple[list[LoggedEvent], int, int]:
    """The events of ``data``, the log's bytes from offset ``base``, as store.log.read_log reads
    them: complete lines only (a torn last line waits to be completed), a line that is not an
    event, or whose seq is not above the one before (or ``after_seq``), skipped and counted.

    Returns the events, the offset just past the last complete line, and the count skipped.
    """
    events: list[LoggedEvent] = []
    skipped = 0
    last = after_seq
    pos = 0
    end = data.rfind(b"\n") + 1
    for nl, event in zip(*line_events(data, end), strict=True):
        if event is None or event["seq"] <= last:
            skipped += 1
        else:
            last = event["seq"]
            events.append(LoggedEvent(event, base + pos, nl - pos))
        pos = nl + 1
    return events, base + end, skipped


def covered_end(events: Sequence[LoggedEvent], start: int) -> tuple[int, int]:
    """``(offset just past the last turn.end's line, how many events up to it)``; ``(start, 0)``
    when none closes a turn: the ``.mem`` covers whole turns only (LOG-FORMAT.md)."""
    for i in range(len(events) - 1, -1, -1):
        le = events[i]
        if le.event.get("kind") == "turn.end":
            return le.offset + le.length + 1, i + 1
    return start, 0


class LogCheck(NamedTuple):
    """What a ``.mem`` keeps to know its log still holds what it was built from. (A named tuple:
    one is made for every ``.mem`` a search opens.)"""

    covered: int
    """The log bytes it covers."""
    head_sha: bytes
    """SHA-256 of the covered bytes' first :data:`HEAD_BYTES`."""
    tail_sha: bytes
    """SHA-256 of the covered bytes' last :data:`TAIL_BYTES`."""
    ino: int
    """The log's inode at the build."""
    size: int
    """Its size at the build."""
    mtime_ns: int
    """Its modification time at the build."""
    ctime_ns: int
    """Its change time at the build."""
    built_ns: int
    """When the build read it."""

    @classmethod
    def of(cls, f: Any, covered: int, st: os.stat_result) -> LogCheck:
        """The check of the open log f, covered up to ``covered``, as ``st`` found it."""
        head, tail = _log_hashes(f, covered)
        return cls(
            covered,
            head,
            tail,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            time.time_ns(),
        )

    def unchanged(self, st: os.stat_result) -> bool:
        """Whether ``stat`` alone shows the log as it was built from: the same inode, size and
        times, the change time older than the build by more than :data:`RACY_NS`."""
        return (
            st.st_ino == self.ino
            and st.st_size == self.size
            and st.st_mtime_ns == self.mtime_ns
            and st.st_ctime_ns == self.ctime_ns
            and self.ctime_ns < self.built_ns - RACY_NS
        )

    def hashes_match(self, f: Any) -> bool:
        """Whether the open log f holds, at the covered bytes' ends, what it was built from."""
        if os.fstat(f.fileno()).st_size < self.covered:
            return False
        return _log_hashes(f, self.covered) == (self.head_sha, self.tail_sha)

    def holds(self, f: Any) -> bool:
        """Whether the open log f still holds, up to :attr:`covered`, what this was made of."""
        return self.unchanged(os.fstat(f.fileno())) or self.hashes_match(f)


def _digest(f: Any, start: int, end: int) -> bytes:
    """SHA-256 of the bytes start:end of the open file f (pread: no shared position)."""
    if end <= start:
        return hashlib.sha256(b"").digest()
    data = os.pread(f.fileno(), end - start, start)
    if len(data) != end - start:
        return b""
    return hashlib.sha256(data).digest()


def _log_hashes(f: Any, covered: int) -> tuple[bytes, bytes]:
    return (
        _digest(f, 0, min(HEAD_BYTES, covered)),
        _digest(f, max(0, covered - TAIL_BYTES), covered),
    )
