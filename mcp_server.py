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
import contextlib
import gc
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from nodwyn_retrieval.tools import tool_definitions, working_rule

if TYPE_CHECKING:
    import asyncio

    from nodwyn_retrieval.store.paths import ProjectDirs

# asyncio is not imported at the top: the engine's process is started before it is (main).

__all__ = [
    "EARLY_ENV",
    "RECORDS_DIR",
    "EngineProcess",
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
SDK_AFTER_S = 1.0
"""The SDK's server is imported at the latest this long after ``initialize`` is answered, if no
tool call came (else once the first is answered): mcp_early.SdkImport."""
EARLY_ENV = "NODWYN_RETRIEVAL_MCP_EARLY"
"""Set to ``0``, the SDK's server answers from the client's first line (docs/mcp.md)."""
_ENGINE_MAIN = (
    "import gc; gc.disable(); from nodwyn_retrieval.mcp_engine import engine_main; engine_main()"
)
"""The engine's process: the collector is off until the index is loaded (mcp_engine)."""


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


# -- the protocol's process -------------------------------------------------------------------


class _Ended(Exception):
    """The engine's process ended before it answered a call."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _engine_command(settings: dict[str, Any]) -> list[str]:
    """The command of an engine's process started anew: this interpreter, importing from where
    this process imports. ``-c`` alone puts the current directory first on ``sys.path``, and a
    client starts the server in the workspace, a clone: a ``json.py`` (or any module the engine
    imports) at its top was imported, and run, by every engine started again after one ended.
    ``-P`` adds no such directory; ``sys.path`` is set to this process's before any import, the
    current directory standing for an empty entry, as the pool's workers have it (bus/pool.py)."""
    path = [os.getcwd() if p == "" else p for p in sys.path]
    program = f"import sys; sys.path[:] = {path!r}; {_ENGINE_MAIN}"
    return [sys.executable, "-P", "-c", program, json.dumps(settings)]


def _spawn(settings: dict[str, Any]) -> subprocess.Popen[bytes]:
    """The engine's process, started with pipes for its calls and answers."""
    return subprocess.Popen(
        _engine_command(settings),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip


class _Forked:
    """The engine's process forked from this one (:func:`_fork`): its pipes, and what
    :class:`EngineProcess` asks of a ``Popen``."""

    def __init__(self, pid: int, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.pid = pid
        self.stdin: BinaryIO | None = stdin
        self.stdout: BinaryIO | None = stdout
        self.returncode: int | None = None
        self._waiting = threading.Lock()

    def _reaped(self, status: int) -> int:
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        # As Popen's: while wait() is reaping it in a thread, it is taken as running.
        if self.returncode is None and self._waiting.acquire(blocking=False):
            try:
                if self.returncode is None:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        return self._reaped(status)
            except ChildProcessError:
                self.returncode = 0
            finally:
                self._waiting.release()
        return self.returncode

    def wait(self) -> int:
        with self._waiting:
            if self.returncode is None:
                try:
                    return self._reaped(os.waitpid(self.pid, 0)[1])
                except ChildProcessError:
                    self.returncode = 0
            return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _fork(settings: dict[str, Any]) -> _Forked | None:
    """The engine's process forked from this one, where that is safe: on Linux, while this
    process has one thread (at :func:`main`, before asyncio's loop runs and the SDK is
    imported). It starts with what this one has imported (the command line, this module,
    asyncio, most of the standard library's that the engine needs) instead of a new interpreter
    importing them again; None where it cannot be forked (it is started anew)."""
    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return None
    # Both processes need asyncio: imported once, here, instead of once in each.
    import asyncio  # noqa: F401, PLC0415

    calls_r, calls_w = os.pipe()
    answers_r, answers_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (calls_r, calls_w, answers_r, answers_w):
            os.close(fd)
        return None
    if pid == 0:  # the engine's process; it never returns into the command line
        code = 1
        try:
            os.close(calls_w)
            os.close(answers_r)
            gc.disable()  # until the index is loaded (mcp_engine)
            from nodwyn_retrieval.mcp_engine import serve_engine  # noqa: PLC0415

            serve_engine(settings, calls_r, answers_w)
            code = 0
        except BaseException:  # noqa: BLE001  said on stderr; the server starts another at need
            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            os._exit(code)
    os.close(calls_r)
    os.close(answers_w)
    calls, answers = os.fdopen(calls_w, "wb", buffering=0), os.fdopen(answers_r, "rb", buffering=0)
    return _Forked(pid, calls, answers)


class _Proc:
    """An engine's process started by :func:`_spawn` or :func:`_fork`, its pipes as asyncio's
    streams."""

    def __init__(
        self, popen: subprocess.Popen[bytes] | _Forked, stdout: asyncio.StreamReader,
        stdin: asyncio.StreamWriter,
    ) -> None:  # fmt: skip
        self.popen = popen
        self.stdout = stdout
        self.stdin = stdin

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    async def wait(self) -> int:
        import asyncio  # noqa: PLC0415  imported by now (main)

        return await asyncio.to_thread(self.popen.wait)

    def kill(self) -> None:
        self.popen.kill()


@dataclass
class _Child:
    """One engine's process: the calls it has not answered yet, by their ids."""

    proc: _Proc
    waiting: dict[int, asyncio.Future[tuple[str, bool]]]
    reading: asyncio.Task[None] | None = None


class EngineProcess:
    """The engine's process of one server, seen from the protocol's: started at once (given
    started, by :func:`main`), asked each call over its pipe, started again at the next call if
    it ever ends."""

    def __init__(
        self, settings: dict[str, Any], started: subprocess.Popen[bytes] | _Forked | None = None
    ) -> None:
        self.settings = settings
        self._started = started
        self._child: _Child | None = None
        self._next = 0
        self._closed = False

    async def start(self) -> None:
        import asyncio  # noqa: PLC0415  imported by now (main)

        popen, self._started = self._started or _spawn(self.settings), None
        if popen.stdin is None or popen.stdout is None:  # pragma: no cover - started with pipes
            raise RuntimeError("the engine's process has no pipes")
        loop = asyncio.get_running_loop()
        out = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out), popen.stdout)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, popen.stdin
        )
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        child = _Child(_Proc(popen, out, stdin), {})
        child.reading = loop.create_task(self._read(child))
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
        import asyncio  # noqa: PLC0415  imported by now (main)

        request = (json.dumps({"id": ident, "name": name, "arguments": arguments, "client": client})
                   + "\n").encode()  # fmt: skip
        for attempt in range(2):
            if self._closed:
                return "the server is closing", True
            child = self._child
            if child is None or child.proc.returncode is not None:
                await self.start()
                child = self._child
            if child is None:  # pragma: no cover - start sets it
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
        import asyncio  # noqa: PLC0415  imported by now (main)

        self._closed = True
        child, self._child = self._child, None
        if child is None:
            if self._started is not None:  # never adopted: its input closed, it ends
                started, self._started = self._started, None
                if started.stdin is not None:
                    started.stdin.close()
                await asyncio.to_thread(started.wait)
            return
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


async def serve(
    settings: dict[str, Any], started: subprocess.Popen[bytes] | _Forked | None = None
) -> None:
    """Serve one client over stdin and stdout until it closes the connection.

    The engine's process is started first; then the SDK's protocol package is imported, the
    client's first exchange answered from it (:mod:`nodwyn_retrieval.mcp_early`) while the rest
    of the SDK is imported in a thread, and the SDK's low-level server takes the connection over
    as soon as it is."""
    import asyncio  # noqa: PLC0415

    from nodwyn_retrieval import __version__  # noqa: PLC0415
    from nodwyn_retrieval.mcp_early import SdkImport, Wire, first_exchange  # noqa: PLC0415

    engine = EngineProcess(settings, started)
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
            importing = SdkImport(_import_sdk, SDK_AFTER_S)
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
                sdk = importing.done.result()
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
    # Started before asyncio and the SDK are imported: its start overlaps theirs.
    started = _fork(settings) or _spawn(settings)
    import asyncio  # noqa: PLC0415

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings, started))
    return 0
