"""The Engine an agent loop embeds: one session's retrieval over one working tree.

An agent loop opens one :class:`Engine` per session and working tree::

    engine = await Engine.open(root, log="task.jsonl")   # the loop writes task.jsonl
    out = await engine.index_search("credential binding", scope="repo")
    print(out.text)          # exactly what the model reads (§7)
    await engine.close()

A session log has one writer (docs/log-format.md, "Who writes the log"): the loop that passes
``log=`` writes it and the engine only reads it, keeping its own records in
``<task-id>.records.ndjson`` beside it (or handing them to ``record=``); with ``owns_log=True``
the engine is the writer and the loop appends through :attr:`Engine.log`.

The engine starts the actors (refresher, indexer, conversation, earlier, gc, embedder) on an actor
system, validates every argument at this edge (:mod:`nodwyn_retrieval.tools`), and renders what
they answer. It has no logic of its own beyond putting them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nodwyn_retrieval.actors.conversation import ConversationActor, LogSearch, Recall
from nodwyn_retrieval.actors.earlier import EarlierActor, EarlierRecall, EarlierSearch
from nodwyn_retrieval.actors.embedder import EmbedderActor, EmbedStatus
from nodwyn_retrieval.actors.gc import Collect, GcActor
from nodwyn_retrieval.actors.indexer import IndexerActor
from nodwyn_retrieval.actors.messages import (
    Forget,
    Progress,
    Refresh,
    Refreshed,
    SaveSnapshot,
    SearchOutput,
    SearchTree,
    ToolOutput,
    TreeSearched,
    UpdateOutput,
)
from nodwyn_retrieval.actors.refresher import Limits, RefresherActor
from nodwyn_retrieval.bus import ActorRef, ActorSystem, ProcessPool
from nodwyn_retrieval.engine_records import Records, log_sink
from nodwyn_retrieval.errors import (
    BadInput,
    Disabled,
    EngineClosed,
    GuardRefused,
    NotFound,
    RetrievalError,
    WrongLoop,
)
from nodwyn_retrieval.guard import Decision, Guard, Recorder, default_guard
from nodwyn_retrieval.retrieval.render import RepoResult, plural, render_repo
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.config import Config, earlier_tasks, load_config
from nodwyn_retrieval.store.log import LogWriter, list_tasks, log_path, records_path
from nodwyn_retrieval.store.manifest import list_manifests, load_manifest, manifest_path
from nodwyn_retrieval.store.paths import (
    ProjectDirs,
    config_dir,
    data_dir,
    git_repo,
    project_dirs,
    repo_project_key,
)
from nodwyn_retrieval.tools import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    SCOPES,
    ToolFormat,
    check_limit,
    check_query,
    check_scope,
    only,
    shown_text,
    tool_definitions,
    working_rule,
)

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SCOPES",
    "Engine",
    "SearchOutput",
    "ToolOutput",
    "UpdateOutput",
]

_logger = logging.getLogger("nodwyn_retrieval.entry")

SEARCH_SECONDS = 10.0  # §5: a search refreshes for at most 10 s
UPDATE_SECONDS = 60.0  # §5: an index-update reads for at most 60 s a call


class Engine:
    """One session's retrieval over one working tree: the three tools and the person's commands."""

    def __init__(
        self,
        *,
        root: Path,
        dirs: ProjectDirs,
        key: str,
        config_dir: Path,
        config: Config,
        guard: Guard,
        log: LogWriter | None,
        log_path: Path | None,
        records: Records | None,
        system: ActorSystem,
        pool: ProcessPool,
        refresher: ActorRef,
        indexer: ActorRef,
        conversation: ActorRef | None,
        earlier: ActorRef,
        gc: ActorRef,
        embedder: ActorRef,
    ) -> None:
        self.root = root
        self.dirs = dirs
        self.key = key
        self.config_dir = config_dir
        self.config = config
        self.guard = guard
        self.log = log
        """The session log's writer when the engine owns the log (``owns_log=True``), else None."""
        self.log_path = log_path
        """The session log the conversation scope and recall read, or None."""
        self._records = records
        self.records_path = records.path if records is not None else None
        """The file of the engine's own records beside a log it only reads, or None."""
        self._system = system
        self._pool = pool
        self._refresher = refresher
        self._indexer = indexer
        self._conversation = conversation
        self._earlier = earlier
        self._gc = gc
        self._embedder = embedder
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        """The event loop the engine was opened in: its actors are tasks of it, and it is theirs."""
        self._open_args: dict[str, Any] = {}

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Engine {state} root={str(self.root)!r} project={self.key!r}>"

    # -- opening and closing --------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        root: str | os.PathLike[str],
        *,
        data_dir: str | os.PathLike[str] | None = None,
        config_dir: str | os.PathLike[str] | None = None,
        log: str | os.PathLike[str] | None = None,
        owns_log: bool = False,
        record: Callable[[dict[str, Any]], None] | None = None,
        guard: Guard | None = None,
        checkers: Sequence[Any] = (),
        limits: Limits | None = None,
        workers: int | None = None,
    ) -> Engine:
        """Open a session on the working tree at root (its git top level when it is in one).

        ``log`` is this session's ``.jsonl`` (docs/log-format.md): the conversation scope and
        recall read it. It need not exist yet: until it does, the conversation has no events.

        A log has one writer. By default that is the agent loop: the engine only reads the log,
        and its own records (each ``guard.decision`` and ``index.update``) go to ``record`` when
        given (a dict with its ``kind``; the loop decides where it goes), else to
        ``<task-id>.records.ndjson`` beside the log (:attr:`records_path`). With ``owns_log=True``
        the engine is the writer: it creates the log if needed, appends its records to it (unless
        ``record`` is given), and the loop appends its own events through :attr:`log`. Without
        a log, records go to ``record`` or nowhere.
        """
        _check_open(
            root=root, data_dir=data_dir, config_dir=config_dir, log=log, limits=limits,
            workers=workers,
        )  # fmt: skip
        log_path = Path(log) if log is not None else None
        if owns_log and log_path is None:
            raise BadInput("owns_log=True needs log=: the session log the engine is to write")
        if log_path is not None and log_path.is_dir():
            raise BadInput(f"log {log_path} is a directory: give the path of a .jsonl file")
        if log_path is not None and (log_path.exists() and not log_path.is_file()):
            # A FIFO would block the first read of its tail for ever, a device never ends, and
            # the records file beside it would be made in /dev.
            raise BadInput(f"log {log_path} is not a regular file: give the path of a .jsonl file")
        top, ddir, cdir, key, dirs, config = await asyncio.to_thread(
            _prepare, Path(root), data_dir, config_dir
        )
        writer: LogWriter | None = None
        records: Records | None = None
        sink: Callable[[dict[str, Any]], None] | None = record
        if log_path is not None and owns_log:
            writer = await asyncio.to_thread(LogWriter, log_path)
            if sink is None:
                sink = log_sink(writer)
        elif log_path is not None and sink is None:
            records = Records(records_path(log_path), log_path)
            sink = records
        recorder: Recorder | None = None
        if sink is not None:
            to_log = sink

            def recorder(decision: Decision) -> None:
                to_log(decision.to_event())

        g = guard or default_guard(
            top,
            data_dir=ddir,
            config_dir=cdir,
            deny=config.deny,
            checkers=checkers,
            recorder=recorder,
        )
        system = ActorSystem()
        # Workers import what they run once, as they start (bus/pool.py); each has a batch
        # waiting in its pipe while it runs one, so it never waits for this process between two.
        pool = ProcessPool(
            max_workers=workers, preload=["numpy", "nodwyn_retrieval.actors._work"], ahead=1
        )
        mpath = manifest_path(dirs.trees, top)
        snap = mpath.with_suffix(".snap")
        indexer = system.spawn(
            IndexerActor(top, ChunkStore(dirs.chunks), g, pool, snap), name="indexer",
            restart="restart",
        )  # fmt: skip
        refresher = system.spawn(
            RefresherActor(top, mpath, indexer, g, record=sink, limits=limits),
            name="refresher",
            restart="restart",
        )
        conversation = (
            system.spawn(
                ConversationActor(log_path, config, record=sink),
                name="conversation",
                restart="restart",
            )
            if log_path is not None
            else None
        )
        earlier = system.spawn(
            EarlierActor(dirs.tasks, key, cdir, config, current=log_path, record=sink),
            name="earlier",
            restart="restart",
        )
        gc = system.spawn(GcActor(dirs), name="gc", restart="restart")
        embedder = system.spawn(EmbedderActor(config), name="embedder", restart="stop")
        await system.started()
        engine = cls(
            root=top, dirs=dirs, key=key, config_dir=cdir, config=config, guard=g, log=writer,
            log_path=log_path, records=records, system=system, pool=pool, refresher=refresher,
            indexer=indexer, conversation=conversation, earlier=earlier, gc=gc, embedder=embedder,
        )  # fmt: skip
        engine._open_args = {
            "data_dir": ddir, "config_dir": cdir, "log": log, "record": record,
            "owns_log": owns_log, "guard": guard,
            "checkers": checkers, "limits": limits, "workers": workers,
        }  # fmt: skip
        return engine

    async def close(self) -> None:
        """Stop the actors and the worker processes; idempotent.

        A close cut short (cancelled, or by a timeout) goes on to its end all the same, and the
        next close waits for it. Called after the event loop the engine was opened in has ended
        (its actors ended with it), it lets the worker processes go without that loop."""
        if asyncio.get_running_loop() is not self._loop:
            if not self._loop.is_closed():
                raise self._elsewhere()
            self._closed = True
            self._pool.abandon()
            self._close_files()
            return
        self._closed = True
        if self._closing is None:
            self._closing = self._loop.create_task(self._shut_down(), name="engine close")
        await asyncio.shield(self._closing)

    async def _shut_down(self) -> None:
        try:
            await self._system.stop()
        finally:
            try:
                await self._pool.close()
            finally:
                self._close_files()

    def _close_files(self) -> None:
        if self.log is not None:
            self.log.close()
        if self._records is not None:
            self._records.close()

    def _usable(self) -> None:
        """Refuse a call the engine could never answer: one after its close, or from an event
        loop other than the one it was opened in (whose tasks its actors are)."""
        if self._closed:
            raise EngineClosed("this engine is closed: open another with Engine.open")
        if asyncio.get_running_loop() is not self._loop:
            raise self._elsewhere()

    def _elsewhere(self) -> RetrievalError:
        """The error of a call from another event loop than the engine's."""
        if self._loop.is_closed():
            return EngineClosed(
                "the event loop this engine was opened in has ended, and its actors with it: "
                "open another with Engine.open in the loop that uses it"
            )
        return WrongLoop(
            "this engine was opened in another event loop, which has not ended: call it in "
            "that loop (from another thread, through asyncio.run_coroutine_threadsafe)"
        )

    async def warm(self) -> None:
        """Load the repository's index and bring it up to date as a search's refresh does (within
        its bound), so that the first search finds it loaded: for a caller that opens the engine
        before its first search is asked (the MCP server, while its client connects)."""
        self._usable()
        await self._refresh(SEARCH_SECONDS)

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the tools ------------------------------------------------------------------------

    def _check_path(self, path: object) -> str | None:
        """A path relative to the root, checked to exist and to stay inside it."""
        if path is None:
            return None
        if not isinstance(path, str) or not path.strip():
            raise BadInput(f"path must be a non-empty string, got {path!r}")
        shown = shown_text(path)
        if "\0" in path:
            raise BadInput(f"path {shown} holds a NUL byte, which no file name can")
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            raise BadInput(f"path {shown} is not a file name: it holds a lone surrogate") from None
        p = Path(path)
        full = p if p.is_absolute() else self.root / p
        try:
            real = Path(os.path.realpath(full))
            root = Path(os.path.realpath(self.root))
            if real != root and root not in real.parents:
                raise BadInput(f"path {shown} is outside the repository")
            exists = real.exists()
        except OSError as e:  # a name too long, a loop of links: the path cannot be looked up
            raise BadInput(f"path {shown} cannot be looked up: {e.strerror or e}") from None
        if not exists:
            raise NotFound(f"path {shown} does not exist")
        rel = real.relative_to(root).as_posix()
        return "" if rel == "." else rel

    async def index_search(
        self, query: str, scope: str, limit: int = DEFAULT_LIMIT, path: str | None = None
    ) -> SearchOutput:
        """index-search (§1): rank what matches plain words or names in one scope."""
        self._usable()
        query = check_query(query)
        scope = check_scope(scope)
        limit = check_limit(limit)
        self._mark()
        if scope == "repo":
            rel = self._check_path(path)
            return await self._search_repo(query, limit, rel)
        if path is not None:
            raise BadInput(f"path narrows a repo search only, not {scope}")
        if scope == "conversation":
            if self._conversation is None or self.log_path is None:
                raise BadInput(NO_CONVERSATION)
            if not self.log_path.exists():
                return _no_events_yet(query)
            return await self._conversation.ask_as(LogSearch(query, limit), SearchOutput)
        allowed = earlier_tasks(self.config_dir, self.key)
        return await self._earlier.ask_as(EarlierSearch(query, limit, allowed), SearchOutput)

    async def _refresh(
        self,
        seconds: float,
        directory: str | None = None,
        update: bool = False,
        progress: Progress | None = None,
        query: str | None = None,
    ) -> Refreshed:
        deadline = asyncio.get_running_loop().time() + seconds
        return await self._refresher.ask_as(
            Refresh(deadline, directory, update, progress=progress, query=query), Refreshed
        )

    async def _search_repo(self, query: str, limit: int, path: str | None) -> SearchOutput:
        r = await self._refresh(SEARCH_SECONDS, query=query)
        found = await self._indexer.ask_as(SearchTree(query, limit, path or None), TreeSearched)
        if found.refused is not None:
            await self._refresher.ask(Forget(found.refused))
            raise GuardRefused(
                f"the guard refused reading {found.refused}: {found.refusal}; "
                "it is dropped from the index"
            )
        if r.read or r.removed:
            await self._gc.tell(Collect(force=False))
        results = [x for x in found.results if isinstance(x, RepoResult)]
        head = _repo_header(found.matched, found.chunks, found.files, r)
        if not results:
            where = f" under {path}" if path else ""
            head += f"\nno chunk{where} matches {query!r}"
        header = {
            "matched": found.matched,
            "chunks": found.chunks,
            "files": found.files,
            "partial": r.partial,
            "not_read": r.not_read,
            "not_seen": r.not_seen,
            "text": head.split("\n", 1)[0],
        }
        hits = [
            {
                "path": x.path,
                "start": x.start,
                "end": x.end,
                "first_line": x.first_line,
                "lines": [{"n": n, "text": t} for n, t in x.lines],
                "score": round(x.score, 4),
                "provenance": "external:file",
            }
            for x in results
        ]
        return SearchOutput("repo", query, render_repo(head, results), header, hits)

    async def index_update(
        self, path: str | None = None, *, progress: Progress | None = None
    ) -> UpdateOutput:
        """index-update (§1, §5): bring the index up to date for at most 60 s; resumable.

        ``progress``, when given, is filled in as the call goes (files and bytes to read and
        read so far), for a display that reads it from another task."""
        self._usable()
        rel = self._check_path(path)
        directory = rel if rel and (self.root / rel).is_dir() else None
        self._mark()
        start = asyncio.get_running_loop().time()
        r = await self._refresh(UPDATE_SECONDS, directory, update=True, progress=progress)
        # The snapshot's write error, when the merge it waits for is written and fails: said
        # beside the manifest's (the index still answers from memory; the next session rebuilds
        # the snapshot from the stored records).
        snapshot_error = await self._indexer.ask(SaveSnapshot(start + UPDATE_SECONDS))
        await self._gc.tell(Collect(force=False))
        skipped = {
            k: r.skipped.get(k, 0) for k in ("binary", "too_large", "not_utf8", "over_limit")
        }
        if r.skipped.get("denied"):
            skipped["denied"] = r.skipped["denied"]
        summary = {
            "files": r.files,
            "read": r.read,
            "unchanged": r.unchanged,
            "removed": r.removed,
            "skipped": skipped,
            "refused": list(r.refused),
            "left_out_unasked": list(r.left_out_unasked),
            "partial": r.partial,
            "not_read": r.not_read,
            "not_seen": r.not_seen,
            "seconds": round(r.seconds, 3),
            "bytes": r.bytes,
            "saved": r.saved,
            "store_error": r.store_error or snapshot_error,
        }
        text = _update_text(r, rel)
        if snapshot_error and not r.store_error:
            text += f"\nthe index's snapshot could not be written: {snapshot_error}"
        return UpdateOutput(text, summary)

    async def recall(
        self, seq: int, start: int | None = None, count: int | None = None, task: str | None = None
    ) -> ToolOutput:
        """recall (§1, §8): one event of the log by its seq, whole or as lines."""
        self._usable()
        _check_recall(seq, start, count)
        if task is not None:
            log_path(self.dirs.tasks, task)  # a malformed id is bad input, whatever the switch
            allowed = earlier_tasks(self.config_dir, self.key)
            return await self._earlier.ask_as(
                EarlierRecall(task, seq, start, count, allowed), ToolOutput
            )
        if self._conversation is None or self.log_path is None:
            raise BadInput(NO_RECALL)
        self._mark()
        if not self.log_path.exists():
            raise NotFound(f"no event with seq {seq} in this log (it has no events yet)")
        return await self._conversation.ask_as(Recall(seq, start, count), ToolOutput)

    async def memory_search(self, query: str, limit: int = DEFAULT_LIMIT) -> SearchOutput:
        """A person's search of all the project's tasks, whatever the switch (ADR 51 amendment)."""
        self._usable()
        query = check_query(query)
        limit = check_limit(limit)
        return await self._earlier.ask_as(
            EarlierSearch(query, limit, True, person=True), SearchOutput
        )

    async def memory_recall(
        self, task: str, seq: int, start: int | None = None, count: int | None = None
    ) -> ToolOutput:
        """A person's recall of any of the project's tasks, whatever the switch."""
        self._usable()
        _check_recall(seq, start, count)
        return await self._earlier.ask_as(
            EarlierRecall(task, seq, start, count, True, person=True), ToolOutput
        )

    # -- status and forget (§12) ----------------------------------------------------------

    async def index_status(self) -> dict[str, Any]:
        """The project's index: its trees, their files and size, and the switches."""
        self._usable()
        trees = []
        for mp in list_manifests(self.dirs.trees):
            with contextlib.suppress(RetrievalError, OSError):
                m = load_manifest(mp)
                if m is None:
                    continue
                indexed = [e for e in m.entries.values() if not e.key.startswith("!")]
                trees.append(
                    {
                        "root": m.root,
                        "files": len(indexed),
                        "bytes": sum(e.size for e in indexed),
                        "changed": _iso(m.updated) if m.updated else None,
                    }
                )
        emb = await self._embedder.ask_as(EmbedStatus(), EmbedStatus)
        return {
            "project": self.key,
            "index_dir": str(self.dirs.index),
            "tasks_dir": str(self.dirs.tasks),
            "index_bytes": _du(self.dirs.index),
            "trees": trees,
            "earlier_tasks": earlier_tasks(self.config_dir, self.key),
            "embeddings": emb.text,
        }

    async def index_forget(self) -> dict[str, Any]:
        """Delete the project's index (never the task logs); the session goes on with a new one."""
        self._usable()
        size = await asyncio.to_thread(_du, self.dirs.index)
        await self.close()
        await asyncio.to_thread(shutil.rmtree, self.dirs.index, True)
        fresh = await Engine.open(self.root, **self._open_args)
        self.__dict__.update(fresh.__dict__)
        return {"project": self.key, "index_dir": str(self.dirs.index), "deleted_bytes": size}

    # -- tools for an agent loop (§1, §11) --------------------------------------------------

    def tools(self, format: ToolFormat = "anthropic") -> list[dict[str, Any]]:
        """The tool definitions to offer the model, as the API named by ``format`` takes them:
        ``"anthropic"`` (Messages API ``tools``), ``"openai"`` (Chat Completions ``tools``) or
        ``"mcp"`` (MCP ``tools/list``). Only what can work in this session is offered: without a
        log no conversation scope and no recall; the earlier scope (and recall's ``task``) when
        the project has other tasks. The working rule for the system prompt is
        :meth:`working_rule`."""
        return tool_definitions(
            format=format,
            conversation=self._conversation is not None,
            earlier=self._earlier_offered(),
        )

    def working_rule(self) -> str:
        """The one working rule to put in the model's system prompt beside the tools (§11)."""
        return working_rule(conversation=self._conversation is not None)

    def _earlier_offered(self) -> bool:
        """Whether the project holds a task log other than this session's."""
        mine = None
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                mine = self.log_path.resolve()
        for task in list_tasks(self.dirs.tasks):
            p = self.dirs.tasks / f"{task}.jsonl"
            with contextlib.suppress(OSError):
                if p.resolve() != mine:
                    return True
        return False

    def _mark(self) -> None:
        """Records made from now on follow the session log's last event."""
        if self._records is not None:
            self._records.mark()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run one tool call; bad arguments and refusals come back as an error result. A call
        the engine cannot answer at all (closed, another event loop's) raises, as the methods do."""
        self._usable()
        try:
            if not isinstance(arguments, dict):
                raise BadInput(f"arguments must be an object, got {type(arguments).__name__}")
            if not all(isinstance(k, str) for k in arguments):
                raise BadInput("arguments' names must be strings")
            if name == "index-search":
                only(arguments, {"query", "scope", "limit", "path"}, name)
                if "scope" not in arguments:
                    offered = [s for s, on in zip(SCOPES, (True, self._conversation is not None,
                               self._earlier_offered()), strict=True) if on]  # fmt: skip
                    raise BadInput(f"scope is required: {_either(offered)}")
                out = await self.index_search(
                    arguments.get("query"),  # type: ignore[arg-type]
                    arguments["scope"],
                    arguments.get("limit", DEFAULT_LIMIT),
                    arguments.get("path"),
                )
                prov = "external:file" if out.scope == "repo" else "external:log"
                return ToolOutput(out.text, False, prov, out.to_json())
            if name == "index-update":
                only(arguments, {"path"}, name)
                up = await self.index_update(arguments.get("path"))
                return ToolOutput(up.text, False, "external:file", up.to_json())
            if name == "recall":
                only(arguments, {"seq", "start", "count", "task"}, name)
                if "seq" not in arguments:
                    raise BadInput("seq is required: the number an [elided seq=N] names")
                return await self.recall(
                    arguments["seq"], arguments.get("start"), arguments.get("count"),
                    arguments.get("task"),
                )  # fmt: skip
            raise BadInput(f"unknown tool {name!r}: index-search, index-update or recall")
        except (BadInput, GuardRefused, Disabled) as e:
            return ToolOutput(str(e), True, "external:file")


def _check_open(
    *, root: object, data_dir: object, config_dir: object, log: object, limits: object,
    workers: object,
) -> None:  # fmt: skip
    """Engine.open's arguments, checked before anything is made: a path is a non-empty string
    or path, ``workers`` a whole number of at least 1, ``limits`` a :class:`Limits`."""
    for name, value, optional in (
        ("root", root, False), ("data_dir", data_dir, True), ("config_dir", config_dir, True),
        ("log", log, True),
    ):  # fmt: skip
        if value is None and optional:
            continue
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            raise BadInput(f"{name} must be a non-empty path, got {value!r}")
    _check_count("workers", workers)
    if limits is not None and not isinstance(limits, Limits):
        raise BadInput(f"limits must be a Limits, got {type(limits).__name__}")


def _check_recall(seq: object, start: object, count: object) -> None:
    """recall's numbers, checked as the tool's schema has them: whole numbers of at least 1."""
    _check_count("seq", seq, optional=False)
    _check_count("start", start)
    _check_count("count", count)


def _check_count(name: str, value: object, *, optional: bool = True) -> None:
    """value is a whole number of at least 1 (a bool is not one), or None when optional."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput(f"{name} must be a whole number of at least 1, got {value!r}")


def _repo_header(matched: int, chunks: int, files: int, r: Refreshed) -> str:
    verb = "matches" if matched == 1 else "match"
    head = f"{matched:,} of {plural(chunks, 'chunk')} in {plural(files, 'file')} {verb}"
    notes = []
    if r.not_seen:
        notes.append(
            f"{plural(r.not_seen, 'file')} not looked at yet in time: the index is partial "
            "(the next search or index-update goes on)"
        )
    if r.not_read:
        notes.append(
            f"{plural(r.not_read, 'changed file')} not read again in time: the index is partial "
            "(index-update reads them)"
        )
    if r.over_limit:
        notes.append(
            "the index is partial: the tree passes 20,000 files or 128 MiB of text and the index "
            "holds what fits in path order (narrow with path, or index-update PATH)"
        )
    if r.refused:
        notes.append(f"refused by the guard: {', '.join(r.refused[:5])}")
    if r.left_out_unasked:
        notes.append(f"left out, not asked: {', '.join(r.left_out_unasked[:5])}")
    if not r.saved:
        notes.append(f"the index could not be saved ({r.store_error}): answering from memory")
    return "; ".join([head, *notes])


def _update_text(r: Refreshed, rel: str | None) -> str:
    where = f"{rel}" if rel else "the repository"
    parts = [
        f"index of {where}: {plural(r.files, 'file')}",
        f"read {r.read:,}",
        f"unchanged {r.unchanged:,}",
        f"removed {r.removed:,}",
    ]
    skipped = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in r.skipped.items() if v)
    if skipped:
        parts.append(f"skipped {skipped}")
    text = "; ".join(parts) + f" ({r.seconds:.1f} s)"
    if r.refused:
        text += "\nrefused by the guard: " + ", ".join(r.refused)
    if r.left_out_unasked:
        text += "\nleft out, not asked: " + ", ".join(r.left_out_unasked)
    if r.not_seen:
        text += f"\npartial: {plural(r.not_seen, 'file')} not looked at yet; call index-update"
    if r.not_read:
        text += f"\npartial: {plural(r.not_read, 'file')} not read yet; call index-update again"
    elif r.over_limit:
        text += "\npartial: the tree passes the limit of 20,000 files or 128 MiB of text"
    if not r.saved:
        text += f"\nthe index could not be saved: {r.store_error}"
    return text


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def _prepare(
    given: Path,
    data_arg: str | os.PathLike[str] | None,
    config_arg: str | os.PathLike[str] | None,
) -> tuple[Path, Path, Path, str, ProjectDirs, Config]:
    """The blocking part of opening (git, the file system), run in a thread."""
    if not given.is_dir():
        raise NotFound(f"root {given} is not a directory")
    repo = git_repo(given)  # once: the top level and the project's key both come from it
    top = repo.work_tree if repo is not None else given.resolve()
    ddir = data_dir(data_arg)
    cdir = config_dir(config_arg)
    key = repo_project_key(top, repo)
    return top, ddir, cdir, key, project_dirs(ddir, key), load_config(cdir)


def _either(names: Sequence[str]) -> str:
    """'repo', 'repo or conversation', 'repo, conversation or earlier'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


NO_CONVERSATION = (
    "scope conversation is not available: this session keeps no conversation log; "
    "use scope repo"
)
NO_RECALL = "recall is not available: this session keeps no conversation log"


def _no_events_yet(query: str) -> SearchOutput:
    text = "ranked 0 of the 0 events in this conversation (0 turns)\nno event matches those words"
    header = {"events": 0, "ranked": 0, "turns": 0, "text": text.split("\n", 1)[0]}
    return SearchOutput("conversation", query, text, header, [])
