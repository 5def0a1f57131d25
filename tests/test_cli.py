"""The command line as people and outside checks use it: a process, its exit status, its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import make_repo

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path, env_dirs: tuple[Path, Path]) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NODWYN_RETRIEVAL_DATA_DIR": str(env_dirs[0]),
        "NODWYN_RETRIEVAL_CONFIG_DIR": str(env_dirs[1]),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "keychain/bind.py": "def check_binding(host):\n    return host == 'example'\n",
            "server/http.py": "def serve(port):\n    return port\n",
        },
    )


def test_search_prints_ranked_results_and_json(repo: Path, dirs: tuple[Path, Path]) -> None:
    text = run("search", "check binding", cwd=repo, env_dirs=dirs)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == "1 of 2 chunks in 2 files matches"
    assert text.stdout.splitlines()[1].startswith("keychain/bind.py:1-2: def check_binding")
    out = run("--json", "search", "check binding", "--limit", "1", cwd=repo, env_dirs=dirs)
    doc = json.loads(out.stdout)
    assert set(doc) == {"scope", "query", "header", "results", "text"}
    assert doc["scope"] == "repo"
    assert set(doc["header"]) >= {"chunks", "files", "partial", "not_read", "text"}
    (hit,) = doc["results"]
    assert set(hit) == {"path", "start", "end", "first_line", "lines", "score", "provenance"}
    assert hit["provenance"] == "external:file"
    assert hit["lines"][0] == {"n": 1, "text": "def check_binding(host):"}


def test_global_options_stand_before_or_after_the_command(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    before = run(
        "--root", str(repo), "--json", "search", "serve port", cwd=repo.parent, env_dirs=dirs
    )
    after = run(
        "search", "serve port", "--root", str(repo), "--json", cwd=repo.parent, env_dirs=dirs
    )
    assert before.returncode == after.returncode == 0
    assert json.loads(before.stdout)["results"] == json.loads(after.stdout)["results"]


def test_update_and_status_and_forget(repo: Path, dirs: tuple[Path, Path]) -> None:
    up = run("update", "--json", cwd=repo, env_dirs=dirs)
    assert up.returncode == 0, up.stderr
    doc = json.loads(up.stdout)
    assert {"files", "read", "unchanged", "removed", "skipped", "refused", "left_out_unasked",
            "partial", "seconds", "bytes"} <= set(doc)  # fmt: skip
    assert doc["files"] == 2
    st = json.loads(run("status", "--json", cwd=repo, env_dirs=dirs).stdout)
    assert {"project", "index_dir", "tasks_dir", "index_bytes", "trees", "earlier_tasks",
            "embeddings"} <= set(st)  # fmt: skip
    assert st["embeddings"] == "off"
    assert st["earlier_tasks"] is False
    assert st["trees"][0]["files"] == 2
    assert Path(st["index_dir"]).is_dir()
    gone = run("forget", cwd=repo, env_dirs=dirs)
    assert gone.returncode == 0
    assert not any(Path(st["index_dir"]).rglob("*.ck"))


def test_tools_lists_the_definitions_and_the_rule(repo: Path, dirs: tuple[Path, Path]) -> None:
    out = json.loads(run("tools", "--json", cwd=repo, env_dirs=dirs).stdout)
    assert [t["name"] for t in out["tools"]] == ["index-search", "index-update", "recall"]
    assert "index-search" in out["rule"]


def test_refresh_brings_several_trees_up_to_date(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    other = make_repo(tmp_path / "other", {"a.py": "def a():\n    pass\n"})
    out = run("refresh", str(repo), str(other), "--json", cwd=tmp_path, env_dirs=dirs)
    assert out.returncode == 0, out.stderr
    trees = json.loads(out.stdout)["trees"]
    assert [t["files"] for t in trees] == [2, 1]
    assert all(t["partial"] is False for t in trees)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", ""], "query is empty: give the words or names to search for"),
        (["search", "x", "--limit", "0"], "limit must be between 1 and 20, got 0"),
        (["search", "x", "--limit", "21"], "limit must be between 1 and 20, got 21"),
        (
            ["search", "x", "--scope", "web"],
            "scope must be repo, conversation or earlier, got 'web'",
        ),
        (["search", "x", "--path", "../elsewhere"], "path ../elsewhere is outside the repository"),
        (["search", "x", "--path", "nothing/here"], "path nothing/here does not exist"),
        (
            ["search", "x", "--log", "missing.jsonl"],
            "no log at missing.jsonl: give the path of a session's .jsonl",
        ),
        (
            ["recall", "3", "--log", "missing.jsonl"],
            "no log at missing.jsonl: give the path of a session's .jsonl",
        ),
        (["frobnicate"], None),
    ],
    ids=[
        "empty",
        "limit0",
        "limit21",
        "scope",
        "outside",
        "missing",
        "no-log",
        "recall-no-log",
        "command",
    ],
)
def test_bad_input_exits_2_with_one_clear_line(
    repo: Path, dirs: tuple[Path, Path], args: list[str], message: str | None
) -> None:
    out = run(*args, cwd=repo, env_dirs=dirs)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nodwyn-retrieval: ")
    if message is not None:
        assert lines[0] == f"nodwyn-retrieval: {message}"
    assert "Traceback" not in out.stderr


def test_a_query_that_begins_with_a_dash_follows_double_dash(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    out = run("search", "--", "-serve port", cwd=repo, env_dirs=dirs)
    assert out.returncode == 0, out.stderr
    assert "server/http.py" in out.stdout


def test_a_search_with_no_match_exits_0(repo: Path, dirs: tuple[Path, Path]) -> None:
    out = run("search", "zzzunmatched", cwd=repo, env_dirs=dirs)
    assert out.returncode == 0
    assert "no chunk matches 'zzzunmatched'" in out.stdout


def _task_log(repo: Path, data: Path, task: str) -> Path:
    from nodwyn_retrieval.store.log import LogWriter
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    tasks = project_dirs(data, project_key(repo)).tasks
    with LogWriter(tasks / f"{task}.jsonl") as w:
        w.append("person.message", turn=1, text="Why does the pangolin cache miss?")
        w.append("turn.end", turn=1)
    return tasks / f"{task}.jsonl"


def test_recall_of_a_task_is_an_earlier_task_and_obeys_the_switch(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    _task_log(repo, dirs[0], "old1")
    off = run("recall", "1", "--task", "old1", cwd=repo, env_dirs=dirs)
    assert off.returncode == 1
    assert "earlier on" in off.stderr
    assert run("earlier", "on", cwd=repo, env_dirs=dirs).returncode == 0
    on = run("recall", "1", "--task", "old1", cwd=repo, env_dirs=dirs)
    assert on.returncode == 0, on.stderr
    assert "pangolin" in on.stdout


def test_the_command_line_never_writes_to_the_log_it_reads(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    log = _task_log(repo, dirs[0], "live")
    with log.open("ab") as f:
        f.write(b'{"seq": 3, "kind": "person.mess')  # a writer caught mid-line
    before = log.read_bytes()
    out = run("search", "pangolin cache", "--scope", "conversation", "--log", str(log),
              cwd=repo, env_dirs=dirs)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "pangolin" in out.stdout
    assert (
        run("search", "check binding", "--log", str(log), cwd=repo, env_dirs=dirs).returncode == 0
    )
    assert log.read_bytes() == before


def test_a_malformed_task_id_is_bad_input_whatever_the_switch(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    out = run("recall", "1", "--task", "../elsewhere", cwd=repo, env_dirs=dirs)
    assert out.returncode == 2
    assert out.stderr.startswith("nodwyn-retrieval: task id '../elsewhere' is not a task id")
