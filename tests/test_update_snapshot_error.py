"""An update whose merge's snapshot cannot be written says so, and the index still answers.

The snapshot is derived (§4): a session that cannot write it answers from memory, and the next one
rebuilds it from the stored records. But the caller of index-update is told, as it is told of a
manifest that could not be written, rather than the failure being logged and forgotten.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine

from tests.support import make_repo

N = 30


def word(i: int, tag: str = "") -> str:
    return "wombat" + chr(97 + i // 26) + chr(97 + i % 26) + tag


@pytest.mark.asyncio
async def test_a_merge_whose_snapshot_cannot_be_written_is_said_by_the_update(
    tmp_path: Path,
) -> None:
    """Five files changed make a delta the update's call does not merge; the update then merges
    it (in a thread, waited for within its bound) and writes the snapshot, which fails."""
    root = make_repo(
        tmp_path / "repo", {f"f{i}.py": f"def {word(i)}():\n    pass\n" for i in range(N)}
    )
    data, config = tmp_path / "data", tmp_path / "config"
    engine = await Engine.open(root, data_dir=data, config_dir=config, workers=1)
    try:
        first = await engine.index_update()
        assert first.summary["store_error"] is None
        (snap,) = data.rglob("*.snap")
        snap.unlink()
        snap.mkdir()  # a directory where the snapshot goes: no file can replace it
        for i in range(5):
            (root / f"f{i}.py").write_text(f"def {word(i, 'x')}():\n    pass\n")
        second = await engine.index_update()
        hits = await engine.index_search(word(3, "x"), "repo")
    finally:
        snap.rmdir()
        await engine.close()
    assert second.summary["read"] == 5
    assert second.summary["store_error"] is not None
    assert str(snap) in second.summary["store_error"]
    assert "could not be written" in second.text
    assert "f3.py" in hits.text
