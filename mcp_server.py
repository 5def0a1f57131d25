"""``nodwyn-retrieval mcp``: index-search, index-update and recall over the Model Context Protocol.

A stdio server on the official ``mcp`` SDK (its low-level ``Server``), for the coding agents
people run: Claude Code, Codex CLI, Cursor and any other MCP client (docs/mcp.md). It serves the
three tools with the definitions, the checks and the text of :mod:`nodwyn_retrieval.tools` and
:meth:`Engine.call_tool`: a call that fails comes back as a tool error (``isError``) with its one
line, never as a failure of the server.

One :class:`Engine` a server process, opened at the first call (so starting the server costs the
client nothing) and closed when the client closes the connection. The working tree is ``--root``,
by default the directory the client starts the server in. This session's conversation is the
transcript ``--log FILE`` names, or else the newest transcript an agent is writing for the root
(the agent the client says it is: Claude Code's sessions for Claude Code, Codex's rollouts for
Codex, either for another client); the project's other sessions, of either agent, are its earlier
tasks, behind the person's switch (§9). The transcripts are read as they are and never written:
their ``.mem`` files live in the project's data directory (store.transcripts), and the guard's
records of this server's session go to a log of the project's own, ``records/mcp-*.jsonl`` in the
project's data directory, which ``status`` names.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import NotFound, RetrievalError
from nodwyn_retrieval.store.log import LogWriter
from nodwyn_retrieval.store.paths import (
    ProjectDirs,
    data_dir,
    git_toplevel,
    project_dirs,
    project_key,
)
from nodwyn_retrieval.store.transcripts import NODWYN, Reader, add_sessions, place, sniff
from nodwyn_retrieval.store.transcripts.claude import CLAUDE
from nodwyn_retrieval.store.transcripts.codex import CODEX
from nodwyn_retrieval.store.transcripts.sessions import AGENTS, find_sessions
from nodwyn_retrieval.tools import tool_definitions, working_rule

__all__ = ["RECORDS_DIR", "McpSession", "main", "mcp_tools", "record_logs", "serve"]

log = logging.getLogger("nodwyn_retrieval.mcp")

SERVER_NAME = "nodwyn-retrieval"
RECORDS_DIR = "records"
"""The project's folder (in its data directory) of the server sessions' own logs."""
TRANSCRIPTS_DIR = "transcripts"
"""The project's folder of the ``.mem`` files of the agents' transcripts it reads."""
_READERS: dict[str, Reader] = {"claude": CLAUDE, "codex": CODEX}


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
    name = (client or "").lower()
    for agent in AGENTS:
        if agent in name:
            return (agent,)
    return AGENTS


class McpSession:
    """What one server process serves: its root, and the Engine opened at the first call."""

    def __init__(
        self,
        root: Path,
        *,
        data_dir: str | None = None,
        config_dir: str | None = None,
        log: Path | None = None,
        workers: int | None = None,
    ) -> None:
        if not root.is_dir():
            raise NotFound(f"root {root} is not a directory")
        self.given_root = root
        self.data_dir = data_dir
        self.config_dir = config_dir
        self.log = log
        self.workers = workers
        self.engine: Engine | None = None
        self.records: LogWriter | None = None
        self.transcript: Path | None = None
        self.key: str | None = None
        self._lock = asyncio.Lock()

    async def get_engine(self, client: str | None) -> Engine:
        """The session's Engine, opened at the first call."""
        async with self._lock:
            if self.engine is None:
                self.engine = await self._open(client)
            return self.engine

    async def _open(self, client: str | None) -> Engine:
        top, dirs, key = await asyncio.to_thread(self._project)
        mem_dir = dirs.root / TRANSCRIPTS_DIR
        current = self.log
        reader = sniff(current) if current is not None else NODWYN
        if current is None:
            found = await asyncio.to_thread(find_sessions, top, _agents_of(client))
            if found:
                current, reader = found[0].path, _READERS[found[0].agent]
        if current is not None and reader is not NODWYN:
            place(current, reader, mem_dir)
        self.transcript = current

        def sessions() -> list[tuple[str, Path]]:
            out = []
            for s in find_sessions(top):
                place(s.path, _READERS[s.agent], mem_dir)
                out.append((s.id, s.path))
            return out

        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = dirs.root / RECORDS_DIR / f"mcp-{stamp}-{os.getpid()}.jsonl"
        records = await asyncio.to_thread(LogWriter, path)
        try:
            records.append(
                "note", turn=1, text=f"records of an MCP server session over {current or 'no log'}"
            )
            add_sessions(key, sessions)
            engine = await Engine.open(
                top, data_dir=self.data_dir, config_dir=self.config_dir, log=current,
                record=_sink(records), workers=self.workers,
            )  # fmt: skip
        except BaseException:
            add_sessions(key, None)
            records.close()
            raise
        self.key, self.records = key, records
        return engine

    def _project(self) -> tuple[Path, ProjectDirs, str]:
        top = git_toplevel(self.given_root) or self.given_root.resolve()
        key = project_key(top)
        return top, project_dirs(data_dir(self.data_dir), key), key

    async def call(
        self, name: str, arguments: dict[str, Any], client: str | None
    ) -> tuple[str, bool]:
        """One tool call: the text the model reads, and whether it is an error."""
        try:
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
        if self.key is not None:
            add_sessions(self.key, None)
        if self.engine is not None:
            engine, self.engine = self.engine, None
            await engine.close()
        if self.records is not None:
            with contextlib.suppress(RetrievalError):
                self.records.append("note", turn=self.records.turn, text="the server closed")
            self.records.close()


def _sink(writer: LogWriter) -> Callable[[dict[str, Any]], None]:
    """Records appended to the server session's own log."""

    def sink(event: dict[str, Any]) -> None:
        body = dict(event)
        kind = body.pop("kind")
        for k in ("seq", "ts", "turn"):
            body.pop(k, None)
        agent = body.pop("agent", "main")
        writer.append(kind, turn=writer.turn, agent=agent, **body)

    return sink


def _client_name(ctx: Any) -> str | None:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) else None


def build_server(session: McpSession) -> Any:
    """The low-level MCP server of one session."""
    import anyio  # noqa: PLC0415  the optional dependency's, imported when serving
    from mcp import types  # noqa: PLC0415
    from mcp.server.lowlevel import Server  # noqa: PLC0415

    tools = [types.Tool.model_validate(t) for t in mcp_tools()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        args = dict(params.arguments or {})
        text, error = await session.call(params.name, args, _client_name(ctx))
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
                await session.close()

    from nodwyn_retrieval import __version__  # noqa: PLC0415

    return Server(
        SERVER_NAME, version=__version__, instructions=working_rule(conversation=True),
        lifespan=lifespan,
        on_list_tools=list_tools, on_call_tool=call_tool,
    )  # fmt: skip


async def serve(session: McpSession) -> None:
    """Serve one client over stdin and stdout until it closes the connection."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    server = build_server(session)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    async def stop() -> None:
        await session.close()
        os._exit(0)  # stdin's reader is a thread blocked in a read: nothing else ends it

    def on_sigterm() -> None:
        # A client stopping the server with SIGTERM gets the Engine closed as at a closed stdin.
        if not stopping:
            stopping.append(loop.create_task(stop()))

    with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``mcp`` command's arguments (cli.py)."""
    q = sub.add_parser("mcp", parents=[common], help="serve the tools over MCP (stdio)")
    q.add_argument("--log", help="this session's transcript or log (default: the newest one)")


def main(ns: argparse.Namespace) -> int:
    """Run the server the command line asked for (cli.py's ``mcp``)."""
    try:
        import mcp.server.lowlevel  # noqa: F401, PLC0415
    except ImportError:
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
    try:
        session = McpSession(
            root, data_dir=getattr(ns, "data_dir", None),
            config_dir=getattr(ns, "config_dir", None), log=logp,
            workers=getattr(ns, "workers", None),
        )  # fmt: skip
    except RetrievalError as e:
        print(f"nodwyn-retrieval: {e}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(session))
    return 0
