"""The refresher: what a working tree holds, what changed, and its manifest (§2, §4, §5).

Every search and every index-update asks it to refresh. It lists the tree, compares each file's
size, modification time and inode with the manifest, has the indexer read what changed (the
indexer does every read), and writes the manifest under its lock, atomically. It never reads a
file's contents.

Two processes may refresh one tree: the manifest on disk is merged, not overwritten. Under the lock
a refresh loads the manifest again and applies only the paths it read or removed on top, so neither
process loses the other's work; each process's in-memory index catches up at its next refresh.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat as stat_mod
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodwyn_retrieval.actors._fastpath import guard_fingerprint, vouched
from nodwyn_retrieval.actors._listing import list_tree, walk_dir
from nodwyn_retrieval.actors._watch import TreeWatch
from nodwyn_retrieval.actors._watch import available as watch_available
from nodwyn_retrieval.actors._work import MAX_FILE_BYTES
from nodwyn_retrieval.actors.messages import (
    FileStat,
    Forget,
    IndexedFiles,
    IndexFiles,
    Refresh,
    Refreshed,
)
from nodwyn_retrieval.bus import Actor, ActorRef
from nodwyn_retrieval.errors import FormatError, StoreError
from nodwyn_retrieval.guard import Guard, precheck_all
from nodwyn_retrieval.retrieval.kinds import read_order
from nodwyn_retrieval.store.atomic import file_lock
from nodwyn_retrieval.store.manifest import Entry, Manifest, load_manifest, save_manifest
from nodwyn_retrieval.store.paths import git_repo

__all__ = ["MAX_TREE_BYTES", "MAX_TREE_FILES", "SKIP_PREFIX", "RefresherActor"]

log = logging.getLogger("nodwyn_retrieval.actors.refresher")

MAX_TREE_FILES = 20_000  # §2: a tree indexes at most 20,000 files
MAX_TREE_BYTES = 128 << 20  # §2: and 128 MiB of text
# A manifest entry whose key starts with this is a file looked at and not indexed (binary, not
# UTF-8): it is not read again until it changes.
SKIP_PREFIX = "!"
KEPT_SKIPS = frozenset({"binary", "not_utf8"})
# What a search keeps of its bound for ranking and reading its results once the refresh is done
# (measured: 0.01 to 0.3 s on sympy and the 100,000-file tree with two CPU burners beside it), and
# at most a 25th of the time left (a bound much shorter than §5's, as a test sets).
SEARCH_RESERVE = 0.4


@dataclass(frozen=True, slots=True)
class Limits:
    """The §2 limits; tests lower them."""

    files: int = MAX_TREE_FILES
    bytes: int = MAX_TREE_BYTES
    file_bytes: int = MAX_FILE_BYTES


def _stat_all(root: Path, paths: list[str]) -> list[FileStat | None]:
    """lstat of each path: None for what is gone or not a regular file (links are not followed)."""
    out: list[FileStat | None] = []
    lstat = os.lstat
    is_reg = stat_mod.S_ISREG
    base = str(root) + os.sep
    for p in paths:
        try:
            st = lstat(base + p)
        except (OSError, ValueError):
            out.append(None)
            continue
        out.append(
            FileStat(p, st.st_size, st.st_mtime_ns, st.st_ino) if is_reg(st.st_mode) else None
        )
    return out


@dataclass
class Plan:
    """What a refresh will do before it reads anything."""

    to_read: list[FileStat] = field(default_factory=list)
    drop: dict[str, Entry | None] = field(default_factory=dict)
    skipped: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("binary", "too_large", "not_utf8", "over_limit", "denied"), 0
        )
    )
    over: bool = False


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _dirs_of(paths: list[str]) -> set[str]:
    """Every directory holding a listed file, and their parents up to the root ("")."""
    dirs = {""}
    for p in paths:
        d = p.rpartition("/")[0]
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    return dirs


def _git_dir(root: Path) -> Path | None:
    """The tree's git directory, as the listing uses it (found and agreed, never moved)."""
    repo = git_repo(root)
    return repo.git_dir if repo is not None else None


class RefresherActor(Actor):
    """Owns one working tree's manifest and decides what the indexer reads."""

    def __init__(
        self,
        root: Path,
        manifest_path: Path,
        indexer: ActorRef,
        guard: Guard,
        *,
        record: Callable[[dict[str, Any]], None] | None = None,
        limits: Limits | None = None,
        watch: bool = True,
    ) -> None:
        self.root = root
        self.manifest_path = manifest_path
        self.lock_path = manifest_path.with_suffix(".lock")
        self.indexer = indexer
        self.guard = guard
        self.record = record
        self.limits = limits or Limits()
        self.manifest = Manifest(str(root), 0, {})
        # The amendment of 2026-10-16: a file found searchable in its present state is not
        # checked against the pin and the denylist again until its state changes.
        self._searchable: dict[str, tuple[int, int, int]] = {}
        # What a manifest saved by this process vouches for (actors/_fastpath.py).
        self._guard_fp = guard_fingerprint(guard)
        self.rebuilt = 0
        self._fs: dict[str, FileStat | None] | None = None  # the listing as last stat-ed
        self._pending: set[str] = set()
        self._extra: list[str] = []
        self._over = False
        self._compare_all = False
        self._disk_sig: tuple[int, int, int] | None = None
        self._fs_bytes = 0
        self._n_indexed = 0
        self._synced: int | None = None  # the manifest generation the indexer last matched
        self._unsaved: str | None = None  # why the last save failed, until one succeeds
        self._foreign = False  # the last save merged entries another process wrote
        self._bad_names = 0  # listed names that are not UTF-8
        self._watch: TreeWatch | None = None
        self._watch_wanted = watch

    def __repr__(self) -> str:
        return (
            f"<RefresherActor root={str(self.root)!r} files={len(self.manifest.entries)} "
            f"generation={self.manifest.generation}>"
        )

    async def on_stop(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    async def handle(self, message: object) -> object:
        match message:
            case Refresh():
                return await self._refresh(message)
            case Forget(path=path):
                return await asyncio.to_thread(self._forget, path)
        raise TypeError(f"refresher cannot handle {type(message).__name__}")

    # -- the manifest on disk ---------------------------------------------------------------

    def _load_disk(self) -> Manifest | None:
        try:
            return load_manifest(self.manifest_path)
        except FormatError as e:
            log.info("manifest %s rebuilt: %s", self.manifest_path, e)
            self.rebuilt += 1
            return None

    def _merge_save(
        self, touched: dict[str, Entry | None], extra: list[str], force: bool = False
    ) -> str | None:
        """Apply touched paths on top of the manifest on disk, under the lock; the error if any."""
        try:
            with file_lock(self.lock_path):
                disk = self._disk_if_changed()
                base = disk if disk is not None else self.manifest
                # Another process's entries merged in: the indexer must load their records.
                self._foreign |= disk is not None and disk is not self.manifest
                generation = max(base.generation, self.manifest.generation) + 1
                m = self._applied(base, touched, extra, generation)
                m.updated = time.time()
                if touched or extra or disk is None or force:
                    save_manifest(self.manifest_path, m)
                    self._disk_sig = self._stat_sig()
                self.manifest = m
        except (StoreError, OSError, TimeoutError) as e:
            # A full disk: the index in memory is current, the one on disk is not.
            self.manifest = self._applied(self.manifest, touched, extra, self.manifest.generation)
            return str(e)
        return None

    def _applied(
        self, base: Manifest, touched: dict[str, Entry | None], extra: list[str], generation: int
    ) -> Manifest:
        """base with the touched paths set (an entry) or removed (None), and extra added."""
        entries = dict(base.entries)
        for path, entry in touched.items():
            if entry is None:
                entries.pop(path, None)
            else:
                entries[path] = entry
        m = Manifest(str(self.root), generation, entries)
        m.extra = sorted(set(base.extra) | set(extra))
        # Every entry this process adds passed its guard's precheck; the base's did under the
        # base's guard, so the whole is vouched for by ours only when the base's is ours too.
        fp = self._guard_fp
        m.guard = fp if fp and (not base.entries or base.guard == fp) else ""
        return m

    def _stat_sig(self) -> tuple[int, int, int] | None:
        """What tells one write of the manifest file from another, or None when there is none."""
        try:
            st = os.stat(self.manifest_path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _disk_if_changed(self) -> Manifest | None:
        """The manifest on disk when another process wrote it since our last save or load."""
        sig = self._stat_sig()
        if sig is None:
            return None
        return self.manifest if sig == self._disk_sig else self._load_disk()

    def _forget(self, path: str) -> None:
        self._searchable.pop(path, None)
        self._pending.add(path)  # looked at again at the next refresh, watch or not
        self._merge_save({path: None}, [])

    # -- a refresh --------------------------------------------------------------------------

    def _reload_if_changed(self) -> None:
        """Load the manifest on disk when another process wrote it since we looked (one stat)."""
        sig = self._stat_sig()
        if sig == self._disk_sig:
            return
        self._disk_sig = sig
        disk = self._load_disk() if sig is not None else None
        if disk is not None and disk.generation != self.manifest.generation:
            if disk.extra != self.manifest.extra:
                self._fs = None  # directories another process added: list the tree again
            self.manifest = disk
            self._compare_all = True

    def _full_scan(self, directory: str | None) -> dict[str, FileStat | None]:
        """List the tree (and the directories index-update added), watch it, and stat every file."""
        listed, in_git = list_tree(self.root)
        # A name that is not UTF-8 cannot be shown in a result or stored as text: it is left out
        # and counted with the files that are not UTF-8.
        good = [p for p in listed if _utf8(p)]
        self._bad_names = len(listed) - len(good)
        listed = good
        extra = list(self.manifest.extra)
        if directory is not None and directory not in extra:
            extra = [*extra, directory]
        self._extra = extra
        if extra:
            seen = set(listed)
            for d in extra:
                start = self.root / d
                if not start.is_dir():
                    continue
                for p in walk_dir(self.root, start, honour_ignores=False, skip_hidden=False):
                    if p not in seen and _utf8(p):
                        seen.add(p)
                        listed.append(p)
        if self._watch is None and self._watch_wanted:
            self._start_watch(in_git)
        if self._watch is not None and not self._watch.broken:
            dirs = _dirs_of(listed)
            dirs.update(extra)
            self._watch.watch_dirs(sorted(dirs))
            self._watch.drain()  # what happened before the watches existed is in the stats below
        listed.sort()
        self._fs = dict(zip(listed, _stat_all(self.root, listed), strict=True))
        return self._fs

    def _start_watch(self, in_git: bool) -> None:
        if not watch_available():
            self._watch_wanted = False
            return
        git_dir = _git_dir(self.root) if in_git else None
        try:
            self._watch = TreeWatch(self.root, git_dir)
        except OSError:
            self._watch_wanted = False

    def _plan(self, directory: str | None, update: bool) -> Plan:
        """What to read and what to drop, from a full scan or from what the watch saw."""
        self._reload_if_changed()
        changes = self._watch.drain() if self._watch is not None else None
        full = (
            update
            or directory is not None
            or self._fs is None
            or changes is None
            or changes.unknown
            or self._over
        )
        fs = self._fs
        if not full and changes is not None and fs is not None:
            for p in changes.created:
                # A name the listing did not hold: only git knows whether it is ignored.
                if p not in fs and os.path.isfile(os.path.join(self.root, p)):
                    full = True
                    break
        if full or fs is None or changes is None:
            fs = self._full_scan(directory)
        else:
            dirty = sorted((changes.touched | self._pending) & fs.keys())
            for p, st in zip(dirty, _stat_all(self.root, dirty), strict=True):
                old = fs[p]
                self._fs_bytes += (st.size if st else 0) - (old.size if old else 0)
                fs[p] = st
            if self._fs_bytes > self.limits.bytes or len(fs) > self.limits.files:
                return self._plan(directory, True)
            if not self._compare_all:
                return self._classify_dirty(fs, dirty)
        self._compare_all = False
        self._fs_bytes = sum(st.size for st in fs.values() if st is not None)
        return self._classify(fs)

    def _classify_dirty(self, fs: dict[str, FileStat | None], dirty: list[str]) -> Plan:
        """The quick plan: only the touched paths, in a tree under every limit of §2.

        Under the limits every listed file the precheck allows and of at most 1 MiB is indexed,
        so the other files' standing cannot change and only the dirty ones are looked at.
        """
        plan = Plan()
        entries = self.manifest.entries
        for path in dirty:
            st = fs[path]
            if st is None:
                self._searchable.pop(path, None)
                if path in entries:
                    plan.drop[path] = None
                continue
            sig = (st.size, st.mtime_ns, st.inode)
            if self._searchable.get(path) != sig:
                if not self.guard.precheck(path).allowed:
                    self._searchable.pop(path, None)
                    if path in entries:
                        plan.drop[path] = None
                    continue
                self._searchable[path] = sig
            if st.size > self.limits.file_bytes:
                if path in entries:
                    plan.drop[path] = None
                continue
            e = entries.get(path)
            if e is None or (e.size, e.mtime_ns, e.inode) != sig:
                plan.to_read.append(st)
        return plan

    def _classify(self, fs: dict[str, FileStat | None]) -> Plan:
        """Compare the whole listing with the manifest, counting §2's limits in path order."""
        plan = Plan()
        skipped = plan.skipped
        entries = self.manifest.entries
        searchable = self._searchable
        keep: set[str] = set()
        n_files = 0
        n_bytes = 0
        # A new session takes as done the precheck of what is provably as it was allowed.
        fp, known = self._guard_fp, self.manifest.guard
        for p in vouched(self.root, self.guard, fs, entries, fingerprint=fp, manifest_guard=known):
            st = fs[p]
            if st is not None:
                searchable[p] = (st.size, st.mtime_ns, st.inode)
        # The pin and denylist checks of every file not found searchable in its present state,
        # in one batch: the guard resolves each directory once (amendment 2026-10-16).
        need = [
            p
            for p, st in fs.items()
            if st is not None and searchable.get(p) != (st.size, st.mtime_ns, st.inode)
        ]
        # Each was just found a regular file by lstat (_stat_all): no name is looked at again.
        verdicts = dict(zip(need, precheck_all(self.guard, need, not_links=True), strict=True))
        for path, st in fs.items():
            if st is None:
                continue
            sig = (st.size, st.mtime_ns, st.inode)
            if searchable.get(path) != sig:
                if not verdicts[path].allowed:
                    skipped["denied"] += 1
                    searchable.pop(path, None)
                    continue
                searchable[path] = sig
            if st.size > self.limits.file_bytes:
                skipped["too_large"] += 1
                continue
            if n_files + 1 > self.limits.files or n_bytes + st.size > self.limits.bytes:
                skipped["over_limit"] += 1
                plan.over = True
                continue
            n_files += 1
            n_bytes += st.size
            keep.add(path)
            e = entries.get(path)
            if e is not None and (e.size, e.mtime_ns, e.inode) == sig:
                if e.key.startswith(SKIP_PREFIX):
                    reason = e.key[len(SKIP_PREFIX) :]
                    skipped[reason] = skipped.get(reason, 0) + 1
                continue
            plan.to_read.append(st)
        plan.drop = {p: None for p in entries if p not in keep}
        skipped["not_utf8"] += self._bad_names
        self._over = plan.over
        return plan

    async def _refresh(self, msg: Refresh) -> Refreshed:
        t0 = time.perf_counter()
        plan = await asyncio.to_thread(self._plan, msg.directory, msg.update)
        to_read, drop, skipped, over = plan.to_read, plan.drop, plan.skipped, plan.over
        if msg.progress is not None:
            msg.progress.plan(len(to_read), sum(st.size for st in to_read))
        if len(to_read) > 1:
            # What a search is likeliest to need is read first, so that a read cut by the bound
            # still finds the code (retrieval.kinds.read_order): source files whose path words
            # match the query, then source files, then the rest.
            order = read_order([st.path for st in to_read], msg.query)
            to_read = [to_read[i] for i in order]
        extra = self._extra
        touched: dict[str, Entry | None] = dict(drop)
        need_sync = self._synced != self.manifest.generation
        if not to_read and not drop and not need_sync and not msg.update and not self._unsaved:
            # Nothing changed, here or in another process: the index in memory is current.
            return Refreshed(
                files=self._n_indexed,
                read=0,
                unchanged=len(self.manifest.entries),
                removed=0,
                skipped=skipped,
                refused=(),
                left_out_unasked=(),
                not_read=0,
                partial=over,
                over_limit=over,
                seconds=time.perf_counter() - t0,
                bytes=0,
            )
        # The whole map of paths to keys only when the indexer may not hold it (a new session, or
        # another process wrote the manifest); otherwise only what this refresh drops.
        target: dict[str, str] | None = None
        if need_sync:
            target = {
                p: e.key
                for p, e in self.manifest.entries.items()
                if p not in drop and not e.key.startswith(SKIP_PREFIX)
            }
            for st in to_read:
                target.pop(st.path, None)
        # A search ranks and reads its results after the refresh, inside the same bound (§5).
        reserve = min(SEARCH_RESERVE, (msg.deadline - asyncio.get_running_loop().time()) / 25)
        deadline = msg.deadline if msg.update else msg.deadline - reserve
        done = await self.indexer.ask_as(
            IndexFiles(target, tuple(to_read), deadline, tuple(drop), msg.progress),
            IndexedFiles,
        )
        missing = list(done.missing)
        rounds = [done]
        if missing:
            # Records another process stored, since collected or damaged: read those files again.
            again = [st for st in _stat_all(self.root, sorted(missing)) if st is not None]
            for st in again:
                if target is not None:
                    target.pop(st.path, None)
                touched[st.path] = None
            done2 = await self.indexer.ask_as(
                IndexFiles(None, tuple(again), deadline), IndexedFiles
            )
            rounds.append(done2)
        read = 0
        text_bytes = 0
        refused: list[str] = []
        unasked: list[str] = []
        for r in rounds:
            for f in r.found:
                st = f.stat
                if f.key is not None:
                    touched[st.path] = Entry(st.size, st.mtime_ns, st.inode, f.key)
                    read += 1
                    text_bytes += f.text_bytes
                elif f.skip in KEPT_SKIPS:
                    touched[st.path] = Entry(st.size, st.mtime_ns, st.inode, SKIP_PREFIX + f.skip)
                    skipped[f.skip] += 1
                    read += 1
                else:
                    if f.skip == "refused":
                        refused.append(st.path)
                    elif f.skip == "unasked":
                        unasked.append(st.path)
                    elif f.skip == "too_large":
                        skipped["too_large"] += 1
                    touched[st.path] = None
        handled = {f.stat.path for r in rounds for f in r.found}
        not_read = sum(1 for st in to_read if st.path not in handled)
        # Looked at again at the next refresh whatever the watch says: not read in time, refused
        # (a budget or a checker may say otherwise next time), or left out unasked.
        self._pending = {st.path for st in to_read if st.path not in handled}
        self._pending.update(refused, unasked)
        store_error = next((r.store_error for r in rounds if r.store_error), None)
        save_error = None
        if touched or msg.directory or msg.update or self._unsaved:
            save_error = await asyncio.to_thread(
                self._merge_save, touched, extra if msg.directory else [], bool(self._unsaved)
            )
        # A save that failed (a full disk) is tried again at every refresh until one succeeds.
        self._unsaved = save_error
        self._synced = None if self._foreign else self.manifest.generation
        self._foreign = False
        store_error = store_error or save_error
        files = sum(1 for e in self.manifest.entries.values() if not e.key.startswith(SKIP_PREFIX))
        self._n_indexed = files
        removed = len(drop)
        result = Refreshed(
            files=files,
            read=read,
            unchanged=max(0, len(self.manifest.entries) - read),
            removed=removed,
            skipped=skipped,
            refused=tuple(sorted(refused)),
            left_out_unasked=tuple(sorted(unasked)),
            not_read=not_read,
            partial=over or not_read > 0,
            over_limit=over,
            seconds=time.perf_counter() - t0,
            bytes=text_bytes,
            saved=store_error is None,
            store_error=store_error,
            rebuilt=self.rebuilt + sum(r.rebuilt for r in rounds),
        )
        self.rebuilt = 0
        if self.record is not None and (
            msg.update or read or removed or refused or unasked or result.rebuilt
        ):
            self.record(update_event(result))
        return result


def update_event(r: Refreshed) -> dict[str, Any]:
    """The one ``index.update`` record of a build or refresh (§3, the person's answer 3)."""
    return {
        "kind": "index.update",
        "files": r.files,
        "read": r.read,
        "unchanged": r.unchanged,
        "removed": r.removed,
        "skipped": dict(r.skipped),
        "refused": list(r.refused),
        "left_out_unasked": list(r.left_out_unasked),
        "not_read": r.not_read,
        "partial": r.partial,
        "seconds": round(r.seconds, 3),
        "bytes": r.bytes,
        "saved": r.saved,
        "rebuilt": r.rebuilt,
    }
