"""nodwyn-retrieval mcp's start: the engine's process beside the protocol's, the index loading
while the client connects, the first call settling the session (docs/mcp.md, "How it starts")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.entry import Engine

from tests.support import make_repo, mcp_process
from tests.test_mcp import call, cli, env, server
from tests.test_transcripts import ClaudeSession

__all__ = ["env"]  # the fixture, shared with test_mcp

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def engine_processes(server_pid: int | None = None) -> list[int]:
    """The engine's process of the server this test started (or of server_pid)."""
    servers = (
        [server_pid] if server_pid else [p for p in _children(os.getpid()) if " mcp" in _cmdline(p)]
    )
    # The server's one child: forked from it (its command line the server's) or started anew.
    return [c for s in servers for c in _children(s)]


def engine_started(server_pid: int) -> list[int]:
    """The engine's process of the server server_pid, waited for up to 10 s (none when it never
    came)."""
    engines: list[int] = []
    for _ in range(200):
        engines = engine_processes(server_pid)
        if engines:
            break
        time.sleep(0.05)
    return engines


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _files(n: int) -> dict[str, str]:
    """A tree large enough that loading it is still going on when the first call comes."""
    files = {
        f"pkg{i % 17}/mod{i}.py": "".join(
            f"def handler_{i}_{j}(request, value):\n    return value * {j} + {i}\n\n"
            for j in range(40)
        )
        for i in range(n)
    }
    files["pkg3/heron.py"] = "def heron_formula(a, b, c):\n    s = (a + b + c) / 2\n    return s\n"
    return files


@pytest.mark.asyncio
async def test_a_search_at_once_while_the_index_loads(tmp_path: Path, env: dict[str, str]) -> None:
    files = _files(400)
    root = make_repo(tmp_path / "repo", files)
    async with server(root, env, tmp_path / "err", client="cursor") as s:
        # sent as soon as initialize is answered: the engine's process is still building the
        # index the tree has none of yet
        text, err = await call(s, "index-search", query="heron formula", scope="repo")
        assert not err, text
        assert "pkg3/heron.py:" in text
        first = text
        text, err = await call(s, "index-update")
        assert not err, text
        assert text.startswith(f"index of the repository: {len(files)} files")
    assert "Traceback" not in (tmp_path / "err").read_text()
    # the same answer as the engine itself gives on the index the server left
    engine = await Engine.open(
        root, data_dir=env["NODWYN_RETRIEVAL_DATA_DIR"],
        config_dir=env["NODWYN_RETRIEVAL_CONFIG_DIR"], workers=1,
    )  # fmt: skip
    try:
        again = await engine.index_search("heron formula", "repo")
    finally:
        await engine.close()
    assert again.text == first


@pytest.mark.asyncio
async def test_a_transcript_begun_after_the_start_is_the_sessions(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    async with server(root, env, tmp_path / "err") as s:
        # the engine opened at the start found no transcript; the session writes its first lines
        # now, before its first call
        await asyncio.sleep(0.5)
        c = ClaudeSession(Path(env["CLAUDE_CONFIG_DIR"]), root)
        c.user("Which flag turns on the capybara mode?")
        c.assistant("The --capybara flag.")
        text, err = await call(s, "index-search", query="capybara mode", scope="conversation")
        assert not err, text
        assert "capybara" in text
        text, err = await call(s, "index-search", query="x", scope="repo")
        assert not err, text
    (log,) = Path(env["NODWYN_RETRIEVAL_DATA_DIR"]).glob("projects/*/records/mcp-*.jsonl")
    first = json.loads(log.read_text().splitlines()[0])
    assert first["text"] == f"records of an MCP server session over {c.path}"


@pytest.mark.asyncio
async def test_an_unusable_data_directory_is_a_tool_error_at_each_call(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def walrus():\n    pass\n"})
    Path(env["NODWYN_RETRIEVAL_DATA_DIR"]).write_text("not a directory\n")
    async with server(root, env, tmp_path / "err") as s:
        for _ in range(2):
            text, err = await call(s, "index-search", query="walrus", scope="repo")
            assert err
            assert "not a directory" in text
            assert "\n" not in text
        listed = await s.list_tools()
        assert len(listed.tools) == 3
    assert "Traceback" not in (tmp_path / "err").read_text()


@pytest.mark.asyncio
async def test_a_root_gone_after_the_start(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def walrus():\n    pass\n"})
    async with server(root, env, tmp_path / "err") as s:
        text, err = await call(s, "index-search", query="walrus", scope="repo")
        assert not err, text
        shutil.rmtree(root)
        for name, args in [
            ("index-search", {"query": "walrus", "scope": "repo"}),
            ("index-update", {}),
        ]:
            text, err = await call(s, name, **args)
            assert err
            assert text == f"root {root} is not a directory"
    assert "Traceback" not in (tmp_path / "err").read_text()


@pytest.mark.asyncio
async def test_the_engine_process_ending_is_survived(tmp_path: Path, env: dict[str, str]) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def walrus():\n    pass\n"})
    async with server(root, env, tmp_path / "err") as s:
        text, err = await call(s, "index-search", query="walrus", scope="repo")
        assert not err, text
        (pid,) = engine_processes()
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            if _gone(pid):
                break
            await asyncio.sleep(0.05)
        # the next call starts another, which answers
        text, err = await call(s, "index-search", query="walrus", scope="repo")
        assert not err, text
        assert "a.py:" in text
        (again,) = engine_processes()
        assert again != pid
    assert _gone(again)


def test_stdin_closed_and_sigterm_leave_no_engine_process(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def marmot():\n    pass\n"})
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "some-client", "version": "1"}}}  # fmt: skip
    for stop in ("stdin", "sigterm"):
        with mcp_process(root, env) as p:
            assert p.stdin is not None
            assert p.stdout is not None
            try:
                p.stdin.write(json.dumps(hello) + "\n")
                p.stdin.flush()
                assert json.loads(p.stdout.readline())["id"] == 1
                engines = engine_started(p.pid)
                assert len(engines) == 1
                if stop == "stdin":
                    p.stdin.close()
                else:
                    p.terminate()
                assert p.wait(timeout=60) == 0
            finally:
                if p.poll() is None:
                    p.kill()
        assert _gone(engines[0]), stop
    # no call came: what the loading recorded (the guard's reads of the tree) is written at the
    # close, and the log ends as any session's
    st = cli(env, root, "status", "--json")
    assert st.returncode == 0, st.stderr
    logs: list[Any] = json.loads(st.stdout)["server_logs"]
    assert all(
        json.loads(Path(x).read_text().splitlines()[-1])["text"] == "the server closed"
        for x in logs
    )


def test_the_engine_process_holds_none_of_the_clients_pipes(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Forked from the server's process, the engine's must let go of the client's stdin and
    stdout: else a client would not see the end of its stream when the server ends."""
    root = make_repo(tmp_path / "repo", {"a.py": "def marmot():\n    pass\n"})
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "some-client", "version": "1"}}}  # fmt: skip
    with mcp_process(root, env) as p:
        assert p.stdin is not None
        assert p.stdout is not None
        try:
            client_pipes = {
                f"pipe:[{os.fstat(f.fileno()).st_ino}]" for f in (p.stdin, p.stdout)
            }
            p.stdin.write(json.dumps(hello) + "\n")
            p.stdin.flush()
            assert json.loads(p.stdout.readline())["id"] == 1
            engines = engine_started(p.pid)
            assert len(engines) == 1
            held = set()
            for fd in os.listdir(f"/proc/{engines[0]}/fd"):
                with contextlib.suppress(OSError):
                    held.add(os.readlink(f"/proc/{engines[0]}/fd/{fd}"))
            assert any(h.startswith("pipe:") for h in held)  # its own pipes to the server
            assert not held & client_pipes
            server_held = {
                os.readlink(f"/proc/{p.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{p.pid}/fd")
            }
            assert client_pipes <= server_held  # the server's own, as they should be
            p.stdin.close()
            assert p.wait(timeout=60) == 0
            assert p.stdout.read() == ""  # the end of the stream, seen
        finally:
            if p.poll() is None:
                p.kill()
