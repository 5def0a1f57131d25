"""What a partial build read is kept: a new session starts from it and reads only the rest.

The first session's bound is cut short by a guard checker that holds half the files past it, and
its snapshot is made too costly to fit in what is left of the bound (as on a big tree): the
snapshot is then written after the answer, and at the latest when the engine closes.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval import entry
from nodwyn_retrieval.actors import indexer
from nodwyn_retrieval.actors.indexer import load_snapshot
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import CheckResult, Verdict
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path

from tests.support import make_repo

N = 40


def word(i: int) -> str:
    """A word found in file i alone."""
    return "quoll" + chr(97 + i // 26) + chr(97 + i % 26)


async def open_engine(root: Path, dirs: tuple[Path, Path], **kw: Any) -> Engine:
    data, config = dirs
    return await Engine.open(root, data_dir=data, config_dir=config, workers=1, **kw)


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["search", "update"])
async def test_a_new_session_starts_from_what_a_cut_build_read(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    files: dict[str, str | bytes] = {
        f"f{i:03}.py": f"def func_{i}():\n    return {word(i)!r}\n" for i in range(N)
    }
    repo = make_repo(tmp_path / "r", files)

    async def slow(path: str, size: int) -> CheckResult:
        if int(path[1:4]) >= N // 2:  # half the files are held past the bound
            await asyncio.sleep(3.0)
        return CheckResult(Verdict.ALLOW)

    monkeypatch.setattr(entry, "SEARCH_SECONDS", 1.0)
    monkeypatch.setattr(entry, "UPDATE_SECONDS", 1.0)
    # As on a big tree: writing the snapshot never fits in what is left of the bound.
    monkeypatch.setattr(indexer, "SNAPSHOT_SECONDS_PER_POSTING", 10.0)
    async with await open_engine(repo, dirs, checkers=[slow]) as first:
        if how == "search":
            out = await first.index_search("func", "repo")
            assert out.header["partial"] is True
        else:
            up = await first.index_update()
            assert up.summary["partial"] is True
        trees, chunks = first.dirs.trees, first.dirs.chunks
    mpath = manifest_path(trees, repo)
    kept = set(load_manifest(mpath).entries)
    assert kept
    assert kept <= {f"f{i:03}.py" for i in range(N // 2)}
    snap = load_snapshot(mpath.with_suffix(".snap"))
    assert snap is not None
    assert set(snap.files) == kept  # what was read, written after the answer

    # The records of what was read are gone: only the snapshot can answer for those files.
    shutil.rmtree(chunks)
    monkeypatch.setattr(entry, "SEARCH_SECONDS", 10.0)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, record=events.append) as second:
        out = await second.index_search("func", "repo")
        assert out.header["partial"] is False
        updates = [e for e in events if e["kind"] == "index.update"]
        assert updates[0]["read"] == N - len(kept)  # only the rest was read
        for i in range(N):  # every file is found, what the first read as well as the rest
            hit = await second.index_search(word(i), "repo", limit=1)
            assert [h["path"] for h in hit.hits] == [f"f{i:03}.py"]
