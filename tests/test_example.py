"""examples/agent_loop.py runs as a user would run it: from a directory of the user's own that holds
an ``errors.py`` and a ``store/`` package, with nothing but the installed library."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from nodwyn_retrieval.store.log import read_log

from tests.support import make_repo

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agent_loop.py"


def _user_dir(tmp_path: Path) -> Path:
    user = tmp_path / "user"
    (user / "store").mkdir(parents=True)
    (user / "errors.py").write_text("class ActorDead(Exception):\n    'the user own'\n")
    (user / "store" / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, user / "agent_loop.py")
    return user


def _run(user: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "agent_loop.py", *args],
        cwd=user, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_example_loop_runs_offline_with_both_tool_formats(tmp_path: Path) -> None:
    out = _run(_user_dir(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("turn 1 (Anthropic tools)")
    assert "  [index-search] 2 of 2 chunks in 2 files match" in lines
    assert any(line.startswith("  [read-file] 1: ") for line in lines)
    assert any(line.startswith("turn 2 (OpenAI tools)") for line in lines)
    assert any(line.startswith("  [index-search] ranked ") for line in lines)
    recall = next(line for line in lines if line.startswith("  [recall] "))
    assert " · tool.result · turn 1 · " in recall
    assert lines[-1] == "the loop wrote 14 events to its log; the engine kept 5 records"
    assert out.stderr == ""


def test_the_example_searches_a_repository_it_is_given_and_keeps_its_index(
    tmp_path: Path,
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"net/refuse.py": "def refuse_localhost(host):\n    '''a key is never sent to localhost'''"
         "\n    return host != 'localhost'\n", "README.md": "a key and a host\n"},
    )  # fmt: skip
    data = tmp_path / "data"
    out = _run(_user_dir(tmp_path), str(repo), "--data-dir", str(data))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "  [read-file] 1: def refuse_localhost(host):" in out.stdout.splitlines()
    assert list(data.glob("projects/*/index/trees/*")), "the index was kept in --data-dir"


def test_the_log_the_example_writes_is_one_every_reader_reads(tmp_path: Path) -> None:
    """The example's writer, taken alone: every line it writes is an event, none skipped."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import agent_loop  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(ROOT / "examples"))
    log = agent_loop.SessionLog(tmp_path / "t.jsonl")
    log.turn = 1
    log.add("person.message", text="héllo")
    log.add("tool.result", call_id="c1", name="read-file", args={"path": "a"}, output="x",
            error=False)  # fmt: skip
    got = read_log(tmp_path / "t.jsonl")
    assert got.skipped == 0
    assert [e["seq"] for e in got.events] == [1, 2]
    assert got.events[0]["ts"].endswith("Z")
