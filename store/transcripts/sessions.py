"""The agents' sessions of a project, found by the working directory their transcripts record.

Claude Code keeps a session under ``projects/<a directory per working directory>/`` of its
configuration directory; the directory's name encodes the working directory in a way that has
changed between versions, so it is not decoded here: each session's own lines say where it ran
(``cwd``). Codex keeps a rollout under ``sessions/YYYY/MM/DD/`` of its home, its first line's
``session_meta`` saying where it ran. A session belongs to a project when it ran in the project's
working tree or below it.

The working directory is read from the first lines of a transcript (at most :data:`SNIFF_BYTES`)
once per file and process: it never changes once written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodwyn_retrieval.store.transcripts import claude as _claude
from nodwyn_retrieval.store.transcripts import claude_dir, codex_dir
from nodwyn_retrieval.store.transcripts import codex as _codex

__all__ = ["AGENTS", "SNIFF_BYTES", "Session", "find_sessions", "newest_session"]

AGENTS = ("claude", "codex")
SNIFF_BYTES = 256 * 1024
"""How much of a transcript's beginning is read for the working directory it records."""


@dataclass(frozen=True, slots=True)
class Session:
    """One session of an agent: its transcript and where it ran."""

    agent: str
    """``claude`` or ``codex``."""
    path: Path
    """Its transcript."""
    cwd: str
    """The working directory it records."""
    mtime_ns: int
    """When its transcript last changed."""

    @property
    def id(self) -> str:
        """Its task id: the transcript's name without ``.jsonl``."""
        return self.path.name.removesuffix(".jsonl")


_lock = threading.Lock()
_cwds: dict[tuple[str, int], str | None] = {}


def _cwd_of(path: str, ino: int, line_cwd: Callable[[bytes], str | None]) -> str | None:
    key = (path, ino)
    with _lock:
        if key in _cwds:
            return _cwds[key]
    found: str | None = None
    try:
        with open(path, "rb") as f:
            data = f.read(SNIFF_BYTES)
    except OSError:
        return None
    complete = data[: data.rfind(b"\n") + 1]
    for line in complete.split(b"\n"):
        if line:
            found = line_cwd(line)
            if found is not None:
                break
    if found is not None or len(data) >= SNIFF_BYTES:
        with _lock:  # a transcript too new to say yet is read again next time
            _cwds[key] = found
    return found


def _inside(cwd: str, root: str) -> bool:
    real = os.path.realpath(cwd)
    return real == root or real.startswith(os.path.join(root, ""))


def _transcripts(agent: str) -> list[tuple[os.DirEntry[str], Callable[[bytes], str | None]]]:
    out: list[tuple[os.DirEntry[str], Callable[[bytes], str | None]]] = []
    if agent == "claude":
        top = claude_dir() / "projects"
        dirs = [top]
        depth = 1  # projects/<dir>/<session>.jsonl
        line_cwd = _claude.line_cwd
    else:
        top = codex_dir() / "sessions"
        dirs = [top]
        depth = 3  # sessions/YYYY/MM/DD/rollout-*.jsonl (older rollouts lie higher)
        line_cwd = _codex.line_cwd
    level = 0
    while dirs and level <= depth:
        below: list[Path] = []
        for d in dirs:
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if e.is_dir(follow_symlinks=False):
                            below.append(Path(e.path))
                        elif (
                            e.name.endswith(".jsonl")
                            and not e.name.startswith("agent-")  # a helper's own transcript
                            and (level > 0 or agent == "codex")
                        ):
                            out.append((e, line_cwd))
            except OSError:
                continue
        dirs = below
        level += 1
    return out


def find_sessions(root: Path, agents: tuple[str, ...] = AGENTS) -> list[Session]:
    """The sessions of these agents that ran in ``root`` or below it, newest first."""
    real_root = os.path.realpath(root)
    found: list[Session] = []
    for agent in agents:
        for entry, line_cwd in _transcripts(agent):
            try:
                st = entry.stat()
            except OSError:
                continue
            cwd = _cwd_of(entry.path, st.st_ino, line_cwd)
            if cwd is not None and _inside(cwd, real_root):
                found.append(Session(agent, Path(entry.path), cwd, st.st_mtime_ns))
    found.sort(key=lambda s: (s.mtime_ns, s.id), reverse=True)
    return found


def newest_session(root: Path, agents: tuple[str, ...] = AGENTS) -> Session | None:
    """The session of root being written now: the one whose transcript changed last."""
    got = find_sessions(root, agents)
    return got[0] if got else None
