"""A new session's first search: the snapshot is read while the refresh lists the tree.

``Engine.open`` no longer waits for the tree's snapshot: the indexer reads it in the background,
the first search's refresh lists, stats and compares the tree meanwhile, and the indexer takes
the refresh's answer once the snapshot is in. The freshness promise of §5 holds across that: an
edit, a rename-save keeping size and modification time, a new file and a deleted file, made after
the session opened and before its first search, are each seen by that search. And the kinds and
the name words a search ranks by, now computed per file as a search first ranks it, are those of
the whole tree's.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.actors import indexer as indexer_mod
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.kinds import KINDS, kinds_of
from nodwyn_retrieval.retrieval.tree import TreeIndex, TreeSegment
from nodwyn_retrieval.retrieval.words import stem

from tests.support import make_repo

FILES: dict[str, str | bytes] = {
    "pkg/alpha.py": "def alpha_walrus():\n    return 1\n",
    "pkg/sub/beta.py": "def beta_pelican():\n    return 2\n",
    "notes/gamma.md": "# Gamma\n\nThe gamma heron.\n",
    "top.py": "TOP_OSPREY = 3\n",
}


async def _hits(engine: Engine, query: str) -> list[str]:
    out = await engine.index_search(query, "repo")
    assert not out.header["partial"]
    return [h["path"] for h in out.hits]


def _rename_save_same_size_and_time(target: Path, text: str) -> None:
    old = target.stat()
    assert len(text) == old.st_size
    tmp = target.with_name("." + target.name + ".tmp")
    tmp.write_text(text)
    os.utime(tmp, ns=(old.st_atime_ns, old.st_mtime_ns))
    tmp.replace(target)
    st = target.stat()
    assert (st.st_size, st.st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    assert st.st_ino != old.st_ino


@pytest.mark.asyncio
async def test_changes_made_while_the_snapshot_loads_are_seen_by_the_first_search(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, config = dirs
    root = make_repo(tmp_path / "repo", FILES)
    async with await Engine.open(root, data_dir=data, config_dir=config, workers=1) as first:
        assert not (await first.index_update()).summary["partial"]
    assert list(data.rglob("*.snap")), "the first session leaves a snapshot"

    # The snapshot's read waits until the test lets it go: the session must open without it,
    # and the first search's refresh must list and stat the tree before the snapshot is in.
    release = threading.Event()
    began = threading.Event()
    real_read = indexer_mod.read_snapshot
    read: list[bool] = []

    def held_read(path: Path) -> object:
        began.set()
        assert release.wait(30), "the snapshot read was never let go"
        got = real_read(path)
        read.append(got[0] is not None)
        return got

    monkeypatch.setattr(indexer_mod, "read_snapshot", held_read)
    engine = await asyncio.wait_for(
        Engine.open(root, data_dir=data, config_dir=config, workers=1), 20
    )
    try:
        assert await asyncio.to_thread(began.wait, 10)
        assert not read, "the session opened before its snapshot was read"
        # After the open, before the search: an edit, a rename-save keeping size and time, a new
        # file and a deleted file.
        with (root / "pkg/alpha.py").open("a") as f:
            f.write("def alpha_narwhal():\n    return 4\n")
        _rename_save_same_size_and_time(
            root / "pkg/sub/beta.py", "def beta_penguin():\n    return 2\n"
        )
        (root / "pkg/sub/delta.py").write_text("def delta_cormorant():\n    pass\n")
        (root / "notes/gamma.md").unlink()

        search = asyncio.ensure_future(_hits(engine, "narwhal"))
        await asyncio.sleep(0.3)  # the refresh lists and compares meanwhile
        assert not search.done(), "the search answered before the index was loaded"
        release.set()
        assert await asyncio.wait_for(search, 30) == ["pkg/alpha.py"]
        assert read == [True], "the snapshot was used"
        assert await _hits(engine, "penguin") == ["pkg/sub/beta.py"]
        assert await _hits(engine, "pelican") == []
        assert await _hits(engine, "cormorant") == ["pkg/sub/delta.py"]
        assert await _hits(engine, "heron") == []
        assert await _hits(engine, "walrus") == ["pkg/alpha.py"]
        assert await _hits(engine, "osprey") == ["top.py"]
    finally:
        release.set()
        await engine.close()


@pytest.mark.asyncio
async def test_a_snapshot_that_cannot_be_read_leaves_a_session_that_indexes_from_its_records(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, config = dirs
    root = make_repo(tmp_path / "repo", FILES)
    async with await Engine.open(root, data_dir=data, config_dir=config, workers=1) as first:
        await first.index_update()

    def failing_read(path: Path) -> object:
        raise MemoryError("no room for the snapshot")

    monkeypatch.setattr(indexer_mod, "read_snapshot", failing_read)
    async with await Engine.open(root, data_dir=data, config_dir=config, workers=1) as engine:
        assert await _hits(engine, "walrus") == ["pkg/alpha.py"]
        assert await _hits(engine, "heron") == ["notes/gamma.md"]


PATHS = [
    "src/app/main.py",
    "src/app/test_main.py",
    "tests/test_parser_utils.py",
    "docs/guide/index.md",
    "vendor/lib/thing.c",
    "api/v1/handlers.py",
    "api/v2/handlers.py",
    "CHANGELOG.md",
    ".github/workflows/ci.yml",
    "build/generated_parser.py",
    "requirements.txt",
    "examples/demo_parser.py",
    "ParserUtils.java",
    ".hidden_name",
]


def _index() -> TreeIndex:
    base = [(p, f"k{i}", analyze(f"parser utils main handlers {i}\n")) for i, p in enumerate(PATHS)]
    index = TreeIndex(TreeSegment.build(base))
    changes = {
        PATHS[0]: ("k-new", analyze("parser main again\n")),
        "api/v3/handlers.py": ("k-v3", analyze("handlers parser\n")),
        PATHS[4]: None,
    }
    index.apply(changes)  # type: ignore[arg-type]
    return index


def test_each_files_kind_asked_in_parts_is_the_whole_trees() -> None:
    index = _index()
    base, delta = index.base.files, index.delta.files
    assert delta, "the index has a delta"
    codes = {k: i for i, k in enumerate(KINDS)}
    # Versioned directories are found among the base's files, as before.
    from nodwyn_retrieval.retrieval.kinds import file_kind, legacy_dirs

    legacy = legacy_dirs(base)
    want = [codes[k] for k in kinds_of(base)] + [codes[file_kind(p, legacy)] for p in delta]
    assert "legacy" in kinds_of(base)
    n = len(want)
    rng = np.random.default_rng(7)
    asked = [rng.integers(0, n, size=k) for k in (0, 1, 3, 5, n)]
    asked.append(np.arange(n)[::-1])
    for keys in asked:
        got = index._kinds_of(keys.astype(np.int64))
        assert got.tolist() == [want[k] for k in keys.tolist()]
    index.warm()
    assert index._kinds_of(np.arange(n, dtype=np.int64)).tolist() == want


def test_a_files_name_stems_agree_with_the_files_named_by_each_stem() -> None:
    seg = _index().base
    for f, path in enumerate(seg.files):
        stems = seg.name_stems(f)
        assert len(set(stems)) == len(stems)
        for s in stems:
            assert f in seg.files_named(s).tolist(), (path, s)
    named = seg.name_stems(PATHS.index("tests/test_parser_utils.py"))
    assert {stem("test"), stem("parser"), stem("utils")} <= set(named)
    assert seg.name_stems(PATHS.index("CHANGELOG.md")) == (stem("changelog"),)
    every = {s for f in range(len(seg.files)) for s in seg.name_stems(f)}
    for s in every:
        assert all(s in seg.name_stems(f) for f in seg.files_named(s).tolist())


def test_ranking_by_name_and_kind_is_the_same_asked_first_or_after_a_warm_index() -> None:
    query = {"parser": 1.0, "handlers": 0.5, "v1": 0.25}
    cold = _index().rank_files(query, 10)
    warm_index = _index()
    warm_index.warm()
    for f in range(len(warm_index.base.files)):
        warm_index.base.name_stems(f)
    warm_index._kinds_of(np.arange(len(warm_index.base.files), dtype=np.int64))
    assert warm_index.rank_files(query, 10) == cold
    assert cold[0], "the query ranks something"


@pytest.mark.asyncio
async def test_the_watch_takes_the_listings_git_directory_and_sees_an_exclude_written_there(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.actors import refresher

    def no_second_look(root: Path) -> Path | None:
        raise AssertionError("the git directory was looked up again after the listing")

    monkeypatch.setattr(refresher, "_git_dir", no_second_look)
    data, config = dirs
    root = make_repo(tmp_path / "repo", FILES)
    async with await Engine.open(root, data_dir=data, config_dir=config, workers=1) as engine:
        assert await _hits(engine, "walrus") == ["pkg/alpha.py"]
        (root / "pkg/extra.py").write_text("def extra_albatross():\n    pass\n")
        assert await _hits(engine, "albatross") == ["pkg/extra.py"]
        # An exclude written in the git directory: only the watch of that directory tells.
        with (root / ".git/info/exclude").open("a") as f:
            f.write("pkg/extra.py\n")
        assert await _hits(engine, "albatross") == []
        assert await _hits(engine, "walrus") == ["pkg/alpha.py"]
