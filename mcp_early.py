"""The MCP server's first exchange, answered while the SDK's low-level server is still imported.

Most of a server's start is the import of the MCP SDK's server (``mcp.server.lowlevel.server``):
the models of both protocol eras the low-level server validates against, and the HTTP
transports (starlette, its auth routes, OpenTelemetry) it imports at its top. A client's first
exchange needs none of that: ``initialize``, ``notifications/initialized``, ``tools/list``,
``tools/call`` and ``ping`` are answered here from the SDK's own protocol package
(``mcp_types``: its public request and result models, the JSON-RPC envelope and the protocol
versions the low-level server negotiates), while the rest of the SDK is imported in a thread.
As soon as it is, the SDK's low-level server takes the connection over through its stdio
transport (:func:`mcp.server.stdio.stdio_server` given the two streams below): it is handed the
client's ``initialize`` and ``notifications/initialized`` again, so that its session is the one
the client opened, its answer to that ``initialize`` is checked against the one sent and not
sent twice, and every later line goes to it and comes from it.

Anything else, or anything this module does not read as well formed, is left to the SDK's
server: it waits for the import and is the first line that server reads after the replay, so
that every error the client can meet is the SDK's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import IO, Any, cast

__all__ = ["SdkImport", "Wire", "first_exchange"]

log = logging.getLogger("nodwyn_retrieval.mcp")

_EOF = ""


class Wire:
    """The connection's two ends, taken from file descriptors 0 and 1 for this server alone.

    As the SDK's stdio transport does when it opens them itself, descriptor 0 is pointed at the
    null device and 1 at standard error while the server runs, so that nothing else (a child
    process, a stray print) reads the client's lines or writes into its stream. One thread reads
    the lines (:meth:`get`: the first exchange's, then :class:`_Lines`'s for the SDK's server)."""

    def __init__(self) -> None:
        self._in = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
        self._out = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.arrived = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self.dropping: Any = None
        """The id of the replayed ``initialize``, whose answer from the SDK is not sent again."""
        self.sent_initialize: dict[str, Any] | None = None
        threading.Thread(target=self._read, name="mcp-stdin", daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self._in:
                self._put(raw.decode("utf-8", errors="replace"))
        except (OSError, ValueError) as e:  # the connection is gone: as at its end
            log.debug("reading the client: %s", e)
        self._put(_EOF)

    def _put(self, line: str) -> None:
        self.lines.put(line)
        with contextlib.suppress(RuntimeError):  # the loop has ended
            self._loop.call_soon_threadsafe(self.arrived.set)

    def send(self, line: str) -> None:
        """One line to the client, whole (from the loop's thread or the SDK's writer)."""
        with self._lock:
            try:
                self._out.write(line.encode("utf-8"))
                self._out.flush()
            except (OSError, ValueError) as e:
                log.debug("writing to the client: %s", e)

    def sdk_streams(self, replay: list[str]) -> tuple[IO[str], IO[str]]:
        """The stdin and stdout for the SDK's stdio transport: the replayed lines first."""
        return cast("IO[str]", _Lines(self, replay)), cast("IO[str]", _Out(self))


class _Lines:
    """The SDK's stdin (what its transport reads, line by line, in a thread): the replayed
    lines, then the client's as they come."""

    def __init__(self, wire: Wire, replay: list[str]) -> None:
        self._wire = wire
        self._replay = list(replay)

    def readline(self) -> str:
        if self._replay:
            return self._replay.pop(0)
        line = self._wire.lines.get()
        if line == _EOF:
            self._wire.lines.put(_EOF)  # every later read is at the end too
        return line


class _Out:
    """The SDK's stdout (what its transport writes, a line at a time): its lines to the client,
    but for its answer to the replayed ``initialize``, which the client has had already (checked
    to be the same)."""

    def __init__(self, wire: Wire) -> None:
        self._wire = wire

    def write(self, s: str) -> int:
        wire = self._wire
        if wire.dropping is not None:
            try:
                message = json.loads(s)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == wire.dropping:
                wire.dropping = None
                if message.get("result") != wire.sent_initialize:
                    log.warning(
                        "the answer to initialize differed from the SDK's server's: %s", s.strip()
                    )
                return len(s)
        wire.send(s)
        return len(s)

    def flush(self) -> None:
        return None


class SdkImport:
    """The import of the SDK's server, in a thread, begun when the first exchange no longer
    keeps the cores busy: once the first tool call is answered, when a line is the SDK's
    server's to answer, or ``after`` seconds from the answer to ``initialize`` if no call came.
    Until then the engine's process, loading the index for that first call, has the cores the
    import would take. :attr:`done` is its outcome."""

    def __init__(self, work: Callable[[], Any], after: float) -> None:
        self._work = work
        self._after = after
        self._loop = asyncio.get_running_loop()
        self.done: asyncio.Future[Any] = self._loop.create_future()
        self._task: asyncio.Future[Any] | None = None

    def begin(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(asyncio.to_thread(self._work))
            self._task.add_done_callback(self._ended)

    def begin_later(self) -> None:
        self._loop.call_later(self._after, self.begin)

    def _ended(self, task: asyncio.Future[Any]) -> None:
        if self.done.done():
            return
        if task.cancelled():
            self.done.cancel()
        elif (e := task.exception()) is not None:
            self.done.set_exception(e)
        else:
            self.done.set_result(task.result())


Call = Callable[[str, dict[str, Any], "str | None"], Awaitable[tuple[str, bool]]]


async def first_exchange(
    wire: Wire,
    call: Call,
    sdk: SdkImport,
    *,
    name: str,
    version: str,
    instructions: str,
    tools: list[dict[str, Any]],
) -> list[str] | None:
    """Answer the client until the SDK's server is imported; then the lines to replay to it.

    ``None`` when the client closed the connection first. A tool call still going on when the
    SDK's server takes over is answered here when it ends."""
    import mcp_types  # noqa: PLC0415  imported before the SDK's server is, in serve
    from mcp_types.version import (  # noqa: PLC0415
        HANDSHAKE_PROTOCOL_VERSIONS,
        LATEST_HANDSHAKE_VERSION,
    )

    replay: list[str] = []
    calls: set[asyncio.Task[None]] = set()
    client: str | None = None
    initialized = False
    listed = mcp_types.ListToolsResult.model_validate({"tools": tools})

    def answer(ident: Any, result: Any) -> dict[str, Any]:
        dumped: dict[str, Any] = result.model_dump(
            by_alias=True, mode="json", exclude_none=True, exclude_unset=True
        )
        envelope = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=ident, result=dumped)
        wire.send(envelope.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
        return dumped

    async def tool_call(ident: Any, params: Any) -> None:
        text, error = await call(params.name, dict(params.arguments or {}), client)
        result = mcp_types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "isError": error}
        )
        answer(ident, result)
        sdk.begin()

    def handled(line: str) -> bool:
        """Whether the line is answered here; else it is the SDK's server's."""
        nonlocal client, initialized
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        method, params = message.get("method"), message.get("params")
        if "id" not in message:  # a notification
            if method == "notifications/initialized" and initialized and params in (None, {}):
                replay.append(line)
                return True
            return False
        ident = message["id"]
        if not isinstance(ident, (str, int)) or isinstance(ident, bool):
            return False
        try:
            if method == "initialize" and not initialized:
                init = mcp_types.InitializeRequestParams.model_validate(params or {}, by_name=False)
                asked = init.protocol_version
                result = mcp_types.InitializeResult(
                    protocol_version=(
                        asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
                    ),
                    capabilities=mcp_types.ServerCapabilities(
                        tools=mcp_types.ToolsCapability(list_changed=False)
                    ),
                    server_info=mcp_types.Implementation(name=name, version=version),
                    instructions=instructions,
                )
                wire.sent_initialize = answer(ident, result)
                sdk.begin_later()
                wire.dropping = ident
                client = init.client_info.name
                initialized = True
                replay.append(line)
                return True
            if not initialized:
                return False
            if method == "ping" and params in (None, {}):
                answer(ident, mcp_types.EmptyResult())
                return True
            if method == "tools/list" and params in (None, {}):
                answer(ident, listed)
                return True
            if method == "tools/call":
                if not isinstance(params, dict) or set(params) - {"name", "arguments", "_meta"}:
                    return False  # a task, or what else a later version may ask: the SDK's
                parsed = mcp_types.CallToolRequestParams.model_validate(params, by_name=False)
                if parsed.name not in {t["name"] for t in tools}:
                    return False
                task = asyncio.get_running_loop().create_task(tool_call(ident, parsed))
                calls.add(task)
                task.add_done_callback(calls.discard)
                return True
        except ValueError:  # pydantic's ValidationError: the SDK's server answers it
            return False
        return False

    importing = sdk.done
    while not importing.done():
        try:
            line = wire.lines.get_nowait()
        except queue.Empty:
            wire.arrived.clear()
            if not wire.lines.empty():
                continue
            waiting = asyncio.ensure_future(wire.arrived.wait())
            await asyncio.wait({waiting, importing}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            continue
        if line == _EOF:
            for task in list(calls):
                task.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            return None
        if not line.strip():
            continue
        if not handled(line):
            replay.append(line)
            break
    sdk.begin()
    await asyncio.wait({importing})
    return replay
