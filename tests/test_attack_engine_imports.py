"""An engine's process started anew imports nothing from the clone it serves.

A client starts the MCP server in the workspace, a clone. The server's engine runs in a process of
its own, forked at the start; one that ends (killed, out of memory) is started again at the next
call, as ``python -c ...``, in the server's directory, and ``-c`` puts that directory first on
``sys.path``: a ``json.py`` at the clone's top was imported, and run, by that engine. It is
started with ``-P`` and this process's ``sys.path`` now (``mcp_server._engine_command``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.mcp_server import _spawn

from tests.support import make_repo, raw_mcp_client, server_env


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """A clone whose top holds json.py, which leaves a mark when imported (then gives the real
    json, so nothing else shows); the clone and the mark's path."""
    marker = tmp_path / "marker"
    planted = (
        "import sys\n"
        f"open({str(marker)!r}, 'a').write('imported from the clone\\n')\n"
        "del sys.modules['json']\n"
        "sys.path[:] = [p for p in sys.path if p not in ('', '.', __file__.rsplit('/', 1)[0])]\n"
        "import json\n"
    )
    clone = make_repo(
        tmp_path / "clone",
        {"app.py": "def inside_wombat():\n    return 1\n", "json.py": planted},
    )
    return clone, marker


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
        return [int(x) for x in f.read().split()]


def test_an_engine_started_again_in_a_clone_imports_nothing_of_it(tmp_path: Path) -> None:
    clone, marker = _planted(tmp_path)
    env = server_env(tmp_path)
    # As the console script runs: the current directory is not on sys.path (-P).
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "nodwyn_retrieval", "mcp", "--workers", "1"],
        cwd=clone, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    with server:
        try:
            call = raw_mcp_client(server)
            search = {"name": "index-search",
                      "arguments": {"query": "inside wombat", "scope": "repo"}}  # fmt: skip
            for i in range(2, 5):
                reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": search})
                assert reply is not None
                assert reply["result"]["isError"] is False, reply
                assert "app.py" in reply["result"]["content"][0]["text"]
                # The engine ends (as one killed for its memory would): the next call starts
                # another, once the server has reaped this one.
                engines = _children(server.pid)
                assert engines, "no engine process"
                for pid in engines:
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 60
                while set(engines) & set(_children(server.pid)):
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
        finally:
            server.kill()
    assert not marker.exists(), marker.read_text()


def test_the_engines_command_started_in_a_clone_imports_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process itself, started by the function the server uses, in the clone."""
    clone, marker = _planted(tmp_path)
    for k, v in server_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(clone)
    settings = {"root": str(clone), "data_dir": None, "config_dir": None, "log": None,
                "workers": 1, "server_pid": os.getpid()}  # fmt: skip
    proc = _spawn(settings)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        request = {"id": 1, "name": "index-search", "client": None,
                   "arguments": {"query": "inside wombat", "scope": "repo"}}  # fmt: skip
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert "app.py" in answer["text"], answer
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
    assert not marker.exists(), marker.read_text()
