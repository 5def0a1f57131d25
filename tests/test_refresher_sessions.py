"""The refresher across sessions and in what it tells: two sessions on one tree, a store that lost
its records, the guard's denials, and the ``index.update`` record field by field (§3, §4, §5).

Two sessions may refresh one tree: each merges its work into the manifest on disk under its lock,
and each one's index catches up with the other's at its next refresh, from the records the other
stored, without reading the files again. A record gone from the store (collected, or damaged) is
made again by reading its file. A file the denylist refuses is counted, never read or stored.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo

FILES: dict[str, str | bytes] = {
    "zoo/lemur.py": "def lemur_cage():\n    return 1\n",
    "zoo/tapir.py": "def tapir_pond():\n    return 2\n",
    "docs/guide.md": "# Guide\n\nThe margay trail.\n",
}


async def open_engine(repo: Path, dirs: tuple[Path, Path], events: list[dict[str, Any]]) -> Engine:
    return await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1
    )


def updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "index.update"]


async def paths(engine: Engine, query: str) -> list[str]:
    out = await engine.index_search(query, "repo", limit=20)
    return [h["path"] for h in out.hits]


def manifest_of(repo: Path, data: Path) -> Any:
    m = load_manifest(manifest_path(project_dirs(data, project_key(repo)).trees, repo))
    assert m is not None
    return m


@pytest.mark.asyncio
async def test_a_session_takes_in_what_another_read_without_reading_it_again(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    a_events: list[dict[str, Any]] = []
    b_events: list[dict[str, Any]] = []
    async with (
        await open_engine(repo, dirs, a_events) as a,
        await open_engine(repo, dirs, b_events) as b,
    ):
        assert await paths(a, "lemur cage") == ["zoo/lemur.py"]
        generation = manifest_of(repo, dirs[0]).generation
        # The other session sees the tree change and does the work: reads the new file and the
        # rewritten one, forgets the deleted one.
        (repo / "zoo/okapi.py").write_text("def okapi_forest():\n    return 3\n")
        (repo / "zoo/tapir.py").write_text("def tapir_river():\n    return 2\n")
        (repo / "docs/guide.md").unlink()
        assert (await b.index_update()).summary["read"] == 2
        n = len(updates(a_events))
        found = {q: await paths(a, q) for q in ("okapi forest", "river", "pond")}
        guide = await paths(a, "margay trail")
        status = await a.index_status()
        a_after = updates(a_events)[n:]
    assert found == {"okapi forest": ["zoo/okapi.py"], "river": ["zoo/tapir.py"], "pond": []}
    assert guide == []
    # The first session read nothing for it: the other's records and manifest were taken in.
    assert sum(u["read"] for u in a_after) == 0
    assert [t["files"] for t in status["trees"]] == [3]
    m = manifest_of(repo, dirs[0])
    assert set(m.entries) == {"zoo/lemur.py", "zoo/tapir.py", "zoo/okapi.py"}
    assert m.generation > generation


@pytest.mark.asyncio
async def test_both_sessions_work_is_kept_when_each_reads_a_different_file(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with (
        await open_engine(repo, dirs, events) as a,
        await open_engine(repo, dirs, events) as b,
    ):
        await a.index_update()
        await b.index_update()
        (repo / "zoo/one.py").write_text("def numbat_one():\n    return 1\n")
        assert (await a.index_update()).summary["read"] == 1
        (repo / "zoo/two.py").write_text("def numbat_two():\n    return 2\n")
        assert (await b.index_update()).summary["read"] == 1
        seen = {name: sorted(await paths(e, "numbat")) for name, e in (("a", a), ("b", b))}
    both = ["zoo/one.py", "zoo/two.py"]
    assert seen == {"a": both, "b": both}
    assert set(manifest_of(repo, dirs[0]).entries) == {*FILES, *both}


@pytest.mark.asyncio
async def test_a_record_gone_from_the_store_is_made_again_from_its_file(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        assert (await engine.index_update()).summary["read"] == 3
    index = project_dirs(dirs[0], project_key(repo)).index
    shutil.rmtree(index / "chunks")
    for snap in (index / "trees").glob("*.snap"):
        snap.unlink()
    async with await open_engine(repo, dirs, events) as engine:
        out = await engine.index_search("lemur cage", "repo")
        again = (await engine.index_update()).summary
    # The manifest said the files were indexed; their records were not there: read again.
    assert [h["path"] for h in out.hits] == ["zoo/lemur.py"]
    assert out.header["files"] == 3
    assert (again["read"], again["files"]) == (0, 3)
    assert sum(u["read"] for u in updates(events)[1:]) == 3


@pytest.mark.asyncio
async def test_denylisted_files_are_counted_and_never_stored(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            **FILES,
            ".env": "ZOO_KEEPER=serval\n",
            "keys/id_rsa": "serval private\n",
        },
    )
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        first = (await engine.index_update()).summary
        second = (await engine.index_update()).summary
        hits = await paths(engine, "serval")
    assert (first["files"], first["read"], first["skipped"]["denied"]) == (3, 3, 2)
    assert (second["files"], second["read"], second["skipped"]["denied"]) == (3, 0, 2)
    assert hits == []
    assert set(manifest_of(repo, dirs[0]).entries) == set(FILES)


@pytest.mark.asyncio
async def test_the_index_update_record_says_what_the_refresh_did(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            **FILES,
            "logo.png": b"\x89PNG\0\0\0\0",
            "latin.txt": "caf\xe9 au lait\n".encode("latin-1"),
        },
    )
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
        (repo / "zoo/tapir.py").write_text("def tapir_river():\n    return 22\n")
        (repo / "docs/guide.md").unlink()
        summary = (await engine.index_update()).summary
        quiet = await engine.index_search("lemur", "repo")
        n = len(updates(events))
        await engine.index_search("lemur", "repo")
        after_quiet = len(updates(events))
    first, second = updates(events)[:2]
    size = len("def tapir_river():\n    return 22\n")
    text = sum(len(v) for k, v in FILES.items() if isinstance(v, str))
    for e in (first, second):
        assert isinstance(e.pop("seconds"), float)
    assert first == {
        "kind": "index.update",
        "files": 3,
        "read": 5,
        "unchanged": 0,
        "removed": 0,
        "skipped": {"binary": 1, "too_large": 0, "not_utf8": 1, "over_limit": 0, "denied": 0},
        "refused": [],
        "left_out_unasked": [],
        "not_read": 0,
        "not_seen": 0,
        "partial": False,
        "bytes": text,
        "saved": True,
        "rebuilt": 0,
    }
    # The binary and the non-UTF-8 file are not read again: each is counted from its entry.
    assert second == {
        **first,
        "files": 2,
        "read": 1,
        "unchanged": 3,
        "removed": 1,
        "bytes": size,
    }
    assert summary["unchanged"] == 3
    # A search that changed nothing records nothing.
    assert quiet.header["files"] == 2
    assert after_quiet == n
