"""The collection of a store in packs: an old pack no manifest names is removed, one partly named
is written again or kept within the waste's bound, small old packs are merged, a second copy
goes, version 2's files go, and nothing named is ever lost (ADR 0050 §4, amendment 2026-10-16)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.actors.gc import CHUNK_GRACE, REWRITE_SHARE, SMALL_PACK, collect
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.store.chunkstore import SUFFIX, ChunkStore, read_pack
from nodwyn_retrieval.store.manifest import Entry, Manifest, manifest_path, save_manifest
from nodwyn_retrieval.store.packs import PACKS, reset_indexes
from nodwyn_retrieval.store.paths import ProjectDirs, project_dirs

DAY = 24 * 3600.0


def text(i: int, size: int = 1) -> str:
    return "".join(f"def f_{i}_{j}(x):\n    return x * {i + j}\n" for j in range(size))


def key_of(t: str) -> str:
    return ChunkStore.key(hashlib.sha256(t.encode()).hexdigest())


@pytest.fixture
def pdirs(tmp_path: Path) -> ProjectDirs:
    return project_dirs(tmp_path / "data", "proj-0123456789ab")


def pack_of(store: ChunkStore, texts: list[str], age: float = 30 * DAY) -> Path:
    before = set((store.packs_dir).glob(f"*{SUFFIX}"))
    store.put_many([(key_of(t), analyze(t)) for t in texts])
    [path] = set((store.packs_dir).glob(f"*{SUFFIX}")) - before
    old = time.time() - age
    os.utime(path, (old, old))
    return path


def name(pdirs: ProjectDirs, root: Path, texts: list[str]) -> None:
    root.mkdir(exist_ok=True)
    entries = {f"f{i}.py": Entry(1, 1, i, key_of(t)) for i, t in enumerate(texts)}
    save_manifest(manifest_path(pdirs.trees, root), Manifest(str(root), 1, entries))


def stored(pdirs: ProjectDirs) -> dict[str, int]:
    """Each key a new process finds, and how many copies of it the packs hold."""
    reset_indexes()
    out: dict[str, int] = {}
    for p in sorted((pdirs.chunks / PACKS).glob(f"*{SUFFIX}")):
        for key, rec in read_pack(p.read_bytes()):
            assert rec is not None
            out[key] = out.get(key, 0) + 1
    return out


def test_an_old_pack_no_manifest_names_is_removed_and_a_young_one_kept(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    store = ChunkStore(pdirs.chunks)
    old = pack_of(store, [text(i) for i in range(20)])
    young = pack_of(store, [text(i) for i in range(20, 40)], age=CHUNK_GRACE - DAY)
    size = old.stat().st_size
    done = collect(pdirs, force=True)
    assert (done.chunks, done.kept_unnamed, done.rewritten) == (20, 20, 0)
    assert done.bytes == size
    assert not old.exists()
    assert young.exists()


def test_an_old_pack_mostly_unnamed_is_written_again_with_its_named_records_alone(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    store = ChunkStore(pdirs.chunks)
    texts = [text(i) for i in range(20)]
    old = pack_of(store, texts)
    name(pdirs, tmp_path / "tree", texts[:12])  # 8 of 20 unnamed: past a quarter
    size = old.stat().st_size
    done = collect(pdirs, force=True)
    assert (done.chunks, done.kept_unnamed, done.rewritten) == (8, 0, 1)
    assert not old.exists()
    assert stored(pdirs) == {key_of(t): 1 for t in texts[:12]}
    [new] = (pdirs.chunks / PACKS).glob(f"*{SUFFIX}")
    assert done.bytes == size - new.stat().st_size
    store = ChunkStore(pdirs.chunks)
    assert all(store.get(key_of(t)) == analyze(t) for t in texts[:12])


def test_an_old_pack_little_unnamed_is_kept_as_it_is(tmp_path: Path, pdirs: ProjectDirs) -> None:
    store = ChunkStore(pdirs.chunks)
    texts = [text(i) for i in range(20)]
    old = pack_of(store, texts)
    name(pdirs, tmp_path / "tree", texts[:17])  # 3 of 20 unnamed: under a quarter
    done = collect(pdirs, force=True)
    assert (done.chunks, done.kept_unnamed, done.rewritten) == (0, 3, 0)
    assert old.exists()


def test_after_a_collection_no_old_pack_is_a_quarter_unnamed(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    """The waste's bound, over packs of every share named: what is left old holds less than
    REWRITE_SHARE of its record bytes unnamed."""
    store = ChunkStore(pdirs.chunks)
    texts: list[str] = []
    named: list[str] = []
    for p in range(10):
        batch = [text(100 * p + i, size=1 + i % 3) for i in range(20)]
        pack_of(store, batch)
        texts += batch
        named += batch[: 2 * p]  # 0, 2, ..., 18 of 20 named
    name(pdirs, tmp_path / "tree", named)
    collect(pdirs, force=True)
    left = ChunkStore(pdirs.chunks).list_packs()
    want = {key_of(t) for t in named}
    for info in left:
        dead = sum(n for k, n in zip(info.keys, info.lengths, strict=True) if k not in want)
        assert dead < REWRITE_SHARE * sum(info.lengths), info.path.name
    assert set(stored(pdirs)) >= want


def test_old_small_packs_are_merged_into_one(tmp_path: Path, pdirs: ProjectDirs) -> None:
    store = ChunkStore(pdirs.chunks)
    texts = [text(i) for i in range(6)]
    olds = [pack_of(store, [t]) for t in texts]  # a refresh's packs of one, a week on
    name(pdirs, tmp_path / "tree", texts)
    done = collect(pdirs, force=True)
    assert (done.chunks, done.rewritten) == (0, 6)
    assert not any(p.exists() for p in olds)
    assert len(list((pdirs.chunks / PACKS).glob(f"*{SUFFIX}"))) == 1
    assert stored(pdirs) == {key_of(t): 1 for t in texts}
    assert done.bytes > 0  # five headers fewer
    # A lone small pack has nothing to merge with: left alone.
    again = collect(pdirs, force=True, now=time.time() + CHUNK_GRACE + DAY)
    assert (again.chunks, again.rewritten) == (0, 0)
    assert len(texts) < SMALL_PACK


def test_a_second_copy_of_a_named_record_goes(tmp_path: Path, pdirs: ProjectDirs) -> None:
    """Two trees stored one content at once: the older pack's copy stays, the other goes."""
    store = ChunkStore(pdirs.chunks)
    texts = [text(i) for i in range(SMALL_PACK)]
    first = pack_of(store, texts)
    second = pack_of(store, texts)
    name(pdirs, tmp_path / "tree", texts)
    done = collect(pdirs, force=True)
    assert done.chunks == SMALL_PACK
    assert stored(pdirs) == {key_of(t): 1 for t in texts}
    assert first.exists() != second.exists()


def test_version_2_record_files_are_deleted_with_their_directories(pdirs: ProjectDirs) -> None:
    key = key_of(text(0))
    old = pdirs.chunks / key[:2] / f"{key}.ck"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"NRCK\x00\x02\x00\x00whatever")  # young: gone all the same, never read
    keep = pdirs.chunks / "notes.txt"
    keep.write_text("not a record")
    done = collect(pdirs, force=True)
    assert done.chunks == 1
    assert not old.exists()
    assert not old.parent.exists()
    assert keep.exists()


def test_a_rewrite_that_cannot_write_puts_every_pack_back(
    tmp_path: Path, pdirs: ProjectDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ChunkStore(pdirs.chunks)
    texts = [text(i) for i in range(20)]
    old = pack_of(store, texts)
    name(pdirs, tmp_path / "tree", texts[:5])

    def full(self: ChunkStore, blobs: list[tuple[str, bytes]]) -> int:
        raise StoreError(f"no space left on device writing {self.packs_dir}/x")

    monkeypatch.setattr(ChunkStore, "write_raw", full)
    with pytest.raises(StoreError, match="no space left"):
        collect(pdirs, force=True)
    monkeypatch.undo()
    assert old.exists()
    assert stored(pdirs) == {key_of(t): 1 for t in texts}
    assert [n for n in os.listdir(pdirs.chunks / PACKS) if n.startswith(".")] == []


def test_a_record_damaged_in_a_pack_being_written_again_is_left_out(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    store = ChunkStore(pdirs.chunks)
    texts = [text(i, size=4) for i in range(20)]
    old = pack_of(store, texts)
    name(pdirs, tmp_path / "tree", texts[:10])
    data = bytearray(old.read_bytes())
    data[-5] ^= 0xFF  # inside the last record, whichever key it is
    mtime = old.stat().st_mtime
    old.write_bytes(bytes(data))
    os.utime(old, (mtime, mtime))
    reset_indexes()
    collect(pdirs, force=True)
    left = stored(pdirs)
    assert len(left) in (9, 10)  # the damaged one named, or not
    assert set(left) <= {key_of(t) for t in texts[:10]}


@pytest.mark.asyncio
async def test_a_collection_killed_after_taking_a_pack_aside_loses_only_derived_records(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """What a collection killed between its rename and its rewrite leaves: the pack under a
    temporary name. A later session finds every file again (its records rebuilt), and the
    temporary file goes once it is an hour old."""
    from nodwyn_retrieval.store.paths import project_key

    from tests.test_gc import all_found, named_but_missing, open_engine, race_repo

    repo, wt, words = race_repo(tmp_path, 8)
    pd = project_dirs(dirs[0], project_key(repo))
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
    for p in (pd.chunks / PACKS).glob(f"*{SUFFIX}"):
        p.rename(p.with_name(f".{p.name}.gc0badf00d.tmp"))
    reset_indexes()
    assert await all_found(wt, dirs, words) == []
    assert named_but_missing(pd, wt) == []
    old = time.time() - 7200
    for p in (pd.chunks / PACKS).glob(".*.tmp"):
        os.utime(p, (old, old))
    assert collect(pd, force=True).temp >= 1
    assert list((pd.chunks / PACKS).glob(".*")) == []


def test_an_old_pack_exactly_a_quarter_unnamed_is_written_again(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    store = ChunkStore(pdirs.chunks)
    keys = [ChunkStore.key(f"{i:064x}") for i in range(SMALL_PACK)]
    store.write_raw([(k, b"r" * 100) for k in keys])  # records of one size
    [path] = (pdirs.chunks / PACKS).glob(f"*{SUFFIX}")
    old = time.time() - 30 * DAY
    os.utime(path, (old, old))
    root = tmp_path / "tree"
    root.mkdir()
    named = keys[SMALL_PACK // 4 :]  # a quarter of the bytes unnamed, exactly
    entries = {f"f{i}.py": Entry(1, 1, i, k) for i, k in enumerate(named)}
    save_manifest(manifest_path(pdirs.trees, root), Manifest(str(root), 1, entries))
    done = collect(pdirs, force=True)
    assert (done.chunks, done.rewritten) == (SMALL_PACK // 4, 1)
    assert not path.exists()


def test_a_sweep_never_follows_a_link_named_as_a_version_2_directory(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    theirs = elsewhere / ".theirs.ck.1.tmp"
    theirs.write_bytes(b"someone else's")
    old = time.time() - 7200
    os.utime(theirs, (old, old))
    pdirs.chunks.mkdir(parents=True)
    (pdirs.chunks / "zz").symlink_to(elsewhere)
    done = collect(pdirs, force=True)
    assert done.temp == 0
    assert theirs.exists()
    assert (pdirs.chunks / "zz").is_symlink()
