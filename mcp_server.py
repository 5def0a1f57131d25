"""``nodwyn-retrieval mcp``: index-search, index-update and recall over the Model Context Protocol.

A stdio server on the official ``mcp`` SDK (its low-level ``Server``), for the coding agents
people run: Claude Code, Codex CLI, Cursor and any other MCP client (docs/mcp.md). It serves the
three tools with the definitions, the checks and the text of :mod:`nodwyn_retrieval.tools` and
:meth:`Engine.call_tool`: a call that fails comes back as a tool error (``isError``) with its one
line, never as a failure of the server.

Two processes make one server, so that its start costs the client one of them. The process the
client starts speaks the protocol: before it imports the SDK (most of a start's time: the
protocol's pydantic models) it starts the engine's process, which imports the engine, opens it and
loads the repository's index meanwhile, on the other core. ``initialize`` and ``tools/list`` never
wait for the engine; each tool call is handed to the engine's process over a pipe, one JSON line
each way, and its answer handed back. A call that comes while the index is still loading waits
for it. The client's first exchange is answered from the SDK's protocol package while the rest of
the SDK is imported in a thread; then the SDK's low-level server takes the connection over
(:mod:`nodwyn_retrieval.mcp_early`).

One :class:`Engine` a server, in the engine's process, closed when the client closes the
connection or sends SIGTERM. The working tree is ``--root``, by default the directory the client
starts the server in. This session's conversation is the transcript ``--log FILE`` names, or else
the newest transcript an agent is writing for the root (the agent the client says it is at its
first call: Claude Code's sessions for Claude Code, Codex's rollouts for Codex, either for another
client): the engine is opened at the start with the newest transcript of either, and opened again
at the first call if that call finds another one. The project's other sessions, of either agent,
are its earlier tasks, behind the person's switch (§9). The transcripts are read as they are and
never written: their ``.mem`` files live in the project's data directory (store.transcripts), and
the guard's records of this server's session go to a log of the project's own,
``records/mcp-*.jsonl`` in the project's data directory, which ``status`` names; it is made at the
first call (or at the close, if the loading left records and no call came).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodwyn_retrieval.errors import NotFound, RetrievalError
from nodwyn_retrieval.tools import tool_definitions, working_rule

if TYPE_CHECKING:
    from nodwyn_retrieval.entry import Engine
    from nodwyn_retrieval.store.log import LogWriter
    from nodwyn_retrieval.store.paths import ProjectDirs
    from nodwyn_retrieval.store.transcripts import Reader

__all__ = [
    "RECORDS_DIR",
    "EngineProcess",
    "McpSession",
    "main",
    "mcp_tools",
    "record_logs",
    "serve",
]

log = logging.getLogger("nodwyn_retrieval.mcp")

SERVER_NAME = "nodwyn-retrieval"
RECORDS_DIR = "records"
"""The project's folder (in its data directory) of the server sessions' own logs."""
TRANSCRIPTS_DIR = "transcripts"
"""The project's folder of the ``.mem`` files of the agents' transcripts it reads."""
LINE_LIMIT = 1 << 30
"""The longest line of the pipe between the two processes (a call's answer is one line)."""
CLOSE_SECONDS = 60.0
"""How long the server waits for the engine's process to close before it stops it."""
EARLY_ENV = "NODWYN_RETRIEVAL_MCP_EARLY"
"""Set to ``0``, the SDK's server answers from the client's first line (docs/mcp.md)."""
_ENGINE_MAIN = (
    "import gc; gc.disable(); from nodwyn_retrieval.mcp_server import engine_main; engine_main()"
)
"""The engine's process: the collector is off until the index is loaded (:func:`_collect`)."""


def mcp_tools() -> list[dict[str, Any]]:
    """The three tools as MCP tool definitions (``{"name", "description", "inputSchema"}``).

    A client lists the tools before the server has found the session's transcript, so every
    scope is offered; a scope that cannot work answers so, in one line, when it is called.
    """
    return tool_definitions("mcp", conversation=True, earlier=True)


def record_logs(dirs: ProjectDirs) -> list[Path]:
    """The logs of the project's server sessions, newest first."""
    try:
        logs = [p for p in (dirs.root / RECORDS_DIR).glob("mcp-*.jsonl") if p.is_file()]
    except OSError:
        return []
    return sorted(logs, key=lambda p: p.name, reverse=True)


def _agents_of(client: str | None) -> tuple[str, ...]:
    """The agent whose transcript is this session's, by the name the client gives itself."""
    from nodwyn_retrieval.store.transcripts.sessions import AGENTS  # noqa: PLC0415

    name = (client or "").lower()
    for agent in AGENTS:
        if agent in name:
            return (agent,)
    return AGENTS


# -- the engine's process ---------------------------------------------------------------------


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
    """The engine's process: the server's settings as its first argument (JSON), the calls on
    its standard input and their answers on its standard output, one JSON line each."""
    settings = json.loads(sys.argv[1])
    # The pipe is kept apart from standard input and output, which nothing else is to use.
    fd_in, fd_out = os.dup(0), os.dup(1)
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


# -- the protocol's process -------------------------------------------------------------------


class _Ended(Exception):
    """The engine's process ended before it answered a call."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class _Child:
    """One engine's process: the calls it has not answered yet, by their ids."""

    proc: asyncio.subprocess.Process
    waiting: dict[int, asyncio.Future[tuple[str, bool]]]
    reading: asyncio.Task[None] | None = None


class EngineProcess:
    """The engine's process of one server, seen from the protocol's: started at once, asked each
    call over its pipe, started again at the next call if it ever ends."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self._child: _Child | None = None
        self._next = 0
        self._closed = False

    async def start(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ENGINE_MAIN, json.dumps(self.settings),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT,
        )  # fmt: skip
        child = _Child(proc, {})
        child.reading = asyncio.get_running_loop().create_task(self._read(child))
        self._child = child

    async def _read(self, child: _Child) -> None:
        out = child.proc.stdout
        try:
            while out is not None and (line := await out.readline()):
                answer = json.loads(line)
                waiting = child.waiting.pop(answer["id"], None)
                if waiting is not None and not waiting.done():
                    waiting.set_result((str(answer["text"]), bool(answer["error"])))
        finally:
            code = await child.proc.wait()
            if self._child is child:
                self._child = None
            left, child.waiting = child.waiting, {}
            for f in left.values():
                if not f.done():
                    f.set_exception(_Ended(code))

    async def call(
        self, name: str, arguments: dict[str, Any], client: str | None
    ) -> tuple[str, bool]:
        """One tool call answered by the engine's process (one started if none runs)."""
        self._next += 1
        ident = self._next
        request = (json.dumps({"id": ident, "name": name, "arguments": arguments, "client": client})
                   + "\n").encode()  # fmt: skip
        for attempt in range(2):
            if self._closed:
                return "the server is closing", True
            child = self._child
            if child is None or child.proc.returncode is not None:
                await self.start()
                child = self._child
            if child is None or child.proc.stdin is None:  # pragma: no cover - started with pipes
                return "the engine's process did not start; call again", True
            answer: asyncio.Future[tuple[str, bool]] = asyncio.get_running_loop().create_future()
            child.waiting[ident] = answer
            try:
                child.proc.stdin.write(request)
                await child.proc.stdin.drain()
            except (ConnectionError, RuntimeError) as e:
                # It ended and its end is not read yet: another one is started for the call.
                child.waiting.pop(ident, None)
                if self._child is child:
                    self._child = None
                if attempt:
                    return f"the engine's process cannot be reached: {e}; call again", True
                continue
            try:
                return await answer
            except _Ended as e:
                # Ended before it answered: killed while the call was on its way, or ended by
                # the call itself. Another is started and asked once more, never twice.
                if self._child is child:
                    self._child = None
                if attempt:
                    return f"the engine's process ended (exit {e.code}); call again", True
        return "the engine's process cannot be reached; call again", True  # pragma: no cover

    async def close(self) -> None:
        """Close the engine's process (its Engine closes as its input ends) and wait for it."""
        self._closed = True
        child, self._child = self._child, None
        if child is None:
            return
        if child.proc.stdin is not None:
            child.proc.stdin.close()
        try:
            await asyncio.wait_for(child.proc.wait(), CLOSE_SECONDS)
        except TimeoutError:
            log.warning("the engine's process did not close in %.0f s: stopped", CLOSE_SECONDS)
            child.proc.kill()
            await child.proc.wait()
        if child.reading is not None:
            with contextlib.suppress(BaseException):
                await child.reading


def _import_sdk() -> tuple[Any, Any, Any]:
    """The SDK's protocol types, its low-level ``Server`` and its ``stdio_server``.

    The ``mcp`` package's ``__init__`` (and ``mcp.server``'s) import the whole SDK (its client,
    ``MCPServer``, their transports) to name it at the top; a server on the low-level ``Server``
    over stdio needs none of that. So the two packages are made without running their
    ``__init__`` and only the modules the server uses are imported, unless the SDK is imported
    already or is laid out otherwise, when it is imported as usual."""
    if "mcp" not in sys.modules:
        made: list[str] = []
        try:
            for name in ("mcp", "mcp.server"):
                spec = importlib.util.find_spec(name)
                if spec is None or spec.submodule_search_locations is None:
                    raise ImportError(name)
                sys.modules[name] = importlib.util.module_from_spec(spec)
                made.append(name)
            sys.modules["mcp"].server = sys.modules["mcp.server"]  # type: ignore[attr-defined]
            return _sdk_modules()
        except ImportError:
            for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
                del sys.modules[name]
    return _sdk_modules()


def _sdk_modules() -> tuple[Any, Any, Any]:
    from mcp import types  # noqa: PLC0415
    from mcp.server.lowlevel.server import Server  # noqa: PLC0415
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    return types, Server, stdio_server


def _client_name(ctx: Any) -> str | None:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) else None


def build_server(engine: EngineProcess, types: Any, server_class: Any) -> Any:
    """The low-level MCP server of one session."""
    import anyio  # noqa: PLC0415  the optional dependency's, imported when serving
    from nodwyn_retrieval import __version__  # noqa: PLC0415

    tools = [types.Tool.model_validate(t) for t in mcp_tools()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        args = dict(params.arguments or {})
        text, error = await engine.call(params.name, args, _client_name(ctx))
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "isError": error}
        )

    @contextlib.asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:
            # Also when the server is cancelled (the client's SIGTERM): the close is shielded.
            with anyio.CancelScope(shield=True):
                await engine.close()

    return server_class(
        SERVER_NAME, version=__version__, instructions=working_rule(conversation=True),
        lifespan=lifespan,
        on_list_tools=list_tools, on_call_tool=call_tool,
    )  # fmt: skip


async def serve(settings: dict[str, Any]) -> None:
    """Serve one client over stdin and stdout until it closes the connection.

    The engine's process is started first; then the SDK's protocol package is imported, the
    client's first exchange answered from it (:mod:`nodwyn_retrieval.mcp_early`) while the rest
    of the SDK is imported in a thread, and the SDK's low-level server takes the connection over
    as soon as it is."""
    from nodwyn_retrieval import __version__  # noqa: PLC0415
    from nodwyn_retrieval.mcp_early import Wire, first_exchange  # noqa: PLC0415

    engine = EngineProcess(settings)
    await engine.start()  # before the SDK's import, which it overlaps
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    async def stop() -> None:
        await engine.close()
        os._exit(0)  # stdin's reader is a thread blocked in a read: nothing else ends it

    def on_sigterm() -> None:
        # A client stopping the server with SIGTERM gets the Engine closed as at a closed stdin.
        if not stopping:
            stopping.append(loop.create_task(stop()))

    with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    # The imports build thousands of objects and free few: the collector is not run over them.
    gc.disable()
    try:
        import mcp_types  # noqa: F401, PLC0415  the protocol's models, for the first exchange

        wire = Wire()
        replay: list[str] | None = []
        if os.environ.get(EARLY_ENV, "1") == "0":
            sdk = _import_sdk()
        else:
            importing = asyncio.ensure_future(asyncio.to_thread(_import_sdk))
            switch = sys.getswitchinterval()
            sys.setswitchinterval(0.0005)  # the first exchange is not kept waiting by the import
            try:
                replay = await first_exchange(
                    wire, engine.call, importing, name=SERVER_NAME, version=__version__,
                    instructions=working_rule(conversation=True), tools=mcp_tools(),
                )  # fmt: skip
            finally:
                sys.setswitchinterval(switch)
            if replay is not None:
                sdk = importing.result()
    finally:
        gc.enable()
        gc.freeze()
    if replay is None:  # the client closed the connection in the first exchange
        await engine.close()
        return
    types, server_class, stdio_server = sdk
    import anyio  # noqa: PLC0415

    server = build_server(engine, types, server_class)
    stdin, stdout = (anyio.wrap_file(f) for f in wire.sdk_streams(replay))
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``mcp`` command's arguments (cli.py)."""
    q = sub.add_parser("mcp", parents=[common], help="serve the tools over MCP (stdio)")
    q.add_argument("--log", help="this session's transcript or log (default: the newest one)")


def main(ns: argparse.Namespace) -> int:
    """Run the server the command line asked for (cli.py's ``mcp``)."""
    if importlib.util.find_spec("mcp") is None:
        print(
            "nodwyn-retrieval: the MCP server needs the mcp package: "
            "pip install 'nodwyn-retrieval[mcp]'",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    root = Path(getattr(ns, "root", None) or os.getcwd())
    given = getattr(ns, "log", None)
    logp = Path(given) if given else None
    if logp is not None and not logp.is_file():
        print(f"nodwyn-retrieval: no log at {logp}: give a session's .jsonl", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"nodwyn-retrieval: root {root} is not a directory", file=sys.stderr)
        return 2
    settings = {
        "root": str(root.absolute()), "data_dir": getattr(ns, "data_dir", None),
        "config_dir": getattr(ns, "config_dir", None),
        "log": str(logp.absolute()) if logp is not None else None,
        "workers": getattr(ns, "workers", None), "server_pid": os.getpid(),
    }  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings))
    return 0
