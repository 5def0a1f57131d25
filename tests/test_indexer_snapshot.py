"""The indexer's snapshot: read back whole, and a missing or unreadable one is not "rebuilt".

Written for survivors of a mutation run (docs/reliability.md, "Mutation testing"): the index of a
new session is read from the snapshot; only a damaged snapshot is dropped and counted as rebuilt
(tests/test_indexer.py), never a missing one or one that cannot be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors.indexer import load_snapshot
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.manifest import manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo

FILES: dict[str, str | bytes] = {f"m{i}.py": f"def serval_{i}():\n    pass\n" for i in range(4)}


async def open_engine(repo: Path, dirs: tuple[Path, Path], events: list[dict[str, Any]]) -> Engine:
    return await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1
    )


def snapshot_of(repo: Path, data: Path) -> Path:
    return manifest_path(project_dirs(data, project_key(repo)).trees, repo).with_suffix(".snap")


def rebuilt(events: list[dict[str, Any]]) -> int:
    return sum(int(e["rebuilt"]) for e in events if e["kind"] == "index.update")


@pytest.mark.asyncio
async def test_the_snapshot_an_update_writes_reads_back_with_every_file(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    snap = snapshot_of(repo, dirs[0])
    assert load_snapshot(snap) is None  # none yet
    async with await open_engine(repo, dirs, events) as engine:
        summary = (await engine.index_update()).summary
    segment = load_snapshot(snap)
    assert segment is not None
    assert sorted(segment.files) == sorted(FILES)
    assert summary["files"] == len(FILES)
    # A first build found no snapshot: nothing was dropped, nothing is said rebuilt.
    assert rebuilt(events) == 0


@pytest.mark.asyncio
async def test_a_snapshot_that_is_a_directory_is_dropped_rebuilt_and_written_again(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
    snap = snapshot_of(repo, dirs[0])
    snap.unlink()
    snap.mkdir()  # there, and not a file that can be read
    later: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, later) as engine:
        out = await engine.index_search("serval_3", "repo")
        summary = (await engine.index_update()).summary
    assert [h["path"] for h in out.hits][:1] == ["m3.py"]
    # The index came from the stored records: nothing read again; the snapshot, which only the
    # library writes and always as a file, was damage, said rebuilt, and is a file again.
    assert (summary["files"], summary["read"]) == (len(FILES), 0)
    assert rebuilt(later) == 1
    assert summary["saved"]
    assert summary["store_error"] is None
    assert not snap.exists() or snap.is_file()


@pytest.mark.asyncio
async def test_an_update_after_an_edit_leaves_a_snapshot_the_next_session_needs_no_record_for(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    import shutil

    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
        (repo / "m2.py").write_text("def ocelot():\n    pass\n")
        assert [h["path"] for h in (await engine.index_search("ocelot", "repo")).hits] == ["m2.py"]
        await engine.index_update()  # the edit merged into the index and its snapshot written
    chunks = project_dirs(dirs[0], project_key(repo)).index / "chunks"
    shutil.rmtree(chunks)
    later: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, later) as engine:
        out = await engine.index_search("ocelot", "repo")
        summary = (await engine.index_update()).summary
    # Everything, the edit too, came from the snapshot: no record to load, no file read again.
    assert [h["path"] for h in out.hits] == ["m2.py"]
    assert (summary["files"], summary["read"]) == (len(FILES), 0)
    assert [e["read"] for e in later if e["kind"] == "index.update"] == [0]


@pytest.mark.asyncio
async def test_a_snapshot_that_cannot_be_written_is_said_by_the_update(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.actors import indexer
    from nodwyn_retrieval.errors import StoreError

    def full(path: Path, data: bytes) -> None:
        raise StoreError(f"no space left on device writing {path}")

    monkeypatch.setattr(indexer, "write_atomic", full)
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        summary = (await engine.index_update()).summary
        out = await engine.index_search("serval_1", "repo")
    # The index answers from memory; the update says what could not be saved.
    assert (summary["files"], summary["saved"]) == (len(FILES), False)
    assert "no space left on device" in str(summary["store_error"])
    assert [h["path"] for h in out.hits][:1] == ["m1.py"]
    assert load_snapshot(snapshot_of(repo, dirs[0])) is None


@pytest.mark.asyncio
async def test_a_file_of_exactly_1_mib_is_indexed_and_one_byte_more_is_not(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    head = "def jaguarundi():\n    pass\n"
    exact = head + "#" * (1_048_576 - len(head) - 1) + "\n"
    assert len(exact.encode()) == 1 << 20
    repo = make_repo(tmp_path / "repo", {"exact.py": exact, "over.py": exact + "#"})
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        summary = (await engine.index_update()).summary
        out = await engine.index_search("jaguarundi", "repo")
    assert [h["path"] for h in out.hits] == ["exact.py"]
    assert (summary["files"], summary["skipped"]["too_large"]) == (1, 1)
