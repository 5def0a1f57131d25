"""The engine's process of ``nodwyn-retrieval mcp``: the server's one Engine, its session's
transcript, the guard's records of the session (docs/mcp.md, "How it starts").

The process the client starts (:mod:`nodwyn_retrieval.mcp_server`) starts this one first, before
it imports anything of the SDK; it is told the server's settings as its first argument and asked
each tool call on its standard input, one JSON line, and answers each on its standard output.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodwyn_retrieval.actors.messages import utf8_text
from nodwyn_retrieval.errors import NotFound, RetrievalError
from nodwyn_retrieval.mcp_server import LINE_LIMIT, RECORDS_DIR, TRANSCRIPTS_DIR

if TYPE_CHECKING:
    from nodwyn_retrieval.entry import Engine
    from nodwyn_retrieval.store.log import LogWriter
    from nodwyn_retrieval.store.paths import ProjectDirs
    from nodwyn_retrieval.store.transcripts import Reader

__all__ = ["McpSession", "engine_main", "serve_engine"]

log = logging.getLogger("nodwyn_retrieval.mcp")

_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
"""What numpy's OpenBLAS reads for its threads; set by the person, it is left as it is."""


def _agents_of(client: str | None) -> tuple[str, ...]:
    """The agent whose transcript is this session's, by the name the client gives itself."""
    from nodwyn_retrieval.store.transcripts.sessions import AGENTS  # noqa: PLC0415

    name = (client or "").lower()
    for agent in AGENTS:
        if agent in name:
            return (agent,)
    return AGENTS


class _Records:
    """The records of the server's session (the guard's, the index's), for its own log.

    Kept in memory until the log is made (:meth:`start`: at the first call, or at the close when
    the loading left some and no call came), then appended as they come; from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._held: list[dict[str, Any]] = []
        self.writer: LogWriter | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            if self.writer is None:
                self._held.append(dict(event))
            else:
                self._write(self.writer, event)

    @staticmethod
    def _write(writer: LogWriter, event: dict[str, Any]) -> None:
        body = dict(event)
        kind = body.pop("kind")
        for k in ("seq", "ts", "turn"):
            body.pop(k, None)
        agent = body.pop("agent", "main")
        writer.append(kind, turn=writer.turn, agent=agent, **body)

    def start(self, over: Path | None) -> None:
        """Make the log (its first line names the transcript) and write what was kept."""
        from nodwyn_retrieval.store.log import LogWriter  # noqa: PLC0415

        with self._lock:
            if self.writer is not None:
                return
            writer = LogWriter(self.path)
            writer.append(
                "note", turn=1, text=f"records of an MCP server session over {over or 'no log'}"
            )
            self.writer = writer
            held, self._held = self._held, []
            for event in held:
                self._write(writer, event)

    def close(self, over: Path | None) -> None:
        if self.writer is None and not self._held:
            return
        with contextlib.suppress(RetrievalError):
            self.start(over)
        with self._lock:
            if self.writer is not None:
                with contextlib.suppress(RetrievalError):
                    self.writer.append("note", turn=self.writer.turn, text="the server closed")
                self.writer.close()


@dataclass
class _Opened:
    """An Engine of the session and the transcript it reads."""

    engine: Engine
    transcript: Path | None
    project: tuple[Path, ProjectDirs, str]
    """The working tree's top, the project's directories and its key."""
    loading: asyncio.Task[None] | None = None


class McpSession:
    """What one server serves: its root, and its Engine (in the engine's process).

    :meth:`start` opens the Engine and loads the index at once, with this session's transcript as
    far as it can be told before a client has named itself; the first call settles it
    (:meth:`get_engine`)."""

    def __init__(
        self,
        root: Path,
        *,
        data_dir: str | None = None,
        config_dir: str | None = None,
        log: Path | None = None,
        workers: int | None = None,
        server_pid: int | None = None,
    ) -> None:
        self.given_root = root
        self.data_dir = data_dir
        self.config_dir = config_dir
        self.log = log
        self.workers = workers
        self.server_pid = server_pid or os.getpid()
        self.engine: Engine | None = None
        self.records: _Records | None = None
        self.transcript: Path | None = None
        self.key: str | None = None
        self._early: asyncio.Task[_Opened | None] | None = None
        self._loading: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Open the Engine and load the index now, before the first call."""
        if self._early is None and self.engine is None:
            self._early = asyncio.get_running_loop().create_task(self._open_early())

    async def _open_early(self) -> _Opened | None:
        try:
            top, dirs, key = await asyncio.to_thread(self._project)
            current, reader = await asyncio.to_thread(self._transcript_of, top, None)
            opened = await self._open(top, dirs, key, current, reader)
        except Exception as e:  # noqa: BLE001  the first call opens it again and answers what it meets
            log.debug("the engine is opened at the first call: %s", e)
            _collect()
            return None
        opened.loading = asyncio.get_running_loop().create_task(opened.engine.warm())
        opened.loading.add_done_callback(_seen)
        return opened

    async def get_engine(self, client: str | None) -> Engine:
        """The session's Engine: the one opened at the start when the first call finds the same
        transcript, else one opened now."""
        async with self._lock:
            if self.engine is None:
                self.engine = await self._settle(client)
            return self.engine

    async def _settle(self, client: str | None) -> Engine:
        early, self._early = self._early, None
        opened = await early if early is not None else None
        if opened is not None:
            top, dirs, key = opened.project
        else:
            top, dirs, key = await asyncio.to_thread(self._project)
        current, reader = await asyncio.to_thread(self._transcript_of, top, client)
        if opened is not None and opened.transcript != current:
            await _close_opened(opened)
            opened = None
        if opened is None:
            opened = await self._open(top, dirs, key, current, reader)
        try:
            if self.records is not None:
                await asyncio.to_thread(self.records.start, current)
        except BaseException:
            # Without its records the session is not served: the next call tries again.
            await _close_opened(opened)
            raise
        self.transcript, self._loading = current, opened.loading
        return opened.engine

    def _project(self) -> tuple[Path, ProjectDirs, str]:
        from nodwyn_retrieval.store.paths import (  # noqa: PLC0415
            data_dir,
            git_toplevel,
            project_dirs,
            project_key,
        )

        top = git_toplevel(self.given_root) or self.given_root.resolve()
        key = project_key(top)
        return top, project_dirs(data_dir(self.data_dir), key), key

    def _transcript_of(self, top: Path, client: str | None) -> tuple[Path | None, Reader]:
        """This session's transcript and its reader: ``--log``, else the newest of the agent's."""
        from nodwyn_retrieval.store.transcripts import NODWYN, sniff  # noqa: PLC0415
        from nodwyn_retrieval.store.transcripts.sessions import find_sessions  # noqa: PLC0415

        if self.log is not None:
            return self.log, sniff(self.log)
        found = find_sessions(top, _agents_of(client))
        if not found:
            return None, NODWYN
        return found[0].path, _readers()[found[0].agent]

    async def _open(
        self, top: Path, dirs: ProjectDirs, key: str, current: Path | None, reader: Reader
    ) -> _Opened:
        from nodwyn_retrieval.entry import Engine  # noqa: PLC0415
        from nodwyn_retrieval.store.transcripts import NODWYN, add_sessions, place  # noqa: PLC0415
        from nodwyn_retrieval.store.transcripts.sessions import find_sessions  # noqa: PLC0415

        mem_dir = dirs.root / TRANSCRIPTS_DIR
        if current is not None and reader is not NODWYN:
            place(current, reader, mem_dir)

        def sessions() -> list[tuple[str, Path]]:
            out = []
            for s in find_sessions(top):
                place(s.path, _readers()[s.agent], mem_dir)
                out.append((s.id, s.path))
            return out

        if self.records is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            name = f"mcp-{stamp}-{self.server_pid}.jsonl"
            self.records = _Records(dirs.root / RECORDS_DIR / name)
        add_sessions(key, sessions)
        self.key = key
        engine = await Engine.open(
            top, data_dir=self.data_dir, config_dir=self.config_dir, log=current,
            record=self.records, workers=self.workers,
        )  # fmt: skip
        return _Opened(engine, current, (top, dirs, key))

    async def call(
        self, name: str, arguments: dict[str, Any], client: str | None
    ) -> tuple[str, bool]:
        """One tool call: the text the model reads, and whether it is an error."""
        try:
            if not self.given_root.is_dir():
                raise NotFound(f"root {self.given_root} is not a directory")
            engine = await self.get_engine(client)
            needs_log = (name == "recall" and "task" not in arguments) or (
                name == "index-search" and arguments.get("scope") == "conversation"
            )
            if needs_log and engine.log_path is None:
                return (
                    f"no transcript of this session found for {engine.root}: start the server "
                    "with --log FILE (docs/mcp.md)",
                    True,
                )
            out = await engine.call_tool(name, arguments)
            return out.text, out.is_error
        except RetrievalError as e:
            return str(e), True
        except Exception as e:  # the server goes on whatever one call met
            log.exception("%s failed", name)
            return f"unexpected error: {type(e).__name__}: {e}", True

    async def close(self) -> None:
        from nodwyn_retrieval.store.transcripts import add_sessions  # noqa: PLC0415

        early, self._early = self._early, None
        if early is not None:
            opened = await early
            if opened is not None:
                self.transcript = opened.transcript
                await _close_opened(opened)
        if self.engine is not None:
            engine, self.engine = self.engine, None
            loading, self._loading = self._loading, None
            if loading is not None and not loading.done():
                loading.cancel()
                with contextlib.suppress(BaseException):
                    await loading
            await engine.close()
        if self.key is not None:
            add_sessions(self.key, None)
        if self.records is not None:
            await asyncio.to_thread(self.records.close, self.transcript)


def _readers() -> dict[str, Reader]:
    from nodwyn_retrieval.store.transcripts.claude import CLAUDE  # noqa: PLC0415
    from nodwyn_retrieval.store.transcripts.codex import CODEX  # noqa: PLC0415

    return {"claude": CLAUDE, "codex": CODEX}


def _collect() -> None:
    """The collector on again, if the engine's process started with it off: the start (the
    imports, the Engine's opening, the index's loading) builds many objects and frees few, so
    it is not run over them, and they are left out of its later runs."""
    if not gc.isenabled():
        gc.enable()
        gc.freeze()


def _seen(task: asyncio.Task[Any]) -> None:
    """A loading's failure is the first search's to meet again: it is not raised here."""
    _collect()
    if not task.cancelled() and task.exception() is not None:
        log.debug("loading the index: %s", task.exception())


async def _close_opened(opened: _Opened) -> None:
    if opened.loading is not None and not opened.loading.done():
        opened.loading.cancel()
        with contextlib.suppress(BaseException):
            await opened.loading
    await opened.engine.close()


def engine_main() -> None:
    """The engine's process started anew: the server's settings as its first argument (JSON),
    the calls on its standard input and their answers on its standard output, one JSON line
    each."""
    settings = json.loads(sys.argv[1])
    # The pipe is kept apart from standard input and output, which nothing else is to use.
    serve_engine(settings, os.dup(0), os.dup(1))


def serve_engine(settings: dict[str, Any], fd_in: int, fd_out: int) -> None:
    """Answer the calls read from fd_in on fd_out until fd_in ends or SIGTERM comes.

    Standard input becomes the null device and standard output the standard error: a process
    forked from the server's has the client's pipes there, which are not the engine's to hold."""
    for name in _BLAS_THREADS:
        if os.environ.get(name):
            break
    else:
        # The engine does no linear algebra: numpy's BLAS is kept from starting a thread that
        # spins at its import, taking a core from the server's other process as it starts.
        os.environ[_BLAS_THREADS[0]] = "1"
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's to act on
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(_engine_loop(settings, fd_in, fd_out))


async def _engine_loop(settings: dict[str, Any], fd_in: int, fd_out: int) -> None:
    given = settings.get("log")
    session = McpSession(
        Path(settings["root"]), data_dir=settings.get("data_dir"),
        config_dir=settings.get("config_dir"), log=Path(given) if given else None,
        workers=settings.get("workers"), server_pid=settings.get("server_pid"),
    )  # fmt: skip
    session.start()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd_in, "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(fd_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    answering: set[asyncio.Task[None]] = set()

    async def answer(request: dict[str, Any]) -> None:
        arguments = request.get("arguments")
        text, error = await session.call(
            str(request.get("name")), arguments if isinstance(arguments, dict) else {},
            request.get("client"),
        )  # fmt: skip
        # The SDK writes the answer as UTF-8: a lone surrogate left in it (an error's text) would
        # fail there and the call would never be answered.
        text = utf8_text(text)
        line = json.dumps({"id": request.get("id"), "text": text, "error": error}) + "\n"
        with contextlib.suppress(ConnectionError):
            writer.write(line.encode())
            await writer.drain()

    async def read() -> None:
        try:
            while line := await reader.readline():
                task = loop.create_task(answer(json.loads(line)))
                answering.add(task)
                task.add_done_callback(answering.discard)
        finally:
            stop.set()

    reading = loop.create_task(read())
    await stop.wait()
    reading.cancel()
    for task in list(answering):
        task.cancel()
    await asyncio.gather(reading, *answering, return_exceptions=True)
    await session.close()
    writer.close()
