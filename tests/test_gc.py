"""The collection (§4, amendment 2026-10-16): what no working tree names leaves the store, and
nothing a tree names or is about to name ever does."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import gc
from nodwyn_retrieval.actors.gc import CHUNK_GRACE, INTERVAL, MARKER, Collect, Collected, collect
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.store.atomic import file_lock
from nodwyn_retrieval.store.chunkstore import ChunkStore, PackInfo
from nodwyn_retrieval.store.manifest import (
    Entry,
    Manifest,
    load_manifest,
    manifest_path,
    save_manifest,
)
from nodwyn_retrieval.store.paths import ProjectDirs, project_dirs, project_key

from tests.support import git, make_repo

DAY = 24 * 3600.0
RACE_ROUNDS = int(os.environ.get("NODWYN_GC_RACE_ROUNDS", "12"))
"""Rounds of the collection raced against a refresh (raise it to look harder)."""
RACE_FILES = int(os.environ.get("NODWYN_GC_RACE_FILES", "60"))
"""Files in the raced tree: each one's record is reused, so each is one chance to lose one."""


def key_of(text: str) -> str:
    return ChunkStore.key(hashlib.sha256(text.encode()).hexdigest())


def put(store: ChunkStore, text: str, mtime: float | None = None) -> str:
    key = key_of(text)
    store.put(key, analyze(text))
    if mtime is not None:
        os.utime(store.path(key), (mtime, mtime))
    return key


@pytest.fixture
def pdirs(tmp_path: Path) -> ProjectDirs:
    return project_dirs(tmp_path / "data", "proj-0123456789ab")


def manifest_naming(pdirs: ProjectDirs, root: Path, keys: list[str]) -> Path:
    path = manifest_path(pdirs.trees, root)
    entries = {f"f{i}.py": Entry(1, 1, i, k) for i, k in enumerate(keys)}
    save_manifest(path, Manifest(str(root), 1, entries))
    return path


# -- the hourly marker -----------------------------------------------------------------------


def test_the_collection_runs_at_most_once_an_hour_unless_forced(pdirs: ProjectDirs) -> None:
    t = 1_900_000_000.0
    assert collect(pdirs, now=t).ran
    assert (pdirs.index / MARKER).stat().st_mtime == t
    assert not collect(pdirs, now=t + 60).ran
    assert not collect(pdirs, now=t + INTERVAL - 1).ran
    assert collect(pdirs, now=t + 60, force=True).ran
    assert collect(pdirs, now=t + 60 + INTERVAL).ran


def test_a_missing_or_unreadable_marker_means_the_collection_is_due(pdirs: ProjectDirs) -> None:
    assert collect(pdirs).ran
    (pdirs.index / MARKER).unlink()
    assert collect(pdirs).ran


async def open_engine(root: Path, data: Path, config: Path, **kw: Any) -> Engine:
    return await Engine.open(root, data_dir=data, config_dir=config, workers=1, **kw)


@pytest.mark.asyncio
async def test_a_search_that_read_a_file_collects_once_an_hour_after_the_lock_is_released(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    pd = project_dirs(dirs[0], project_key(repo))
    lock = manifest_path(pd.trees, repo).with_suffix(".lock")
    runs: list[bool] = []
    real = gc.collect

    def watched(d: ProjectDirs, *, force: bool = False, now: float | None = None) -> Collected:
        # The manifest's lock is free while the collection runs.
        with file_lock(lock, timeout=0):
            pass
        done = real(d, force=force, now=now)
        runs.append(done.ran)
        return done

    monkeypatch.setattr(gc, "collect", watched)
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_search("alpha", "repo")
        # An ask queues behind the search's tell: when it answers, that collection is done.
        assert isinstance(await engine._gc.ask(Collect()), Collected)
        assert runs == [True, False]
        marker = (pd.index / MARKER).stat().st_mtime
        (repo / "a.py").write_text("def alpha_beta():\n    pass\n")
        await engine.index_search("alpha", "repo")  # read a file: sends Collect, within the hour
        await engine._gc.ask(Collect())
        assert runs == [True, False, False, False]
        assert (pd.index / MARKER).stat().st_mtime == marker
        await engine.index_search("alpha", "repo")  # read nothing: sends nothing
        await engine._gc.ask(Collect())
        assert runs == [True, False, False, False, False]


@pytest.mark.asyncio
async def test_index_update_sends_the_collection_too(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    pd = project_dirs(dirs[0], project_key(repo))
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
        await engine._gc.ask(Collect())
    assert (pd.index / MARKER).is_file()


@pytest.mark.asyncio
async def test_a_collection_that_fails_never_fails_the_search(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(d: ProjectDirs, *, force: bool = False, now: float | None = None) -> Collected:
        raise StoreError(f"read-only file system removing {d.chunks}")

    monkeypatch.setattr(gc, "collect", broken)
    repo = make_repo(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    async with await open_engine(repo, *dirs) as engine:
        # More failures than the actor's restart budget (3 within 10 s): none reaches a search.
        for i in range(8):
            (repo / "a.py").write_text(f"def alpha():\n    return {i}\n")
            out = await engine.index_search("alpha", "repo")
            assert [h["path"] for h in out.hits] == ["a.py"]
        last = await engine._gc.ask(Collect(force=True))
    assert isinstance(last, Collected)
    assert not last.ran
    assert last.error is not None
    assert "read-only" in last.error


# -- what is removed and what is kept ---------------------------------------------------------


def test_a_gone_trees_manifest_snapshot_and_lock_are_removed(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    live = tmp_path / "live"
    live.mkdir()
    gone = tmp_path / "gone"
    gone.mkdir()
    store = ChunkStore(pdirs.chunks)
    k_live = put(store, "def live():\n    pass\n")
    k_gone = put(store, "def gone():\n    pass\n")
    m_live = manifest_naming(pdirs, live, [k_live])
    m_gone = manifest_naming(pdirs, gone, [k_gone])
    for p in (m_gone.with_suffix(".snap"), m_gone.with_suffix(".lock")):
        p.write_bytes(b"x")
    gone.rmdir()
    done = collect(pdirs, force=True)
    assert done.manifests == 1
    assert m_live.is_file()
    assert not m_gone.exists()
    assert not m_gone.with_suffix(".snap").exists()
    assert not m_gone.with_suffix(".lock").exists()
    # Its records are no longer named, but young: kept until they are seven days unnamed.
    assert store.exists(k_gone)
    assert done.kept_unnamed == 1
    later = collect(pdirs, force=True, now=time.time() + CHUNK_GRACE + DAY)
    assert later.chunks == 1
    assert not store.exists(k_gone)
    assert store.exists(k_live)


@pytest.mark.asyncio
async def test_a_removed_worktrees_manifest_goes_and_the_main_checkouts_stays(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    for root in (repo, wt):
        async with await open_engine(root, *dirs) as engine:
            await engine.index_update()
    pd = project_dirs(dirs[0], project_key(repo))
    m_wt = manifest_path(pd.trees, wt)
    assert m_wt.with_suffix(".snap").is_file()
    git(repo, "worktree", "remove", "--force", str(wt))
    assert collect(pd, force=True).manifests == 1
    assert not m_wt.exists()
    assert not m_wt.with_suffix(".snap").exists()
    assert manifest_path(pd.trees, repo).is_file()


def test_an_unnamed_record_is_removed_after_seven_days_and_kept_before(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    store = ChunkStore(pdirs.chunks)
    now = time.time()
    old = put(store, "def old():\n    pass\n", now - CHUNK_GRACE - 60)
    young = put(store, "def young():\n    pass\n", now - CHUNK_GRACE + 3600)
    done = collect(pdirs, force=True, now=now)
    assert (done.chunks, done.kept_unnamed) == (1, 1)
    assert done.bytes > 0
    assert not store.exists(old)
    assert store.exists(young)
    # The same records judged by a clock moved forward instead of their times moved back.
    fresh = put(store, "def fresh():\n    pass\n")
    assert collect(pdirs, force=True, now=now + CHUNK_GRACE - 60).chunks == 1  # young's turn
    assert store.exists(fresh)
    assert collect(pdirs, force=True, now=now + CHUNK_GRACE + 60).chunks == 1
    assert list(store.iter_entries()) == []


def test_a_record_a_manifest_names_is_never_removed(tmp_path: Path, pdirs: ProjectDirs) -> None:
    store = ChunkStore(pdirs.chunks)
    root = tmp_path / "tree"
    root.mkdir()
    keys = [put(store, f"def named_{i}():\n    pass\n", 1.0) for i in range(3)]
    manifest_naming(pdirs, root, keys)
    for years in (1, 10, 100):
        done = collect(pdirs, force=True, now=time.time() + years * 365 * DAY)
        assert done.chunks == 0
    assert all(store.exists(k) for k in keys)


def test_a_manifest_that_does_not_decode_keeps_every_record_while_it_is_young(
    tmp_path: Path, pdirs: ProjectDirs
) -> None:
    store = ChunkStore(pdirs.chunks)
    root = tmp_path / "tree"
    root.mkdir()
    old = put(store, "def maybe_named():\n    pass\n", 1.0)
    bad = manifest_naming(pdirs, root, [old])
    bad.write_bytes(b"NRMF\xff\xff\x00\x00garbage")  # a manifest of a version we cannot read
    now = time.time()
    done = collect(pdirs, force=True, now=now)
    assert (done.chunks, done.manifests) == (0, 0)
    assert store.exists(old)
    assert bad.is_file()
    # Nobody rebuilt it for seven days: its tree is not used; it goes, and so does the record.
    later = collect(pdirs, force=True, now=now + CHUNK_GRACE + DAY)
    assert (later.manifests, later.chunks) == (1, 1)
    assert not bad.exists()
    assert not store.exists(old)


def test_temporary_files_of_killed_writers_are_swept_once_an_hour_old(
    pdirs: ProjectDirs,
) -> None:
    store = ChunkStore(pdirs.chunks)
    key = put(store, "def kept():\n    pass\n")
    bucket = store.path(key).parent
    pdirs.trees.mkdir(parents=True, exist_ok=True)
    now = time.time()
    stale = [pdirs.trees / ".abc.manifest.x1.tmp", bucket / f".{key}.ck.x2.tmp"]
    young = [pdirs.trees / ".abc.snap.y1.tmp", bucket / f".{key}.ck.y2.tmp"]
    for p in stale:
        p.write_bytes(b"half")
        os.utime(p, (now - 7200, now - 7200))
    for p in young:
        p.write_bytes(b"half")
    done = collect(pdirs, force=True, now=now)
    assert done.temp == 2
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in young)
    assert store.exists(key)


def test_a_record_touched_after_the_listing_is_put_back(
    pdirs: ProjectDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing saw an old record; a refresh touched it before the collection reached it."""
    store = ChunkStore(pdirs.chunks)
    now = time.time()
    key = put(store, "def reused():\n    pass\n", now - CHUNK_GRACE - DAY)
    real = ChunkStore.list_packs

    def listing_then_touch(self: ChunkStore) -> list[PackInfo]:
        packs = real(self)
        time.sleep(0.01)  # past the file system's tick of times
        ChunkStore(pdirs.chunks).touch(key)  # a refresh reuses it now
        return packs

    monkeypatch.setattr(ChunkStore, "list_packs", listing_then_touch)
    done = collect(pdirs, force=True, now=now)
    assert (done.chunks, done.kept_unnamed) == (0, 1)
    assert store.get(key) is not None
    assert [n for n in os.listdir(store.path(key).parent) if n.startswith(".")] == []


# -- a collection racing a refresh that reuses stored records ----------------------------------


def race_repo(tmp_path: Path, n: int) -> tuple[Path, Path, dict[str, str]]:
    """A repository and a worktree of it, each file with a word of its own."""
    words = {f"pkg/mod_{i:03d}.py": f"raceword{i:03d}" for i in range(n)}
    files: dict[str, str | bytes] = {
        p: f"def {w}():\n    return {i}\n" for i, (p, w) in enumerate(words.items())
    }
    repo = make_repo(tmp_path / "repo", files)
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    return repo, wt, words


def age_the_store(pd: ProjectDirs, *roots: Path) -> None:
    """Leave every record stored, unnamed and thirty days old: what a collection takes."""
    for root in roots:
        mp = manifest_path(pd.trees, root)
        for p in (mp, mp.with_suffix(".snap")):
            p.unlink(missing_ok=True)
    old = time.time() - 30 * DAY
    for key, _, _ in ChunkStore(pd.chunks).iter_entries():
        os.utime(ChunkStore(pd.chunks).path(key), (old, old))


def named_but_missing(pd: ProjectDirs, root: Path) -> list[str]:
    m = load_manifest(manifest_path(pd.trees, root))
    assert m is not None
    store = ChunkStore(pd.chunks)
    return sorted(
        p for p, e in m.entries.items() if not e.key.startswith("!") and store.get(e.key) is None
    )


async def all_found(root: Path, dirs: tuple[Path, Path], words: dict[str, str]) -> list[str]:
    """The files a fresh session cannot find by their own word."""
    lost = []
    async with await open_engine(root, *dirs) as engine:
        for path, word in words.items():
            out = await engine.index_search(word, "repo", limit=1)
            if [h["path"] for h in out.hits] != [path]:
                lost.append(path)
    return lost


@pytest.mark.asyncio
async def test_a_collection_between_reading_and_touching_a_reused_record_takes_nothing_named(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race made deterministic: the collection runs right after the refresh has read a
    record it found stored (thirty days old, named by no manifest). The refresh touches a
    record before it reads it, so the collection finds it fresh and puts it back."""
    repo, wt, _ = race_repo(tmp_path, 4)
    pd = project_dirs(dirs[0], project_key(repo))
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
    age_the_store(pd, repo)
    real_get = ChunkStore.get
    fired: list[str] = []

    def get_then_collect(self: ChunkStore, key: str) -> Any:
        rec = real_get(self, key)
        if rec is not None and not fired:
            fired.append(key)
            collect(pd, force=True)
        return rec

    monkeypatch.setattr(ChunkStore, "get", get_then_collect)
    async with await open_engine(wt, *dirs) as engine:
        await engine.index_update()
    monkeypatch.setattr(ChunkStore, "get", real_get)
    assert fired
    assert named_but_missing(pd, wt) == []


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_collection_racing_a_refresh_that_reuses_old_records_loses_none(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """Collections in a loop on another thread while a worktree's refresh reuses records that
    are thirty days old and unnamed, round after round: every file stays findable and every
    record the manifest names stays stored."""
    repo, wt, words = race_repo(tmp_path, RACE_FILES)
    pd = project_dirs(dirs[0], project_key(repo))
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
    failures: list[BaseException] = []
    collections = 0
    lost: dict[int, list[str]] = {}
    for rnd in range(RACE_ROUNDS):
        age_the_store(pd, repo, wt)
        stop = threading.Event()

        def collector(stop: threading.Event = stop) -> None:
            nonlocal collections
            while not stop.is_set():
                try:
                    collect(pd, force=True)
                except BaseException as e:  # noqa: BLE001 - reported below
                    failures.append(e)
                    return
                collections += 1

        thread = threading.Thread(target=collector)
        thread.start()
        try:
            async with await open_engine(wt, *dirs) as engine:
                up = await engine.index_update()
                assert up.summary["files"] == len(words)
        finally:
            stop.set()
            await asyncio.to_thread(thread.join)
        missing = named_but_missing(pd, wt)
        if missing:
            lost[rnd] = missing
    assert failures == []
    assert collections >= RACE_ROUNDS
    assert lost == {}
    assert await all_found(wt, dirs, words) == []
