"""The collection: what no working tree names any more leaves the store (§4, amendment 2026-10-16).

A search that read or removed a file, and every index-update, send :class:`Collect` after the
manifest's lock is released. It runs at most once an hour (a marker file in the store records the
last run) unless forced, and removes:

- manifests (and their locks and snapshots) whose working tree is gone (a removed worktree);
- manifests that no longer decode and that nobody wrote for seven days (their tree would have
  rebuilt them by then if it were still used);
- stored chunk records that no manifest names and whose pack nobody touched for seven days;
- version 2's record files (one a record), which this version never reads;
- temporary files a killed writer left behind, once they are an hour old.

Records live in packs (store.packs), so a pack is what is judged: one untouched for seven days
whose records no manifest names is removed; one that holds some named records is written again
with those alone when the others are at least a quarter of its record bytes (REWRITE_SHARE), and
kept as it is otherwise; old packs of fewer than SMALL_PACK records are merged into one. So after
a collection, at most a quarter of an old pack's bytes are records nobody names (or a record's
second copy, which two trees storing one content at once can leave), besides the packs touched
in the last seven days, which are kept whole.

A refresh that reuses a stored record touches its pack, so a collection racing a refresh cannot
take a record a manifest is about to name: the pack is at most seconds old, not seven days. The
collection judges a pack's age twice: once when it lists the store, and again after it has
renamed the pack out of the way, and it puts back a pack that was touched in between. A reader
that touches a record before it reads it therefore either finds it in place (and the collection
leaves it) or finds it gone (and analyses the file again). A pack written again is renamed aside
first, so a reader meanwhile finds the records it named missing for that moment and analyses
their files again: derived work, never a loss.

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
from nodwyn_retrieval.store.chunkstore import ChunkStore, PackInfo
from nodwyn_retrieval.store.manifest import list_manifests, load_manifest
from nodwyn_retrieval.store.paths import ProjectDirs

__all__ = ["CHUNK_GRACE", "INTERVAL", "MARKER", "Collect", "Collected", "GcActor", "collect"]

log = logging.getLogger("nodwyn_retrieval.actors.gc")

INTERVAL = 3600.0  # at most once an hour
CHUNK_GRACE = 7 * 24 * 3600.0  # stored files no manifest names for seven days
TEMP_GRACE = 3600.0  # a temporary file younger than this may be a write in progress
MARKER = "gc.marker"
REWRITE_SHARE = 0.25  # an old pack this much unnamed (in its records' bytes) is written again
SMALL_PACK = 16  # old packs of fewer records are merged into one


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
    """Chunk records removed (version 2's record files among them)."""
    bytes: int = 0
    """Bytes freed."""
    kept_unnamed: int = 0
    """Records no manifest names, kept because they are younger than seven days, were touched
    while the collection ran, or a manifest that does not decode might name them."""
    temp: int = 0
    """Temporary files of killed writers removed."""
    rewritten: int = 0
    """Packs written again with their named records alone (or merged)."""
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


def _aside(info: PackInfo, now: float) -> Path | None:
    """Rename the pack out of the way unless it was touched since the store was listed.

    Renamed first, atomically, so that nobody can touch it any more under its name; then its
    age is judged again on the renamed file. A pack touched before the rename is put back. The
    renamed file, or None when the pack was kept or was gone.
    """
    path = info.path
    aside = path.with_name(f".{path.name}.gc{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return None  # another collection took it, or a reader found it damaged
    except OSError as exc:
        raise StoreError(f"cannot collect {path}: {exc.strerror or exc}") from None
    try:
        st = os.stat(aside)
    except OSError:
        return None
    if st.st_mtime_ns != info.mtime_ns or now - st.st_mtime < CHUNK_GRACE:
        # Touched between the listing and the rename: a refresh is about to name a record.
        try:
            os.rename(aside, path)
        except OSError:
            # Lost: the next reader finds its records missing and analyses the files again.
            with contextlib.suppress(OSError):
                os.unlink(aside)
        return None
    return aside


def _collect_packs(
    store: ChunkStore, named: set[str], now: float, hold: bool
) -> tuple[int, int, int, int]:
    """Remove or write again the old packs whose records no manifest names (the module says
    which); (records removed, records kept unnamed, bytes freed, packs written again)."""
    live_seen: set[str] = set()
    plans: list[tuple[PackInfo, list[str], int]] = []
    kept = 0
    for info in store.list_packs():
        live: list[str] = []
        dead = dead_bytes = 0
        for key, length in zip(info.keys, info.lengths, strict=True):
            if key in named and key not in live_seen:
                live.append(key)
                live_seen.add(key)
            else:
                dead += 1
                dead_bytes += length
        small = len(info.keys) < SMALL_PACK
        worth = small or not live or dead_bytes >= REWRITE_SHARE * sum(info.lengths)
        if hold or now - info.mtime < CHUNK_GRACE or not (dead or small) or not worth:
            kept += dead
        else:
            plans.append((info, live, dead))
    if len(plans) == 1 and plans[0][2] == 0:
        plans = []  # a lone small pack with nothing to free: nothing to merge it with
    removed = freed = rewritten = 0
    taken: list[tuple[PackInfo, Path, int]] = []
    blobs: list[tuple[str, bytes]] = []
    for info, live, dead in plans:
        aside = _aside(info, now)
        if aside is None:
            kept += dead
            continue
        store.forget(info.path)
        # A damaged or unreadable pack: its named records are analysed again where needed.
        with contextlib.suppress(FormatError, OSError):
            blobs += store.read_raw(aside, live) if live else []
        taken.append((info, aside, dead))
        rewritten += bool(live)
    if not taken:
        return removed, kept, freed, 0
    try:
        written = store.write_raw(sorted(set(blobs))) if blobs else 0
    except StoreError:
        for info, aside, _ in taken:  # the named records stay stored, where they were
            with contextlib.suppress(OSError):
                os.rename(aside, info.path)
        raise
    for info, aside, dead in taken:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(aside)
        removed += dead
        freed += info.size
    return removed, kept, freed - written, rewritten


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
    removed, kept, got, rewritten = _collect_packs(store, named, t, unreadable_young)
    freed += got
    for old in list(store.legacy_files()):  # version 2's records: never read again
        size = _unlink(old)
        if size:
            removed += 1
            freed += size
    temp = _remove_stale_temp(dirs.trees, t) + _remove_stale_temp(store.packs_dir, t)
    with contextlib.suppress(OSError):
        for bucket in os.scandir(dirs.chunks):
            if len(bucket.name) == 2 and bucket.is_dir(follow_symlinks=False):
                temp += _remove_stale_temp(Path(bucket.path), t)
                with contextlib.suppress(OSError):
                    os.rmdir(bucket.path)  # emptied of version 2's records
    try:
        dirs.index.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.utime(marker, (t, t))
    except OSError as e:
        raise StoreError(f"cannot write {marker}: {e.strerror or e}") from None
    return Collected(True, gone, removed, freed, kept, temp, rewritten=rewritten)


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
