"""Which reader reads a log file, and where its ``.mem`` lives (docs/log-format.md, "Transcripts").

A log is read line by line into the events of docs/log-format.md. This project's own logs are
already those events (:data:`NODWYN`); the transcripts the coding agents people run write are
mapped into them as each line is read, by an adapter of their own: Claude Code's sessions
(:mod:`store.transcripts.claude`) and Codex CLI's rollouts (:mod:`store.transcripts.codex`). The
transcript is read as it is and never written: a ``.mem``'s offsets point into the transcript
itself, so recall reads the transcript's own line, and the ``.mem`` lives in this project's data
directory, keyed by the transcript's path, never in the agent's directories.

:func:`reader_for` answers both questions for a path: a transcript placed with :func:`place`
(the server places each transcript it reads, with its project's data directory) has that reader
and ``.mem``; a file under Claude Code's ``projects/`` or Codex's ``sessions/`` that was not placed
is read by its agent's adapter, its ``.mem`` in the default data directory; any other file is
this project's log, its ``.mem`` beside it (store.mem).

:func:`add_sessions` lets a project's earlier tasks include the agents' other sessions of the same
project (store.transcripts.sessions finds them by the working directory they record).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nodwyn_retrieval.store.log import event_of
from nodwyn_retrieval.store.mem_log import LoggedEvent, parse_lines
from nodwyn_retrieval.store.transcripts._base import json_object

if TYPE_CHECKING:
    from nodwyn_retrieval.store.mem_format import MemIndex

__all__ = [
    "NODWYN",
    "Reader",
    "add_sessions",
    "claude_dir",
    "codex_dir",
    "mem_file_in",
    "place",
    "plain_dir",
    "reader_for",
    "sessions_of",
    "sniff",
    "unplace",
]


class Reader(Protocol):
    """How one format's lines become events, and where a log of it keeps its ``.mem``."""

    name: str
    """``nodwyn``, ``claude`` or ``codex``."""

    def parse(
        self, data: bytes, base: int, after_seq: int, mem: MemIndex | None
    ) -> tuple[list[LoggedEvent], int, int]:
        """The events of ``data`` (the log's bytes from offset ``base``, just after what ``mem``
        covers), as store.mem_log.parse_lines returns them: events, end offset, lines skipped."""
        ...

    def line_event(
        self,
        line: bytes,
        seq: int,
        mem: MemIndex | None,
        read: Callable[[int, int], bytes] | None = None,
    ) -> dict[str, Any] | None:
        """The event with this seq whose line ``mem`` places here, read again (``read(offset,
        length)`` reads another line of the log); None when the line holds no event."""
        ...

    def mem_file(self, log_path: str) -> str:
        """Where the ``.mem`` of the log at ``log_path`` lives."""
        ...


class _Nodwyn:
    """This project's own log: its lines are events; the ``.mem`` is beside it."""

    name = "nodwyn"

    def parse(
        self, data: bytes, base: int, after_seq: int, mem: MemIndex | None
    ) -> tuple[list[LoggedEvent], int, int]:
        return parse_lines(data, base, after_seq)

    def line_event(
        self,
        line: bytes,
        seq: int,
        mem: MemIndex | None,
        read: Callable[[int, int], bytes] | None = None,
    ) -> dict[str, Any] | None:
        return event_of(line)

    def mem_file(self, log_path: str) -> str:
        if log_path.endswith(".jsonl"):
            return log_path[: -len(".jsonl")] + ".mem"
        return log_path + ".mem"


NODWYN: Reader = _Nodwyn()


def mem_file_in(directory: Path, transcript: str | os.PathLike[str]) -> str:
    """A transcript's ``.mem`` in ``directory``, named by the hash of its real path."""
    real = os.path.realpath(os.fspath(transcript))
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:32]
    return os.path.join(os.fspath(directory), f"{digest}.mem")


class _PlacedReader:
    """A transcript's reader with its ``.mem`` in a directory of this project's."""

    def __init__(self, reader: Reader, mem_dir: Path) -> None:
        self.name = reader.name
        self._reader = reader
        self._mem_dir = Path(mem_dir)

    def parse(
        self, data: bytes, base: int, after_seq: int, mem: MemIndex | None
    ) -> tuple[list[LoggedEvent], int, int]:
        return self._reader.parse(data, base, after_seq, mem)

    def line_event(
        self,
        line: bytes,
        seq: int,
        mem: MemIndex | None,
        read: Callable[[int, int], bytes] | None = None,
    ) -> dict[str, Any] | None:
        return self._reader.line_event(line, seq, mem, read)

    def mem_file(self, log_path: str) -> str:
        # The directory is made here: a .mem that cannot be written is only slower (store.mem).
        with contextlib.suppress(OSError):
            self._mem_dir.mkdir(parents=True, exist_ok=True)
        return mem_file_in(self._mem_dir, log_path)


_lock = threading.Lock()
_placed: dict[str, Reader] = {}
_sessions: dict[str, Callable[[], list[tuple[str, Path]]]] = {}


def _key(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.fspath(path))


def place(path: str | os.PathLike[str], reader: Reader, mem_dir: Path) -> None:
    """Read the transcript at ``path`` with ``reader``, its ``.mem`` in ``mem_dir``."""
    with _lock:
        _placed[_key(path)] = _PlacedReader(reader, mem_dir)


def unplace(path: str | os.PathLike[str]) -> None:
    with _lock:
        _placed.pop(_key(path), None)


def claude_dir() -> Path:
    """Claude Code's configuration directory: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".claude"


def codex_dir() -> Path:
    """Codex CLI's home: ``$CODEX_HOME``, else ``~/.codex``."""
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


def _under(path: str, directory: Path) -> bool:
    d = os.path.join(os.path.abspath(os.fspath(directory)), "")
    return path.startswith(d)


_dirs_memo: dict[tuple[str | None, ...], tuple[str, str]] = {}


def _agent_dirs() -> tuple[str, str]:
    """The prefixes :func:`_under` tests for Claude Code's ``projects/`` and Codex's
    ``sessions/``, remembered for the environment they are made from."""
    env = tuple(os.environ.get(k) for k in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "HOME"))
    got = _dirs_memo.get(env)
    if got is None:
        got = (
            os.path.join(os.path.abspath(os.fspath(claude_dir() / "projects")), ""),
            os.path.join(os.path.abspath(os.fspath(codex_dir() / "sessions")), ""),
        )
        _dirs_memo.clear()
        _dirs_memo[env] = got
    return got


def reader_for(path: str | os.PathLike[str]) -> Reader:
    """The reader of the log at ``path``: placed, an agent's transcript by where it lies, or this
    project's log."""
    key = _key(path)
    got = _placed.get(key)
    if got is not None:
        return got
    if not key.endswith(".jsonl"):
        return NODWYN
    if not key.startswith(_agent_dirs()):
        return NODWYN  # most logs, at every search: without building the agents' paths again
    from nodwyn_retrieval.store.transcripts.claude import CLAUDE  # noqa: PLC0415  no cycle
    from nodwyn_retrieval.store.transcripts.codex import CODEX  # noqa: PLC0415

    for reader, home, sub in ((CLAUDE, claude_dir(), "projects"), (CODEX, codex_dir(), "sessions")):
        if _under(key, home / sub):
            from nodwyn_retrieval.store.paths import data_dir  # noqa: PLC0415

            return _PlacedReader(reader, data_dir() / "transcripts")
    return NODWYN


def plain_dir(directory: str | os.PathLike[str]) -> bool:
    """Whether every log in ``directory`` (not below it) is this project's log, which
    :func:`reader_for` would say of each: none is placed there and the directory is not an
    agent's. A search of many logs of one directory asks once instead of once a log."""
    d = os.path.join(_key(directory), "")
    with _lock:
        if any(k.startswith(d) for k in _placed):
            return False
    return not d.startswith(_agent_dirs())


def add_sessions(project_key: str, lister: Callable[[], list[tuple[str, Path]]] | None) -> None:
    """Let the project's earlier tasks include what ``lister`` finds: ``(task id, transcript)``
    of the agents' other sessions of the project (None takes it away)."""
    with _lock:
        if lister is None:
            _sessions.pop(project_key, None)
        else:
            _sessions[project_key] = lister


def sessions_of(project_key: str) -> list[tuple[str, Path]]:
    """The agents' sessions of the project that :func:`add_sessions` lets in; ``[]`` for none."""
    lister = _sessions.get(project_key)
    return lister() if lister is not None else []


def sniff(path: str | os.PathLike[str], limit: int = 64 * 1024) -> Reader:
    """The reader of a log given by hand, told by its first complete lines: an event of this
    project's (``seq`` and ``kind``), a line of Claude Code's (``type`` user, assistant, ... with
    ``sessionId`` or ``uuid``) or of Codex's (``type`` session_meta, response_item, ...).
    A file none of them says anything about is this project's log."""
    from nodwyn_retrieval.store.transcripts.claude import CLAUDE  # noqa: PLC0415  no cycle
    from nodwyn_retrieval.store.transcripts.codex import CODEX  # noqa: PLC0415

    try:
        with open(path, "rb") as f:
            data = f.read(limit)
    except OSError:
        return NODWYN
    for line in data[: data.rfind(b"\n") + 1].split(b"\n"):
        if event_of(line) is not None:
            return NODWYN
        obj = json_object(line)
        if obj is None or not isinstance(obj.get("type"), str):
            continue
        if obj["type"] in _CODEX_TYPES and ("payload" in obj or obj["type"] in _CODEX_ITEMS):
            return CODEX
        if "sessionId" in obj or "uuid" in obj:
            return CLAUDE
    return NODWYN


_CODEX_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "message",
     "function_call", "function_call_output", "reasoning"}
)  # fmt: skip
_CODEX_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning"})
