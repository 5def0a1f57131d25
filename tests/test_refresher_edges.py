"""The refresher's watched path, as a person sees it: what a search says after a quiet edit.

Written for survivors of a mutation run (docs/reliability.md, "Mutation testing"): an edit seen
by the watch made the search say the index was partial, and a change of git's excludes was not
seen by the watch at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import refresher
from nodwyn_retrieval.entry import Engine

from tests.support import make_repo

FILES: dict[str, str | bytes] = {
    "src/a.py": "def pangolin():\n    return 1\n",
    "src/b.py": "def tamarin():\n    return 2\n",
}


async def session(repo: Path, dirs: tuple[Path, Path]) -> tuple[Engine, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    engine = await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1
    )
    return engine, events


@pytest.mark.asyncio
async def test_a_search_after_an_edit_the_watch_saw_is_complete_not_partial(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", FILES)
    engine, events = await session(repo, dirs)
    async with engine:
        first = await engine.index_search("pangolin", "repo")
        (repo / "src/a.py").write_text("def pangolin():\n    return 'okapi'\n")
        edited = await engine.index_search("okapi", "repo")
        quiet = await engine.index_search("tamarin", "repo")
    assert [h["path"] for h in first.hits] == ["src/a.py"]
    assert [h["path"] for h in edited.hits] == ["src/a.py"]
    assert [h["path"] for h in quiet.hits] == ["src/b.py"]
    # Nothing was left out: neither the edit's search nor the next one says partial.
    for out in (first, edited, quiet):
        assert (out.header["partial"], out.header["not_seen"], out.header["not_read"]) == (
            False,
            0,
            0,
        )
        assert "partial" not in out.header["text"]
    updates = [e for e in events if e["kind"] == "index.update"]
    assert [u["partial"] for u in updates] == [False] * len(updates)


@pytest.mark.asyncio
async def test_a_file_newly_excluded_by_git_leaves_the_index_at_the_next_search(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", FILES)
    (repo / "notes").mkdir()
    (repo / "notes/todo.py").write_text("def axolotl():\n    return 3\n")  # not committed
    engine, events = await session(repo, dirs)
    async with engine:
        before = await engine.index_search("axolotl", "repo")
        n = len(events)
        # Only git's excludes change: no file of the tree is touched.
        with (repo / ".git/info/exclude").open("a", encoding="utf-8") as f:
            f.write("notes/\n")
        after = await engine.index_search("axolotl", "repo")
        status = await engine.index_update()
    assert [h["path"] for h in before.hits] == ["notes/todo.py"]
    assert after.hits == []
    updates = [e for e in events[n:] if e["kind"] == "index.update"]
    assert updates[0]["removed"] == 1
    assert status.summary["files"] == 2


@pytest.mark.asyncio
async def test_a_manifest_that_cannot_be_saved_is_said_and_saved_at_the_next_refresh(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.errors import StoreError
    from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    repo = make_repo(tmp_path / "repo", FILES)
    real_save = refresher.save_manifest
    full = True

    def save(path: Path, m: Any) -> None:
        if full:
            raise StoreError(f"no space left on device writing {path}")
        real_save(path, m)

    monkeypatch.setattr(refresher, "save_manifest", save)
    mpath = manifest_path(project_dirs(dirs[0], project_key(repo)).trees, repo)
    engine, _ = await session(repo, dirs)
    async with engine:
        failed = (await engine.index_update()).summary
        out = await engine.index_search("tamarin", "repo")
        full = False
        # The disk has room again: the next refresh writes the manifest, though it is a search
        # and nothing in the tree changed.
        quiet = await engine.index_search("pangolin", "repo")
        written = load_manifest(mpath)
        saved = (await engine.index_update()).summary
    # Only the manifest could not be written: the update says so, the search answers from
    # memory, and the next refresh writes it.
    assert (failed["saved"], failed["files"]) == (False, 2)
    assert "no space left on device" in str(failed["store_error"])
    assert [h["path"] for h in out.hits] == ["src/b.py"]
    assert [h["path"] for h in quiet.hits] == ["src/a.py"]
    assert written is not None
    assert sorted(written.entries) == sorted(FILES)
    assert (saved["saved"], saved["store_error"]) == (True, None)
    m = load_manifest(mpath)
    assert m is not None
    assert sorted(m.entries) == sorted(FILES)


@pytest.mark.asyncio
async def test_later_sessions_check_again_only_the_files_that_changed(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The amendment of 2026-10-16: a file the manifest holds as it is now was allowed by the
    # same guard, and a new session does not check it against the pin and denylist again.
    repo = make_repo(tmp_path / "repo", FILES)
    checked: list[str] = []
    real = refresher.precheck_all

    def precheck_all(guard: Any, paths: list[str], **kw: Any) -> Any:
        checked.extend(paths)
        return real(guard, paths, **kw)

    monkeypatch.setattr(refresher, "precheck_all", precheck_all)
    per_session: list[list[str]] = []
    for edit in (None, "src/a.py", None):
        if edit is not None:
            (repo / edit).write_text("def pangolin():\n    return 'okapi'\n")
        checked.clear()
        engine, _ = await session(repo, dirs)
        async with engine:
            out = await engine.index_search("pangolin", "repo")
        assert [h["path"] for h in out.hits] == ["src/a.py"]
        per_session.append(sorted(checked))
    assert per_session == [sorted(FILES), ["src/a.py"], []]


@pytest.mark.asyncio
async def test_another_sessions_save_made_while_this_one_reads_is_kept(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    import asyncio
    import threading

    from nodwyn_retrieval.guard import CheckResult
    from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    repo = make_repo(tmp_path / "repo", FILES)
    mpath = manifest_path(project_dirs(dirs[0], project_key(repo)).trees, repo)
    other: list[dict[str, Any]] = []

    async def other_session() -> None:
        engine = await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1)
        async with engine:
            other.append((await engine.index_update()).summary)

    def run_other() -> None:
        # A new file appears and another session indexes the tree and saves its manifest while
        # this session is between its listing and its own save.
        (repo / "src/c.py").write_text("def margay():\n    return 3\n")
        t = threading.Thread(target=lambda: asyncio.run(other_session()))
        t.start()
        t.join()

    def checker(path: str, size: int) -> CheckResult:
        if path == "src/a.py" and not other:
            run_other()
        return CheckResult.allow()

    engine = await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, checkers=[checker]
    )
    async with engine:
        (repo / "src/a.py").write_text("def pangolin():\n    return 'okapi'\n")
        await engine.index_update()
    assert other[0]["files"] == 3
    m = load_manifest(mpath)
    assert m is not None
    # This session's save merged the other's: the file it never listed is still in the manifest.
    assert sorted(m.entries) == ["src/a.py", "src/b.py", "src/c.py"]


@pytest.mark.parametrize("how", ["deleted", "damaged"])
@pytest.mark.asyncio
async def test_a_manifest_deleted_or_damaged_under_a_session_is_written_again(
    tmp_path: Path, dirs: tuple[Path, Path], how: str
) -> None:
    from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    repo = make_repo(tmp_path / "repo", FILES)
    mpath = manifest_path(project_dirs(dirs[0], project_key(repo)).trees, repo)
    engine, events = await session(repo, dirs)
    async with engine:
        await engine.index_update()
        if how == "deleted":
            mpath.unlink()
        else:
            mpath.write_bytes(b"not a manifest")
        out = await engine.index_search("tamarin", "repo")
        summary = (await engine.index_update()).summary
    assert [h["path"] for h in out.hits] == ["src/b.py"]
    assert (summary["files"], summary["saved"]) == (2, True)
    m = load_manifest(mpath)
    assert m is not None
    assert sorted(m.entries) == sorted(FILES)
    rebuilt = sum(int(e["rebuilt"]) for e in events if e["kind"] == "index.update")
    assert rebuilt == (1 if how == "damaged" else 0)


@pytest.mark.asyncio
async def test_a_file_another_session_dropped_by_its_own_denylist_is_read_again_here(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", FILES)
    strict = tmp_path / "strict-config"
    strict.mkdir()
    (strict / "config.toml").write_text('[index]\ndeny = ["src/b.py"]\n')
    engine, _ = await session(repo, dirs)
    async with engine:
        first = await engine.index_search("tamarin", "repo")
        # Another session, whose configuration denies b.py, saves a manifest without it; no
        # file of the tree is touched.
        other = await Engine.open(repo, data_dir=dirs[0], config_dir=strict, workers=1)
        async with other:
            theirs = (await other.index_update()).summary
        after = await engine.index_search("tamarin", "repo")
    assert [h["path"] for h in first.hits] == ["src/b.py"]
    assert (theirs["files"], theirs["skipped"]["denied"]) == (1, 1)
    # This session's guard allows it: the whole listing is compared with the new manifest, and
    # the file it no longer holds is read again.
    assert [h["path"] for h in after.hits] == ["src/b.py"]
    assert after.header["files"] == 2


@pytest.mark.asyncio
async def test_an_edit_to_a_denylisted_file_the_watch_saw_is_not_read_nor_refused(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", {**FILES, "src/.env": "KOALA_MODE=1\n"})
    engine, events = await session(repo, dirs)
    async with engine:
        built = (await engine.index_update()).summary
        n = len(events)
        (repo / "src/.env").write_text("KOALA_MODE=2\n")
        (repo / "src/a.py").write_text("def pangolin():\n    return 'koala'\n")
        out = await engine.index_search("koala", "repo")
    assert built["skipped"]["denied"] == 1
    # The denylist keeps the file out before any read: it is not read, and no read of it is
    # refused (the index.update record of the search names nothing refused).
    assert [h["path"] for h in out.hits] == ["src/a.py"]
    ups = [e for e in events[n:] if e["kind"] == "index.update"]
    assert [(u["read"], u["refused"]) for u in ups] == [(1, [])]
    assert not out.header["partial"]


@pytest.mark.asyncio
async def test_an_index_update_that_finds_nothing_changed_is_still_recorded(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    engine, events = await session(repo, dirs)
    async with engine:
        await engine.index_update()
        n = len(events)
        quiet = (await engine.index_update()).summary
    ups = [e for e in events[n:] if e["kind"] == "index.update"]
    assert (quiet["files"], quiet["read"], quiet["unchanged"], quiet["saved"]) == (2, 0, 2, True)
    assert [(u["files"], u["read"], u["unchanged"], u["partial"]) for u in ups] == [
        (2, 0, 2, False)
    ]


@pytest.mark.asyncio
async def test_a_file_gone_or_grown_too_large_between_its_stat_and_its_read(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.actors.messages import FileStat

    repo = make_repo(tmp_path / "repo", FILES)
    real_stat = refresher._stat_all
    after_stat: dict[str, Any] = {}

    def stat_all(root: Path, paths: list[str]) -> list[FileStat | None]:
        out = real_stat(root, paths)
        for p in [p for p in paths if p in after_stat]:
            after_stat.pop(p)(root / p)  # an editor, between the refresh's stat and its read
        return out

    monkeypatch.setattr(refresher, "_stat_all", stat_all)
    engine, _ = await session(repo, dirs)
    async with engine:
        await engine.index_update()
        (repo / "src/a.py").write_text("def pangolin():\n    return 'quokka'\n")
        after_stat["src/a.py"] = Path.unlink
        gone = (await engine.index_update()).summary
        (repo / "src/b.py").write_text("def tamarin():\n    return 'quokka'\n")
        after_stat["src/b.py"] = lambda p: p.write_text("#" * (1 << 20) + "\n")
        grown = (await engine.index_update()).summary
        left = await engine.index_search("tamarin", "repo")
    # A file gone when it is read is dropped, and not said to be too large.
    assert (gone["files"], gone["skipped"]["too_large"]) == (1, 0)
    # A file that grew past 1 MiB before its read is left out as too large.
    assert (grown["files"], grown["skipped"]["too_large"]) == (0, 1)
    assert left.hits == []


@pytest.mark.asyncio
async def test_a_damaged_record_made_again_is_counted_as_rebuilt(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    repo = make_repo(tmp_path / "repo", FILES)
    engine, events = await session(repo, dirs)
    async with engine:
        await engine.index_update()
    index = project_dirs(dirs[0], project_key(repo)).index
    records = sorted(p for p in (index / "chunks").rglob("*") if p.is_file())
    for snap in (index / "trees").glob("*.snap"):
        snap.unlink()
    records[0].write_bytes(b"not a record")
    engine, events = await session(repo, dirs)
    async with engine:
        out = await engine.index_search("pangolin tamarin", "repo")
    # The new session loads the stored records: one fails to decode, is counted as rebuilt,
    # and its file is read again.
    ups = [e for e in events if e["kind"] == "index.update"]
    assert [(u["read"], u["rebuilt"]) for u in ups] == [(1, 1)]
    assert sorted(h["path"] for h in out.hits) == sorted(FILES)


@pytest.mark.skipif(not refresher.watch_available(), reason="no inotify on this system")
@pytest.mark.asyncio
async def test_edits_that_keep_a_tree_under_its_byte_limit_are_taken_by_the_watch_alone(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watched path keeps the tree's bytes as each stat changes them: a file rewritten at
    its size, or shrunk, leaves the total where it was, so no edit lists the tree again; one
    that takes it past §2's limit (lowered here) does."""
    from nodwyn_retrieval.actors import _listing

    files: dict[str, str | bytes] = {f"m{i}.py": f"okapi_{i} = 1\n" for i in range(4)}
    size = len(files["m0.py"])
    repo = make_repo(tmp_path / "repo", files)
    listed: list[Path] = []
    real_output = _listing._git_output

    def git_output(root: Path, *args: Any) -> bytes | None:
        listed.append(root)
        return real_output(root, *args)

    monkeypatch.setattr(_listing, "_git_output", git_output)
    limits = refresher.Limits(bytes=4 * size + 3)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limits
    ) as engine:
        await engine.index_update()
        runs = len(listed)
        for i in range(6):  # rewritten at its size, then shrunk: well under the limit each time
            body = f"okapi_{i % 9} = 1\n" if i < 3 else "k = 1\n"
            (repo / "m1.py").write_text(body)
            out = await engine.index_search("okapi", "repo", limit=20)
            assert out.header["partial"] is False
        assert len(listed) == runs  # the watch alone
        (repo / "m2.py").write_text("okapi_2 = 1\n" + "# padding\n" * 4)
        out = await engine.index_search("okapi", "repo", limit=20)
    assert len(listed) == runs + 1  # past the limit: listed and compared whole
    assert out.header["partial"] is True
