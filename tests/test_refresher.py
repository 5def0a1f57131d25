"""The refresher: every search sees the tree as it is now (ADR 0050 §5), on both of its paths.

A refresh either lists and stats the whole tree (the first search, an index-update, or where no
watch is available) or looks only at what the tree's watch saw touched. Each behaviour is checked
on both paths, and on the index itself (the ``index.update`` record, the status, the manifest on
disk), not only by what a search shows: a result's lines are read from the file at the search, so
a deleted file drops out of the results even when the index still holds it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors.refresher import Limits, RefresherActor
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo

# Two versions of one file of exactly the same size, with different words.
BEFORE = "def quokka_keyring():\n    return 1\n"
AFTER = "def wombat_burrows():\n    return 2\n"
assert len(BEFORE) == len(AFTER)

FILES: dict[str, str | bytes] = {
    "keychain/bind.py": BEFORE,
    "server/http.py": "def serve(port):\n    return listen(port)\n",
    "docs/manual.md": "# Manual\n\nThe echidna server listens on a port.\n",
}

PATHS = pytest.mark.parametrize("watch", [True, False], ids=["watched", "listed-and-stated"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


@pytest.fixture
def no_watch(monkeypatch: pytest.MonkeyPatch, watch: bool) -> None:
    """Without a watch every refresh lists and stats the whole tree."""
    if not watch:
        monkeypatch.setattr("nodwyn_retrieval.actors.refresher.watch_available", lambda: False)


class Session:
    """An engine on a tree and every event it records."""

    def __init__(self, engine: Engine, events: list[dict[str, Any]]) -> None:
        self.engine = engine
        self.events = events

    def updates(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "index.update"]

    async def find(self, query: str) -> list[str]:
        out = await self.engine.index_search(query, "repo")
        return [h["path"] for h in out.hits]


async def session(repo: Path, dirs: tuple[Path, Path]) -> tuple[Engine, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    engine = await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1
    )
    return engine, events


def stored_paths(repo: Path, data: Path) -> set[str]:
    """The paths the manifest on disk holds."""
    m = load_manifest(manifest_path(project_dirs(data, project_key(repo)).trees, repo))
    assert m is not None
    return set(m.entries)


def same_times(path: Path, st: os.stat_result) -> None:
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# -- a changed file ---------------------------------------------------------------------------


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_file_rewritten_in_place_to_the_same_size_with_new_words_is_read_again(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    target = repo / "keychain/bind.py"
    engine, events = await session(repo, dirs)
    async with engine:
        s = Session(engine, events)
        assert await s.find("quokka keyring") == ["keychain/bind.py"]
        old = target.stat()
        # In place: the same inode and size; only the time and the words change.
        fd = os.open(target, os.O_WRONLY)  # no truncation: the same inode, rewritten
        try:
            os.write(fd, AFTER.encode())
        finally:
            os.close(fd)
        os.utime(target, ns=(old.st_atime_ns, old.st_mtime_ns + 5_000_000_000))
        new = target.stat()
        assert (new.st_ino, new.st_size) == (old.st_ino, old.st_size)
        assert new.st_mtime_ns != old.st_mtime_ns
        n = len(s.updates())
        assert await s.find("wombat burrows") == ["keychain/bind.py"]
        assert await s.find("quokka keyring") == []
        (update,) = s.updates()[n:]
    assert (update["read"], update["removed"]) == (1, 0)


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_an_editors_save_by_rename_with_the_time_put_back_is_read_again(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    target = repo / "keychain/bind.py"
    engine, events = await session(repo, dirs)
    async with engine:
        s = Session(engine, events)
        assert await s.find("quokka keyring") == ["keychain/bind.py"]
        old = target.stat()
        # An editor's save: a temporary file of the same size, given the old file's times, renamed
        # over it. Only the inode tells the new file from the old one.
        tmp = target.with_name(".bind.py.swp")
        tmp.write_text(AFTER, encoding="utf-8")
        same_times(tmp, old)
        tmp.replace(target)
        new = target.stat()
        assert (new.st_size, new.st_mtime_ns) == (old.st_size, old.st_mtime_ns)
        assert new.st_ino != old.st_ino
        n = len(s.updates())
        assert await s.find("wombat burrows") == ["keychain/bind.py"]
        assert await s.find("quokka keyring") == []
        (update,) = s.updates()[n:]
    assert (update["read"], update["removed"]) == (1, 0)


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_file_left_alone_is_not_read_again(repo: Path, dirs: tuple[Path, Path]) -> None:
    engine, events = await session(repo, dirs)
    async with engine:
        s = Session(engine, events)
        await s.find("quokka keyring")
        n = len(s.updates())
        (repo / "server/http.py").write_text("def serve(port):\n    return gannet(port, 1)\n")
        assert await s.find("serve gannet") == ["server/http.py"]
        assert await s.find("quokka keyring") == ["keychain/bind.py"]
        updates = s.updates()[n:]
    # One record for the one change: the untouched files were neither read nor dropped.
    assert [(u["read"], u["removed"], u["files"]) for u in updates] == [(1, 0, 3)]


# -- a deleted file ---------------------------------------------------------------------------


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_deleted_file_is_forgotten_by_the_index_not_only_left_out_of_results(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    engine, events = await session(repo, dirs)
    async with engine:
        s = Session(engine, events)
        first = await engine.index_search("echidna server", "repo")
        assert first.hits[0]["path"] == "docs/manual.md"
        assert first.header["files"] == 3
        assert stored_paths(repo, dirs[0]) == set(FILES)
        n = len(s.updates())
        (repo / "docs/manual.md").unlink()
        after = await engine.index_search("echidna server", "repo")
        (update,) = s.updates()[n:]
        status = await engine.index_status()
    assert "docs/manual.md" not in [h["path"] for h in after.hits]
    assert (update["removed"], update["read"], update["files"]) == (1, 0, 2)
    assert after.header["files"] == 2
    assert [t["files"] for t in status["trees"]] == [2]
    assert stored_paths(repo, dirs[0]) == {"keychain/bind.py", "server/http.py"}


@pytest.mark.asyncio
async def test_an_index_update_counts_a_deleted_file_as_removed(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    engine, _ = await session(repo, dirs)
    async with engine:
        assert (await engine.index_update()).summary["files"] == 3
        (repo / "server/http.py").unlink()
        (repo / "keychain/bind.py").unlink()
        summary = (await engine.index_update()).summary
        status = await engine.index_status()
    assert (summary["removed"], summary["files"], summary["read"]) == (2, 1, 0)
    assert [t["files"] for t in status["trees"]] == [1]
    assert stored_paths(repo, dirs[0]) == {"docs/manual.md"}


@pytest.mark.asyncio
async def test_a_deleted_file_stays_forgotten_in_the_next_session(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    engine, _ = await session(repo, dirs)
    async with engine:
        await engine.index_update()
        (repo / "docs/manual.md").unlink()
        await engine.index_search("echidna", "repo")
    engine, _ = await session(repo, dirs)
    async with engine:
        out = await engine.index_search("echidna server", "repo")
    assert out.header["files"] == 2
    assert [h["path"] for h in out.hits] == ["server/http.py"]
    assert stored_paths(repo, dirs[0]) == {"keychain/bind.py", "server/http.py"}


# -- the time a refresh is given (§5) ---------------------------------------------------------


@pytest.mark.asyncio
async def test_a_search_refreshes_for_at_most_10_s_and_an_update_for_at_most_60_s(
    repo: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[tuple[bool, float]] = []
    real = RefresherActor.handle

    async def handle(self: RefresherActor, message: object) -> object:
        deadline = getattr(message, "deadline", None)
        if deadline is not None:
            left = deadline - asyncio.get_running_loop().time()
            given.append((bool(getattr(message, "update", False)), left))
        return await real(self, message)

    monkeypatch.setattr(RefresherActor, "handle", handle)
    engine, _ = await session(repo, dirs)
    async with engine:
        await engine.index_search("serve", "repo")
        await engine.index_update()
    (search, s_left), (update, u_left) = given
    assert (search, update) == (False, True)
    assert 9.0 < s_left <= 10.0
    assert 59.0 < u_left <= 60.0


# -- the limits of §2, lowered ----------------------------------------------------------------


def limited(files: int = 20_000, total: int = 128 << 20, one: int = 1 << 20) -> Limits:
    return Limits(files=files, bytes=total, file_bytes=one)


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_past_the_file_limit_the_first_files_in_path_order_are_indexed(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"def civet_{i}():\n    pass\n" for i in range(5)}
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limited(files=3)
    ) as engine:
        summary = (await engine.index_update()).summary
        first = await engine.index_search("civet", "repo", limit=20)
        (repo / "m1.py").unlink()
        after = await engine.index_search("civet", "repo", limit=20)
    assert (summary["files"], summary["skipped"]["over_limit"], summary["partial"]) == (3, 2, True)
    assert sorted(h["path"] for h in first.hits) == ["m0.py", "m1.py", "m2.py"]
    assert first.header["partial"] is True
    # A place freed: the next file in path order takes it.
    assert sorted(h["path"] for h in after.hits) == ["m0.py", "m2.py", "m3.py"]


@pytest.mark.asyncio
async def test_past_the_byte_limit_the_first_files_that_fit_are_indexed(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"genet_{i} = 1\n" for i in range(4)}
    size = len(files["m0.py"])
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limited(total=2 * size)
    ) as engine:
        summary = (await engine.index_update()).summary
    assert (summary["files"], summary["skipped"]["over_limit"], summary["partial"]) == (2, 2, True)
    assert summary["bytes"] == 2 * size


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_file_grown_past_the_file_size_limit_leaves_the_index(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "binturong = 1\n", "b.py": "x = 1\n"})
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limited(one=40)
    ) as engine:
        before = await engine.index_search("binturong", "repo")
        (repo / "a.py").write_text("binturong = 2\n" + "#" * 40 + "\n")
        grown = await engine.index_search("binturong", "repo")
        summary = (await engine.index_update()).summary
    assert [h["path"] for h in before.hits] == ["a.py"]
    assert grown.hits == []
    assert grown.header["files"] == 1
    assert (summary["files"], summary["skipped"]["too_large"]) == (1, 1)


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_tree_grown_past_the_byte_limit_by_an_edit_leaves_out_the_last_files(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"fossa_{i} = 1\n" for i in range(3)}
    size = len(files["m0.py"])
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limited(total=3 * size + 4)
    ) as engine:
        first = await engine.index_search("fossa", "repo", limit=20)
        (repo / "m0.py").write_text("fossa_0 = 1\n" + "#" * 10 + "\n")
        grown = await engine.index_search("fossa", "repo", limit=20)
    assert sorted(h["path"] for h in first.hits) == ["m0.py", "m1.py", "m2.py"]
    assert first.header["partial"] is False
    # m0 now takes the room of m2, the last in path order.
    assert sorted(h["path"] for h in grown.hits) == ["m0.py", "m1.py"]
    assert grown.header["partial"] is True


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_file_grown_to_exactly_the_file_size_limit_stays(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "kinkajou = 1\n", "b.py": "x = 1\n"})
    body = "kinkajou = 2\n"
    body += "#" * (40 - len(body) - 1) + "\n"
    assert len(body) == 40
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limited(one=40)
    ) as engine:
        await engine.index_search("kinkajou", "repo")
        (repo / "a.py").write_text(body)
        out = await engine.index_search("kinkajou", "repo")
    assert [h["path"] for h in out.hits] == ["a.py"]


@PATHS
@pytest.mark.usefixtures("no_watch")
@pytest.mark.asyncio
async def test_a_new_file_in_an_old_or_a_new_directory_is_found_by_the_next_search(
    repo: Path, dirs: tuple[Path, Path]
) -> None:
    engine, events = await session(repo, dirs)
    async with engine:
        s = Session(engine, events)
        await s.find("quokka")
        (repo / "server/tapir.py").write_text("def tapir_route():\n    pass\n")
        in_old = await s.find("tapir")
        (repo / "new/deep").mkdir(parents=True)
        (repo / "new/deep/saiga.py").write_text("def saiga_route():\n    pass\n")
        in_new = await s.find("saiga")
        status = await engine.index_status()
    assert in_old == ["server/tapir.py"]
    assert in_new == ["new/deep/saiga.py"]
    assert [t["files"] for t in status["trees"]] == [5]


@pytest.mark.asyncio
async def test_an_ignored_directory_one_session_indexed_is_searched_by_another(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {".gitignore": "gen/\n", "a.py": "x = 1\n", "gen/table.py": "def margay_table():\n"},
    )
    (repo / "gen/table.py").write_text("def margay_table():\n    pass\n")
    first, _ = await session(repo, dirs)
    second, _ = await session(repo, dirs)
    async with first, second:
        assert (await second.index_search("margay", "repo")).hits == []
        await first.index_update("gen")
        found = await second.index_search("margay", "repo")
        (repo / "gen/table.py").unlink()
        gone = await second.index_update()
    assert [h["path"] for h in found.hits] == ["gen/table.py"]
    assert (gone.summary["removed"], gone.summary["files"]) == (1, 2)
    assert stored_paths(repo, dirs[0]) == {".gitignore", "a.py"}


@pytest.mark.asyncio
async def test_a_new_session_reads_no_file_it_looked_at_before(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "a.py": "x = 1\n",
            "logo.png": b"\x89PNG\0\0\0",
            "latin.txt": "caf\xe9\n".encode("latin-1"),
        },
    )
    engine, _ = await session(repo, dirs)
    async with engine:
        await engine.index_update()
    engine, _ = await session(repo, dirs)
    async with engine:
        summary = (await engine.index_update()).summary
    assert (summary["read"], summary["files"]) == (0, 1)
    assert (summary["skipped"]["binary"], summary["skipped"]["not_utf8"]) == (1, 1)


@pytest.mark.asyncio
async def test_files_a_checker_refuses_or_would_ask_about_are_named_and_looked_at_again(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    from nodwyn_retrieval.guard import CheckResult

    repo = make_repo(
        tmp_path / "repo",
        {"a.py": "dhole = 1\n", "b.py": "dhole = 2\n", "c.py": "dhole = 3\n"},
    )
    verdicts = {"a.py": CheckResult.deny("not now"), "b.py": CheckResult.confirm("ask first")}

    def checker(path: str, size: int) -> CheckResult:
        return verdicts.get(path, CheckResult.allow())

    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, checkers=[checker]
    ) as engine:
        first = (await engine.index_update()).summary
        verdicts.clear()
        second = (await engine.index_update()).summary
    assert (first["refused"], first["left_out_unasked"]) == (["a.py"], ["b.py"])
    assert (first["files"], first["read"], first["bytes"]) == (1, 1, 10)
    assert (second["refused"], second["left_out_unasked"]) == ([], [])
    assert (second["files"], second["read"], second["bytes"]) == (3, 2, 20)


@pytest.mark.asyncio
async def test_a_file_refused_at_a_search_is_found_once_allowed_though_untouched(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    from nodwyn_retrieval.guard import CheckResult

    repo = make_repo(tmp_path / "repo", {"a.py": "zorro = 1\n", "b.py": "zorro = 2\n"})
    refuse = {"a.py"}

    def checker(path: str, size: int) -> CheckResult:
        return CheckResult.deny("not now") if path in refuse else CheckResult.allow()

    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, checkers=[checker]
    ) as engine:
        first = await engine.index_search("zorro", "repo")
        refuse.clear()
        second = await engine.index_search("zorro", "repo")
    assert [h["path"] for h in first.hits] == ["b.py"]
    assert sorted(h["path"] for h in second.hits) == ["a.py", "b.py"]
