"""The collection: what no working tree names any more leaves the store (§4, amendment 2026-10-16).

A search that read or removed a file, and every index-update, send :class:`Collect` after the
manifest's lock is released. It runs at most once an hour (a marker file in the store records the
last run) unless forced, and removes:

- manifests (and their locks and snapshots) whose working tree is gone (a removed worktree);
- manifests that no longer decode and that nobody wrote for seven days (their tree would have
  rebuilt them by then if it were still used);
- stored chunk records that no manifest names and that nobody touched for seven days;
- temporary files a killed writer left behind, once they are an hour old.

A refresh that reuses a stored record touches it, so a collection racing a refresh cannot take a
record a manifest is about to name: the record is at most seconds old, not seven days. The
collection judges a record's age twice: once when it lists the store, and again after it has
renamed the record out of the way, and it puts back a record that was touched in between. A
reader that touches a record before it reads it therefore either finds it in place (and the
collection leaves it) or finds it gone (and analyses the file again).

A manifest that does not decode may name anything: while one younger than seven days is there, no
chunk record is removed.

A collection never fails its caller: a store it cannot change (a read-only or full disk) is logged
and tried again at the next search.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from nodwyn_retrieval.bus import Actor
from nodwyn_retrieval.errors import FormatError, RetrievalError, StoreError
from nodwyn_retrieval.store.atomic import TEMP_SUFFIX
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.manifest import list_manifests, load_manifest
from nodwyn_retrieval.store.paths import ProjectDirs

__all__ = ["CHUNK_GRACE", "INTERVAL", "MARKER", "Collect", "Collected", "GcActor", "collect"]

log = logging.getLogger("nodwyn_retrieval.actors.gc")

INTERVAL = 3600.0  # at most once an hour
CHUNK_GRACE = 7 * 24 * 3600.0  # stored files no manifest names for seven days
TEMP_GRACE = 3600.0  # a temporary file younger than this may be a write in progress
MARKER = "gc.marker"


@dataclass(frozen=True, slots=True)
class Collect:
    """Run the collection if the last one is an hour old (or now, when forced)."""

    force: bool = False
    """Run now whatever the marker says."""
    now: float | None = None
    """The time to judge ages by (tests move it forward); the wall clock when None."""


@dataclass(frozen=True, slots=True)
class Collected:
    """What a collection removed."""

    ran: bool
    """False when the last run was less than an hour ago (or the collection failed)."""
    manifests: int = 0
    """Manifests removed because their working tree is gone (or they no longer decode)."""
    chunks: int = 0
    """Chunk records removed."""
    bytes: int = 0
    """Bytes freed."""
    kept_unnamed: int = 0
    """Records no manifest names, kept because they are younger than seven days, were touched
    while the collection ran, or a manifest that does not decode might name them."""
    temp: int = 0
    """Temporary files of killed writers removed."""
    error: str | None = None
    """Why the collection stopped, when it did: it is tried again at the next search."""


def _marker_age(marker: Path, now: float) -> float:
    try:
        return now - marker.stat().st_mtime
    except OSError:
        return float("inf")


def _unlink(path: Path) -> int:
    """Remove path; the bytes freed (0 when it was not there or could not be removed)."""
    try:
        size = path.stat().st_size
        path.unlink()
    except OSError:
        return 0
    return size


def _remove_unnamed(store: ChunkStore, key: str, now: float) -> int | None:
    """Remove the record of key unless it was touched since the store was listed.

    The record is first renamed out of the way, atomically, so that nobody can touch it any more
    under its name; then its age is judged again on the renamed file. A record touched before
    the rename is put back. The bytes freed, or None when the record was kept or was gone.
    """
    path = store.path(key)
    aside = path.with_name(f".{path.name}.gc{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return None  # another collection took it, or its writer's rename has not happened
    except OSError as exc:
        raise StoreError(f"cannot collect {path}: {exc.strerror or exc}") from None
    try:
        st = os.stat(aside)
    except OSError:
        return None
    if now - st.st_mtime < CHUNK_GRACE:
        # Touched between the listing and the rename: a refresh is about to name it.
        try:
            os.rename(aside, path)
        except OSError:
            # Lost: the next reader finds it missing and analyses the file again.
            with contextlib.suppress(OSError):
                os.unlink(aside)
        return None
    try:
        os.unlink(aside)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot collect {path}: {exc.strerror or exc}") from None
    return st.st_size


def _remove_stale_temp(directory: Path, now: float) -> int:
    """Temporary files (``.<name>.<random>.tmp``) older than an hour in directory; how many."""
    removed = 0
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
            continue
        with contextlib.suppress(OSError):
            if now - entry.stat(follow_symlinks=False).st_mtime >= TEMP_GRACE:
                os.unlink(entry.path)
                removed += 1
    return removed


def collect(dirs: ProjectDirs, *, force: bool = False, now: float | None = None) -> Collected:
    """One collection of the project's index (a plain function: the actor runs it in a thread).

    ``now`` judges the marker's, the manifests' and the records' ages; the wall clock when None.
    Raises :class:`errors.StoreError` when the store cannot be listed or changed.
    """
    t = time.time() if now is None else now
    marker = dirs.index / MARKER
    if not force and _marker_age(marker, t) < INTERVAL:
        return Collected(False)
    named: set[str] = set()
    gone = 0
    freed = 0
    unreadable_young = False
    for mp in list_manifests(dirs.trees):
        try:
            m = load_manifest(mp)
        except FormatError:
            m = None
            try:
                age = t - mp.stat().st_mtime
            except OSError:
                continue
            if age < CHUNK_GRACE:
                unreadable_young = True
            else:
                for p in (mp, mp.with_suffix(".snap")):
                    freed += _unlink(p)
                gone += 1
        if m is None:
            continue
        if not Path(m.root).is_dir():
            for p in (mp, mp.with_suffix(".snap"), mp.with_suffix(".lock")):
                freed += _unlink(p)
            gone += 1
            continue
        named.update(e.key for e in m.entries.values())
    store = ChunkStore(dirs.chunks)
    removed = 0
    kept = 0
    for key, mtime, _size in store.iter_entries():
        if key in named:
            continue
        if unreadable_young or t - mtime < CHUNK_GRACE:
            kept += 1
            continue
        size = _remove_unnamed(store, key, t)
        if size is None:
            kept += 1
            continue
        removed += 1
        freed += size
    temp = _remove_stale_temp(dirs.trees, t)
    with contextlib.suppress(OSError):
        for bucket in os.scandir(dirs.chunks):
            if len(bucket.name) == 2 and bucket.is_dir(follow_symlinks=False):
                temp += _remove_stale_temp(Path(bucket.path), t)
    try:
        dirs.index.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.utime(marker, (t, t))
    except OSError as e:
        raise StoreError(f"cannot write {marker}: {e.strerror or e}") from None
    return Collected(True, gone, removed, freed, kept, temp)


class GcActor(Actor):
    """Runs :func:`collect` for one project, one collection at a time.

    A collection that fails (a read-only or full disk) is logged and answered as not run: it
    never stops the actor, so a search that sends :class:`Collect` never fails because of it.
    """

    def __init__(self, dirs: ProjectDirs) -> None:
        self.dirs = dirs
        self.last: Collected | None = None

    def __repr__(self) -> str:
        return f"<GcActor index={str(self.dirs.index)!r} last={self.last!r}>"

    async def handle(self, message: object) -> object:
        match message:
            case Collect(force=force, now=now):
                try:
                    self.last = await asyncio.to_thread(collect, self.dirs, force=force, now=now)
                except (RetrievalError, OSError) as e:
                    log.warning("collection of %s failed: %s", self.dirs.index, e)
                    self.last = Collected(False, error=str(e))
                if self.last.ran:
                    log.info("collected %s", self.last)
                return self.last
        raise TypeError(f"gc cannot handle {type(message).__name__}")
