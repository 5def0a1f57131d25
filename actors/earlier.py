"""Earlier tasks: the project's other logs, searched as one collection when the person allows it
(ADR 0050 §9, amended by ADR 51).

The project's tasks are the logs in its ``tasks/`` directory (``<task-id>.jsonl`` beside
``<task-id>.meta.json``): archived ones included and marked, deleted ones gone with their logs,
never the current task (the engine's own log) and never another project's, whose tasks live in
another directory. Each log's ``.mem`` is checked against its log and rebuilt or extended when
off (store.mem.LogView); the events of all of them are ranked as one collection
(retrieval.bm25.search_all: a word weighs by how many events of all the tasks hold it), the newest
task first so that a tie goes to it. A search decodes the postings of its own words only and keeps
nothing after: no index stays in this process between searches.

The settled tasks' ``.mem`` files are joined in one file of the directory (store.mem_join:
``earlier.join``), which holds every task's words once: a later search finds each of its words
and reads its postings once for all of them, and reads nothing of the tasks' own files. A task is
read from the join only while its log's ``stat`` shows it unchanged by its ``.mem``'s own rule
and holds nothing after it; any other (changed, grown, cut, new) is read through its own view, and
a join that does not read is removed and written again. The join is written after a search's
answer, in a thread (the next search, and the actor's stop, wait for it), when a task it does not
hold is settled or one it holds is gone with its log; it takes their ``.mem`` files in.

The switch (§9): the engine reads ``earlier_tasks`` from ``workspaces.toml`` at every call and
passes it as ``allowed``. Off, a search and a recall with a task are refused with how a person turns
it on, so the model can ask. A person's own ``memory search`` and ``memory recall`` (``person``)
work whatever the switch: it decides what the model reads (ADR 51's amendment).

The first search of a project writes a ``.mem`` for each log. When the logs to fold hold more than
:data:`POOL_MIN_BYTES`, worker processes fold the biggest (each writes its log's ``.mem``) while
this actor folds the smallest, so the processors all work from the start; below that, starting a
worker would cost more than it saves, and the logs are folded here one after another, yielding to
the event loop between logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodwyn_retrieval.actors.conversation import (
    Damaged,
    Source,
    rank_sources,
    rebuilt_event,
    recall_event,
    with_views,
)
from nodwyn_retrieval.actors.messages import SearchOutput, ToolOutput
from nodwyn_retrieval.bus import Actor, ProcessPool
from nodwyn_retrieval.errors import BadInput, Disabled, FormatError, NotFound, RetrievalError
from nodwyn_retrieval.retrieval.event_render import hit_json, render_hits
from nodwyn_retrieval.retrieval.render import plural
from nodwyn_retrieval.store import mem_log
from nodwyn_retrieval.store.atomic import file_lock, store_error, write_atomic
from nodwyn_retrieval.store.config import Config
from nodwyn_retrieval.store.log import LOG_SUFFIX, TaskMeta, log_path, meta_path, task_meta
from nodwyn_retrieval.store.mem import (
    LOCK_NAME,
    LOCK_SECONDS,
    LogView,
    MemIndex,
    mem_path,
    remove_locked,
)
from nodwyn_retrieval.store.mem_join import (
    Join,
    JoinDamaged,
    JoinedMem,
    encode_join,
    join_path,
)
from nodwyn_retrieval.store.transcripts import NODWYN, Reader, plain_dir, sessions_of

__all__ = [
    "DISABLED",
    "POOL_MIN_BYTES",
    "EarlierActor",
    "EarlierRecall",
    "EarlierSearch",
    "Task",
    "fold_log",
]

log = logging.getLogger("nodwyn_retrieval.actors.earlier")

_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
"""A task id as store.log names them."""

DISABLED = (
    "searching earlier tasks is off for this project; "
    "a person turns it on with `nodwyn-retrieval earlier on`"
)
"""§9: off, the scope says so and where a person turns it on."""

POOL_MIN_BYTES = 8 << 20
"""Log bytes to fold past which worker processes fold some of them. A worker takes most of a second
to start (it imports what folding needs) and folding runs at about 8 MB/s a core here
(bench/memory_bench.py): below this, this actor folds everything before a worker would have
folded anything."""


@dataclass(frozen=True, slots=True)
class EarlierSearch:
    """index-search with scope "earlier" (§9), or a person's ``memory search``."""

    query: str
    """The query as given (the engine has checked it is not empty)."""
    limit: int
    """How many results, 1 to 20 (checked by the engine)."""
    allowed: bool
    """Whether the person allows searching earlier tasks for this project, read at this call."""
    person: bool = False
    """A person's own search (``memory search``): the switch does not apply."""


@dataclass(frozen=True, slots=True)
class EarlierRecall:
    """recall with a task (§1, §9), or a person's ``memory recall``."""

    task: str
    """The task's id, as a search's result names it."""
    seq: int
    """The event's seq in that task's log."""
    start: int | None = None
    """The first line to return, 1-based; None for the whole event."""
    count: int | None = None
    """How many lines from start; None for all that fit the result cap."""
    allowed: bool = False
    """Whether the person allows earlier tasks for this project, read at this call."""
    person: bool = False
    """A person's own recall (``memory recall``): the switch does not apply."""


@dataclass(slots=True)
class Task:
    """One of the project's tasks, as a search orders and labels its results."""

    id: str
    """The task's id."""
    log: Path
    """Its log."""
    st: os.stat_result
    """Its log's ``stat`` when listed."""
    has_mem: bool = True
    """Whether its ``.mem`` was there when listed."""
    transcript: bool = False
    """An agent's transcript (store.transcripts), not a log of the tasks directory."""
    metas: _Metas | None = None
    """The actor's metas read at earlier searches, which this one's is taken from if unchanged."""
    _meta: TaskMeta | None = None

    @property
    def mtime_ns(self) -> int:
        """When its log last changed: the newer task comes first, and wins a tie (§9)."""
        return self.st.st_mtime_ns

    @property
    def size(self) -> int:
        return self.st.st_size

    @property
    def meta(self) -> TaskMeta:
        """Its ``.meta.json`` (title, created, archived), read when a result needs it."""
        if self._meta is None:
            got = self.metas.get(self.log, self.mtime_ns) if self.metas else task_meta(self.log)
            self._meta = got
        return self._meta

    @property
    def date(self) -> str:
        return self.meta.created[:10]

    def labels(self) -> tuple[str, str, bool]:
        """Its date, title and whether it is archived, as its results show them."""
        return self.date, self.meta.title, self.meta.archived


class _Metas:
    """The tasks' ``.meta.json`` as earlier searches read them, each read again only when its
    file's stat (inode, size, change times) or its log's time (``created``'s fallback) changed.
    A meta file changed within :data:`store.mem_log.RACY_NS` of now is not kept: a write in the same
    clock tick as the read could leave the same stat (the ``.mem`` files' rule)."""

    def __init__(self) -> None:
        self._got: dict[Path, tuple[str, tuple[int, ...], TaskMeta]] = {}

    def get(self, log: Path, log_mtime_ns: int) -> TaskMeta:
        """The meta of the task whose log is ``log`` (task_meta's, never an exception)."""
        had = self._got.get(log)
        where = had[0] if had is not None else os.fspath(meta_path(log))
        try:
            st = os.stat(where)
        except FileNotFoundError:
            key: tuple[int, ...] = (-1, log_mtime_ns)
        except OSError:
            return task_meta(log)  # task_meta says what is wrong with it
        else:
            if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < mem_log.RACY_NS:
                self._got.pop(log, None)
                return task_meta(log)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, log_mtime_ns)
        if had is not None and had[1] == key:
            return had[2]
        meta = task_meta(log)
        self._got[log] = (where, key, meta)
        return meta

    def keep_only(self, logs: set[Path]) -> None:
        """Forget the metas of tasks no longer listed."""
        if self._got.keys() - logs:
            self._got = {k: v for k, v in self._got.items() if k in logs}


def fold_log(path: str) -> int:
    """Bring one log's ``.mem`` up to date (in a worker process); the log bytes it covers."""
    with LogView.open(Path(path)) as view:
        return view.mem.covered if view.mem is not None else 0


class EarlierActor(Actor):
    """index-search "earlier" and recall with a task over the project's other tasks (§9)."""

    def _report(self, path: Path, why: str) -> None:
        if self.record is not None:
            self.record(rebuilt_event("earlier", path, why))

    def __init__(
        self,
        tasks_dir: Path,
        project_key: str,
        config_dir: Path,
        config: Config,
        *,
        current: Path | None = None,
        record: Callable[[dict[str, object]], None] | None = None,
    ) -> None:
        self.record = record
        self.tasks_dir = Path(tasks_dir)
        self.project_key = project_key
        self.config_dir = Path(config_dir)
        self.config = config
        self.current = Path(current) if current is not None else None
        self._metas = _Metas()
        self._logs: dict[str, Path] = {}  # each listed log's path, made once
        self._pool: ProcessPool | None = None
        self._current_id: tuple[int, int] | None = None
        self._joining: asyncio.Task[None] | None = None  # a join written after an answer
        self._find_current()

    def _find_current(self) -> None:
        """The current log's identity; looked for again while it does not exist yet."""
        if self.current is not None and self._current_id is None:
            try:
                st = self.current.stat()
                self._current_id = (st.st_dev, st.st_ino)
            except OSError:
                self._current_id = None

    def __repr__(self) -> str:
        return f"<EarlierActor {self.project_key} in {self.tasks_dir}>"

    async def on_stop(self) -> None:
        await self._joined()
        await self._close_pool()

    async def _joined(self) -> None:
        """Wait for a join being written after an answer (it logs its own failure)."""
        if self._joining is not None:
            joining, self._joining = self._joining, None
            with contextlib.suppress(Exception):
                await joining

    def on_failure(self, exc: BaseException) -> None:
        # A failing tell has no state to undo; the pool, if any, is closed at the stop.
        log.warning("earlier tasks: %s", exc)

    async def _close_pool(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def handle(self, message: object) -> object:
        if isinstance(message, EarlierSearch):
            if not (message.allowed or message.person):
                raise Disabled(DISABLED)
            return await self.search(message.query, message.limit, person=message.person)
        if isinstance(message, EarlierRecall):
            if not (message.allowed or message.person):
                raise Disabled(DISABLED)
            return self.recall(message.task, message.seq, message.start, message.count)
        raise BadInput(f"earlier tasks do not take {type(message).__name__}")

    # -- the tasks ------------------------------------------------------------------------

    def tasks(self, *, person: bool = False) -> list[Task]:
        """The project's tasks, newest first (by their logs' change, then id); the current one
        left out unless a person asks. A ``.mem`` whose log is gone is removed: it went with its
        task."""
        entries: dict[str, os.DirEntry[str]] = {}
        try:
            with os.scandir(self.tasks_dir) as it:
                for entry in it:
                    entries[entry.name] = entry
        except (FileNotFoundError, NotADirectoryError):
            pass  # no task of ours yet; the agents' sessions may still be there
        except OSError as exc:
            raise store_error("listing", self.tasks_dir, exc) from exc
        self._remove_orphans(list(entries))
        self._find_current()
        out: list[Task] = []
        logs: dict[str, Path] = {}
        for name, entry in entries.items():
            if not name.endswith(LOG_SUFFIX):
                continue
            tid = name[: -len(LOG_SUFFIX)]
            if not _TASK_ID.fullmatch(tid):
                continue
            try:
                st = entry.stat()
            except OSError:
                continue  # deleted while we listed: gone with its log
            if not stat.S_ISREG(st.st_mode):
                continue
            if not person and (st.st_dev, st.st_ino) == self._current_id:
                continue
            path = logs[name] = self._logs.get(name) or Path(entry.path)
            out.append(Task(tid, path, st, has_mem=f"{tid}.mem" in entries, metas=self._metas))
        self._logs = logs
        out.extend(self._transcripts(person))
        out.sort(key=lambda t: (t.mtime_ns, t.id), reverse=True)
        self._metas.keep_only({t.log for t in out})
        return out

    def _transcripts(self, person: bool) -> list[Task]:
        """The agents' other sessions of this project, when the engine lets them in."""
        out: list[Task] = []
        for tid, path in sessions_of(self.project_key):
            try:
                st = path.stat()
            except OSError:
                continue
            if not person and (st.st_dev, st.st_ino) == self._current_id:
                continue
            has_mem = mem_path(path).exists()
            out.append(Task(tid, path, st, has_mem=has_mem, transcript=True, metas=self._metas))
        return out

    def _remove_orphans(self, names: list[str]) -> None:
        logs = {n for n in names if n.endswith(LOG_SUFFIX)}
        orphans = [
            n for n in names if n.endswith(".mem") and n[: -len(".mem")] + LOG_SUFFIX not in logs
        ]
        if not orphans:
            return
        try:
            with file_lock(self.tasks_dir / LOCK_NAME, timeout=LOCK_SECONDS):
                for n in orphans:
                    if not (self.tasks_dir / (n[: -len(".mem")] + LOG_SUFFIX)).exists():
                        (self.tasks_dir / n).unlink(missing_ok=True)
        except (OSError, TimeoutError) as exc:
            log.warning("cannot remove a gone task's .mem: %s", exc)

    async def _fold_in_parallel(self, tasks: list[Task]) -> None:
        """Bring the ``.mem`` files that need it up to date, in worker processes and here at once.

        Worker processes take the biggest logs; while they start (most of a second, to import
        what folding needs) and after, this actor folds the smallest ones itself, yielding to the
        event loop between logs so the workers' results come back; the two meet in the middle.
        Below :data:`POOL_MIN_BYTES`, or on one processor, nothing is done here: the search's views
        fold what they find.
        """
        # A log without a .mem is folded whole; one that grew since its .mem keeps it and folds
        # only what it grew by, in its view.
        # A transcript is folded by its view here: a worker does not know where its .mem lives.
        work = [t for t in tasks if not t.has_mem and not t.transcript]
        cpus = os.cpu_count() or 1
        if sum(t.size for t in work) < POOL_MIN_BYTES or cpus < 2:
            return
        work.sort(key=lambda t: t.size)
        queue = deque(work)
        if self._pool is None:
            self._pool = ProcessPool(max_workers=max(1, cpus - 1))
        pool = self._pool

        async def in_a_worker() -> None:
            while queue:
                t = queue.pop()  # the biggest left
                try:
                    await pool.run(fold_log, str(t.log))
                except RetrievalError as exc:
                    # The search's view folds it instead, and says what is wrong if it must.
                    log.warning("folding %s in a worker failed: %s", t.log, exc)

        runners = [asyncio.create_task(in_a_worker()) for _ in range(pool.max_workers)]
        try:
            await asyncio.sleep(0)  # let each runner hand its first log to the pool
            while queue:
                t = queue.popleft()  # the smallest left
                try:
                    fold_log(str(t.log))
                except RetrievalError as exc:
                    log.warning("folding %s failed: %s", t.log, exc)  # the view says, if it must
                await asyncio.sleep(0)
            await asyncio.gather(*runners)
        finally:
            for r in runners:
                r.cancel()
            await asyncio.gather(*runners, return_exceptions=True)

    # -- search ---------------------------------------------------------------------------

    async def search(self, query: str, limit: int, *, person: bool = False) -> SearchOutput:
        """Rank the events of all the project's other tasks as one collection (§9)."""
        await self._joined()  # a join of the last search's is whole before this one reads
        tasks = self.tasks(person=person)
        # The tasks directory's logs are this project's: their reader is known once for all, and
        # their words are joined (store.mem_join).
        plain = NODWYN if plain_dir(self.tasks_dir) else None
        join: Join | None = None
        if plain is not None:
            try:
                join = Join.open(self.tasks_dir)
            except JoinDamaged as exc:
                log.info("%s", exc)
        if join is not None:
            for t in tasks:
                e = join.entries.get(t.id)
                if e is not None and not t.transcript and e.check.covered <= t.size:
                    t.has_mem = True  # its view finds it in the join (or grown past it)
        # A search that folds a log (here or in a worker) leaves the join to the next one.
        folds = any(not t.has_mem for t in tasks)
        try:
            await self._fold_in_parallel(tasks)
        except BaseException:
            if join is not None:
                join.close()
            raise
        try:
            try:
                out, rejoin = await self._search(
                    tasks, plain, join, query, limit=limit, person=person
                )
            except _JoinFailed as exc:
                log.info("%s; searching without it", exc)
                if join is not None:
                    join.close()
                join = None
                remove_locked(join_path(self.tasks_dir))
                out, rejoin = await self._search(
                    tasks, plain, None, query, limit=limit, person=person
                )
        finally:
            if join is not None:
                join.close()
        if rejoin is not None and not folds:
            # After the answer: the search that finds the join behind is not made longer by it.
            self._joining = asyncio.create_task(asyncio.to_thread(self._write_join, rejoin))
        return out

    async def _search(
        self,
        tasks: list[Task],
        plain: Reader | None,
        join: Join | None,
        query: str,
        *,
        limit: int,
        person: bool,
    ) -> tuple[SearchOutput, list[Task] | None]:
        """The search over views opened now (from the join where it serves a task), and the
        tasks to join after it (None: the join stays as it is)."""
        views: list[LogView] = []
        kept: list[Task] = []
        joined: list[bool] = []
        try:
            for t in tasks:
                view = self._joined_view(join, t) if join is not None else None
                if view is None:
                    try:
                        view = LogView.open(t.log, st=t.st, reader=None if t.transcript else plain)
                    except NotFound:
                        continue  # deleted while we listed: gone with its log
                    if view.wrote or view.tail:
                        await asyncio.sleep(0)  # a log was folded: let other actors run
                joined.append(view.mem is not None and isinstance(view.mem, JoinedMem))
                views.append(view)
                kept.append(t)
        except BaseException:
            for v in views:
                v.close()
            raise
        rejoin = self._to_join(kept, views, joined, join) if plain is not None else None
        return self._rank(kept, views, query, limit, person), rejoin

    def _joined_view(self, join: Join, t: Task) -> LogView | None:
        """The task's view with its words from the join, when the join holds it as its log and
        ``.mem`` now are; None otherwise (its own view then reads it)."""
        e = join.entries.get(t.id)
        if e is None or t.transcript or not e.serves(t.st):
            return None
        return LogView(t.log, mem=JoinedMem(join, e), reader=NODWYN)

    def _to_join(
        self, tasks: list[Task], views: list[LogView], joined: list[bool], join: Join | None
    ) -> list[Task] | None:
        """The tasks to join after this search, when the join should be written again: a task
        it does not serve could be joined now (its ``.mem`` whole, its log unchanged by the
        ``.mem``'s rule), or a task it holds is gone with its log (its words and cards go with
        it). None when it stays as it is, and when this search wrote a ``.mem`` (the next one
        joins it); an empty list when it should go."""
        if any(v.wrote for v in views):
            return None
        take: list[Task] = []
        new = 0
        for t, v, j in zip(tasks, views, joined, strict=True):
            if j:
                take.append(t)
            elif not t.transcript and _joinable(v, t):
                take.append(t)
                new += 1
        listed = {t.id for t in tasks}
        # A task not listed may be the current one (a person's search lists it): gone only when
        # its log is.
        gone = join is not None and any(
            not (self.tasks_dir / f"{tid}{LOG_SUFFIX}").exists()
            for tid in join.entries.keys() - listed
        )
        if new or gone or (join is None and take):
            return take
        return None

    def _write_join(self, tasks: list[Task]) -> None:
        """Join the tasks (store.mem_join) under the directory's lock: each task's ``.mem`` read
        again there, or taken from the join as it holds it when the task has no ``.mem`` file
        (a ``.mem`` that no longer reads or is not whole is left out); the ``.mem`` files joined
        are then removed, a view finding them in the join. A join that cannot be written
        leaves them where they are."""
        path = join_path(self.tasks_dir)
        try:
            with file_lock(self.tasks_dir / LOCK_NAME, timeout=LOCK_SECONDS):
                try:
                    old = Join.open(self.tasks_dir)
                except JoinDamaged:
                    old = None
                try:
                    parts = [p for t in tasks if (p := _part(self.tasks_dir, t.id, old))]
                    data = encode_join(parts, old) if parts else None
                finally:
                    if old is not None:
                        old.close()
                if data is None:
                    path.unlink(missing_ok=True)
                    return
                write_atomic(path, data, sync=False)
                for tid, loose in parts:
                    if loose is not None:
                        (self.tasks_dir / f"{tid}.mem").unlink(missing_ok=True)
        except (OSError, TimeoutError, RetrievalError) as exc:
            log.warning("cannot write %s: %s", path, exc)

    def _rank(
        self, tasks: list[Task], views: list[LogView], query: str, limit: int, person: bool
    ) -> SearchOutput:
        # with_views takes the views already open, reopens only a log whose .mem turns out
        # damaged, and closes them all.

        def run(vs: list[LogView]) -> SearchOutput:
            sources = [Source(v, t.id, t.labels) for t, v in zip(tasks, vs, strict=True)]
            try:
                hits = rank_sources(sources, query, limit)
            except Damaged as exc:
                if isinstance(exc.cause, JoinDamaged):
                    raise _JoinFailed(str(exc.cause)) from None
                raise
            events = sum(v.n_events for v in vs)
            ranked = sum(v.n_ranked for v in vs)
            whose = "this project's" if person else "this project's earlier"
            text = (
                f"ranked {ranked:,} of the {plural(events, 'event')} in {whose} "
                f"{plural(len(tasks), 'task')}"
            )
            text += "" if hits else "\nno event matches those words"
            header = {"events": events, "ranked": ranked, "tasks": len(tasks), "text": text}
            return SearchOutput(
                scope="earlier",
                query=query,
                text=render_hits(text, hits),
                header=header,
                hits=[hit_json(h) for h in hits],
            )

        return with_views([t.log for t in tasks], run, opened=views, report=self._report)

    # -- recall ---------------------------------------------------------------------------

    def _task_log(self, task: str) -> Path:
        if not isinstance(task, str) or not task:
            raise BadInput(f"task id {task!r} is not a task id")
        if "/" in task or "\\" in task or ".." in task or "\0" in task:
            raise BadInput(f"task id {task!r} is not a task id: it names a path")
        path = log_path(self.tasks_dir, task)
        if not path.is_file():
            for tid, p in sessions_of(self.project_key):
                if tid == task:
                    return p
            raise NotFound(f"task {task} is not a task of this project")
        return path

    def recall(self, task: str, seq: int, start: int | None, count: int | None) -> ToolOutput:
        """One event of one of this project's tasks by its seq (§9)."""
        path = self._task_log(task)

        def run(views: list[LogView]) -> ToolOutput:
            try:
                return recall_event(views[0], seq, start, count, self.config.result_cap, task=task)
            except FormatError as exc:
                raise Damaged(0, exc) from None

        try:
            return with_views([path], run, report=self._report)
        except NotFound as exc:
            if not path.exists():
                raise NotFound(f"task {task} is not a task of this project") from exc
            raise


class _JoinFailed(Exception):
    """The join turned out damaged, or behind a task's ``.mem``, while a search read it."""


def _joinable(view: LogView, t: Task) -> bool:
    """Whether a task's view could be joined as it is: its ``.mem`` covers the whole log, which
    ``stat`` shows unchanged by the ``.mem``'s rule."""
    mem = view.mem
    return (
        mem is not None
        and not isinstance(mem, JoinedMem)
        and not view.tail
        and mem.covered == t.size
        and mem.check.unchanged(t.st)
    )


def _part(tasks_dir: Path, tid: str, old: Join | None) -> tuple[str, bytes | None] | None:
    """A task to join: its ``.mem`` file's bytes when it reads, covers its whole log and the
    log's ``stat`` shows it unchanged by its rule (settled); None as the bytes when it has no
    file and the join ``old`` holds it; None when neither."""
    path = tasks_dir / f"{tid}.mem"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return (tid, None) if old is not None and tid in old.entries else None
    except OSError as exc:
        log.info("not joining %s: %s", path, exc)
        return None
    try:
        mem = MemIndex.from_bytes(data)
    except FormatError as exc:
        log.info("not joining %s: %s", path, exc)
        return None
    try:
        st = os.stat(tasks_dir / f"{tid}{LOG_SUFFIX}")
    except OSError:
        return None  # gone with its log
    return (tid, data) if mem.covered == st.st_size and mem.check.unchanged(st) else None
