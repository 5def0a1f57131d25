"""The command line as people and outside checks use it: a process, its exit status, its JSON."""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from nodwyn_retrieval import __version__
from nodwyn_retrieval.cli import _parser
from nodwyn_retrieval.store.log import records_path

from tests.support import cli_env, make_repo

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path, env_dirs: tuple[Path, Path]) -> subprocess.CompletedProcess[str]:
    env = cli_env(*env_dirs)
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
    assert not any(Path(st["index_dir"]).rglob("*.ckp"))


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
    assert not records_path(log).exists()


def test_a_malformed_task_id_is_bad_input_whatever_the_switch(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    out = run("recall", "1", "--task", "../elsewhere", cwd=repo, env_dirs=dirs)
    assert out.returncode == 2
    assert out.stderr.startswith("nodwyn-retrieval: task id '../elsewhere' is not a task id")


def test_version_comes_from_the_package_and_loads_neither_the_engine_nor_numpy(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nodwyn_retrieval", "--version"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0
    assert out.stdout == f"nodwyn-retrieval {__version__}\n"
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}
    assert "nodwyn_retrieval.cli" in imported
    assert not {"nodwyn_retrieval.entry", "numpy", "nodwyn_retrieval.bus"} & imported
    probe = "import sys, nodwyn_retrieval; print(sorted(m for m in sys.modules if m == 'numpy' " \
        "or m.startswith('nodwyn_retrieval.')))"
    bare = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    assert bare.stdout.strip() == "[]"


def _walk(p: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(p.prog, p)]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for q in a.choices.values():
                out.extend(_walk(q))
    return out


def test_every_option_of_every_command_says_what_it_does_and_its_default() -> None:
    parsers = _walk(_parser())
    assert len(parsers) >= 12
    for prog, p in parsers:
        assert p.description or prog == "nodwyn-retrieval memory", prog
        for a in p._actions:
            if not a.option_strings or a.dest in ("help", "version"):
                continue
            assert a.help, (prog, a.dest)
            assert "default" in a.help, (prog, a.dest, a.help)
            if a.dest == "scope":
                assert all(s in a.help for s in ("repo", "conversation", "earlier"))
    top = _parser().format_help()
    assert "The composition root" not in top
    assert "ranked\nsearch of the working tree" in top


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [(["serch", "x"], "did you mean 'search'?"), (["search", "x", "--lmit", "3"],
      "did you mean --limit?"), (["memory", "serch", "x"], "did you mean 'search'?")],
)  # fmt: skip
def test_a_mistyped_command_or_option_gets_a_suggestion(
    repo: Path, dirs: tuple[Path, Path], args: list[str], suggestion: str
) -> None:
    out = run(*args, cwd=repo, env_dirs=dirs)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert suggestion in line


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "nodwyn_retrieval", "search", "check binding serve port"],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert p.stdout is not None
    assert p.stderr is not None
    p.stdout.close()  # as `| head -0` does: nobody reads what the search prints
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=120) == 0
    assert err == ""


def test_the_header_counts_the_chunks_that_match_and_plurals_are_right(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "one",
        {"notes.md": "\n\n   \nThe walrus migration plan.\nmore text here\n"},
    )
    hit = run("search", "walrus migration", cwd=repo, env_dirs=dirs)
    assert hit.returncode == 0, hit.stderr
    first, result = hit.stdout.splitlines()[:2]
    assert first == "1 of 1 chunk in 1 file matches"
    # The chunk starts with blank lines: it is shown by its first line with words.
    assert result == "notes.md:1-5: The walrus migration plan."
    miss = run("--json", "search", "zzzzqqqq", cwd=repo, env_dirs=dirs)
    doc = json.loads(miss.stdout)
    assert doc["header"]["text"] == "0 of 1 chunk in 1 file match"
    assert doc["header"]["matched"] == 0
    status = run("status", cwd=repo, env_dirs=dirs)
    assert f"  {repo}: 1 file, " in status.stdout


def _run_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run the command line with stderr on a pseudo-terminal and stdout on a pipe."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "nodwyn_retrieval", *args],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                got = os.read(master, 65536)
            except OSError:  # the terminal's other side closed
                return
            if not got:
                return
            seen.extend(got)

    reader = threading.Thread(target=drain)
    reader.start()
    assert p.stdout is not None
    out = p.stdout.read().decode()
    p.stdout.close()
    code = p.wait(timeout=300)
    reader.join(timeout=30)
    os.close(master)
    return code, out, seen.decode("utf-8", "replace")


def test_refresh_and_update_show_a_live_bar_on_a_terminal_and_nothing_when_piped(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files = {f"pkg/m{i:03d}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(60)}
    a = make_repo(tmp_path / "a", files)
    b = make_repo(tmp_path / "b", {"one.py": "def one():\n    return 1\n"})
    code, out, term = _run_on_a_terminal(["refresh", str(a), str(b)], tmp_path)
    assert code == 0, term
    assert out.splitlines()[0].startswith(f"{a}: 60 files, read 60")
    assert out.splitlines()[1].startswith(f"{b}: 1 file, read 1")
    frames = [f for f in term.split("\r") if f.strip("\x1b[K")]
    assert any(f.startswith("[1/2] a ") and "60 of 60 files read" in f for f in frames), frames
    assert any(f.startswith("[2/2] b ") and "1 of 1 file read" in f for f in frames), frames
    assert all("MB/s" in f and "left" in f for f in frames if " of " in f)
    assert term.endswith("\r\x1b[K")  # the bar is gone before the summary
    (a / "pkg/m000.py").write_text("def changed():\n    return 0\n")
    code, out, term = _run_on_a_terminal(["update"], a)
    assert code == 0
    assert "1 of 1 file read" in term
    piped = run("refresh", str(a), cwd=tmp_path, env_dirs=dirs)
    assert piped.returncode == 0
    assert piped.stderr == ""


def test_an_unwritable_data_directory_fails_update_with_prefixed_lines(
    repo: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where a directory should be\n")
    bad = (blocker / "data", tmp_path / "config")
    up = run("update", cwd=repo, env_dirs=bad)
    assert up.returncode == 1
    assert "the index could not be saved" in up.stdout
    lines = up.stderr.splitlines()
    assert lines
    assert all(line.startswith("nodwyn-retrieval: ") for line in lines), lines
    assert any("the index was not saved" in line for line in lines)
    js = run("update", "--json", cwd=repo, env_dirs=bad)
    assert js.returncode == 1
    doc = json.loads(js.stdout)
    assert doc["saved"] is False
    assert doc["store_error"]
    assert all(line.startswith("nodwyn-retrieval: ") for line in js.stderr.splitlines())
    found = run("search", "check binding", cwd=repo, env_dirs=bad)
    assert found.returncode == 0
    assert "could not be saved" in found.stdout.splitlines()[0]
    assert all(line.startswith("nodwyn-retrieval: ") for line in found.stderr.splitlines())
