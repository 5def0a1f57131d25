"""The session log: one JSON object a line, append-only (docs/log-format.md).

The conversation (§8) and earlier tasks (§9) are ranked from a task's log, and ``recall`` returns
an event "as the log recorded it". The log is the source every index here is derived from
(nothing derived is trusted over it), so the reader is tolerant where a writer can fail: a last
line without its newline (a writer killed mid-line) is left alone until it is completed, and a
line that is not an event is skipped and counted, never a crash.

:class:`LogWriter` is the small writer an agent loop may use, and the engine's own when it owns a
log or keeps its records beside one (docs/log-format.md, "Who writes the log").
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Self

import msgspec
import numpy as np
from nodwyn_retrieval.errors import BadInput, FormatError, NotFound, StoreError
from nodwyn_retrieval.store.atomic import open_without_waiting, store_error, write_atomic

__all__ = [
    "COMMON_FIELDS",
    "LOG_SUFFIX",
    "META_SUFFIX",
    "RECORDS_SUFFIX",
    "LogRead",
    "LogWriter",
    "TaskMeta",
    "event_of",
    "format_ts",
    "line_events",
    "list_tasks",
    "log_path",
    "meta_path",
    "open_log",
    "read_event_at",
    "read_log",
    "records_path",
    "tail_of",
    "task_meta",
    "write_task_meta",
]

LOG_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
RECORDS_SUFFIX = ".records.ndjson"
"""The engine's own records beside a log it does not own: ``<task-id>.records.ndjson``. Not
``.jsonl``, so it is never taken for a task."""
COMMON_FIELDS = ("seq", "ts", "kind", "turn", "agent")
"""The fields every event carries, in the order the writer puts them."""

_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def format_ts(when: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` and milliseconds: ``2026-10-15T09:00:03.120Z``."""
    if when.tzinfo is None:
        raise ValueError("a log time must be timezone-aware")
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _now() -> datetime:
    return datetime.now(UTC)


def open_log(path: Path | str) -> BinaryIO:
    """A log opened for reading without waiting on what is not a file: a FIFO or a device put
    where the log was would block its ``open`` (or its reads) for ever, so it is opened without
    blocking (:func:`store.atomic.open_without_waiting`) and refused as :class:`errors.NotFound`
    ("it is not a regular file"). A directory raises ``IsADirectoryError`` as ``open`` does; a
    missing file ``FileNotFoundError``."""
    fd, mode = open_without_waiting(path)
    try:
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise NotFound(f"no log at {path}: it is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_decode = msgspec.json.Decoder().decode


def _loads(line: bytes) -> Any:
    """``json.loads(line)``, by msgspec's decoder where it can (three times faster: a log's
    first fold is bound by it). msgspec gives the values ``json`` gives, numbers past 64 bits
    included, and refuses what it does not take as ``json`` does (a byte-order mark, a lone
    surrogate, ``NaN``, a number past a float's range, a UTF-16 line): those lines, and bad ones,
    go to ``json`` itself, whose answer stands."""
    try:
        return _decode(line)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(line)


def event_of(line: bytes) -> dict[str, Any] | None:
    """The event a complete line holds, or None when it is not one: not JSON, not an object, or
    without an integer ``seq`` of at least 1 and a non-empty string ``kind``."""
    try:
        obj = _loads(line)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, a 5,000-digit number, deep nesting
        return None
    return _as_event(obj)


_decode_lines = msgspec.json.Decoder().decode_lines


def line_events(data: bytes, end: int) -> tuple[list[int], list[dict[str, Any] | None]]:
    """The offset of each line break of ``data[:end]`` (``end`` just past one, or 0), and
    :func:`event_of` of the line before each, in order.

    Where every line is one object on its own (it begins with ``{`` and ends with ``}``), the
    lines are decoded in one call, half the time of a call a line; msgspec's ``decode_lines``
    reads a stream of values, not lines, so its answer is taken only when it holds exactly one
    value a line. It does: a value cannot run past its line (a string holds no line break, and
    after an object's ``}`` the ``{`` of the next line is bad JSON) and every line starts one,
    so as many values as lines means one on each, the whole line. Otherwise, and when the
    batch is refused (a bad line, a byte-order mark, a number ``json`` alone reads), each line
    is read alone, as ever."""
    # The line breaks, and whether every line begins with "{" and ends with "}" (an empty line
    # begins with its break), for all the lines at once, not a step a line in Python.
    b = np.frombuffer(data, dtype=np.uint8, count=end)
    at = np.flatnonzero(b == 0x0A)
    starts = np.concatenate((np.zeros(1, dtype=at.dtype), at[:-1] + 1)) if at.size else at
    whole = bool(at.size and np.all(b[starts] == 0x7B) and np.all(b[at - 1] == 0x7D))
    breaks: list[int] = at.tolist()
    if whole:
        try:
            values = _decode_lines(memoryview(data)[:end])
        except (msgspec.DecodeError, RecursionError):
            values = None
        if values is not None and len(values) == len(breaks):
            return breaks, [_as_event(v) for v in values]
    events: list[dict[str, Any] | None] = []
    pos = 0
    for nl in breaks:
        events.append(event_of(data[pos:nl]))
        pos = nl + 1
    return breaks, events


def _as_event(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    seq = obj.get("seq")
    kind = obj.get("kind")
    if type(seq) is not int or seq < 1 or not isinstance(kind, str) or not kind:
        return None
    return obj


@dataclass(frozen=True, slots=True)
class LogRead:
    """What :func:`read_log` found."""

    events: list[dict[str, Any]]
    """The events, in file order, with seq strictly increasing."""
    offsets: list[int]
    """The byte offset at which each event's line starts, parallel to ``events``: recall reads one
    event again from there without parsing the log."""
    skipped: int
    """Complete lines that are not events (not JSON objects, no seq or kind, a seq not above the
    one before): skipped, and counted so a status can say so."""
    torn: bool
    """The file ends in a line without its newline: ignored until it is completed."""
    end_offset: int
    """The byte offset just after the last complete line: pass it as ``start_offset`` to read only
    what was appended since."""
    last_seq: int = 0
    """The highest seq read (``after_seq`` when none), to pass as ``after_seq`` next time."""


def read_log(path: Path, start_offset: int = 0, *, after_seq: int = 0) -> LogRead:
    """Read the events of the log at ``path`` from byte ``start_offset`` on.

    ``start_offset`` is 0 or an ``end_offset`` of an earlier read of the same file; an offset past
    the end of the file, or not at the start of a line, means the file was replaced or cut, and is a
    :class:`errors.FormatError` ("read it from the start"). An event whose seq is not above the
    one before it (or above ``after_seq``) is skipped and counted. A missing log is
    :class:`errors.NotFound`.
    """
    path = Path(path)
    if start_offset < 0:
        raise BadInput(f"a log offset is at least 0, got {start_offset}")
    before = b"\n"
    try:
        with open_log(path) as f:
            if start_offset:
                f.seek(start_offset - 1)
                before = f.read(1)
            data = f.read()
    except FileNotFoundError:
        raise NotFound(f"no log at {path}") from None
    except IsADirectoryError:
        raise NotFound(f"no log at {path}: it is a directory") from None
    except OSError as exc:
        raise store_error("reading", path, exc) from exc
    except MemoryError:
        raise StoreError(f"{path} is too large to read: past what this process can hold") from None
    if before != b"\n":
        raise FormatError(
            f"{path} has no line break before offset {start_offset}: "
            "it was replaced or cut; read it from the start"
        )

    events: list[dict[str, Any]] = []
    offsets: list[int] = []
    skipped = 0
    last = after_seq
    pos = 0
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    for nl, event in zip(*line_events(data, end), strict=True):
        if event is None or event["seq"] <= last:
            skipped += 1
        else:
            last = event["seq"]
            events.append(event)
            offsets.append(start_offset + pos)
        pos = nl + 1
    return LogRead(
        events=events,
        offsets=offsets,
        skipped=skipped,
        torn=end < len(data),
        end_offset=start_offset + end,
        last_seq=last,
    )


def read_event_at(path: Path, offset: int) -> dict[str, Any] | None:
    """The event whose line starts at byte ``offset`` (a :attr:`LogRead.offsets` entry), read
    again without reading the rest of the log; None when no complete event line starts there
    (the file was replaced or cut). A missing log is :class:`errors.NotFound`."""
    path = Path(path)
    if offset < 0:
        raise BadInput(f"a log offset is at least 0, got {offset}")
    try:
        with open_log(path) as f:
            if offset:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    return None
            line = f.readline()
    except FileNotFoundError:
        raise NotFound(f"no log at {path}") from None
    except OSError as exc:
        raise store_error("reading", path, exc) from exc
    if not line.endswith(b"\n"):
        return None
    return event_of(line[:-1])


def records_path(log: Path) -> Path:
    """Where an engine that reads ``log`` without owning it writes its own records
    (``guard.decision``, ``index.update``): ``<task-id>.records.ndjson`` beside it."""
    log = Path(log)
    return log.with_name(log.name.removesuffix(LOG_SUFFIX) + RECORDS_SUFFIX)


_TAIL_BYTES = 1 << 16


def tail_of(path: Path) -> tuple[int, int]:
    """``(seq, turn)`` of the last complete event of the log, read from its last 64 KiB only;
    ``(0, 0)`` when it has none there or does not exist (yet). A missing or unknown turn is 0."""
    try:
        with open_log(path) as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - _TAIL_BYTES)
            f.seek(start)
            data = f.read(size - start)
    except (OSError, NotFound):  # none yet, or not a file (a FIFO would block for ever)
        return 0, 0
    pos = data.rfind(b"\n") + 1
    while pos > 0:
        begin = data.rfind(b"\n", 0, pos - 1) + 1
        if begin == 0 and start > 0:
            break  # the first line in the window may be cut
        event = event_of(data[begin : pos - 1])
        if event is not None:
            turn = event.get("turn")
            return event["seq"], turn if type(turn) is int and turn > 0 else 0
        pos = begin
    return 0, 0


# What this writer puts first on every line; the fast path of _scan's seq.
_SEQ_FIRST = re.compile(rb'\{"seq":([0-9]{1,18})[,}]')


def _scan(f: BinaryIO, size: int) -> tuple[int, int, bool]:
    """``(highest seq, turn of the last event, ends with a newline)`` of an open log.

    The highest seq, not the last: a reader skips an event whose seq is not above every one
    before it, so a writer that continued after a lower last seq would write events no reader
    sees. A line that starts as this writer starts its lines is read for its seq without parsing
    the rest; one that is not JSON then counts too, which can only leave a gap, and gaps are
    allowed. The last event's turn is read from the end of the file."""
    if size == 0:
        return 0, 0, True
    f.seek(0)
    data = f.read(size)
    ends_with_newline = data.endswith(b"\n")
    end = data.rfind(b"\n") + 1
    best = 0
    match = _SEQ_FIRST.match
    pos = 0
    while pos < end:
        nl = data.index(b"\n", pos)
        m = match(data, pos, nl)
        if m is not None:
            seq = int(m.group(1))
        else:
            event = event_of(data[pos:nl])
            seq = event["seq"] if event is not None else 0
        best = max(best, seq)
        pos = nl + 1
    turn = 0
    pos = end
    while pos > 0:
        start = data.rfind(b"\n", 0, pos - 1) + 1
        event = event_of(data[start : pos - 1])
        if event is not None:
            got = event.get("turn")
            turn = got if type(got) is int and got > 0 else 0
            break
        pos = start
    return best, turn, ends_with_newline


def _dumps(event: dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON. A string holding a lone surrogate (undecodable text that reached
    an event) cannot be UTF-8: that line is written with ASCII escapes instead, which every JSON
    reader reads back."""
    line = json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(event, separators=(",", ":"), allow_nan=False).encode("ascii")


class LogWriter:
    """Appends events to one task's log, numbering them (docs/log-format.md).

    Opening an existing log continues its numbering: the next seq is one more than the highest.
    A torn last line (a writer killed mid-line) is ended with a newline first, so the next event
    starts a line of its own and the torn one is skipped by readers.

    One writer per log: two processes appending to one log would number events twice. Within a
    process the writer is thread-safe. Every event is flushed to the operating system before
    ``append`` returns, so a reader in another process sees it at once.
    """

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = _now) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file: BinaryIO = open(self.path, "a+b")  # noqa: SIM115  closed by close()
        except OSError as exc:
            raise store_error("opening", self.path, exc) from exc
        try:
            size = self._file.seek(0, os.SEEK_END)
            last_seq, last_turn, ends_with_newline = _scan(self._file, size)
            if not ends_with_newline:
                self._file.write(b"\n")
                self._file.flush()
        except OSError as exc:
            self._file.close()
            raise store_error("reading", self.path, exc) from exc
        except MemoryError:  # its numbering is read from the whole file
            self._file.close()
            raise StoreError(f"{self.path} is too large to read to continue it") from None
        self._next_seq = last_seq + 1
        self._torn = False
        """Whether a failed append left part of its line at the end of the file."""
        self.turn = max(last_turn, 1)
        """The turn of the last event appended or found: :meth:`record_decision`'s default."""

    def __repr__(self) -> str:
        state = "closed" if self._file.closed else f"next seq {self._next_seq}"
        return f"LogWriter({str(self.path)!r}, {state})"

    @property
    def next_seq(self) -> int:
        """The seq the next event will get."""
        return self._next_seq

    @property
    def closed(self) -> bool:
        return self._file.closed

    def append(self, kind: str, turn: int, agent: str = "main", **fields: Any) -> dict[str, Any]:
        """Append one event and return it as written: ``seq``, ``ts``, ``kind``, ``turn``,
        ``agent``, then ``fields``. Raises :class:`errors.BadInput` for an event that is not one
        (an empty kind, a turn below 1, a field that is not JSON) and :class:`errors.StoreError`
        when the write fails."""
        if not isinstance(kind, str) or not kind:
            raise BadInput(f"an event's kind is a non-empty string, got {kind!r}")
        if type(turn) is not int or turn < 1:
            raise BadInput(f"an event's turn is an integer of at least 1, got {turn!r}")
        if not isinstance(agent, str) or not agent:
            raise BadInput(f"an event's agent is a non-empty string, got {agent!r}")
        clash = sorted(set(fields) & {"seq", "ts"})
        if clash:
            raise BadInput(f"the writer assigns {' and '.join(clash)}; do not pass them")
        with self._lock:
            if self._file.closed:
                raise BadInput(f"the log writer of {self.path} is closed")
            event: dict[str, Any] = {
                "seq": self._next_seq,
                "ts": format_ts(self._clock()),
                "kind": kind,
                "turn": turn,
                "agent": agent,
                **fields,
            }
            try:
                line = _dumps(event)
            except (TypeError, ValueError) as exc:
                raise BadInput(f"a {kind} event is not JSON: {exc}") from exc
            # Written straight to the file, not through a buffer: a write that fails (a full
            # disk) keeps nothing back to be written by the next append, and what part of the
            # line did reach the file is ended by the next one's newline, skipped by readers.
            data = memoryview((b"\n" if self._torn else b"") + line + b"\n")
            done = 0
            try:
                while done < len(data):
                    done += os.write(self._file.fileno(), data[done:])
            except OSError as exc:
                if done:
                    self._torn = data[done - 1] != 0x0A
                raise store_error("writing", self.path, exc) from exc
            self._torn = False
            self._next_seq += 1
            self.turn = turn
            return event

    def record_decision(self, decision_event: dict[str, Any]) -> dict[str, Any]:
        """Append a guard's decision (§3: every read the index makes logs its ``guard.decision``).

        ``decision_event`` holds the decision's fields (path, verdict, rule, reason, asked,
        answer...); its ``kind`` defaults to ``guard.decision``, its ``turn`` to the turn of the
        last event, its ``agent`` to ``main``; a ``seq`` or ``ts`` in it is replaced."""
        fields = dict(decision_event)
        kind = fields.pop("kind", "guard.decision")
        turn = fields.pop("turn", None)
        agent = fields.pop("agent", "main")
        fields.pop("seq", None)
        fields.pop("ts", None)
        return self.append(kind, self.turn if turn is None else turn, agent, **fields)

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- tasks: <task-id>.jsonl and <task-id>.meta.json in the project's tasks/ directory ----------


def log_path(tasks_dir: Path, task_id: str) -> Path:
    """The log of ``task_id`` in ``tasks_dir``. An id that could name a file elsewhere is
    :class:`errors.BadInput` (the command line's ``--task ID``)."""
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
        raise BadInput(
            f"task id {task_id!r} is not a task id: letters, digits, '.', '_' and '-', "
            "not starting with '.' or '-'"
        )
    return Path(tasks_dir) / f"{task_id}{LOG_SUFFIX}"


def list_tasks(tasks_dir: Path) -> list[str]:
    """The ids of the tasks whose logs are in ``tasks_dir``, sorted."""
    try:
        names = os.listdir(tasks_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise store_error("listing", tasks_dir, exc) from exc
    ids = (n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX))
    return sorted(i for i in ids if _TASK_ID.fullmatch(i))


def meta_path(path: Path) -> Path:
    """``<task-id>.meta.json`` beside the log ``<task-id>.jsonl``; a meta path is returned as is."""
    path = Path(path)
    if path.name.endswith(META_SUFFIX):
        return path
    return path.with_name(path.name.removesuffix(LOG_SUFFIX) + META_SUFFIX)


@dataclass(frozen=True, slots=True)
class TaskMeta:
    """A task's ``<task-id>.meta.json``: what a person sees of a task besides its events."""

    title: str = ""
    """The task's title; empty when unknown."""
    created: str = ""
    """When it was created, RFC 3339; empty when unknown."""
    archived: bool = False
    """Archived tasks are still searched, and marked (§9)."""
    root: str | None = None
    """The working tree the task ran in, when known."""
    problems: tuple[str, ...] = field(default=(), compare=False)
    """What was wrong with the file, if anything; the fields it concerned have their defaults."""


def task_meta(path: Path) -> TaskMeta:
    """The meta of a task, from its ``.meta.json`` or from the log it lies beside.

    Tolerant: a missing, unreadable or corrupt file, or a field of the wrong type, gives the
    default of that field (``created`` then falls back to the log's modification time) and a note
    in ``problems``; never an exception. The meta only labels results, so a bad one must not hide
    a task."""
    mpath = meta_path(path)
    problems: list[str] = []
    obj: object = {}
    try:
        obj = json.loads(mpath.read_bytes())
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(f"{mpath}: {exc.strerror or exc}")
    except (ValueError, RecursionError) as exc:
        problems.append(f"{mpath} is not JSON: {exc}")
    if not isinstance(obj, dict):
        problems.append(f"{mpath} is not a JSON object")
        obj = {}

    def get(name: str, kinds: type | tuple[type, ...], default: Any) -> Any:
        value = obj.get(name, default)
        if value is default or isinstance(value, kinds):
            return value
        problems.append(f"{mpath}: {name} is {type(value).__name__}")
        return default

    title = get("title", str, "")
    created = get("created", str, "")
    archived = get("archived", bool, False)
    root = get("root", str, None)
    if not created:
        log = mpath.with_name(mpath.name.removesuffix(META_SUFFIX) + LOG_SUFFIX)
        try:
            created = format_ts(datetime.fromtimestamp(log.stat().st_mtime, UTC))
        except OSError:
            created = ""
    return TaskMeta(title, created, archived, root, tuple(problems))


def write_task_meta(
    path: Path,
    *,
    title: str = "",
    created: str | None = None,
    archived: bool = False,
    root: str | None = None,
) -> TaskMeta:
    """Write a task's ``.meta.json`` (beside the log ``path``, or at the meta path itself)
    atomically; ``created`` defaults to now. Returns what was written."""
    meta = TaskMeta(title, created if created is not None else format_ts(_now()), archived, root)
    obj = {"title": meta.title, "created": meta.created, "archived": meta.archived, "root": root}
    text = json.dumps(obj, ensure_ascii=False, indent=2) + "\n"
    write_atomic(meta_path(path), text.encode("utf-8"))
    return meta
