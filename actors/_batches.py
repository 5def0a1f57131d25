"""The indexer's reads: a refresh's files read through the guard and analysed as they arrive (§5).

Reading and analysis overlap. A small refresh is analysed here file by file as each read
completes; a big one goes to the process pool a megabyte at a time (smaller near the end) while the
rest is still being read, the reads kept at most :data:`READ_AHEAD_BYTES` ahead of the pool. Every
read and every batch is priced against the call's deadline: reads stop early enough, and a batch is
waited for only while, what follows them (storing, applying or a first build's finish) still fits
in the bound, as estimated from the slowdown measured as the call runs.

:func:`read_and_analyze` is the whole of it; :func:`read_file` is one file's read beneath the root,
which a search's live reads use too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path

from nodwyn_retrieval.actors._work import (
    MAX_FILE_BYTES,
    Analyzed,
    Contention,
    analyze_blob,
    analyze_read,
    cpu_count,
    read_beneath,
)
from nodwyn_retrieval.actors.messages import FileStat, Progress, TreeFound
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.errors import DeadlineExceeded, WorkerError
from nodwyn_retrieval.guard import Guard, Verdict
from nodwyn_retrieval.guard.beneath import Beneath
from nodwyn_retrieval.retrieval.tree import TreeBuilder

__all__ = [
    "MARGIN",
    "POOL_MIN_BYTES",
    "read_and_analyze",
    "read_file",
]

# The indexer's own logger: what its reads say is said under its name, as before they had a module.
log = logging.getLogger("nodwyn_retrieval.actors.indexer")

# Below this many bytes of changed text a batch is analysed in this process: starting and feeding
# workers costs more than it saves (docs/benchmarks.md, "the pool threshold").
POOL_MIN_BYTES = 2 << 20
BATCH_BYTES = 1 << 20  # one unit of work sent to a worker
# The last batches are smaller: a worker that has taken the last batch is the one still working
# after the others are done, so near the end a batch holds at most a share of what is left to
# send (each worker about two more), down to this size.
MIN_BATCH_BYTES = 128 << 10
# The reads are this far ahead of the pool at most (bytes sent to it and not back yet): enough
# to keep every worker busy, and no more held in memory, and no file read whose analysis the
# bound will not wait for. Where reads stop is decided with what the batches back have measured.
READ_AHEAD_BYTES = 8 << 20
# The share of a refresh's time kept for what follows the reads (storing, merging, snapshot).
POST_SHARE = 0.15
# What follows the reads costs about this much per byte read on a core of its own (merging a
# first build of the big tree, 130 MB, took 13 s on a loaded machine; 27 MB took 1.3 s on a
# quiet one): reads stop while it still fits in the bound. Every estimate of the work after the
# reads is multiplied by the slowdown measured as the call runs (actors/_work.Contention: the
# time this process's threads waited for a CPU against the time they ran), not by the load.
POST_SECONDS_PER_BYTE = 1.25e-7
# A first build (an empty index, built as the batches arrive) leaves less after the reads: the sort
# and merge of the postings' runs (TreeBuilder.finish); the snapshot is waited for only when it
# fits (the indexer's _settle). Until this process has measured its own speed at that work, about
# 1.9e-8 s a byte per unit of slowdown (the git corpus, a first build cut at 2,701 files: 3.0 s
# and 0.8 s at a slowdown of 7.8), taken twice that, MARGIN on top.
BUILD_POST_SECONDS_PER_BYTE = 4e-8
# Once the batches added to a first build hold this many postings, its finish is priced from
# their own cost instead: TreeBuilder.add's CPU time a byte analysed, times FINISH_PER_ADD (the
# finish's CPU a posting over add's, measured at 0.81 on sympy and 0.74 to 1.21 on the git corpus,
# taken larger: the finish's sort grows a little faster than its postings), the slowdown and MARGIN.
MIN_MEASURED_PAIRS = 100_000
FINISH_PER_ADD = 1.25
# And this much whatever was read (storing, the manifest's save), on an idle core.
POST_FIXED_SECONDS = 0.3
# Estimates of the work after the reads are taken this much larger, for what they do not see.
MARGIN = 1.5
READ_CONCURRENCY = 16  # files read at once
# What a worker that reads a batch itself says of a file it did not read.
_NOT_READ = frozenset({"gone", "too_large"})


async def read_and_analyze(
    stats: Sequence[FileStat],
    deadline: float,
    found: list[TreeFound],
    *,
    root: Path,
    guard: Guard,
    pool: ProcessPool | None,
    chunks_dir: str,
    contention: Contention,
    progress: Progress | None = None,
    builder: TreeBuilder | None = None,
    post: float = 0.0,
) -> list[tuple[FileStat, Analyzed, bytes]]:
    """Read the files of stats beneath root through guard, in path order, and analyse each as it
    arrives; the analysed files (each with its bytes) in the order of stats.

    A file not read (refused, a confirm nobody is asked for, gone, too large) is appended to found
    with its reason. A small batch is analysed here file by file as each read completes, a big one
    (:data:`POOL_MIN_BYTES` or more as listed, with a pool) goes to the pool a megabyte at a time
    while the rest is still being read; its workers write the records into ``chunks_dir``. With a
    builder, a batch's postings come back as flat arrays and join it as they arrive (the files'
    records stay in the workers and the store, and their bytes are not kept). ``deadline`` is on
    the event loop's clock: no read and no analysis starts past it, and nothing is awaited past it
    (§5): what is not done by then is simply not in this refresh. ``post`` is what the work after
    the reads is estimated to cost whatever they read (rebuilding the delta as it is): reads stop
    that much earlier. Every estimate is multiplied by the slowdown contention measures.
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
    # under load), as measured while this call runs.
    load = contention.factor()
    per_byte = POST_SECONDS_PER_BYTE if builder is None else BUILD_POST_SECONDS_PER_BYTE
    # (At most the post share of a bound much shorter than §5's, as a test sets.)
    hard -= post + min(POST_FIXED_SECONDS * load, (hard - loop.time()) * POST_SHARE)

    unread = sum(st.size for st in stats)  # bytes of the files not reached yet (as listed)
    use_pool = pool is not None and unread >= POOL_MIN_BYTES
    shares = 2 * (pool.max_workers if pool is not None else 1)
    # A first build's finish runs once the workers are idle: its slowdown is the one measured
    # without the share of the cores they took meanwhile.
    own = shares / 2 / cpu_count() if use_pool and builder is not None else 0.0
    measured = [load, loop.time()]

    def slowdown() -> float:
        """The slowdown measured since the call began, looked at every quarter second."""
        now = loop.time()
        if now - measured[1] >= 0.25:
            measured[:] = [contention.factor(), now]
        return measured[0]

    def post_per_byte() -> float:
        """What the work after the reads is estimated to cost a byte read, now."""
        rate = per_byte
        if builder is not None and builder.n_pairs >= MIN_MEASURED_PAIRS and analysed > 0:
            rate = FINISH_PER_ADD * builder.cpu / analysed  # measured here, on this machine
        return rate * max(1.0, slowdown() - own) * MARGIN

    def may_start() -> bool:
        now = loop.time()
        return now < deadline and now + read_bytes * post_per_byte() < hard

    done: dict[int, tuple[FileStat, Analyzed, bytes]] = {}
    batch: list[tuple[int, FileStat]] = []
    batch_bytes = 0
    pool_tasks: list[asyncio.Task[None]] = []
    queued = 0  # bytes in the batch being made, or sent to the pool and not back
    back = asyncio.Event()  # set as each batch comes back

    async def analyse_batch(items: list[tuple[int, FileStat]], until: float) -> None:
        try:
            await analyse_sent(items, until)
        finally:
            nonlocal queued
            queued -= sum(st.size for _, st in items)
            back.set()

    async def analyse_sent(items: list[tuple[int, FileStat]], until: float) -> None:
        if pool is None:  # pragma: no cover - batches are made only when there is a pool
            return
        paths = [st.path for _, st in items]
        # The worker reads the files itself, beneath the directory this call holds open: 131 MB
        # of a big tree's text are not read here a thread hop a file, nor pickled through pipes.
        try:
            got = await pool.run(
                analyze_read, paths, ref, chunks_dir, builder is not None, deadline=until
            )
        except DeadlineExceeded:
            return  # not analysed in time: not read, for this refresh
        except WorkerError as e:
            log.warning("a worker failed on a batch (%s); analysing it here", e)
            await analyse_here(items)
            return
        if builder is not None and got.pairs is not None:
            builder.add(
                [(i, st.path, a.key) for (i, st), a in zip(items, got.analyzed, strict=True)
                 if a.packed],
                got.pairs,
            )  # fmt: skip
        for n, ((i, st), a) in enumerate(zip(items, got.analyzed, strict=True)):
            if a.skip in _NOT_READ:
                found.append(TreeFound(st, None, a.skip))
                if progress is not None:
                    progress.advance(0)
                continue
            # A file whose postings are in the builder needs its bytes no more: the build
            # does not keep the whole tree's text until the reads end.
            settle(i, st, a, got.kept.get(n, b""), got.sizes[n])

    async def analyse_here(items: list[tuple[int, FileStat]]) -> None:
        """A batch its worker could not do, read and analysed in this process."""
        for i, st in items:
            data = await read_file(tree, st.path)
            if data is None or len(data) > MAX_FILE_BYTES:
                found.append(TreeFound(st, None, "gone" if data is None else "too_large"))
                if progress is not None:
                    progress.advance(0)
                continue
            settle(i, st, analyze_blob(st.path, data, chunks_dir), data, len(data))

    def settle(i: int, st: FileStat, a: Analyzed, data: bytes, size: int) -> None:
        nonlocal analysed
        done[i] = (st, a, data)
        analysed += size
        if progress is not None:
            progress.advance(size)

    def flush() -> None:
        nonlocal batch, batch_bytes
        if batch:
            batch.sort(key=lambda item: item[0])  # in path order: see TreeBuilder.add
            # The call waits for this batch only while those before it fit in what follows
            # the reads (below): past that its worker stops, between two files, rather than
            # take a core from the work after the reads.
            until = min(deadline, hard - (analysed + queued - batch_bytes) * post_per_byte())
            pool_tasks.append(asyncio.create_task(analyse_batch(batch, until)))
            batch, batch_bytes = [], 0

    reading: set[asyncio.Task[None]] = set()

    async def one(i: int, st: FileStat) -> None:
        nonlocal batch_bytes, read_bytes, unread, queued
        unread -= st.size
        decision = await guard.check_read(st.path, st.size)
        if not decision.allowed:
            skip = "unasked" if decision.verdict == Verdict.CONFIRM else "refused"
            found.append(TreeFound(st, None, skip))
            if progress is not None:
                progress.advance(0)
            return
        if use_pool:
            # Read by the worker the batch goes to (analyze_read), as listed until then.
            read_bytes += st.size
            batch.append((i, st))
            batch_bytes += st.size
            queued += st.size
            if batch_bytes >= min(BATCH_BYTES, max(MIN_BATCH_BYTES, unread // shares)):
                flush()
            return
        # A read in flight is not cancelled at the deadline (it takes milliseconds):
        # cancelling an open in a worker thread would leave its file open.
        me = asyncio.current_task()
        if me is not None:
            reading.add(me)
        try:
            data = await read_file(tree, st.path)
        finally:
            if me is not None:
                reading.discard(me)
        if data is not None:
            read_bytes += len(data)
        if data is None or len(data) > MAX_FILE_BYTES:
            found.append(TreeFound(st, None, "gone" if data is None else "too_large"))
            if progress is not None:
                progress.advance(0)
        elif loop.time() < deadline:
            settle(i, st, analyze_blob(st.path, data, chunks_dir), data, len(data))

    try:
        # One descriptor of the root for the whole build: every read is resolved beneath it.
        tree = await asyncio.to_thread(Beneath, root)
        ref = tree.ref()
    except OSError as e:
        log.info("cannot open the root %s: %s", root, e.strerror)
        found.extend(TreeFound(st, None, "gone") for st in stats)
        return []
    # A few readers take the files in turn (not a task a file: a tree of 20,000 files to read
    # would make 20,000 tasks to start and, at the deadline, to cancel, seconds of a loaded
    # core); each looks at the clock before it starts a file.
    todo = iter(enumerate(stats))

    async def reader() -> None:
        for i, st in todo:
            while queued > READ_AHEAD_BYTES and loop.time() < deadline:
                back.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(back.wait(), deadline - loop.time())
            if not may_start():
                return
            await one(i, st)

    readers = [asyncio.create_task(reader()) for _ in range(min(READ_CONCURRENCY, len(stats)))]
    try:
        if readers:
            await asyncio.wait(readers, timeout=max(0.0, deadline - loop.time()))
        for t in readers:
            if t not in reading:
                t.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        flush()
        log.debug("reads: %d bytes, %.2f s before the deadline; %.3g s a byte after them "
                  "(slowdown %.2f)", read_bytes, hard - loop.time(), post_per_byte(),
                  slowdown())  # fmt: skip
        # Wait for the pool while what it returns can still be stored and merged in time:
        # each batch analysed makes the work after the reads longer.
        pending: set[asyncio.Task[None]] = set(pool_tasks)
        while pending:
            left = min(deadline, hard - analysed * post_per_byte()) - loop.time()
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


async def read_file(tree: Beneath, rel: str) -> bytes | None:
    """The file's bytes (at most 1 MiB + 1), or None when it is gone or not a regular file:
    :func:`~actors._work.read_beneath` in a thread."""
    return await asyncio.to_thread(read_beneath, tree, rel)
