"""A session log at the edge of the file system: one that stops being a file in the middle of a
session, and one whose disk fills up under an append. Never a hang, and no event lost: a call that
cannot read the log says so in one line, and the events appended once space is back are searched
and recalled. Through the library in a process of its own (a hang fails the test, a file size
limit stands in for a full disk)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from nodwyn_retrieval.store.log import read_log

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


def _session(
    script: str, repo: Path, tmp_path: Path, log: Path
) -> subprocess.CompletedProcess[str]:
    """script run in a process of its own on repo, its data under tmp_path and the session log
    log; it must end well (its output is what the test reads)."""
    out = subprocess.run(
        [sys.executable, "-c", script, str(repo), str(tmp_path / "data"), str(log)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out


def test_a_session_log_replaced_by_a_fifo_blocks_no_call(repo: Path, tmp_path: Path) -> None:
    # Every call reads the log's tail first: opened as a file, a FIFO there blocked that open,
    # and with it the event loop (no timeout could fire), for ever. Run in a process of its
    # own so that a hang fails the test instead of holding the suite.
    log = tmp_path / "task.jsonl"
    Log(log).add("person.message", text="albatross question")
    out = _session(_FIFO_SESSION, repo, tmp_path, log)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["repo"].startswith("answered 1 of"), out.stdout
    assert lines["update"].startswith("answered index of the repository"), out.stdout
    for name in ("conversation", "recall"):
        assert lines[name] == f"refused NotFound no log at {log}: it is not a regular file", (
            out.stdout
        )
    assert "Traceback" not in out.stderr


_FULL_DISK_SESSION = textwrap.dedent(
    """
    import asyncio, json, os, resource, signal, sys
    from nodwyn_retrieval import Engine
    from nodwyn_retrieval.errors import StoreError

    repo, data, log = sys.argv[1:4]

    async def main():
        async with await Engine.open(repo, data_dir=data, config_dir=data + "-cfg", log=log,
                                     owns_log=True, workers=1) as e:
            e.log.append("person.message", turn=1, text="albatross first")
            # The file may grow by 100 bytes more: the next event's line is cut there.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(log) + 100, hard))
            try:
                e.log.append("person.message", turn=1, text="lost " * 200)
                print("full", "appended")
            except StoreError as exc:
                print("full", type(exc).__name__)
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            seq = e.log.append("person.message", turn=1, text="albatross after the disk")["seq"]
            print("seq", seq)
            print("recall", json.dumps((await e.recall(seq)).text.splitlines()[-1]))
            found = await e.index_search("disk", "conversation")
            print("found", json.dumps(found.text))

    asyncio.run(main())
    """
)


def test_an_append_that_meets_a_full_disk_loses_no_later_event(repo: Path, tmp_path: Path) -> None:
    # The writer's buffer kept the line a full disk refused, and the next append wrote it whole
    # ahead of its own: the event said not to be written was in the log after all, with the seq
    # the next event was given, so readers skipped the next event (a seq not above the one
    # before) and it was never searched or recalled. RLIMIT_FSIZE in a process of its own makes
    # the file system refuse the write as a full disk does.
    log = tmp_path / "task.jsonl"
    out = _session(_FULL_DISK_SESSION, repo, tmp_path, log)
    said = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert said["full"] == "StoreError"
    assert json.loads(said["recall"]) == "albatross after the disk"
    assert "albatross after the disk" in json.loads(said["found"])
    # In the file: the refused line's part is a line of its own, skipped; no "lost" event.
    events = read_log(log).events
    assert [e["text"] for e in events if e["kind"] == "person.message"] == [
        "albatross first",
        "albatross after the disk",
    ]
    assert read_log(log).skipped == 1
