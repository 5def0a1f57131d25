"""The collection: what no working tree names any more leaves the store (§4, amendment 2026-10-16).

A search that read or removed a file, and every index-update, send :class:`Collect` after the
manifest's lock is released. It runs at most once an hour (a marker file in the store records the
last run) unless forced, and removes:

- manifests (and their locks and snapshots) whose working tree is gone (a removed worktree);
- stored chunk records that no manifest names and that nobody touched for seven days.

A refresh that reuses a stored record touches it, so a collection racing a refresh cannot take a
record a manifest is about to name: the record is at most seconds old, not seven days.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bus import Actor
from errors import FormatError, StoreError
from store.chunkstore import ChunkStore
from store.manifest import list_manifests, load_manifest
from store.paths import ProjectDirs

__all__ = ["CHUNK_GRACE", "INTERVAL", "Collect", "Collected", "GcActor", "collect"]

log = logging.getLogger("actors.gc")

INTERVAL = 3600.0  # at most once an hour
CHUNK_GRACE = 7 * 24 * 3600.0  # stored files no manifest names for seven days
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
    """False when the last run was less than an hour ago."""
    manifests: int = 0
    """Manifests removed because their working tree is gone."""
    chunks: int = 0
    """Chunk records removed."""
    bytes: int = 0
    """Bytes freed."""
    kept_unnamed: int = 0
    """Records no manifest names, kept because they are younger than seven days."""


def _marker_age(marker: Path, now: float) -> float:
    try:
        return now - marker.stat().st_mtime
    except OSError:
        return float("inf")


def collect(dirs: ProjectDirs, *, force: bool = False, now: float | None = None) -> Collected:
    """One collection of the project's index (a plain function: the actor runs it in a thread)."""
    t = time.time() if now is None else now
    marker = dirs.index / MARKER
    if not force and _marker_age(marker, t) < INTERVAL:
        return Collected(False)
    named: set[str] = set()
    gone = 0
    freed = 0
    for mp in list_manifests(dirs.trees):
        try:
            m = load_manifest(mp)
        except FormatError:
            m = None
        if m is None:
            continue
        if not Path(m.root).is_dir():
            for p in (mp, mp.with_suffix(".snap"), mp.with_suffix(".lock")):
                with contextlib.suppress(OSError):
                    freed += p.stat().st_size
                    p.unlink()
            gone += 1
            continue
        named.update(e.key for e in m.entries.values())
    store = ChunkStore(dirs.chunks)
    removed = 0
    kept = 0
    for key, mtime, size in store.iter_entries():
        if key in named:
            continue
        if t - mtime < CHUNK_GRACE:
            kept += 1
            continue
        store.remove(key)
        removed += 1
        freed += size
    with contextlib.suppress(OSError):
        store.remove_stale_temp()
    try:
        dirs.index.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.utime(marker, (t, t))
    except OSError as e:
        raise StoreError(f"cannot write {marker}: {e.strerror or e}") from None
    return Collected(True, gone, removed, freed, kept)


class GcActor(Actor):
    """Runs :func:`collect` for one project, one collection at a time."""

    def __init__(self, dirs: ProjectDirs) -> None:
        self.dirs = dirs
        self.last: Collected | None = None

    def __repr__(self) -> str:
        return f"<GcActor index={str(self.dirs.index)!r} last={self.last!r}>"

    async def handle(self, message: object) -> object:
        match message:
            case Collect(force=force, now=now):
                self.last = await asyncio.to_thread(collect, self.dirs, force=force, now=now)
                if self.last.ran:
                    log.info("collected %s", self.last)
                return self.last
        raise TypeError(f"gc cannot handle {type(message).__name__}")
