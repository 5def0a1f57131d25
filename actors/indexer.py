"""The indexer: a working tree's reads, its chunk records and the index a session searches (§3-§7).

It owns the tree's in-memory :class:`~retrieval.tree.TreeIndex`. The refresher tells it what the
manifest holds and which files changed; it reads those through the guard (never asking: a confirm
is a refusal nobody is asked for), redacts, hashes and analyses them (in the process pool when a
batch is big), stores each content once, and updates the index. A search ranks the chunks and reads
each result's lines from the file now, through the guard again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from nodwyn_retrieval.actors._work import (
    MAX_FILE_BYTES,
    Analyzed,
    analyze_batch,
    analyze_blob,
    analyze_packed,
    cpu_count,
)
from nodwyn_retrieval.actors.messages import (
    FileStat,
    Forget,
    IndexedFiles,
    IndexFiles,
    Progress,
    SaveSnapshot,
    SearchTree,
    TreeFound,
    TreeSearched,
)
from nodwyn_retrieval.bus import Actor, ProcessPool
from nodwyn_retrieval.errors import DeadlineExceeded, FormatError, StoreError, WorkerError
from nodwyn_retrieval.guard import DefaultGuard, Guard, Verdict, redact
from nodwyn_retrieval.guard.beneath import Beneath, LinkRefused
from nodwyn_retrieval.retrieval.analyze import FileRecord
from nodwyn_retrieval.retrieval.chunks import split_lines
from nodwyn_retrieval.retrieval.render import RepoResult, best_lines
from nodwyn_retrieval.retrieval.tree import TreeBuilder, TreeIndex, TreeSegment, pairs_of
from nodwyn_retrieval.retrieval.words import weighted_query
from nodwyn_retrieval.store.atomic import write_atomic
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.codec import decode, encode

__all__ = ["MAX_FILE_BYTES", "POOL_MIN_BYTES", "IndexerActor", "load_snapshot"]

log = logging.getLogger("nodwyn_retrieval.actors.indexer")

# Below this many bytes of changed text a batch is analysed in this process: starting and feeding
# workers costs more than it saves (docs/benchmarks.md, "the pool threshold").
POOL_MIN_BYTES = 2 << 20
BATCH_BYTES = 1 << 20  # one unit of work sent to a worker
# The share of a refresh's time kept for what follows the reads (storing, merging, snapshot).
POST_SHARE = 0.15
# What follows the reads costs about this much per byte read (merging a first build of the big
# tree, 130 MB, took 13 s on a loaded machine; 27 MB took 1.3 s on a quiet one): reads stop
# while it still fits in the bound.
# With two CPU burners beside it the merge took 4.6e-7 s a byte at a load of 4 a core: the estimate
# below times the load, with a quarter more for margin.
POST_SECONDS_PER_BYTE = 1.25e-7
# And this much whatever was read (storing, the manifest's save), on an idle machine.
POST_FIXED_SECONDS = 0.3
# Merging a delta into the base costs about this much per posting (the big tree's: 3.8 s on a
# loaded machine; measured with a profile of a search after 3,000 files changed).
MERGE_SECONDS_PER_POSTING = 6e-7
# A snapshot's cost grows with its postings (measured: about 0.3 us each, and some margin).
SNAPSHOT_SECONDS_PER_POSTING = 5e-7
READ_CONCURRENCY = 16
LOAD_FACTOR_MAX = 8.0
SNAPSHOT_MAGIC = b"NRTS"
SNAPSHOT_VERSION = 2  # 2: packed postings, sorted vocabulary, CRC-32


def load_snapshot(path: Path) -> TreeSegment | None:
    """The tree segment stored at path, or None when it is missing or must be rebuilt."""
    return _load_snapshot(path)[0]


def _load_snapshot(path: Path) -> tuple[TreeSegment | None, bool]:
    """The tree segment stored at path, and whether a damaged one was dropped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, False
    except OSError as e:
        log.warning("cannot read %s: %s", path, e)
        return None, False
    try:
        return TreeSegment.from_obj(decode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, data)), False
    except FormatError as e:
        log.info("snapshot %s dropped: %s", path, e)
        with contextlib.suppress(OSError):
            path.unlink()
        return None, True


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

    def __repr__(self) -> str:
        return f"<IndexerActor root={str(self.root)!r} {self.tree!r}>"

    async def on_start(self) -> None:
        base, dropped = await asyncio.to_thread(_load_snapshot, self.snapshot_path)
        self._rebuilt += int(dropped)  # reported by the next index.update record
        if base is not None:
            self.tree = TreeIndex(base)
            self._snapshot_base = base

    async def on_stop(self) -> None:
        # What this session read is kept for the next one, even when no call had time to save it.
        self._save_soon()
        if self._saving is not None:
            await self._saving

    async def handle(self, message: object) -> object:
        match message:
            case IndexFiles():
                return await self._index(message)
            case SearchTree():
                return await self._search(message)
            case Forget(path=path):
                self.tree.apply({path: None})
                return None
            case SaveSnapshot(deadline=deadline):
                # Compacting merges the whole index: only when it fits before the bound (§5: an
                # update call's 60 s); otherwise a later refresh or update does it.
                if self.tree.dirty and self._may_compact(deadline):
                    self.tree.compact()
                if not self._should_snapshot(deadline):
                    self._save_soon()
                    return None
                return await self._save_snapshot()
        raise TypeError(f"indexer cannot handle {type(message).__name__}")

    # -- indexing -------------------------------------------------------------------------

    def _sync(
        self, target: dict[str, str], until: float | None = None
    ) -> tuple[dict[str, tuple[str, FileRecord] | None], list[str], list[str]]:
        """Changes that make the index hold exactly target; paths whose records are gone; and
        paths whose records were not loaded before ``time.monotonic()`` reached until (§5: a
        new session may have thousands of records to load; the next refresh goes on)."""
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
            if until is not None and loaded % 64 == 0 and time.monotonic() >= until:
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
        return changes, missing, later

    async def _index(self, msg: IndexFiles) -> IndexedFiles:
        rebuilt_before = self.store.stats.rebuilt
        later: list[str] = []
        if msg.target is not None:
            loop = asyncio.get_running_loop()
            until = time.monotonic() + (msg.deadline - loop.time())
            changes, missing, later = await asyncio.to_thread(self._sync, msg.target, until)
        else:
            changes, missing = {p: None for p in msg.drop if p in self.tree.files}, []
        found: list[TreeFound] = []
        # An empty index (a first build) is built as the batches arrive, from their postings:
        # only the sort of the postings is left when the last one is in.
        builder = TreeBuilder() if not self.tree.files and not changes else None
        analyzed = await self._read_and_analyze(
            msg.read, msg.deadline, found, msg.progress, builder
        )
        results, store_error = await asyncio.to_thread(self._store_all, analyzed)
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
                self.tree = TreeIndex(await asyncio.to_thread(builder.finish))
        else:
            for f in found:  # skipped now, refused, gone: out of the index
                if f.key is None:
                    changes[f.stat.path] = None
        # Merging a big delta into the base costs time in proportion to the whole index: only
        # when it fits before the bound (§5); otherwise a later refresh or update does it.
        loop = asyncio.get_running_loop()

        def may_merge(tree: TreeIndex) -> bool:
            postings = tree.base.segment.n_postings + tree.delta.segment.n_postings
            cost = postings * MERGE_SECONDS_PER_POSTING * _load_factor()
            return loop.time() + cost < msg.deadline

        if builder is None:
            self.tree.apply(changes, merge=may_merge)
        if self._should_snapshot(msg.deadline):
            err = await self._save_snapshot()
            store_error = store_error or err
        else:
            # No time left in the bound (a partial first build spends it all on reads): the
            # snapshot is written after the answer, so a new session starts from what was read.
            self._save_soon()
        rebuilt = self.store.stats.rebuilt - rebuilt_before + self._rebuilt
        self._rebuilt = 0
        return IndexedFiles(
            tuple(found),
            tuple(missing),
            rebuilt=rebuilt,
            store_error=store_error,
            not_loaded=tuple(later),
        )

    def _touch(self, key: str) -> None:
        """Mark a record fresh; a store that cannot be written then still answers from memory."""
        with contextlib.suppress(StoreError):
            self.store.touch(key)

    def _store_all(
        self, analyzed: list[tuple[FileStat, Analyzed, bytes]]
    ) -> tuple[list[tuple[FileStat, Analyzed, FileRecord | None]], str | None]:
        """Write new records and load the ones the store already held, in one thread hop.

        A write that fails (a full disk) is remembered and the record still indexed in memory: the
        search answers from memory and says the index could not be saved.
        """
        out: list[tuple[FileStat, Analyzed, FileRecord | None]] = []
        error: str | None = None
        for stat, a, data in analyzed:
            if a.skip is not None or a.packed:
                if a.store_error is not None:  # a worker could not write it (a full disk)
                    error = error or a.store_error
                out.append((stat, a, None))
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
        return out, error

    async def _read_and_analyze(
        self,
        stats: Sequence[FileStat],
        deadline: float,
        found: list[TreeFound],
        progress: Progress | None = None,
        builder: TreeBuilder | None = None,
    ) -> list[tuple[FileStat, Analyzed, bytes]]:
        """Read files through the guard in path order and analyse each as it arrives.

        Reading and analysis overlap: a small batch is analysed here file by file as each read
        completes, a big one goes to the process pool a megabyte at a time while the rest is
        still being read. With a builder, a batch's postings come back as flat arrays and join
        it as they arrive (the files' records stay in the workers and the store). No read and
        no analysis starts past the deadline, and nothing is awaited past it (§5): what is not
        done by then is simply not in this refresh.
        """
        loop = asyncio.get_running_loop()
        # §5's bound covers the whole refresh: reads stop early enough to leave time for storing
        # and merging what they produced, which grows with the text read (a first build of a
        # large tree merges for seconds).
        hard = deadline
        deadline = loop.time() + (deadline - loop.time()) * (1.0 - POST_SHARE)
        read_bytes = 0
        analysed = 0  # bytes analysed so far: what the merge after the reads will cost
        # What follows the reads is CPU work in this process: on a machine whose cores are busy
        # it gets a share of a core, and takes that much longer (docs/reliability.md, the bounds
        # under load).
        load = _load_factor()
        post_per_byte = POST_SECONDS_PER_BYTE * load
        # (At most the post share of a bound much shorter than §5's, as a test sets.)
        hard -= min(POST_FIXED_SECONDS * load, (hard - loop.time()) * POST_SHARE)

        def may_start() -> bool:
            now = loop.time()
            return now < deadline and now + read_bytes * post_per_byte < hard

        chunks_dir = str(self.store.directory)
        use_pool = self.pool is not None and sum(st.size for st in stats) >= POOL_MIN_BYTES
        sem = asyncio.Semaphore(READ_CONCURRENCY)
        done: dict[int, tuple[FileStat, Analyzed, bytes]] = {}
        batch: list[tuple[int, FileStat, bytes]] = []
        batch_bytes = 0
        pool_tasks: list[asyncio.Task[None]] = []

        pool = self.pool

        async def analyse_batch(items: list[tuple[int, FileStat, bytes]]) -> None:
            if pool is None:  # pragma: no cover - batches are made only when there is a pool
                return
            blobs = [(st.path, data) for _, st, data in items]
            try:
                if builder is not None:
                    res, pairs = await pool.run(
                        analyze_packed, blobs, chunks_dir, deadline=deadline
                    )
                    builder.add(
                        [(i, st.path, a.key) for (i, st, _), a in zip(items, res, strict=True)
                         if a.packed],
                        pairs,
                    )  # fmt: skip
                else:
                    res = await pool.run(analyze_batch, blobs, chunks_dir, deadline=deadline)
            except DeadlineExceeded:
                return  # not analysed in time: not read, for this refresh
            except WorkerError as e:
                log.warning("a worker failed on a batch (%s); analysing it here", e)
                res = [analyze_blob(p, d, chunks_dir) for p, d in blobs]
            nonlocal analysed
            for (i, st, data), a in zip(items, res, strict=True):
                # A file whose postings are in the builder needs its bytes no more: the build
                # does not keep the whole tree's text until the reads end.
                done[i] = (st, a, b"" if a.packed else data)
                analysed += len(data)
                if progress is not None:
                    progress.advance(len(data))

        def flush() -> None:
            nonlocal batch, batch_bytes
            if batch:
                batch.sort(key=lambda item: item[0])  # in path order: see TreeBuilder.add
                pool_tasks.append(asyncio.create_task(analyse_batch(batch)))
                batch, batch_bytes = [], 0

        reading: set[asyncio.Task[None]] = set()

        async def one(i: int, st: FileStat) -> None:
            nonlocal batch_bytes, read_bytes, analysed
            async with sem:
                if not may_start():
                    return
                decision = await self.read_guard.check_read(st.path, st.size)
                if not decision.allowed:
                    skip = "unasked" if decision.verdict == Verdict.CONFIRM else "refused"
                    found.append(TreeFound(st, None, skip))
                    if progress is not None:
                        progress.advance(0)
                    return
                # A read in flight is not cancelled at the deadline (it takes milliseconds):
                # cancelling an open in a worker thread would leave its file open.
                me = asyncio.current_task()
                if me is not None:
                    reading.add(me)
                try:
                    data = await self._read_file(tree, st.path)
                finally:
                    if me is not None:
                        reading.discard(me)
            if data is not None:
                read_bytes += len(data)
            if data is None or len(data) > MAX_FILE_BYTES:
                found.append(TreeFound(st, None, "gone" if data is None else "too_large"))
                if progress is not None:
                    progress.advance(0)
            elif use_pool:
                batch.append((i, st, data))
                batch_bytes += len(data)
                if batch_bytes >= BATCH_BYTES:
                    flush()
            elif loop.time() < deadline:
                done[i] = (st, analyze_blob(st.path, data, chunks_dir), data)
                analysed += len(data)
                if progress is not None:
                    progress.advance(len(data))

        try:
            # One descriptor of the root for the whole build: every read is resolved beneath it.
            tree = await asyncio.to_thread(Beneath, self.root)
        except OSError as e:
            log.info("cannot open the root %s: %s", self.root, e.strerror)
            found.extend(TreeFound(st, None, "gone") for st in stats)
            return []
        readers = [asyncio.create_task(one(i, st)) for i, st in enumerate(stats)]
        try:
            if readers:
                await asyncio.wait(readers, timeout=max(0.0, deadline - loop.time()))
            for t in readers:
                if t not in reading:
                    t.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            flush()
            # Wait for the pool while what it returns can still be stored and merged in time:
            # each batch analysed makes the work after the reads longer.
            pending: set[asyncio.Task[None]] = set(pool_tasks)
            while pending:
                left = min(deadline, hard - analysed * post_per_byte) - loop.time()
                if left <= 0:
                    break
                _, pending = await asyncio.wait(
                    pending, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            for t in (*readers, *pool_tasks):
                t.cancel()
            await asyncio.gather(*readers, *pool_tasks, return_exceptions=True)
            tree.close()  # a read still in a thread closes the descriptors when it is done
        return [done[i] for i in sorted(done)]

    async def _read_file(self, tree: Beneath, rel: str) -> bytes | None:
        """The file's bytes (at most 1 MiB + 1), or None when it is gone or not a regular file.

        Read beneath the root without following a link at any component (guard/beneath.py): a
        file or a directory on its way replaced by a link after the guard's decision is not
        followed, and a FIFO or a device is not waited on (O_NONBLOCK) nor read.
        """
        try:
            return await asyncio.to_thread(tree.read, rel, MAX_FILE_BYTES + 1)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return None
        except LinkRefused:
            log.info("not read: %s has a link on its way (not followed)", rel)
            return None
        except OSError as e:
            log.info("cannot read %s: %s", rel, e.strerror)
            return None

    def _may_compact(self, deadline: float | None) -> bool:
        if deadline is None:
            return True
        postings = self.tree.base.segment.n_postings + self.tree.delta.segment.n_postings
        cost = postings * MERGE_SECONDS_PER_POSTING * _load_factor()
        return asyncio.get_running_loop().time() + cost < deadline

    def _should_snapshot(self, deadline: float | None) -> bool:
        """Whether to write the snapshot now: the base is new, and there is time for it."""
        if self.tree.dirty or self.tree.base is self._snapshot_base:
            return False
        if deadline is None:
            return True
        cost = 0.05 + self.tree.base.segment.n_postings * SNAPSHOT_SECONDS_PER_POSTING
        return asyncio.get_running_loop().time() + cost < deadline

    async def _save_snapshot(self) -> str | None:
        base = self.tree.snapshot()
        return await self._write_snapshot(base)

    async def _write_snapshot(self, base: TreeSegment) -> str | None:
        """Write base as the snapshot unless it already is; one write at a time."""
        async with self._snapshot_lock:
            if base is self._snapshot_base:
                return None  # already written
            try:
                # Encoded in a thread: the base is never changed once built (a change makes a
                # new one), so the next message's work may go on meanwhile.
                data = await asyncio.to_thread(
                    lambda: encode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, base.to_obj())
                )
                await asyncio.to_thread(write_atomic, self.snapshot_path, data)
            except StoreError as e:
                return str(e)
            self._snapshot_base = base
            return None

    def _save_soon(self) -> None:
        """Write the snapshot in the background when the base is new (not while a delta holds
        changes: the next session then loads the base and takes the delta's records from the
        chunk store)."""
        if self.tree.dirty or self.tree.base is self._snapshot_base:
            return
        if self._saving is not None and not self._saving.done():
            return  # the running write takes the newest base when it ends
        self._saving = asyncio.create_task(self._save_in_background())

    async def _save_in_background(self) -> None:
        while not self.tree.dirty and self.tree.base is not self._snapshot_base:
            base = self.tree.base
            err = await self._write_snapshot(base)
            if err is not None:
                log.warning("snapshot %s not written: %s", self.snapshot_path, err)
                return

    # -- searching ------------------------------------------------------------------------

    async def _search(self, msg: SearchTree) -> TreeSearched:
        tree = await asyncio.to_thread(Beneath, self.root)
        try:
            return await self._search_in(msg, tree)
        finally:
            tree.close()

    async def _search_in(self, msg: SearchTree, tree: Beneath) -> TreeSearched:
        query = weighted_query(msg.query)
        words = list(query)
        # The best chunks of the best files (retrieval.tree.Ranking); a few more than shown, for
        # files gone since they were indexed. The selection is made in order, so the first
        # chunks of a longer list are the list of a shorter one.
        hits = self.tree.rank(query, msg.limit * 2 + 4, msg.path)
        matched = self.tree.count_matching(words, msg.path)
        results: list[RepoResult] = []
        gone: list[str] = []
        cache: dict[str, bytes | None] = {}
        for h in hits:
            if len(results) >= msg.limit:
                break
            if h.path not in cache:
                size = await asyncio.to_thread(_size, tree, h.path)
                decision = await self.read_guard.check_read(h.path, size)
                if not decision.allowed:
                    # §3: a refusal stops the search with the refusal as the answer, and drops
                    # the file from the tree's index.
                    self.tree.apply({h.path: None})
                    return TreeSearched(
                        (), self.tree.n_docs, len(self.tree.files), h.path, decision.reason
                    )
                cache[h.path] = await self._read_file(tree, h.path)
            data = cache[h.path]
            chunk = None if data is None else _chunk_lines(data, h.start, h.end)
            if not chunk:
                gone.append(h.path)
                continue
            red = redact("\n".join(chunk)).text.split("\n")
            numbered = list(enumerate(red, h.start))
            results.append(
                RepoResult(
                    h.path,
                    h.start,
                    h.start + len(chunk) - 1,
                    next((x for x in red if x.strip()), red[0]),
                    tuple(best_lines(numbered, words)),
                    h.score,
                )
            )
        return TreeSearched(
            tuple(results), self.tree.n_docs, len(self.tree.files), gone=tuple(gone),
            matched=matched,
        )  # fmt: skip


def _load_factor() -> float:
    """How much slower CPU work runs now than on an idle machine: the run queue per core (the
    one-minute load average over the cores this process may use), at least 1 and at most 8."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average on this system
        return 1.0
    return min(LOAD_FACTOR_MAX, max(1.0, load / cpu_count()))


def _chunk_lines(data: bytes, start: int, end: int) -> list[str]:
    """Lines start to end (1-based, inclusive) of a file's bytes, as split_lines cuts them.

    Only the bytes up to the chunk's end are split: a result near the top of a 1 MiB file does
    not cost a split of the whole file.
    """
    parts = data.split(b"\n", end)
    text = b"\n".join(parts[start - 1 : end]).decode("utf-8", "replace")
    return split_lines(text)[: end - start + 1] if start <= len(parts) else []


def _size(tree: Beneath, rel: str) -> int:
    """The size of the file at rel, reached without a link (0 when there is none)."""
    try:
        return tree.stat(rel).st_size
    except (OSError, ValueError):
        return 0
