"""The refresher: what a working tree holds, what changed, and its manifest (§2, §4, §5).

Every search and every index-update asks it to refresh. It lists the tree, compares each file's
size, modification time and inode with the manifest, has the indexer read what changed (the
indexer does every read), and writes the manifest under its lock, atomically. It never reads a
file's contents.

A full scan (the listing, the watch of its directories, the stat, precheck and comparison of each
name) is made a part at a time and stops at the refresh's deadline (§5); what it compared is read
and dropped, what it did not is said as not seen yet, and the next refresh goes on from there.

Two processes may refresh one tree: the manifest on disk is merged, not overwritten. Under the lock
a refresh loads the manifest again and applies only the paths it read or removed on top, so neither
process loses the other's work; each process's in-memory index catches up at its next refresh.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import operator
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from nodwyn_retrieval.actors._fastpath import guard_fingerprint, vouched
from nodwyn_retrieval.actors._listing import Listing
from nodwyn_retrieval.actors._plan import (
    MAX_TREE_BYTES,
    MAX_TREE_FILES,
    Limits,
    Plan,
    Scan,
    dirs_of,
)
from nodwyn_retrieval.actors._stat import Sig, lstat_all
from nodwyn_retrieval.actors._watch import Changes, TreeWatch
from nodwyn_retrieval.actors._watch import available as watch_available
from nodwyn_retrieval.actors._work import cpu_count
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
from nodwyn_retrieval.guard import Decision, Guard, precheck_all
from nodwyn_retrieval.retrieval.kinds import read_order
from nodwyn_retrieval.store.atomic import clear_in_way, file_lock
from nodwyn_retrieval.store.manifest import Entry, Manifest, load_manifest, save_manifest
from nodwyn_retrieval.store.paths import git_repo

__all__ = ["MAX_TREE_BYTES", "MAX_TREE_FILES", "SKIP_PREFIX", "Limits", "RefresherActor"]

log = logging.getLogger("nodwyn_retrieval.actors.refresher")

# A manifest entry whose key starts with this is a file looked at and not indexed (binary, not
# UTF-8): it is not read again until it changes.
SKIP_PREFIX = "!"
KEPT_SKIPS = frozenset({"binary", "not_utf8"})
# What a search keeps of its bound for ranking and reading its results once the refresh is done
# (measured: 0.01 to 0.3 s on sympy and the 100,000-file tree with two CPU burners beside it), and
# at most a 25th of the time left (a bound much shorter than §5's, as a test sets); both times the
# load per core up to 3 (0.17 s at a load of 12 a core).
SEARCH_RESERVE = 0.4
# A full scan stats, prechecks and compares this many names between two looks at the clock
# (about 25 ms idle, 0.1 s with two CPU burners beside it).
SCAN_CHUNK = 1024
WATCH_EVERY = 512  # directories watched between two looks at the clock
# What writing the manifest after the reads costs, kept out of the time the reads may take
# (measured: 10 ms for 20,000 entries at a load of 5 a core; times the load, with margin), and
# at most a 20th of the time left.
SAVE_FIXED_SECONDS = 0.02
SAVE_SECONDS_PER_ENTRY = 1e-6
# Putting the files to read in the order a search needs them costs about this much a file at
# the load of one task a core (1 s for 20,000 at 5 a core): done only when it fits.
ORDER_SECONDS_PER_FILE = 1e-5


def _stat_all(root: Path, paths: list[str]) -> list[Sig | None]:
    """lstat of each path, its (size, mtime_ns, inode): None for what is gone or not a regular
    file (links are not followed). One call for the part, plain values back (actors/_stat.py)."""
    return lstat_all(str(root) + os.sep, paths)


def _file_stats(root: Path, paths: list[str]) -> list[FileStat]:
    """The FileStat of each of paths that is a regular file now, in order."""
    sigs = _stat_all(root, paths)
    return [FileStat(p, *sig) for p, sig in zip(paths, sigs, strict=True) if sig is not None]


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
        self._fs: dict[str, Sig | None] | None = None  # the listing as last stat-ed
        self._scan: Scan | None = None  # a full scan a refresh stopped in, to go on with
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
        self._drop_scan()
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
            clear_in_way(self.manifest_path)  # a directory there would refuse every save
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
                save = bool(touched or extra or disk is None or force)
                # A generation names one version of the file on disk: only a save makes one. (A
                # new generation kept in memory only would be taken, at the next reload, for the
                # one another process saves next, and that save's entries never loaded.)
                generation = max(base.generation, self.manifest.generation) + 1
                m = self._applied(base, touched, extra, generation if save else base.generation)
                m.updated = time.time()
                if save:
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
        if disk is None and sig is not None:
            # Damaged on disk: written again by this refresh, even when nothing changed.
            self._unsaved = self._unsaved or "the manifest on disk is damaged"
        if disk is not None and disk.generation != self.manifest.generation:
            if disk.extra != self.manifest.extra:
                self._fs = None  # directories another process added: list the tree again
                self._drop_scan()
            self.manifest = disk
            self._compare_all = True

    def _drop_scan(self) -> None:
        if self._scan is not None:
            if self._scan.listing is not None:
                self._scan.listing.close()
            self._scan = None

    def _start_watch(self, in_git: bool, git_dir: Path | None = None) -> None:
        """Watch the tree; in git, its git directory too (the listing's, else found again)."""
        if not watch_available():
            self._watch_wanted = False
            return
        if not in_git:
            git_dir = None
        elif git_dir is None:
            git_dir = _git_dir(self.root)
        try:
            self._watch = TreeWatch(self.root, git_dir)
        except OSError:
            self._watch_wanted = False

    def _plan(self, directory: str | None, update: bool, until: float) -> Plan:
        """What to read and what to drop, from a full scan or from what the watch saw.

        ``until``: the ``time.monotonic()`` past which a full scan stops (and goes on at the
        next refresh)."""
        # A new session lists the whole tree: git's listing starts before the manifest's load.
        first = Listing(self.root, []) if self._scan is None and self._fs is None else None
        if first is not None:
            first.start(until)
        self._reload_if_changed()
        changes = self._watch.drain() if self._watch is not None else None
        scan = self._scan
        if scan is not None and directory is not None and directory not in self._extra:
            self._drop_scan()  # a directory to add: list again, with it
            scan = None
        if scan is not None:
            return self._scan_step(scan, changes, until)
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
            extra = list(self.manifest.extra)
            if directory is not None and directory not in extra:
                extra = [*extra, directory]
            self._extra = extra
            listing = first or Listing(self.root, extra)
            listing.extra = list(extra)
            scan = self._scan = Scan(listing)
            return self._scan_step(scan, None, until)
        dirty = sorted((changes.touched | self._pending) & fs.keys())
        for p, st in zip(dirty, _stat_all(self.root, dirty), strict=True):
            old = fs[p]
            self._fs_bytes += (st[0] if st else 0) - (old[0] if old else 0)
            fs[p] = st
        if self._fs_bytes > self.limits.bytes or len(fs) > self.limits.files:
            return self._plan(directory, True, until)
        if not self._compare_all:
            return self._classify_dirty(fs, dirty)
        # Another process wrote the manifest: the whole listing is compared with it again, from
        # the stats the watch keeps current.
        scan = self._scan = Scan(None, names=sorted(fs), given=fs)
        return self._scan_step(scan, None, until)

    def _listed(self, scan: Scan, listing: Listing) -> None:
        """The listing is complete: sort it, and say which directories to watch."""
        self._bad_names = listing.bad_names
        names = sorted(listing.names)
        if self._watch is None and self._watch_wanted:
            self._start_watch(listing.in_git, listing.git_dir)
        if self._watch is not None and not self._watch.broken:
            dirs = dirs_of(names)
            dirs.update(listing.extra)
            scan.to_watch = sorted(dirs)
        scan.names = names

    def _watch_dirs(self, scan: Scan, until: float) -> bool:
        """Watch every directory that holds a name, a part at a time; whether all are."""
        watch = self._watch
        dirs = scan.to_watch
        while watch is not None and scan.watched < len(dirs) and not watch.broken:
            part = dirs[scan.watched : scan.watched + WATCH_EVERY]
            watch.watch_dirs(part)
            scan.watched += len(part)
            if time.monotonic() >= until and scan.watched < len(dirs):
                return False
        scan.to_watch = []
        if watch is not None:
            watch.drain()  # what happened before the watches existed is in the stats below
        return True

    def _scan_step(self, scan: Scan, changes: Changes | None, until: float) -> Plan:
        """Go on with a full scan until it is done or until; the plan of what it compared."""
        plan = Plan()
        entries = self.manifest.entries
        listing = scan.listing
        if listing is not None and not scan.names and not listing.done:
            if not listing.step(until):
                # Nothing compared: what the index holds was not checked, and is said so.
                plan.not_seen = max(len(entries), len(listing.names), 1)
                plan.over = self._over
                plan.skipped = dict(scan.skipped)
                return plan
            self._listed(scan, listing)
        if scan.to_watch:
            if not self._watch_dirs(scan, until):
                plan.not_seen = max(len(scan.names), 1)
                plan.unseen_from = scan.names[0] if scan.names else None
                plan.over = self._over
                plan.skipped = dict(scan.skipped)
                return plan
        elif scan.at:
            self._look_again(scan, changes, plan)
        names = scan.names
        lo = scan.at
        given = scan.given
        while scan.at < len(names) and time.monotonic() < until:
            if len(scan.keep) >= self.limits.files:
                # The index holds as many files as it may: no later name in path order can
                # enter, and none is stat-ed or checked; each is counted past the limit.
                scan.skipped["over_limit"] += len(names) - scan.at
                scan.over = True
                scan.at = len(names)
                break
            part = names[scan.at : scan.at + SCAN_CHUNK]
            stats = [given[p] for p in part] if given is not None else _stat_all(self.root, part)
            fs = dict(zip(part, stats, strict=True))
            self._compare(scan, fs, plan)
            scan.fs.update(fs)
            scan.at += len(part)
        # The manifest's entries in the range this step compared that the index no longer holds:
        # gone, no longer listed, refused now, too large or past a limit.
        first = names[lo] if lo else None
        end = names[scan.at] if scan.at < len(names) else None
        keep = scan.keep
        for p in entries:
            if p not in keep and (first is None or p >= first) and (end is None or p < end):
                plan.drop[p] = None
        plan.over = scan.over
        plan.skipped = dict(scan.skipped)
        plan.skipped["not_utf8"] += self._bad_names
        if scan.at < len(names):
            plan.not_seen = len(names) - scan.at
            plan.unseen_from = names[scan.at]
            return plan
        # Done: the stats of the whole listing are what the watched path starts from.
        self._scan = None
        self._fs = None if scan.stale else scan.fs
        self._fs_bytes = sum(st[0] for st in scan.fs.values() if st is not None)
        self._over = scan.over
        self._compare_all = False
        return plan

    def _look_again(self, scan: Scan, changes: Changes | None, plan: Plan) -> None:
        """Names a scan compared in an earlier refresh that changed since, or were not read."""
        prefix = scan.fs
        again = self._pending & prefix.keys()
        if changes is None or changes.unknown:
            scan.stale = True  # what changed among them cannot be known: list again after
            scan.given = None  # and the names still to compare are stat-ed now
        else:
            again |= changes.touched & prefix.keys()
            if changes.created - prefix.keys():
                scan.stale = True  # perhaps a name the listing does not hold
            if scan.given is not None:  # stats given when the scan began: bring them up to date
                later = sorted(
                    (changes.touched | self._pending) & scan.given.keys() - prefix.keys()
                )
                for p, st in zip(later, _stat_all(self.root, later), strict=True):
                    scan.given[p] = st
        if not again:
            return
        paths = sorted(again)
        kept = [p for p in paths if p in scan.keep]
        if len(kept) < len(paths):
            scan.stale = True  # a name past a limit or refused then may be indexed now
        before = {p: old[0] for p in kept if (old := prefix[p]) is not None}
        for p, st in zip(paths, _stat_all(self.root, paths), strict=True):
            prefix[p] = st
        sub = self._classify_dirty(prefix, kept)
        limit = self.limits.file_bytes
        for p in kept:
            st = prefix[p]
            if st is None or st[0] > limit or p not in self._searchable:
                scan.keep.discard(p)
                scan.n_bytes -= before.get(p, 0)
            else:
                scan.n_bytes += st[0] - before.get(p, st[0])
        plan.to_read.extend(sub.to_read)
        plan.drop.update(sub.drop)

    def _compare(self, scan: Scan, fs: dict[str, Sig | None], plan: Plan) -> None:
        """Compare a part of the sorted listing with the manifest, counting §2's limits in path
        order from where the scan is."""
        skipped = scan.skipped
        entries = self.manifest.entries
        searchable = self._searchable
        limits = self.limits
        file_bytes = limits.file_bytes
        keep = scan.keep
        # A new session takes as done the precheck of what is provably as it was allowed.
        fp, known = self._guard_fp, self.manifest.guard
        for p in vouched(self.root, self.guard, fs, entries, fingerprint=fp, manifest_guard=known):
            sig = fs[p]
            if sig is not None:
                searchable[p] = sig
        # Once the index holds as many files as it may, no later name in path order can enter:
        # those are counted past the limit without the pin and denylist checks (none is read).
        verdicts: dict[str, Decision] = {}
        if len(keep) < limits.files:
            # The pin and denylist checks of every file not found searchable in its present
            # state, in one batch: the guard resolves each directory once (amendment
            # 2026-10-16). Each was just found a regular file by lstat (_stat_all).
            get = searchable.get
            need = [p for p, sig in fs.items() if sig is not None and get(p) != sig]
            if need:
                verdicts = dict(
                    zip(need, precheck_all(self.guard, need, not_links=True), strict=True)
                )
        # Each file's work in locals (this loop runs for every listed file of a new session).
        sget, eget, add = searchable.get, entries.get, keep.add
        max_files, max_bytes = limits.files, limits.bytes
        n_keep, n_bytes = len(keep), scan.n_bytes
        for path, sig in fs.items():
            if sig is None:
                continue
            size = sig[0]
            if sget(path) != sig:
                verdict = verdicts.get(path)
                if verdict is None:  # past the limit, not checked
                    skipped["too_large" if size > file_bytes else "over_limit"] += 1
                    scan.over |= size <= file_bytes
                    continue
                if not verdict.allowed:
                    skipped["denied"] += 1
                    searchable.pop(path, None)
                    continue
                searchable[path] = sig
            if size > file_bytes:
                skipped["too_large"] += 1
                continue
            if n_keep >= max_files or n_bytes + size > max_bytes:
                skipped["over_limit"] += 1
                scan.over = True
                continue
            n_bytes += size
            n_keep += 1
            add(path)
            e = eget(path)
            if e is not None and e.size == size and e.mtime_ns == sig[1] and e.inode == sig[2]:
                if e.key.startswith(SKIP_PREFIX):
                    reason = e.key[len(SKIP_PREFIX) :]
                    skipped[reason] = skipped.get(reason, 0) + 1
                continue
            plan.to_read.append(FileStat(path, *sig))
        scan.n_bytes = n_bytes

    def _classify_dirty(self, fs: dict[str, Sig | None], dirty: list[str]) -> Plan:
        """The quick plan: only the touched paths, in a tree under every limit of §2.

        Under the limits every listed file the precheck allows and of at most 1 MiB is indexed,
        so the other files' standing cannot change and only the dirty ones are looked at.
        """
        plan = Plan()
        entries = self.manifest.entries
        for path in dirty:
            sig = fs[path]
            if sig is None:
                self._searchable.pop(path, None)
                if path in entries:
                    plan.drop[path] = None
                continue
            if self._searchable.get(path) != sig:
                if not self.guard.precheck(path).allowed:
                    self._searchable.pop(path, None)
                    if path in entries:
                        plan.drop[path] = None
                    continue
                self._searchable[path] = sig
            if sig[0] > self.limits.file_bytes:
                if path in entries:
                    plan.drop[path] = None
                continue
            e = entries.get(path)
            if e is None or (e.size, e.mtime_ns, e.inode) != sig:
                plan.to_read.append(FileStat(path, *sig))
        return plan

    async def _refresh(self, msg: Refresh) -> Refreshed:
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        # A search ranks and reads its results after the refresh, inside the same bound (§5);
        # and the manifest is written after the reads, inside it too.
        left = msg.deadline - loop.time()
        load = _load_factor()
        reserve = 0.0 if msg.update else min(SEARCH_RESERVE, left / 25) * min(load, 3.0)
        save = min(
            left / 20,
            (SAVE_FIXED_SECONDS + SAVE_SECONDS_PER_ENTRY * len(self.manifest.entries)) * load,
        )
        deadline = msg.deadline - reserve - save
        until = time.monotonic() + (deadline - loop.time())  # the plan's clock is monotonic
        plan = await asyncio.to_thread(self._plan, msg.directory, msg.update, until)
        to_read, drop, skipped, over = plan.to_read, plan.drop, plan.skipped, plan.over
        not_seen = plan.not_seen
        if msg.progress is not None:
            msg.progress.plan(len(to_read), sum(st.size for st in to_read))
        if len(to_read) > 1 and (until - time.monotonic()) > 4 * len(to_read) * (
            ORDER_SECONDS_PER_FILE * _load_factor()
        ):
            # What a search is likeliest to need is read first, so that a read cut by the bound
            # still finds the code (retrieval.kinds.read_order): source files whose path words
            # match the query, then source files, then the rest. Skipped when it would take
            # more than a quarter of the time left.
            paths = [st.path for st in to_read]
            order = await asyncio.to_thread(read_order, paths, msg.query)
            to_read = [to_read[i] for i in order]
        extra = self._extra
        touched: dict[str, Entry | None] = dict(drop)
        need_sync = self._synced != self.manifest.generation
        if not to_read and not drop and not need_sync and not msg.update and not self._unsaved:
            # Nothing changed, here or in another process: the index in memory is current (or,
            # when the scan stopped at the deadline, as current as it could be found).
            return Refreshed(
                files=self._n_indexed,
                read=0,
                unchanged=len(self.manifest.entries),
                removed=0,
                skipped=skipped,
                refused=(),
                left_out_unasked=(),
                not_read=0,
                partial=over or not_seen > 0,
                over_limit=over,
                seconds=time.perf_counter() - t0,
                bytes=0,
                not_seen=not_seen,
            )
        # The whole map of paths to keys only when the indexer may not hold it (a new session, or
        # another process wrote the manifest); otherwise only what this refresh drops.
        target: dict[str, str] | None = None
        if need_sync:
            target = _indexed_keys(self.manifest.entries)
            for p in drop:
                target.pop(p, None)
            for st in to_read:
                target.pop(st.path, None)
        done = await self.indexer.ask_as(
            IndexFiles(target, tuple(to_read), deadline, tuple(drop), msg.progress),
            IndexedFiles,
        )
        missing = list(done.missing)
        # Records a new session had no time to load: not in the index yet, said as not seen;
        # the next refresh sends the map again and goes on.
        not_loaded = len(done.not_loaded)
        if not_loaded and not (not_seen and plan.unseen_from is None):  # (a cut listing: all)
            start = plan.unseen_from
            not_seen += sum(1 for p in done.not_loaded if start is None or p < start)
        rounds = [done]
        if missing:
            # Records another process stored, since collected or damaged: read those files again.
            again = _file_stats(self.root, sorted(missing))
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
        self._synced = None if self._foreign or not_loaded else self.manifest.generation
        self._foreign = False
        store_error = store_error or save_error
        entries = self.manifest.entries
        files = len(entries) - sum(_skips(map(_KEY, entries.values())))
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
            partial=over or not_read > 0 or not_seen > 0,
            over_limit=over,
            seconds=time.perf_counter() - t0,
            bytes=text_bytes,
            not_seen=not_seen,
            saved=store_error is None,
            store_error=store_error,
            rebuilt=self.rebuilt + sum(r.rebuilt for r in rounds),
        )
        self.rebuilt = 0
        if self.record is not None and (
            msg.update or read or removed or refused or unasked or result.rebuilt or not_seen
        ):
            self.record(update_event(result))
        return result


_KEY = operator.attrgetter("key")


def _skips(keys: Iterable[str]) -> Iterator[bool]:
    """For each key, whether it marks a file looked at and not indexed (SKIP_PREFIX); by C calls
    (12,000 entries are a few milliseconds of a new session's first search)."""
    return map(str.startswith, keys, itertools.repeat(SKIP_PREFIX))


def _indexed_keys(entries: dict[str, Entry]) -> dict[str, str]:
    """Each path's key, but for the files looked at and not indexed (:func:`_skips`)."""
    keys = list(map(_KEY, entries.values()))
    indexed = map(operator.not_, _skips(keys))
    return dict(itertools.compress(zip(entries, keys, strict=True), indexed))


def _load_factor() -> float:
    """How much slower CPU work runs now than on an idle machine (the one-minute load average
    per core this process may use), at least 1 and at most 8."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average on this system
        return 1.0
    return min(8.0, max(1.0, load / cpu_count()))


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
        "not_seen": r.not_seen,
        "partial": r.partial,
        "seconds": round(r.seconds, 3),
        "bytes": r.bytes,
        "saved": r.saved,
        "rebuilt": r.rebuilt,
    }
