"""Test support: real git repositories built in temporary directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}

CHECKOUT = Path(__file__).resolve().parent.parent


def cli_env(data: Path, config: Path) -> dict[str, str]:
    """A command's environment: this one, with the data and configuration directories given."""
    return {
        **os.environ,
        "NODWYN_RETRIEVAL_DATA_DIR": str(data),
        "NODWYN_RETRIEVAL_CONFIG_DIR": str(config),
        "PYTHONPATH": str(CHECKOUT),
    }


def server_env(tmp_path: Path) -> dict[str, str]:
    """An MCP server's environment as a client starts it: nothing of this one's but ``PATH``,
    every home (its own, the agents' transcripts', the project's data and configuration) made
    in tmp_path."""
    env = {
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CODEX_HOME": str(tmp_path / "codex"),
        "NODWYN_RETRIEVAL_DATA_DIR": str(tmp_path / "data"),
        "NODWYN_RETRIEVAL_CONFIG_DIR": str(tmp_path / "config"),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(CHECKOUT),
        **GIT_ENV,
    }
    for k in ("HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        Path(env[k]).mkdir(exist_ok=True)
    return env


def git(cwd: Path, *args: str) -> str:
    """Run git in cwd with a fixed identity; return its stdout."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def make_repo(path: Path, files: dict[str, str | bytes], *, commit: bool = True) -> Path:
    """A real git repository at path holding files, committed unless told otherwise."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, body in files.items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            f.write_bytes(body)
        else:
            f.write_text(body, encoding="utf-8")
    if commit and files:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "fixture")
    return path


def ts_by_seq(seq: int) -> str:
    """A distinct time for each event: 09:MM:SS by its seq."""
    return f"2026-10-15T09:{seq // 60 % 60:02d}:{seq % 60:02d}Z"


class Log:
    """A session log written line by line, as LOG-FORMAT.md has it."""

    def __init__(self, path: Path, ts: Callable[[int], str] = ts_by_seq) -> None:
        self.path = path
        self.ts = ts
        self.seq = 0
        self.turn = 1

    def add(self, kind: str, agent: str = "main", **fields: Any) -> int:
        self.seq += 1
        event = {
            "seq": self.seq,
            "ts": self.ts(self.seq),
            "kind": kind,
            "turn": self.turn,
            "agent": agent,
            **fields,
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")
        return self.seq

    def call(self, name: str, output: str, agent: str = "main", **args: Any) -> tuple[int, int]:
        """A reply making one call, and the call's result: their seqs."""
        cid = f"c{self.seq + 1}"
        reply = self.add(
            "llm.resp", agent, text="Let me look.", calls=[{"id": cid, "name": name, "args": args}]
        )
        res = self.add("tool.result", agent, call_id=cid, name=name, args=args, output=output)
        return reply, res

    def result(self, output: str, name: str = "fs-read", **args: Any) -> int:
        """A reply making one call in the main context, and the result's seq."""
        return self.call(name, output, **args)[1]

    def end_turn(self) -> int:
        seq = self.add("turn.end")
        self.turn += 1
        return seq


def shifted_time(offset: Callable[[], float]) -> Any:
    """A stand-in for the ``time`` module whose monotonic clock runs ``offset()`` seconds ahead
    (a module's deadlines made to pass, or not, without waiting); its other clocks are time's."""

    class Time:
        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + offset()

        perf_counter = staticmethod(time.perf_counter)
        thread_time = staticmethod(time.thread_time)
        time = staticmethod(time.time)

    return Time


def raw_mcp_client(p: subprocess.Popen[str]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A client of the JSON lines it writes to an :func:`mcp_process` (what the SDK's client
    cannot send), after the handshake: ``call(message)`` sends one message and, when it has an
    ``id``, answers the server's reply."""
    assert p.stdin is not None
    assert p.stdout is not None
    stdin, stdout = p.stdin, p.stdout

    def call(obj: dict[str, Any]) -> dict[str, Any] | None:
        stdin.write(json.dumps(obj) + "\n")
        stdin.flush()
        return json.loads(stdout.readline()) if "id" in obj else None

    hello = call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "some-client", "version": "1"}}})  # fmt: skip
    assert hello is not None
    assert hello["id"] == 1
    call({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return call


def mcp_process(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``nodwyn-retrieval mcp`` started in root as a client starts it, its three pipes as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "nodwyn_retrieval", "mcp", "--workers", "1"],
        cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def run_cli(
    cwd: Path, tmp_path: Path, *args: str | bytes, **env: str
) -> subprocess.CompletedProcess[bytes]:
    """The command line run in cwd with its data and configuration under tmp_path (and env's
    variables beside them), its output kept as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", *args],
        cwd=cwd, env={**cli_env(tmp_path / "data", tmp_path / "cfg"), **env},
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip


@asynccontextmanager
async def mcp_session(cwd: Path, tmp_path: Path, *args: str) -> AsyncIterator[Any]:
    """A real MCP client's session (the SDK's own, initialized) with the server started in cwd
    with one worker and args; its standard error goes to tmp_path/err."""
    from mcp import ClientSession, types
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "nodwyn_retrieval", "mcp", "--workers", "1", *args],
        env=server_env(tmp_path),
        cwd=str(cwd),
    )
    with open(tmp_path / "err", "w", encoding="utf-8") as err:  # noqa: ASYNC230  the child writes it
        async with stdio_client(params, errlog=err) as (read, write):
            info = types.Implementation(name="cursor", version="1.0")
            async with ClientSession(read, write, client_info=info) as session:
                await session.initialize()
                yield session


def small_repo(tmp_path: Path) -> Path:
    """A committed repository of two files (a.py defining albatross, d/b.py bittern) at
    tmp_path/repo: the boundary tests' tree."""
    return make_repo(
        tmp_path / "repo",
        {"a.py": "def albatross():\n    return 1\n", "d/b.py": "def bittern():\n    pass\n"},
    )


def one_line_error(text: str) -> None:
    """text is one short line, no traceback: what bad input is answered with."""
    assert "\n" not in text
    assert "Traceback" not in text
    assert len(text) < 400, text
