"""The repository scope end to end (ADR R1): real git trees, the Engine, and the guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from nodwyn_retrieval import entry
from nodwyn_retrieval.actors.refresher import Limits
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import CheckResult, Verdict
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.log import LogWriter, read_log
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import git, make_repo

CANARY = "ghp_" + "Zq7RkX2mPw9LbN4vT6yH1cJ8dF3sA5gU0eIo"

BIND = '''"""Credential bindings: which host a key may be sent to."""


class Binding:
    def __init__(self, host: str, method: str, key_position: str) -> None:
        self.host = host
        self.method = method


def check_binding(binding: Binding, host: str) -> bool:
    """A credential is sent only to the host it is bound to."""
    return binding.host == host
'''

FILES: dict[str, str | bytes] = {
    "keychain/bind.py": BIND,
    "server/http.py": "def serve(port):\n    return listen(port)\n",
    "docs/manual.md": "# Manual\n\nHow the server listens on a port.\n",
    ".gitignore": "build/\n*.log\n",
    "build/generated.py": "def generated_binding_table():\n    pass\n",
    "debug.log": "credential binding failure in the log\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = make_repo(tmp_path / "repo", FILES)
    (r / "notes_untracked.py").write_text("def untracked_helper_zebra():\n    pass\n")
    return r


async def open_engine(root: Path, data: Path, config: Path, **kw: object) -> Engine:
    return await Engine.open(root, data_dir=data, config_dir=config, workers=1, **kw)  # type: ignore[arg-type]


def paths_of(out: entry.SearchOutput) -> list[str]:
    return [h["path"] for h in out.hits]


@pytest.mark.asyncio
async def test_tracked_and_untracked_files_are_searched_and_ignored_ones_are_not(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        out = await engine.index_search("credential binding", "repo")
        assert paths_of(out)[0] == "keychain/bind.py"
        assert "build/generated.py" not in paths_of(out)
        assert "debug.log" not in paths_of(out)
        zebra = await engine.index_search("untracked zebra", "repo")
        assert paths_of(zebra) == ["notes_untracked.py"]


@pytest.mark.asyncio
async def test_a_result_shows_its_lines_read_from_the_file_now(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        out = await engine.index_search("check_binding host", "repo", limit=1)
    hit = out.hits[0]
    assert hit["provenance"] == "external:file"
    assert (hit["path"], hit["start"]) == ("keychain/bind.py", 1)
    lines = (repo / "keychain/bind.py").read_text().splitlines()
    assert hit["first_line"] == lines[0]
    assert 1 <= len(hit["lines"]) <= 3
    for ln in hit["lines"]:
        assert lines[ln["n"] - 1] == ln["text"]
    assert out.text.splitlines()[0].endswith(" chunks in 5 files matches")
    assert out.text.splitlines()[1].startswith("keychain/bind.py:1-")


@pytest.mark.asyncio
async def test_a_denied_file_never_reaches_the_index(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "r",
        {".env": "SECRET_PLATYPUS=1\n", "app.py": "def main():\n    platypus = 1\n"},
    )
    async with await open_engine(repo, *dirs) as engine:
        out = await engine.index_search("secret platypus", "repo")
        up = await engine.index_update()
    assert paths_of(out) == ["app.py"]
    assert up.summary["skipped"]["denied"] == 1
    chunks = ChunkStore(project_dirs(dirs[0], project_key(repo)).chunks)
    for key, _, _ in chunks.iter_entries():
        rec = chunks.get(key)
        assert rec is not None
        assert "secret_platypus" not in rec.vocab


def refuse(name: str) -> Callable[[str, int], CheckResult]:
    def check(path: str, size: int) -> CheckResult:
        if path.endswith(name):
            return CheckResult(Verdict.DENY, "the person's checker refuses it")
        return CheckResult(Verdict.ALLOW)

    return check


@pytest.mark.asyncio
async def test_a_checker_that_refuses_a_file_is_named_and_the_file_left_out(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs, checkers=[refuse("http.py")]) as engine:
        up = await engine.index_update()
        out = await engine.index_search("serve port listen", "repo")
    assert up.summary["refused"] == ["server/http.py"]
    assert "server/http.py" not in paths_of(out)
    assert "refused by the guard: server/http.py" in up.text


@pytest.mark.asyncio
async def test_a_file_the_guard_would_ask_about_is_left_out_unasked(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    def confirm(path: str, size: int) -> CheckResult:
        if path == "docs/manual.md":
            return CheckResult(Verdict.CONFIRM, "ask the person")
        return CheckResult(Verdict.ALLOW)

    log = dirs[0] / "task.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    async with await open_engine(repo, *dirs, checkers=[confirm], log=log, owns_log=True) as engine:
        up = await engine.index_update()
    assert up.summary["left_out_unasked"] == ["docs/manual.md"]
    events = read_log(log).events
    asked = [e for e in events if e["kind"] == "guard.decision" and e["path"] == "docs/manual.md"]
    assert asked
    assert asked[0]["answer"] == "no"
    assert asked[0]["asked"] is False


@pytest.mark.asyncio
async def test_every_read_logs_a_decision_and_each_build_one_summary(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    log = dirs[0] / "task.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    LogWriter(log).close()
    async with await open_engine(repo, *dirs, log=log, owns_log=True) as engine:
        await engine.index_search("binding", "repo")
        before = len(read_log(log).events)
        await engine.index_search("binding", "repo")  # nothing changed: nothing read
        after_unchanged = read_log(log).events[before:]
    events = read_log(log).events[:before]
    decisions = [e for e in events if e["kind"] == "guard.decision"]
    updates = [e for e in events if e["kind"] == "index.update"]
    read_paths = {e["path"] for e in decisions}
    assert {"keychain/bind.py", "server/http.py", "docs/manual.md"} <= read_paths
    assert len(updates) == 1
    assert updates[0]["read"] >= 5
    # The second search read only the results' lines again: decisions, no summary.
    assert all(e["kind"] == "guard.decision" for e in after_unchanged)


@pytest.mark.asyncio
async def test_a_canary_credential_reaches_neither_store_nor_log_nor_result(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"deploy.py": f'def deploy():\n    token = "{CANARY}"\n    return upload(token)\n'},
    )
    log = dirs[0] / "task.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    async with await open_engine(repo, *dirs, log=log, owns_log=True) as engine:
        out = await engine.index_search("deploy upload token", "repo")
        await engine.index_update()
    assert paths_of(out) == ["deploy.py"]
    assert CANARY not in out.text
    assert CANARY not in json.dumps(out.to_json())
    assert CANARY not in log.read_text()
    secret_words = {CANARY.lower(), CANARY[4:].lower()}
    chunks = ChunkStore(project_dirs(dirs[0], project_key(repo)).chunks)
    keys = [k for k, _, _ in chunks.iter_entries()]
    assert keys
    for key in keys:
        rec = chunks.get(key)
        assert rec is not None
        assert not secret_words & set(rec.vocab)
    for f in dirs[0].rglob("*"):
        if f.is_file():
            assert CANARY.encode() not in f.read_bytes()
            assert CANARY[4:].lower().encode() not in f.read_bytes()


@pytest.mark.asyncio
async def test_a_worktree_shares_the_main_checkouts_stored_chunks(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
    chunks = ChunkStore(project_dirs(dirs[0], project_key(repo)).chunks)
    before = sorted(k for k, _, _ in chunks.iter_entries())
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    assert project_key(wt) == project_key(repo)
    async with await open_engine(wt, *dirs) as engine:
        up = await engine.index_update()
        out = await engine.index_search("credential binding", "repo")
        status = await engine.index_status()
    assert up.summary["files"] >= 4
    assert sorted(k for k, _, _ in chunks.iter_entries()) == before
    assert paths_of(out)[0] == "keychain/bind.py"
    assert len(status["trees"]) == 2


@pytest.mark.asyncio
async def test_a_gone_worktrees_manifest_is_removed_by_the_next_collection(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    from nodwyn_retrieval.actors.gc import collect

    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    for root in (repo, wt):
        async with await open_engine(root, *dirs) as engine:
            await engine.index_update()
    git(repo, "worktree", "remove", "--force", str(wt))
    pdirs = project_dirs(dirs[0], project_key(repo))
    done = collect(pdirs, force=True)
    assert done.manifests == 1
    async with await open_engine(repo, *dirs) as engine:
        status = await engine.index_status()
    assert [t["root"] for t in status["trees"]] == [str(repo.resolve())]


@pytest.mark.parametrize("watch", [True, False], ids=["watched", "listed-and-stated"])
@pytest.mark.asyncio
async def test_a_file_changed_added_and_deleted_between_searches_is_seen(
    repo: Path, dirs: tuple[Path, Path], watch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not watch:
        monkeypatch.setattr("nodwyn_retrieval.actors.refresher.watch_available", lambda: False)
    async with await open_engine(repo, *dirs) as engine:
        first = await engine.index_search("serve port", "repo")
        assert paths_of(first)[0] == "server/http.py"
        (repo / "server/http.py").write_text("def shutdown_gracefully():\n    pass\n")
        (repo / "new_module.py").write_text("def serve_port_forever(port):\n    pass\n")
        (repo / "docs/manual.md").unlink()
        second = await engine.index_search("serve port", "repo")
        gone = await engine.index_search("shutdown gracefully", "repo")
        manual = await engine.index_search("manual listens", "repo")
    assert paths_of(second)[0] == "new_module.py"
    assert "server/http.py" not in paths_of(second)
    assert paths_of(gone) == ["server/http.py"]
    assert "docs/manual.md" not in paths_of(manual)
    # The index itself forgot the deleted file: one file added, one removed.
    assert manual.header["files"] == first.header["files"]


@pytest.mark.asyncio
async def test_an_edit_by_rename_and_a_new_directory_are_seen_by_the_next_search(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_search("binding", "repo")
        # An editor's save: write a temporary file, then rename it over the original.
        tmp = repo / "keychain" / ".bind.py.swp"
        tmp.write_text("def rotate_keyring_quokka():\n    pass\n")
        tmp.replace(repo / "keychain" / "bind.py")
        (repo / "fresh" / "deep").mkdir(parents=True)
        (repo / "fresh" / "deep" / "wombat.py").write_text("def wombat_burrow():\n    pass\n")
        quokka = await engine.index_search("quokka keyring", "repo")
        wombat = await engine.index_search("wombat burrow", "repo")
        (repo / "fresh" / "deep" / "later.py").write_text("def later_echidna():\n    pass\n")
        echidna = await engine.index_search("echidna", "repo")
    assert paths_of(quokka) == ["keychain/bind.py"]
    assert paths_of(wombat) == ["fresh/deep/wombat.py"]
    assert paths_of(echidna) == ["fresh/deep/later.py"]


@pytest.mark.asyncio
async def test_a_new_session_loads_the_index_without_reading_files(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
    async with await open_engine(repo, *dirs) as engine:
        up = await engine.index_update()
        out = await engine.index_search("credential binding", "repo")
    assert up.summary["read"] == 0
    assert paths_of(out)[0] == "keychain/bind.py"


@pytest.mark.asyncio
async def test_ranking_prefers_the_file_about_the_words(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {
        f"pkg/module_{i}.py": f"def helper_{i}(x):\n    return x + {i}\n" for i in range(30)
    }
    files["pkg/scrub_env.py"] = (
        'def ScrubEnv(env):\n    """Drop secrets from a child\'s environment."""\n'
        "    return {k: v for k, v in env.items() if not secret(k)}\n"
    )
    files["pkg/env_docs.md"] = "# Environment\n\nThe environment is passed to children.\n"
    repo = make_repo(tmp_path / "r", files)
    async with await open_engine(repo, *dirs) as engine:
        out = await engine.index_search("scrub env secrets", "repo")
        narrowed = await engine.index_search("environment", "repo", path="pkg/env_docs.md")
    assert paths_of(out)[0] == "pkg/scrub_env.py"
    assert paths_of(narrowed) == ["pkg/env_docs.md"]


@pytest.mark.asyncio
async def test_path_narrows_to_a_directory(repo: Path, dirs: tuple[Path, Path]) -> None:
    async with await open_engine(repo, *dirs) as engine:
        out = await engine.index_search("binding host port server", "repo", path="server")
    assert paths_of(out) == ["server/http.py"]


@pytest.mark.asyncio
async def test_the_search_bound_returns_a_partial_index_and_says_so(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    files: dict[str, str | bytes] = {
        f"f{i:03}.py": f"def func_{i}():\n    pass\n" for i in range(60)
    }
    repo = make_repo(tmp_path / "r", files)

    async def slow(path: str, size: int) -> CheckResult:
        # Half the files take far longer than the bound: those are the ones not read.
        if int(path[1:4]) >= 30:
            await asyncio.sleep(2.0)
        return CheckResult(Verdict.ALLOW)

    monkeypatch.setattr(entry, "SEARCH_SECONDS", 0.5)
    async with await open_engine(repo, *dirs, checkers=[slow]) as engine:
        out = await engine.index_search("func", "repo", limit=20)
    assert out.header["partial"] is True
    assert out.header["not_read"] == 30
    assert {h["path"] for h in out.hits} <= {f"f{i:03}.py" for i in range(30)}
    assert "not read again in time: the index is partial" in out.text.splitlines()[0]


@pytest.mark.asyncio
async def test_an_update_cut_short_goes_on_at_the_next_call(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    files: dict[str, str | bytes] = {
        f"f{i:03}.py": f"def func_{i}():\n    pass\n" for i in range(40)
    }
    repo = make_repo(tmp_path / "r", files)
    seen: list[str] = []

    async def slow(path: str, size: int) -> CheckResult:
        # Reads go 16 at a time: 40 files take three rounds of 0.2 s, past a 0.5 s bound.
        seen.append(path)
        await asyncio.sleep(0.2)
        return CheckResult(Verdict.ALLOW)

    monkeypatch.setattr(entry, "UPDATE_SECONDS", 0.5)
    async with await open_engine(repo, *dirs, checkers=[slow]) as engine:
        first = await engine.index_update()
        assert first.summary["partial"] is True
        total = first.summary["read"]
        for _ in range(40):
            nxt = await engine.index_update()
            total += nxt.summary["read"]
            if not nxt.summary["partial"]:
                break
    assert nxt.summary["partial"] is False
    assert total == 40
    assert nxt.summary["files"] == 40
    assert len(set(seen)) == 40


@pytest.mark.asyncio
async def test_the_limits_skip_large_binary_and_latin1_files(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {
        "big.txt": "word " * (2 * 1024 * 1024 // 5),
        "blob.bin": b"\x00\x01binary\x00" * 100,
        "latin.txt": "caf\xe9 cr\xe8me".encode("latin-1"),
        "ok.py": "def fine():\n    pass\n",
    }
    repo = make_repo(tmp_path / "r", files)
    async with await open_engine(repo, *dirs) as engine:
        up = await engine.index_update()
        again = await engine.index_update()
    sk = up.summary["skipped"]
    assert (sk["too_large"], sk["binary"], sk["not_utf8"]) == (1, 1, 1)
    assert up.summary["files"] == 1
    # Looked at once: not read again until they change.
    assert again.summary["read"] == 0


@pytest.mark.asyncio
async def test_more_files_than_the_limit_index_what_fits_in_path_order(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"def shared_{i}():\n    pass\n" for i in range(8)}
    repo = make_repo(tmp_path / "r", files)
    async with await open_engine(repo, *dirs, limits=Limits(files=5)) as engine:
        out = await engine.index_search("shared", "repo", limit=20)
    assert sorted(paths_of(out)) == [f"m{i}.py" for i in range(5)]
    assert out.header["partial"] is True
    assert "the index is partial: the tree passes 20,000 files" in out.text.splitlines()[0]


@pytest.mark.asyncio
async def test_update_of_an_ignored_directory_indexes_it_whole(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        before = await engine.index_search("generated binding table", "repo")
        await engine.index_update("build")
        after = await engine.index_search("generated binding table", "repo")
    assert "build/generated.py" not in paths_of(before)
    assert paths_of(after)[0] == "build/generated.py"


@pytest.mark.asyncio
async def test_a_live_read_the_guard_refuses_is_the_answer_and_leaves_the_index(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    refusing = {"on": False}

    def later(path: str, size: int) -> CheckResult:
        if refusing["on"] and path == "keychain/bind.py":
            return CheckResult(Verdict.DENY, "no longer allowed")
        return CheckResult(Verdict.ALLOW)

    async with await open_engine(repo, *dirs, checkers=[later]) as engine:
        await engine.index_update()
        refusing["on"] = True
        with pytest.raises(
            entry.GuardRefused,
            match=r"^the guard refused reading keychain/bind\.py: no longer allowed; "
            r"it is dropped from the index$",
        ):
            await engine.index_search("credential binding", "repo")
        # Still refused: the next search reads it again, is refused, and leaves it out.
        out = await engine.index_search("credential binding", "repo")
    assert "keychain/bind.py" not in paths_of(out)
    assert "refused by the guard: keychain/bind.py" in out.text.splitlines()[0]


@pytest.mark.asyncio
async def test_a_chunk_whose_lines_are_gone_is_left_out(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    from nodwyn_retrieval.actors.messages import SearchTree

    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
        (repo / "keychain/bind.py").write_text("")
        found = await engine._indexer.ask(SearchTree("credential binding", 8))
    assert all(r.path != "keychain/bind.py" for r in found.results)  # type: ignore[attr-defined]
    assert "keychain/bind.py" in found.gone  # type: ignore[attr-defined]


Call = Callable[[Engine], Awaitable[object]]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda e: e.index_search("", "repo"),
            r"^query is empty: give the words or names to search for$",
        ),
        (lambda e: e.index_search("x", "repo", 0), r"^limit must be between 1 and 20, got 0$"),
        (lambda e: e.index_search("x", "repo", 21), r"^limit must be between 1 and 20, got 21$"),
        (
            lambda e: e.index_search("x", "files"),
            r"^scope must be repo, conversation or earlier, got 'files'$",
        ),
        (
            lambda e: e.index_search("x", "repo", 8, "../x"),
            r"^path \.\./x is outside the repository$",
        ),
        (lambda e: e.index_search("x", "repo", 8, "nope"), r"^path nope does not exist$"),
        (lambda e: e.index_update("/etc"), r"^path /etc is outside the repository$"),
    ],
    ids=["empty", "limit0", "limit21", "scope", "outside", "missing", "update-outside"],
)
@pytest.mark.asyncio
async def test_bad_input_says_exactly_what_was_wrong(
    repo: Path, dirs: tuple[Path, Path], call: Call, message: str
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        with pytest.raises(entry.BadInput, match=message):
            await call(engine)


@pytest.mark.asyncio
async def test_a_tool_call_with_bad_arguments_is_an_error_result(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    async with await open_engine(repo, *dirs) as engine:
        no_scope = await engine.call_tool("index-search", {"query": "x"})
        ok = await engine.call_tool("index-search", {"query": "binding", "scope": "repo"})
        unknown = await engine.call_tool("index-grep", {})
        tools = engine.tools()
    assert no_scope.is_error
    assert no_scope.text == "scope is required: repo"  # no log, no other task: only repo works
    assert not ok.is_error
    assert ok.provenance == "external:file"
    assert unknown.is_error
    names = [t["name"] for t in tools]
    assert names[:2] == ["index-search", "index-update"]
    assert "grep" in tools[0]["description"]
    assert tools[0]["input_schema"]["required"] == ["query", "scope"]


@pytest.mark.asyncio
async def test_forget_deletes_the_index_not_the_logs_and_the_session_goes_on(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    pdirs = project_dirs(dirs[0], project_key(repo))
    pdirs.tasks.mkdir(parents=True)
    log = pdirs.tasks / "t1.jsonl"
    LogWriter(log).close()
    async with await open_engine(repo, *dirs, log=log) as engine:
        await engine.index_update()
        assert any(pdirs.chunks.rglob("*.ckp"))
        gone = await engine.index_forget()
        assert gone["deleted_bytes"] > 0
        assert not any(pdirs.chunks.rglob("*.ckp"))
        assert log.is_file()
        out = await engine.index_search("credential binding", "repo")
    assert paths_of(out)[0] == "keychain/bind.py"
    assert any(pdirs.chunks.rglob("*.ckp"))
