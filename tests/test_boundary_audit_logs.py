"""A session log at the edge of the file system: one that stops being a file in the middle of a
session. Never a hang: a call that cannot read the log says so in one line and every other call
answers. Through the library in a process of its own (a hang fails the test)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import Log, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"a.py": "def albatross():\n    return 1\n", "d/b.py": "def bittern():\n    pass\n"},
    )


# -- a session log that is no longer a file --------------------------------------------------

_FIFO_SESSION = textwrap.dedent(
    """
    import asyncio, os, sys
    from nodwyn_retrieval import Engine
    from nodwyn_retrieval.errors import RetrievalError

    repo, data, log = sys.argv[1:4]

    async def main():
        async with await Engine.open(repo, data_dir=data, config_dir=data + "-cfg", log=log,
                                     workers=1) as e:
            await e.index_search("albatross", "conversation")
            os.unlink(log)
            os.mkfifo(log)
            calls = [
                ("repo", lambda: e.index_search("albatross", "repo")),
                ("conversation", lambda: e.index_search("albatross", "conversation")),
                ("recall", lambda: e.recall(1)),
                ("update", lambda: e.index_update()),
            ]
            for name, call in calls:
                try:
                    out = await call()
                    print(name, "answered", out.text.splitlines()[0], flush=True)
                except RetrievalError as exc:
                    print(name, "refused", type(exc).__name__, exc, flush=True)

    asyncio.run(main())
    """
)


def test_a_session_log_replaced_by_a_fifo_blocks_no_call(repo: Path, tmp_path: Path) -> None:
    # Every call reads the log's tail first: opened as a file, a FIFO there blocked that open,
    # and with it the event loop (no timeout could fire), for ever. Run in a process of its
    # own so that a hang fails the test instead of holding the suite.
    log = tmp_path / "task.jsonl"
    Log(log).add("person.message", text="albatross question")
    out = subprocess.run(
        [sys.executable, "-c", _FIFO_SESSION, str(repo), str(tmp_path / "data"), str(log)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["repo"].startswith("answered 1 of"), out.stdout
    assert lines["update"].startswith("answered index of the repository"), out.stdout
    for name in ("conversation", "recall"):
        assert lines[name] == f"refused NotFound no log at {log}: it is not a regular file", (
            out.stdout
        )
    assert "Traceback" not in out.stderr
