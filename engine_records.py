"""The engine's own records (each ``guard.decision`` and ``index.update``): appended to the
session log the engine owns, or kept beside a log it only reads (docs/log-format.md, "Who writes
the log")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodwyn_retrieval.errors import RetrievalError
from nodwyn_retrieval.store.log import LogWriter, tail_of

__all__ = ["Records", "log_sink"]

_logger = logging.getLogger("nodwyn_retrieval.entry")


def log_sink(writer: LogWriter) -> Callable[[dict[str, Any]], None]:
    """Events appended to a session log, in the turn the log is in."""

    def sink(event: dict[str, Any]) -> None:
        body = dict(event)
        kind = body.pop("kind")
        body.pop("seq", None)
        body.pop("ts", None)
        turn = body.pop("turn", None) or writer.turn
        agent = body.pop("agent", "main")
        writer.append(kind, turn=turn, agent=agent, **body)

    return sink



class Records:
    """The engine's own records beside a session log it only reads (docs/log-format.md).

    ``<task-id>.records.ndjson``, in the log's own format and numbering of its own, written by
    this engine alone; created at the first record. Each record carries ``log_seq``, the seq of
    the session log's last event when the call that made it began (0 before any), and that
    event's turn. A record that cannot be written is said once as a warning and the work goes on:
    a record is never worth a failed search."""

    def __init__(self, path: Path, log_path: Path) -> None:
        self.path = path
        self.log_path = log_path
        self._lock = threading.Lock()
        self._writer: LogWriter | None = None
        self._failed = False
        self._seq = 0
        self._turn = 1

    def mark(self) -> None:
        seq, turn = tail_of(self.log_path)
        self._seq, self._turn = seq, max(turn, 1)

    def __call__(self, event: dict[str, Any]) -> None:
        body = dict(event)
        kind = body.pop("kind")
        for k in ("seq", "ts", "log_seq"):
            body.pop(k, None)
        turn = body.pop("turn", None) or self._turn
        agent = body.pop("agent", "main")
        with self._lock:
            if self._failed:
                return
            try:
                if self._writer is None:
                    self._writer = LogWriter(self.path)
                self._writer.append(kind, turn=turn, agent=agent, log_seq=self._seq, **body)
            except RetrievalError as exc:
                self._failed = True
                _logger.warning("the engine's records are not kept: %s", exc)

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
