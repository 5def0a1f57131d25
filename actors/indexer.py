"""The indexer: a working tree's reads, its chunk records and the index a session searches (§3-§7).

It owns the tree's in-memory :class:`~retrieval.tree.TreeIndex`. The refresher tells it what the
manifest holds and which files changed; it reads those through the guard (never asking: a confirm
is a refusal nobody is asked for), redacts, hashes and analyses them (in the process pool when a
batch is big), stores each content once, and updates the index. A search ranks the chunks and reads
each result's lines from the file now, through the guard again.

The reads and the batches sent to the pool are actors/_batches.py; a search's answer is
actors/_results.py. This module prices and bounds the work after the reads (storing, applying,
merging, the snapshot) and keeps the index.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import Mapping
from pathlib import Path

from nodwyn_retrieval.actors._batches import MARGIN, read_and_analyze
from nodwyn_retrieval.actors._listing import listed_files
from nodwyn_retrieval.actors._results import search_in
from nodwyn_retrieval.actors._work import (
    MAX_FILE_BYTES,
    SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
    Analyzed,
    Contention,
    analyze_blob,
    cpu_seconds,
    load_factor,
    load_snapshot,
    read_snapshot,
)
from nodwyn_retrieval.actors.messages import (
    FileStat,
    Forget,
    IndexedFiles,
    IndexFiles,
    SaveSnapshot,
    SearchTree,
    TreeFound,
    TreeSearched,
)
from nodwyn_retrieval.bus import Actor, ProcessPool
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.guard import DefaultGuard, Guard
from nodwyn_retrieval.guard.beneath import Beneath
from nodwyn_retrieval.retrieval.analyze import FileRecord
from nodwyn_retrieval.retrieval.tree import TreeBuilder, TreeIndex, TreeSegment, pairs_of
from nodwyn_retrieval.store.atomic import write_atomic
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.codec import encode_parts

__all__ = [
    "MAX_FILE_BYTES",
    "SNAPSHOT_MAGIC",
    "SNAPSHOT_VERSION",
    "IndexerActor",
    "load_snapshot",
]

log = logging.getLogger("nodwyn_retrieval.actors.indexer")

# Rebuilding the delta (TreeIndex.apply builds it again from every changed file) costs about this
# much CPU a document of it until this process has measured its own rate (the big tree's delta
# of 12,413 documents took 9 s at a slowdown of about 5).
APPLY_SECONDS_PER_DOC = 1.5e-4
# A delta this small is rebuilt whatever the time left (0.04 s of CPU).
MIN_APPLY_DOCS = 256
# A snapshot's cost grows with its postings (measured: about 0.3 us each, and some margin): a
# call waits for its write only when it fits, otherwise it is written after the answer.
SNAPSHOT_SECONDS_PER_POSTING = 5e-7
# What a call keeps, on an idle core, between the end of its waits and its deadline.
SETTLE_MARGIN = 0.05
# A tree with no snapshot whose git index lists this many files or more is read in the pool at
# its first refresh: the pool's workers are started as the session opens, so that their start
# (the interpreter and numpy, a few tenths of a second of the first build's critical path) is
# made while the refresher lists the tree. A smaller tree starts them only when it needs them.
EARLY_POOL_FILES = 1_000


class IndexerActor(Actor):
    """Reads, stores and indexes one working tree's files; ranks and shows its chunks."""

    def __init__(
        self,
        root: Path,
        store: ChunkStore,
        guard: Guard,
        pool: ProcessPool | None,
        snapshot_path: Path,
    ) -> None:
        self.root = root
        self.store = store
        self.guard = guard.without_asking()
        # The build and a search's live reads read only through Beneath: their decisions need
        # not resolve links (DefaultGuard.reading_beneath).
        self.read_guard = (
            self.guard.reading_beneath() if isinstance(self.guard, DefaultGuard) else self.guard
        )
        self.pool = pool
        self.snapshot_path = snapshot_path
        self.tree = TreeIndex()
        self._snapshot_base: TreeSegment | None = None
        self._snapshot_lock = asyncio.Lock()
        self._saving: asyncio.Task[None] | None = None  # a snapshot written after the answer
        self._rebuilt = 0
        # The slowdown of this process's CPU work, measured as each call runs.
        self._contention = Contention(load_factor)
        # CPU seconds a delta document costs to rebuild, as last measured here.
        self._apply_rate = APPLY_SECONDS_PER_DOC
        # A merge of the delta into a new base, made in a thread apart from the tree it was
        # copied from; the changes applied to the tree since it began, which its result takes
        # on when it is installed (the next call that changes the index, or the session's end).
        self._compacting: asyncio.Task[TreeIndex] | None = None
        self._since: dict[str, tuple[str, FileRecord] | None] = {}
        self._snapshot_error: str | None = None  # a write that failed after its call answered
        # What the first search of a loaded index would compute, made in a thread meanwhile.
        self._warming: asyncio.Task[None] | None = None
        self._early: asyncio.Future[None] | None = None  # the pool's workers started at the open

    def __repr__(self) -> str:
        return f"<IndexerActor root={str(self.root)!r} {self.tree!r}>"

    async def on_start(self) -> None:
        # Not awaited: the session opens and the refresher lists the tree while the snapshot is
        # read and warmed; every message waits for it.
        self._warming = asyncio.ensure_future(self._load())
        if self.pool is not None:
            self._early = asyncio.ensure_future(self._start_pool(self.pool))

    async def _start_pool(self, pool: ProcessPool) -> None:
        """Start the pool's workers now when the tree is to be built and is big."""
        if await asyncio.to_thread(self._build_ahead):
            await pool.start()

    def _build_ahead(self) -> bool:
        """Whether this tree has never been indexed here (no snapshot) and git lists enough files
        that its first refresh will read in the pool."""
        return not self.snapshot_path.exists() and listed_files(self.root) >= EARLY_POOL_FILES

    async def _load(self) -> None:
        base, dropped = await asyncio.to_thread(read_snapshot, self.snapshot_path)
        self._rebuilt += int(dropped)  # reported by the next index.update record
        if base is not None:
            self.tree = TreeIndex(base)
            self._snapshot_base = base
            await asyncio.to_thread(self.tree.warm)

    async def on_stop(self) -> None:
        # What this session read is kept for the next one, even when no call had time to save
        # it: a merge still running is waited for (its thread cannot be stopped) and its base
        # written as the snapshot.
        if self._early is not None:
            with contextlib.suppress(Exception):
                await self._early
        if self._warming is not None:
            with contextlib.suppress(Exception):
                await self._warming
        if self._compacting is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._compacting)
            self._install(at_once=True)
        self._save_soon()
        if self._saving is not None:
            await self._saving

    async def handle(self, message: object) -> object:
        if self._warming is not None:
            with contextlib.suppress(Exception):
                await self._warming
            self._warming = None
        match message:
            case IndexFiles():
                return await self._index(message)
            case SearchTree():
                return await self._search(message)
            case Forget(path=path):
                self._apply({path: None})
                return None
            case SaveSnapshot(deadline=deadline):
                # Compacting merges the whole index, in a thread: waited for until the bound (§5:
                # an update call's 60 s), and left to go on after it; the next call that changes
                # the index, or the session's end, takes it.
                self._start_compaction()
                return await self._settle(deadline)
        raise TypeError(f"indexer cannot handle {type(message).__name__}")

    # -- indexing -------------------------------------------------------------------------

    def _sync(
        self,
        target: dict[str, str],
        until: float | None = None,
        per_doc: float = 0.0,
        docs: int = 0,
    ) -> tuple[dict[str, tuple[str, FileRecord] | None], list[str], list[str]]:
        """Changes that make the index hold exactly target; paths whose records are gone; and
        paths whose records were not loaded before ``time.monotonic()`` reached until (§5: a
        new session may have thousands of records to load; the next refresh goes on).

        Loading stops while what it loaded can still be applied in time: applying rebuilds the
        delta, ``docs`` documents already and those loaded, at an estimated ``per_doc`` seconds
        each."""
        changes: dict[str, tuple[str, FileRecord] | None] = {}
        missing: list[str] = []
        later: list[str] = []
        for path in self.tree.files.keys() - target.keys():
            changes[path] = None
        loaded = 0
        for n, (path, key) in enumerate(target.items()):
            if self.tree.files.get(path) == key:
                continue
            loaded += 1
            if (
                until is not None
                and loaded % 16 == 0
                and time.monotonic() + docs * per_doc >= until
            ):
                later.extend(p for p, k in list(target.items())[n:] if self.tree.files.get(p) != k)
                break
            # Touched before it is read: a collection from now on sees it fresh (§4).
            self._touch(key)
            rec = self.store.get(key)
            if rec is None:
                missing.append(path)
                if path in self.tree.files:
                    changes[path] = None
            else:
                changes[path] = (key, rec)
                docs += rec.n_chunks
        return changes, missing, later

    async def _index(self, msg: IndexFiles) -> IndexedFiles:
        rebuilt_before = self.store.stats.rebuilt
        loop = asyncio.get_running_loop()
        self._contention.start()
        t0 = loop.time()
        # Every phase after the reads stops at the deadline too (§5): storing, applying, merging
        # and the snapshot; what is not done is said (not read, not loaded) or goes on after.
        until = time.monotonic() + (msg.deadline - t0)
        later: list[str] = []
        if msg.target is not None:
            changes, missing, later = await asyncio.to_thread(
                self._sync, msg.target, until, self._per_doc(), self.tree.delta.n_docs
            )
        else:
            changes, missing = {p: None for p in msg.drop if p in self.tree.files}, []
        synced = {p for p, v in changes.items() if v is not None}
        t_sync = loop.time()
        found: list[TreeFound] = []
        # An empty index (a first build) is built as the batches arrive, from their postings:
        # only the sort of the postings is left when the last one is in.
        builder = TreeBuilder() if not self.tree.files and not changes else None
        pending = self.tree.delta.n_docs + sum(v[1].n_chunks for v in changes.values() if v)
        analyzed = await read_and_analyze(
            msg.read, msg.deadline, found,
            root=self.root, guard=self.read_guard, pool=self.pool,
            chunks_dir=str(self.store.directory), contention=self._contention,
            progress=msg.progress, builder=builder,
            post=0.0 if builder is not None else pending * self._per_doc(),
        )  # fmt: skip
        t_read = loop.time()
        results, store_error = await asyncio.to_thread(
            self._store_all, analyzed, until, self._per_doc(), pending
        )
        t_store = loop.time()
        order = {st.path: i for i, st in enumerate(msg.read)} if builder is not None else {}
        here: list[tuple[int, str, str, FileRecord]] = []  # analysed in this process
        for stat, a, rec in results:
            if a.packed:  # its postings are in the builder
                found.append(TreeFound(stat, a.key, None, a.text_bytes))
            elif rec is None:
                found.append(TreeFound(stat, None, a.skip, a.text_bytes))
            else:
                if builder is not None:
                    here.append((order[stat.path], stat.path, a.key, rec))
                else:
                    changes[stat.path] = (a.key, rec)
                found.append(TreeFound(stat, a.key, None, a.text_bytes))
        if builder is not None:
            if here:
                builder.add(
                    [(o, p, k) for o, p, k, _ in here], pairs_of([(p, r) for _, p, _, r in here])
                )
            if len(builder):
                self._drop_compaction()  # of an index emptied since: this one replaces it
                self.tree = await asyncio.to_thread(_built, builder)
        else:
            for f in found:  # skipped now, refused, gone: out of the index
                if f.key is None:
                    changes[f.stat.path] = None
            # Applying rebuilds the delta: what does not fit before the deadline is left, the
            # records loaded said as not loaded yet, the files read as not read (read again at
            # the next refresh: their records are stored, so that costs a read, not an analysis).
            changes, cut = self._fit(changes, until)
            if cut:
                left = set(cut)
                later.extend(p for p in cut if p in synced)
                found = [f for f in found if f.key is None or f.stat.path not in left]
            self._apply(changes)
            # A delta this big is merged into a new base, in a thread: waited for until the
            # deadline, and taken by a later call if it is not done by then (§5).
            if self.tree.delta.n_docs > max(TreeIndex.COMPACT_DOCS, self.tree.base.n_docs // 10):
                self._start_compaction()
        t_apply = loop.time()
        err = await self._settle(msg.deadline)
        store_error = store_error or err
        log.debug("index: sync %.2f s (%d changes, %d later), reads %.2f s (%d), store %.2f s, "
                  "apply %.2f s, merge, snapshot %.2f s; %.2f s left; slowdown %.1f; %r",
                  t_sync - t0, len(changes), len(later), t_read - t_sync, len(analyzed),
                  t_store - t_read, t_apply - t_store, loop.time() - t_apply,
                  msg.deadline - loop.time(), self._contention.factor(), self.tree)  # fmt: skip
        rebuilt = self.store.stats.rebuilt - rebuilt_before + self._rebuilt
        self._rebuilt = 0
        return IndexedFiles(
            tuple(found),
            tuple(missing),
            rebuilt=rebuilt,
            store_error=store_error,
            not_loaded=tuple(later),
        )

    # -- the work after the reads, each part bounded ------------------------------------------

    def _per_doc(self) -> float:
        """What a delta document is estimated to cost to rebuild now, in seconds of wall time."""
        return self._apply_rate * self._contention.factor() * MARGIN

    def _fit(
        self, changes: dict[str, tuple[str, FileRecord] | None], until: float
    ) -> tuple[dict[str, tuple[str, FileRecord] | None], list[str]]:
        """The changes whose delta can be rebuilt before ``time.monotonic()`` reaches until, in
        their order, and the paths of those left for later. A removal is always applied (the
        manifest drops the file whatever the index holds), and so is a delta of at most
        MIN_APPLY_DOCS documents (a part, as the scan's, before the clock is looked at: a call
        with no time left still moves on)."""
        per_doc = self._per_doc()
        docs = self.tree.delta.n_docs
        now = time.monotonic()
        kept: dict[str, tuple[str, FileRecord] | None] = {}
        cut: list[str] = []
        for path, new in changes.items():
            if new is None:
                kept[path] = None
            elif cut or (
                docs + new[1].n_chunks > MIN_APPLY_DOCS
                and now + (docs + new[1].n_chunks) * per_doc >= until
            ):
                cut.append(path)
            else:
                docs += new[1].n_chunks
                kept[path] = new
        return kept, cut

    def _apply(self, changes: Mapping[str, tuple[str, FileRecord] | None]) -> None:
        """Apply changes to the index (never merging it there: see _start_compaction), taking a
        merge done meanwhile with them in the same rebuild of the delta."""
        if not changes:
            return
        if self._compacting is not None:
            self._since.update(changes)
            if self._install(at_once=True):
                return
        self._rebuild(self.tree, changes)

    def _rebuild(
        self, tree: TreeIndex, changes: Mapping[str, tuple[str, FileRecord] | None]
    ) -> None:
        """tree.apply, its CPU time measured: the rate the next estimates use."""
        t = cpu_seconds()
        tree.apply(changes, merge=_never)
        docs = tree.delta.n_docs
        if docs >= 512:
            self._apply_rate = max(1e-6, (cpu_seconds() - t) / docs)

    def _start_compaction(self) -> None:
        """Merge a copy of the index in a thread, unless a merge is already under way."""
        if self._compacting is not None or not self.tree.dirty:
            return
        view = copy.copy(self.tree)
        self._since = {}
        self._compacting = asyncio.ensure_future(asyncio.to_thread(_compacted, view))

    def _drop_compaction(self) -> None:
        """Forget a merge under way (its result will not be taken)."""
        self._compacting = None
        self._since = {}

    def _install(self, *, at_once: bool) -> bool:
        """Take the merge's result once it is done: with the changes applied since (at_once), or
        only when there are none (a swap of the index, no work). Whether it was taken."""
        task = self._compacting
        if task is None or not task.done() or (self._since and not at_once):
            return False
        since = self._since
        self._drop_compaction()
        if task.cancelled() or task.exception() is not None:
            log.warning(
                "merging the index failed: %r", None if task.cancelled() else task.exception()
            )
            return False
        merged = task.result()
        if since:
            self._rebuild(merged, since)
        self.tree = merged
        return True

    async def _settle(self, deadline: float | None) -> str | None:
        """Wait for the merge under way and the snapshot until deadline (None: until both are
        done); what is not done by then goes on after the answer, and a later call or the
        session's end takes it. The error of a snapshot write, when one is known.

        The wait ends a little before the deadline (SETTLE_MARGIN times the slowdown, at most
        half a second): the answer still has to reach the caller."""
        loop = asyncio.get_running_loop()
        margin = min(0.5, SETTLE_MARGIN * self._contention.factor())
        until = None if deadline is None else time.monotonic() + (deadline - loop.time()) - margin

        def left() -> float | None:
            return None if until is None else until - time.monotonic()

        task = self._compacting
        if task is not None:
            wait = left()
            if wait is None or wait > 0:
                await asyncio.wait({task}, timeout=wait)
            # Taken with the changes applied since it began when their rebuild fits in time.
            docs = sum(v[1].n_chunks for v in self._since.values() if v is not None)
            wait = left()
            self._install(at_once=wait is None or docs * self._per_doc() < wait)
        err, self._snapshot_error = self._snapshot_error, None
        if self.tree.base is self._snapshot_base:
            return err
        self._save_soon()
        saving = self._saving
        if saving is None:
            return err
        wait = left()
        if wait is None:
            await asyncio.shield(saving)
        else:
            postings = self.tree.base.segment.n_postings
            cost = (0.05 + postings * SNAPSHOT_SECONDS_PER_POSTING) * self._contention.factor()
            if cost < wait:
                await asyncio.wait({saving}, timeout=wait)
        if saving.done():
            err = err or self._snapshot_error
            self._snapshot_error = None
        return err

    def _touch(self, key: str) -> None:
        """Mark a record fresh; a store that cannot be written then still answers from memory."""
        with contextlib.suppress(StoreError):
            self.store.touch(key)

    def _store_all(
        self,
        analyzed: list[tuple[FileStat, Analyzed, bytes]],
        until: float | None = None,
        per_doc: float = 0.0,
        docs: int = 0,
    ) -> tuple[list[tuple[FileStat, Analyzed, FileRecord | None]], str | None]:
        """Write new records and load the ones the store already held, in one thread hop.

        A write that fails (a full disk) is remembered and the record still indexed in memory: the
        search answers from memory and says the index could not be saved.

        Stops once ``time.monotonic()`` and the estimated rebuild of the delta (``docs``
        documents and each record's, ``per_doc`` seconds each) reach until (past
        MIN_APPLY_DOCS documents): the files not handled are left out of the answer (not read,
        this refresh), and a record written for one stays in the store for the next.
        """
        out: list[tuple[FileStat, Analyzed, FileRecord | None]] = []
        error: str | None = None
        stopped = False
        for stat, a, data in analyzed:
            if a.skip is not None or a.packed:
                if a.store_error is not None:  # a worker could not write it (a full disk)
                    error = error or a.store_error
                out.append((stat, a, None))
                continue
            if stopped or (
                until is not None
                and docs > MIN_APPLY_DOCS
                and time.monotonic() + docs * per_doc >= until
            ):
                stopped = True
                continue
            rec = a.record
            if rec is None:
                # §4: touched before it is read, so a collection from now on keeps it.
                self._touch(a.key)
                rec = self.store.get(a.key)
                if rec is not None:
                    out.append((stat, a, rec))
                    continue
                # Stored when the worker looked, gone or damaged since: analyse it here.
                rec = analyze_blob(stat.path, data, None).record
                if rec is None:
                    out.append((stat, a, None))
                    continue
            if a.store_error is not None:
                error = error or a.store_error
            elif not a.stored and error is None:
                try:
                    self.store.put(a.key, rec)
                except StoreError as e:
                    error = str(e)
            out.append((stat, a, rec))
            docs += rec.n_chunks
        return out, error

    async def _write_snapshot(self, base: TreeSegment) -> str | None:
        """Write base as the snapshot unless it already is; one write at a time."""
        async with self._snapshot_lock:
            if base is self._snapshot_base:
                return None  # already written
            path = self.snapshot_path

            def save() -> None:
                # In pieces: its long arrays are written as to_obj made them, not joined first.
                write_atomic(path, encode_parts(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, base.to_obj()))

            try:
                # Encoded and written in a thread: the base is never changed once built (a
                # change makes a new one), so the next message's work may go on meanwhile.
                await asyncio.to_thread(save)
            except StoreError as e:
                return str(e)
            self._snapshot_base = base
            return None

    def _save_soon(self) -> None:
        """Write the snapshot in the background when the base is new. A delta may hold changes
        beside it: the next session loads the base and takes the delta's records from the chunk
        store (as many as its first call has time for; the rest at the next)."""
        if self.tree.base is self._snapshot_base:
            return
        if self._saving is not None and not self._saving.done():
            return  # the running write takes the newest base when it ends
        self._saving = asyncio.create_task(self._save_in_background())

    async def _save_in_background(self) -> None:
        while self.tree.base is not self._snapshot_base:
            base = self.tree.base
            err = await self._write_snapshot(base)
            if err is not None:
                log.warning("snapshot %s not written: %s", self.snapshot_path, err)
                self._snapshot_error = err  # said by the next call that waits for a snapshot
                return

    # -- searching ------------------------------------------------------------------------

    async def _search(self, msg: SearchTree) -> TreeSearched:
        self._install(at_once=False)  # a merge done since the refresh: taken when it is free
        tree = await asyncio.to_thread(Beneath, self.root)
        try:
            return await search_in(self, msg, tree)
        finally:
            tree.close()


def _never(tree: TreeIndex) -> bool:
    """TreeIndex.apply's merge question, answered: the indexer merges in a thread of its own."""
    return False


def _compacted(tree: TreeIndex) -> TreeIndex:
    """tree with its delta merged into a new base (in a thread: tree is a copy no one changes),
    ready for a search."""
    tree.compact()
    tree.warm()
    return tree


def _built(builder: TreeBuilder) -> TreeIndex:
    """The index of a first build, ready for a search (in a thread)."""
    tree = TreeIndex(builder.finish())
    tree.warm()
    return tree
