"""A hostile clone: its configuration names programs to run, its files and names hold terminal
commands, its ignore files are FIFOs. Real git, real processes, a real terminal (a pty)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodwyn_retrieval import Engine

from tests.support import cli_env, make_repo


def _env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path / "data", tmp_path / "cfg")


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A clone whose configuration and attributes name a program at every place git would run
    one; the program leaves a mark when it runs."""
    mark = tmp_path / "ran"
    prog = tmp_path / "evil.sh"
    prog.write_text(f'#!/bin/sh\necho "$0 $*" >> {mark}\ncat\n', encoding="utf-8")
    prog.chmod(0o755)
    repo = make_repo(
        tmp_path / "clone",
        {"a.py": "def albatross():\n    return 1\n", ".gitattributes": "* filter=evil diff=evil\n"},
    )
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        (hooks / hook).write_text(prog.read_text(encoding="utf-8"), encoding="utf-8")
        (hooks / hook).chmod(0o755)
    extra = tmp_path / "included.cfg"
    extra.write_text(f"[core]\n\tfsmonitor = {prog}\n", encoding="utf-8")
    with open(repo / ".git" / "config", "a", encoding="utf-8") as f:
        f.write(
            f"[core]\n\tfsmonitor = {prog}\n\tpager = {prog}\n\tsshCommand = {prog}\n"
            f"\taskPass = {prog}\n\thooksPath = {hooks}\n\talternateRefsCommand = {prog}\n"
            f'[filter "evil"]\n\tclean = {prog} clean\n\tsmudge = {prog} smudge\n'
            f"\tprocess = {prog} process\n\trequired = true\n"
            f'[diff "evil"]\n\ttextconv = {prog}\n\tcommand = {prog}\n'
            f"[diff]\n\texternal = {prog}\n"
            f"[include]\n\tpath = {extra}\n"
        )
    # A file changed since the commit, and one not committed: git would refresh its index (the
    # fsmonitor, the clean filter) to say whether they changed.
    (repo / "a.py").write_text("def albatross():\n    return 2\n", encoding="utf-8")
    (repo / "new.py").write_text("def bittern():\n    pass\n", encoding="utf-8")
    os.utime(repo / ".git" / "index", (0, 0))
    return repo, mark


@pytest.mark.asyncio
async def test_a_clone_naming_programs_in_its_configuration_runs_none(tmp_path: Path) -> None:
    repo, mark = _hostile(tmp_path)
    # The check is real: git itself runs the program for a status in this clone. Its exit status
    # is not the point (the process filter's handshake, answered by cat, fails, and under load git
    # sometimes says so by failing the status): the mark is.
    await asyncio.to_thread(
        subprocess.run,
        ["git", "status", "--porcelain"], cwd=repo, env={**os.environ, "HOME": str(repo)},
        capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert mark.exists()
    mark.unlink()
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        for tool, args in (
            ("index-update", {}),
            ("index-search", {"query": "albatross", "scope": "repo"}),
            ("index-search", {"query": "bittern", "scope": "repo", "path": "new.py"}),
        ):
            out = await engine.call_tool(tool, args)
            assert not out.is_error, out.text
        found = await engine.call_tool("index-search", {"query": "bittern", "scope": "repo"})
        assert "new.py:1-2" in found.text
    cli = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "nodwyn_retrieval", "search", "albatross"],
        cwd=repo, env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert not mark.exists(), mark.read_text(encoding="utf-8")


def _terminal_run(
    args: list[str], cwd: Path, env: dict[str, str], *, stream: str = "stdout"
) -> tuple[int, bytes]:
    """The CLI's exit status and the bytes it writes to a real terminal (a pty) as its standard
    output (or its standard error)."""
    master, slave = pty.openpty()
    other = cwd.parent / "other-stream"
    try:
        with open(other, "wb") as otherf:
            outs = {"stdout": slave, "stderr": otherf} if stream == "stdout" else {
                "stdout": otherf, "stderr": slave}  # fmt: skip
            proc = subprocess.Popen(
                [sys.executable, "-m", "nodwyn_retrieval", *args],
                cwd=cwd, env=env, stdin=subprocess.DEVNULL, **outs,
            )  # fmt: skip
            os.close(slave)
            out = b""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1.0)
                if ready:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # the terminal's other end closed: the CLI is done
                        break
                    if not chunk:
                        break
                    out += chunk
                elif proc.poll() is not None:
                    break
            return proc.wait(timeout=60), out
    finally:
        os.close(master)


def _through_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    code, out = _terminal_run(args, cwd, env)
    assert code == 0, (cwd.parent / "other-stream").read_text(encoding="utf-8")
    return out


def test_a_file_or_a_name_holding_terminal_commands_reaches_a_terminal_shown(
    tmp_path: Path,
) -> None:
    title = "\x1b]2;owned\x07"
    clear = "\x1b[2J\x1b[3J"
    csi = "\x9b31m"
    repo = make_repo(
        tmp_path / "clone",
        {
            "a.py": f"def albatross():\n    return 1  # albatross {title}{clear}{csi}\n",
            f"b{clear}.py": "albatross = 1\n",
        },
    )
    env = _env(tmp_path)
    out = _through_a_terminal(["search", "albatross"], repo, env)
    assert b"albatross" in out
    assert b"\x1b" not in out
    assert "\x9b".encode() not in out
    assert b"\x07" not in out
    text = out.decode()
    assert "\\x1b]2;owned\\x07" in text
    assert "b\\x1b[2J\\x1b[3J.py:1-1" in text
    # --json to a terminal: still JSON, which reads back the file's own characters.
    raw = _through_a_terminal(["--json", "search", "albatross"], repo, env)
    doc = json.loads(raw.decode())
    assert b"\x1b" not in raw
    assert "\x9b".encode() not in raw
    paths = {hit["path"] for hit in doc["results"]}
    assert f"b{clear}.py" in paths
    # Into a pipe or a file the lines stay the file's own, byte for byte.
    piped = subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", "search", "albatross"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert title in piped.stdout
    assert f"b{clear}.py:1-1" in piped.stdout


@pytest.mark.asyncio
async def test_a_fifo_planted_as_a_gitignore_does_not_stall_every_search(tmp_path: Path) -> None:
    # git blocks opening it; past the untracked listing's bound the index alone is listed, and
    # every later search of the process lists it at once.
    repo = make_repo(tmp_path / "clone", {"a.py": "def albatross():\n    return 1\n"})
    os.mkfifo(repo / ".gitignore")
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        start = time.monotonic()
        out = await engine.call_tool("index-search", {"query": "albatross", "scope": "repo"})
        took = time.monotonic() - start
        assert "a.py:1-2" in out.text, out.text
        assert took < 8, took
        (repo / "a.py").write_text("def albatross_two():\n    return 2\n", encoding="utf-8")
        start = time.monotonic()
        out = await engine.call_tool("index-search", {"query": "albatross_two", "scope": "repo"})
        assert "a.py:1-2" in out.text, out.text
        assert time.monotonic() - start < 3


def test_an_error_naming_control_characters_reaches_a_terminal_shown(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "clone", {"a.py": "def albatross():\n    return 1\n"})
    named = tmp_path / "\x1b]2;owned\x07"
    named.mkdir()
    args = ["search", "albatross", "--scope", "conversation", "--log", str(named)]
    code, err = _terminal_run(args, repo, _env(tmp_path), stream="stderr")
    assert code == 2
    assert b"\x1b" not in err
    assert b"\x07" not in err
    assert "\\x1b]2;owned\\x07" in err.decode()


@pytest.mark.asyncio
@pytest.mark.parametrize("planted", [".git", ".gitignore", "sub/.gitignore"])
async def test_a_fifo_planted_in_a_plain_tree_is_not_waited_on(
    tmp_path: Path, planted: str
) -> None:
    # Outside git the walk reads each .gitignore through guard/beneath.py (a regular file only),
    # and a .git that is neither a directory nor a file is not a repository: nothing blocks.
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.py").write_text("def albatross():\n    return 1\n", encoding="utf-8")
    (tree / "sub" / "b.py").write_text("def bittern():\n    pass\n", encoding="utf-8")
    os.mkfifo(tree / planted)
    async with await Engine.open(
        tree, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        for query, where in (("albatross", "a.py:1-2"), ("bittern", "sub/b.py:1-2")):
            out = await asyncio.wait_for(
                engine.call_tool("index-search", {"query": query, "scope": "repo"}), 60
            )
            assert where in out.text, out.text
