"""The Engine an agent loop embeds, the tool definitions, and the command line.

An agent loop opens one :class:`Engine` per session and working tree::

    engine = await Engine.open(root, data_dir=None, config_dir=None, log="task.jsonl")
    out = await engine.index_search("credential binding", scope="repo")
    print(out.text)          # exactly what the model reads (§7)
    await engine.close()

The engine starts the actors (refresher, indexer, conversation, earlier, gc, embedder) on an actor
system, validates every argument at this edge, and renders what they answer. It has no logic of its
own beyond putting them together.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from nodwyn_retrieval.actors.conversation import ConversationActor, LogSearch, Recall
from nodwyn_retrieval.actors.earlier import EarlierActor, EarlierRecall, EarlierSearch
from nodwyn_retrieval.actors.embedder import EmbedderActor, EmbedStatus
from nodwyn_retrieval.actors.gc import Collect, GcActor
from nodwyn_retrieval.actors.indexer import IndexerActor
from nodwyn_retrieval.actors.messages import (
    Forget,
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
from nodwyn_retrieval.errors import BadInput, Disabled, GuardRefused, NotFound, RetrievalError
from nodwyn_retrieval.guard import Decision, Guard, Recorder, default_guard
from nodwyn_retrieval.retrieval.render import RepoResult, plural, render_repo
from nodwyn_retrieval.retrieval.words import query_words
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.config import Config, earlier_tasks, load_config, set_earlier_tasks
from nodwyn_retrieval.store.log import LogWriter, log_path
from nodwyn_retrieval.store.manifest import list_manifests, load_manifest, manifest_path
from nodwyn_retrieval.store.paths import (
    ProjectDirs,
    config_dir,
    data_dir,
    git_toplevel,
    project_dirs,
    project_key,
)

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SCOPES",
    "Engine",
    "SearchOutput",
    "ToolOutput",
    "UpdateOutput",
    "main",
]

SCOPES = ("repo", "conversation", "earlier")
DEFAULT_LIMIT = 8  # §1
MAX_LIMIT = 20  # §1
SEARCH_SECONDS = 10.0  # §5: a search refreshes for at most 10 s
UPDATE_SECONDS = 60.0  # §5: an index-update reads for at most 60 s a call

WORKING_RULE = (
    "To find code by what it does or under several possible names, search for the words with "
    "index-search; use a grep for an exact string or pattern."
)


def _check_query(query: object) -> str:
    if not isinstance(query, str):
        raise BadInput(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise BadInput("query is empty: give the words or names to search for")
    if not query_words(query):
        raise BadInput(f"query {query!r} has no words to search for: give words or names")
    return query


def _check_scope(scope: object) -> str:
    if scope not in SCOPES:
        raise BadInput(f"scope must be repo, conversation or earlier, got {scope!r}")
    return str(scope)


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BadInput(f"limit must be a whole number between 1 and {MAX_LIMIT}, got {limit!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


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
        self.log_path = log_path
        self._system = system
        self._pool = pool
        self._refresher = refresher
        self._indexer = indexer
        self._conversation = conversation
        self._earlier = earlier
        self._gc = gc
        self._embedder = embedder
        self._closed = False
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
        record: Callable[[dict[str, Any]], None] | None = None,
        write_log: bool = True,
        guard: Guard | None = None,
        checkers: Sequence[Any] = (),
        limits: Limits | None = None,
        workers: int | None = None,
    ) -> Engine:
        """Open a session on the working tree at root (its git top level when it is in one).

        ``log`` is this session's ``.jsonl`` (docs/log-format.md): the conversation scope and
        recall read it. ``record`` receives each ``guard.decision`` and ``index.update`` event (a
        dict with its ``kind``): an agent loop that writes its own log passes its own append, so
        the log keeps one writer. Without it, and with a log, the engine appends to the log
        itself, unless ``write_log`` is False (the command line only reads a log: its agent loop
        is its writer); with neither, nothing is recorded.
        """
        top, ddir, cdir, key, dirs, config = await asyncio.to_thread(
            _prepare, Path(root), data_dir, config_dir
        )
        log_path = Path(log) if log is not None else None
        writer: LogWriter | None = None
        sink: Callable[[dict[str, Any]], None] | None = record
        if sink is None and log_path is not None and write_log:
            # No sink of the loop's own: the events go to the session log through our writer.
            writer = await asyncio.to_thread(_open_log, log_path)
            sink = _log_sink(writer)
        elif log_path is not None and not log_path.is_file():
            raise NotFound(f"no log at {log_path}: give the path of this session's .jsonl")
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
        # Workers start from a fork server that has already imported what they run.
        pool = ProcessPool(max_workers=workers, preload=["numpy", "actors._work"])
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
            log_path=log_path, system=system, pool=pool, refresher=refresher, indexer=indexer,
            conversation=conversation, earlier=earlier, gc=gc, embedder=embedder,
        )  # fmt: skip
        engine._open_args = {
            "data_dir": ddir, "config_dir": cdir, "log": log, "record": record,
            "write_log": write_log, "guard": guard,
            "checkers": checkers, "limits": limits, "workers": workers,
        }  # fmt: skip
        return engine

    async def close(self) -> None:
        """Stop the actors and the worker processes; idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._system.stop()
        await self._pool.close()
        if self.log is not None:
            self.log.close()

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
        p = Path(path)
        full = p if p.is_absolute() else self.root / p
        real = Path(os.path.realpath(full))
        root = Path(os.path.realpath(self.root))
        if real != root and root not in real.parents:
            raise BadInput(f"path {path} is outside the repository")
        if not real.exists():
            raise NotFound(f"path {path} does not exist")
        rel = real.relative_to(root).as_posix()
        return "" if rel == "." else rel

    async def index_search(
        self, query: str, scope: str, limit: int = DEFAULT_LIMIT, path: str | None = None
    ) -> SearchOutput:
        """index-search (§1): rank what matches plain words or names in one scope."""
        query = _check_query(query)
        scope = _check_scope(scope)
        limit = _check_limit(limit)
        if scope == "repo":
            rel = self._check_path(path)
            return await self._search_repo(query, limit, rel)
        if path is not None:
            raise BadInput(f"path narrows a repo search only, not {scope}")
        if scope == "conversation":
            if self._conversation is None:
                raise BadInput(
                    "scope conversation needs this session's log: open the engine with log=..."
                    " (--log FILE or --task ID on the command line)"
                )
            return await self._conversation.ask_as(LogSearch(query, limit), SearchOutput)
        allowed = earlier_tasks(self.config_dir, self.key)
        return await self._earlier.ask_as(EarlierSearch(query, limit, allowed), SearchOutput)

    async def _refresh(
        self,
        seconds: float,
        directory: str | None = None,
        update: bool = False,
        query: str | None = None,
    ) -> Refreshed:
        deadline = asyncio.get_running_loop().time() + seconds
        return await self._refresher.ask_as(
            Refresh(deadline, directory, update, query), Refreshed
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
        head = _repo_header(found.chunks, found.files, r)
        if not results:
            where = f" under {path}" if path else ""
            head += f"\nno chunk{where} matches {query!r}"
        header = {
            "chunks": found.chunks,
            "files": found.files,
            "partial": r.partial,
            "not_read": r.not_read,
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

    async def index_update(self, path: str | None = None) -> UpdateOutput:
        """index-update (§1, §5): bring the index up to date for at most 60 s; resumable."""
        rel = self._check_path(path)
        directory = rel if rel and (self.root / rel).is_dir() else None
        start = asyncio.get_running_loop().time()
        r = await self._refresh(UPDATE_SECONDS, directory, update=True)
        await self._indexer.ask(SaveSnapshot(start + UPDATE_SECONDS))
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
            "seconds": round(r.seconds, 3),
            "bytes": r.bytes,
        }
        return UpdateOutput(_update_text(r, rel), summary)

    async def recall(
        self, seq: int, start: int | None = None, count: int | None = None, task: str | None = None
    ) -> ToolOutput:
        """recall (§1, §8): one event of the log by its seq, whole or as lines."""
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise BadInput(f"seq must be a whole number of at least 1, got {seq!r}")
        for name, v in (("start", start), ("count", count)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise BadInput(f"{name} must be a whole number of at least 1, got {v!r}")
        if task is not None:
            log_path(self.dirs.tasks, task)  # a malformed id is bad input, whatever the switch
            allowed = earlier_tasks(self.config_dir, self.key)
            return await self._earlier.ask_as(
                EarlierRecall(task, seq, start, count, allowed), ToolOutput
            )
        if self._conversation is None:
            raise BadInput(
                "recall needs this session's log: open the engine with log=..."
                " (--log FILE or --task ID on the command line)"
            )
        return await self._conversation.ask_as(Recall(seq, start, count), ToolOutput)

    async def memory_search(self, query: str, limit: int = DEFAULT_LIMIT) -> SearchOutput:
        """A person's search of all the project's tasks, whatever the switch (ADR 51 amendment)."""
        query = _check_query(query)
        limit = _check_limit(limit)
        return await self._earlier.ask_as(
            EarlierSearch(query, limit, True, person=True), SearchOutput
        )

    async def memory_recall(
        self, task: str, seq: int, start: int | None = None, count: int | None = None
    ) -> ToolOutput:
        """A person's recall of any of the project's tasks, whatever the switch."""
        return await self._earlier.ask_as(
            EarlierRecall(task, seq, start, count, True, person=True), ToolOutput
        )

    # -- status and forget (§12) ----------------------------------------------------------

    async def index_status(self) -> dict[str, Any]:
        """The project's index: its trees, their files and size, and the switches."""
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
        size = await asyncio.to_thread(_du, self.dirs.index)
        await self.close()
        await asyncio.to_thread(shutil.rmtree, self.dirs.index, True)
        fresh = await Engine.open(self.root, **self._open_args)
        self.__dict__.update(fresh.__dict__)
        return {"project": self.key, "index_dir": str(self.dirs.index), "deleted_bytes": size}

    # -- tools for an agent loop (§1, §11) --------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The tool definitions an agent loop offers its model, with the working rule."""
        return tool_definitions(conversation=self._conversation is not None)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run one tool call; bad arguments and refusals come back as an error result."""
        try:
            if not isinstance(arguments, dict):
                raise BadInput(f"arguments must be an object, got {type(arguments).__name__}")
            if name == "index-search":
                _only(arguments, {"query", "scope", "limit", "path"}, name)
                if "scope" not in arguments:
                    raise BadInput("scope is required: repo, conversation or earlier")
                out = await self.index_search(
                    arguments.get("query"),  # type: ignore[arg-type]
                    arguments["scope"],
                    arguments.get("limit", DEFAULT_LIMIT),
                    arguments.get("path"),
                )
                prov = "external:file" if out.scope == "repo" else "external:log"
                return ToolOutput(out.text, False, prov, out.to_json())
            if name == "index-update":
                _only(arguments, {"path"}, name)
                up = await self.index_update(arguments.get("path"))
                return ToolOutput(up.text, False, "external:file", up.to_json())
            if name == "recall":
                _only(arguments, {"seq", "start", "count", "task"}, name)
                if "seq" not in arguments:
                    raise BadInput("seq is required: the number an [elided seq=N] names")
                return await self.recall(
                    arguments["seq"], arguments.get("start"), arguments.get("count"),
                    arguments.get("task"),
                )  # fmt: skip
            raise BadInput(f"unknown tool {name!r}: index-search, index-update or recall")
        except (BadInput, GuardRefused, Disabled) as e:
            return ToolOutput(str(e), True, "external:file")


def _only(arguments: dict[str, Any], allowed: set[str], tool: str) -> None:
    extra = sorted(set(arguments) - allowed)
    if extra:
        raise BadInput(f"{tool} takes {', '.join(sorted(allowed))}; unknown: {', '.join(extra)}")


def tool_definitions(*, conversation: bool = True) -> list[dict[str, Any]]:
    """index-search, index-update and recall as JSON-schema tools (§1, §11)."""
    search = {
        "name": "index-search",
        "description": (
            "Rank what matches plain words or names, best first. Use it to find code by what it "
            "does or when you would otherwise guess several names (cred|binding|host|key): give "
            "the words, not a pattern. scope 'repo' searches the working tree's files (chunks of "
            "lines; each result is path:A-B with its best lines, so go on with a ranged read); "
            "'conversation' searches this session's messages and tool results, including ones "
            "shown as [elided seq=N]; 'earlier' searches the project's other tasks when the "
            "person allows it. Use a grep instead for an exact string or regular expression."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Plain words or names."},
                "scope": {"type": "string", "enum": list(SCOPES)},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                          "default": DEFAULT_LIMIT},
                "path": {"type": "string",
                         "description": "repo only: a file or directory to narrow to."},
            },
            "required": ["query", "scope"],
            "additionalProperties": False,
        },
    }  # fmt: skip
    update = {
        "name": "index-update",
        "description": (
            "Bring the repository's search index up to date now (at most 60 s a call; call again "
            "to go on). index-search refreshes by itself, so use this only for a large tree the "
            "search said is partial, or with path to add a directory git ignores."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "additionalProperties": False,
        },
    }
    recall = {
        "name": "recall",
        "description": (
            "Read back one event of this conversation by its seq: use it when the window shows "
            "[elided seq=N] or a search names a seq, instead of running the call again. start "
            "and count read it in lines, as a ranged file read does. task reads an earlier "
            "task's event, when the person allows earlier tasks."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "seq": {"type": "integer", "minimum": 1},
                "start": {"type": "integer", "minimum": 1},
                "count": {"type": "integer", "minimum": 1},
                "task": {"type": "string"},
            },
            "required": ["seq"],
            "additionalProperties": False,
        },
    }
    tools: list[dict[str, Any]] = [search, update]
    if conversation:
        tools.append(recall)
    for t in tools:
        t["rule"] = WORKING_RULE
    return tools


def _repo_header(chunks: int, files: int, r: Refreshed) -> str:
    head = f"ranked {plural(chunks, 'chunk')} in {plural(files, 'file')}"
    notes = []
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
    top = git_toplevel(given) or given.resolve()
    ddir = data_dir(data_arg)
    cdir = config_dir(config_arg)
    key = project_key(top)
    return top, ddir, cdir, key, project_dirs(ddir, key), load_config(cdir)


def _log_sink(writer: LogWriter) -> Callable[[dict[str, Any]], None]:
    """Events appended to a session log, in the turn the log is in."""

    def sink(event: dict[str, Any]) -> None:
        body = dict(event)
        kind = body.pop("kind")
        body.pop("seq", None)
        body.pop("ts", None)
        turn = body.pop("turn", None) or writer.turn
        agent = body.pop("agent", "main")
        writer.append(kind, turn=turn, agent=agent, **body)

    return sink


def _open_log(path: Path) -> LogWriter:
    if not path.is_file():
        raise NotFound(f"no log at {path}: give the path of this session's .jsonl")
    return LogWriter(path)


# -- the command line (CLI.md) ------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as BadInput (exit 2, one line), not its own exit."""

    def error(self, message: str) -> NoReturn:
        raise BadInput(f"{message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument(
        "--data-dir", default=s, help="data directory (or NODWYN_RETRIEVAL_DATA_DIR)"
    )
    common.add_argument(
        "--config-dir", default=s, help="configuration directory (or NODWYN_RETRIEVAL_CONFIG_DIR)"
    )
    common.add_argument(
        "--root", default=s, help="the working tree (default: the git top level here)"
    )
    common.add_argument(
        "--json", action="store_true", default=s, help="one JSON document on stdout"
    )
    common.add_argument("--debug", action="store_true", default=s, help="tracebacks on errors")
    common.add_argument("--workers", type=int, default=s, help="worker processes for big builds")

    p = _Parser(
        prog="nodwyn-retrieval",
        parents=[common],
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def log_opts(q: argparse.ArgumentParser) -> None:
        g = q.add_mutually_exclusive_group()
        g.add_argument(
            "--task", help="this session's task id (its log in the project's tasks directory)"
        )
        g.add_argument("--log", help="this session's log file (.jsonl)")

    q = sub.add_parser("search", parents=[common], help="index-search")
    q.add_argument("query")
    q.add_argument("--scope", default="repo")
    q.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    q.add_argument("--path")
    log_opts(q)
    q = sub.add_parser("update", parents=[common], help="index-update")
    q.add_argument("path", nargs="?")
    q = sub.add_parser("recall", parents=[common], help="recall one event by its seq")
    q.add_argument("seq", type=int)
    q.add_argument("--start", type=int)
    q.add_argument("--count", type=int)
    log_opts(q)
    sub.add_parser("status", parents=[common], help="the project's index")
    sub.add_parser("forget", parents=[common], help="delete the project's index (not the logs)")
    m = sub.add_parser("memory", parents=[common], help="a person's search of the project's tasks")
    msub = m.add_subparsers(dest="memory_command", required=True, parser_class=_Parser)
    q = msub.add_parser("search", parents=[common])
    q.add_argument("query")
    q.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    q = msub.add_parser("recall", parents=[common])
    q.add_argument("task")
    q.add_argument("seq", type=int)
    q.add_argument("--start", type=int)
    q.add_argument("--count", type=int)
    q = sub.add_parser("earlier", parents=[common], help="turn searching earlier tasks on or off")
    q.add_argument("state", choices=["on", "off"])
    q = sub.add_parser("refresh", parents=[common], help="bring each tree's index fully up to date")
    q.add_argument("roots", nargs="+")
    sub.add_parser("tools", parents=[common], help="the tool definitions and the working rule")
    return p


def _opt(ns: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(ns, name, default)


def _root_of(ns: argparse.Namespace) -> Path:
    r = _opt(ns, "root")
    here = Path(r) if r else Path.cwd()
    if not here.is_dir():
        raise NotFound(f"root {here} is not a directory")
    return git_toplevel(here) or here.resolve()


def _log_of(ns: argparse.Namespace, root: Path) -> Path | None:
    if _opt(ns, "log"):
        p = Path(ns.log)
        if not p.is_file():
            raise NotFound(f"no log at {p}: give the path of a session's .jsonl")
        return p
    if _opt(ns, "task"):
        tasks = project_dirs(data_dir(_opt(ns, "data_dir")), project_key(root)).tasks
        p = log_path(tasks, ns.task)
        if not p.is_file():
            raise NotFound(f"no task {ns.task} in this project (its logs are in {tasks})")
        return p
    return None


class _Progress:
    """A one-line progress display on a terminal's stderr; silent elsewhere."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last = 0

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        pad = max(0, self._last - len(text))
        sys.stderr.write("\r" + text + " " * pad)
        sys.stderr.flush()
        self._last = len(text)

    def done(self) -> None:
        if self.enabled and self._last:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._last = 0


async def _engine(ns: argparse.Namespace, root: Path, log: Path | None = None) -> Engine:
    # The command line reads a session's log but never writes to it: a log has one writer, the
    # agent loop whose session it is.
    return await Engine.open(
        root, data_dir=_opt(ns, "data_dir"), config_dir=_opt(ns, "config_dir"), log=log,
        write_log=False, workers=_opt(ns, "workers"),
    )  # fmt: skip


async def _run(ns: argparse.Namespace) -> tuple[str, Any]:
    """Run one command; return its text and its JSON document."""
    cmd = ns.command
    if cmd == "tools":
        defs = tool_definitions()
        text = "\n\n".join(f"{t['name']}: {t['description']}" for t in defs)
        return text + f"\n\nrule: {WORKING_RULE}", {"tools": defs, "rule": WORKING_RULE}
    if cmd == "earlier":
        root = _root_of(ns)
        key = project_key(root)
        set_earlier_tasks(config_dir(_opt(ns, "config_dir")), key, ns.state == "on", root=str(root))
        return f"earlier tasks {ns.state} for {key}", {
            "project": key,
            "earlier_tasks": ns.state == "on",
        }
    if cmd == "refresh":
        return await _refresh_many(ns)
    root = _root_of(ns)
    # recall --task names an earlier task (switch-gated, §9); search --task names this session.
    task_is_earlier = cmd == "recall" and _opt(ns, "task") is not None
    log = _log_of(ns, root) if cmd in ("search", "recall") and not task_is_earlier else None
    engine = await _engine(ns, root, log)
    try:
        if cmd == "search":
            out = await engine.index_search(ns.query, ns.scope, ns.limit, ns.path)
            return out.text, out.to_json()
        if cmd == "update":
            # One call, as the tool makes it: at most 60 s, and the next call goes on (§5).
            progress = _Progress(sys.stderr.isatty() and not _opt(ns, "json"))
            progress.show(f"indexing {root} (at most 60 s) ...")
            up = await engine.index_update(ns.path)
            progress.done()
            return up.text, up.to_json()
        if cmd == "recall":
            task = ns.task if task_is_earlier else None
            r = await engine.recall(ns.seq, ns.start, ns.count, task)
            return r.text, r.data
        if cmd == "status":
            st = await engine.index_status()
            return _status_text(st), st
        if cmd == "forget":
            fg = await engine.index_forget()
            return f"forgot the index of {fg['project']} ({fg['deleted_bytes']:,} bytes)", fg
        if cmd == "memory":
            if ns.memory_command == "search":
                out = await engine.memory_search(ns.query, ns.limit)
                return out.text, out.to_json()
            r = await engine.memory_recall(ns.task, ns.seq, ns.start, ns.count)
            return r.text, r.data
    finally:
        await engine.close()
    raise BadInput(f"unknown command {cmd!r}")


async def _refresh_many(ns: argparse.Namespace) -> tuple[str, Any]:
    """Headless batch refresh: each tree brought fully up to date, one summary line each."""
    progress = _Progress(sys.stderr.isatty() and not _opt(ns, "json"))
    lines: list[str] = []
    docs: list[dict[str, Any]] = []
    roots = [Path(r) for r in ns.roots]
    for r in roots:
        if not r.is_dir():
            raise NotFound(f"root {r} is not a directory")
    for i, r in enumerate(roots, 1):
        top = git_toplevel(r) or r.resolve()
        engine = await _engine(ns, top)
        try:
            calls = 0
            total_read = 0
            t0 = time.perf_counter()
            while True:
                calls += 1
                progress.show(
                    f"[{i}/{len(roots)}] {top}: update {calls}, {total_read:,} files read"
                )
                up = await engine.index_update()
                total_read += up.summary["read"]
                # Done when nothing is left unread; past a limit of §2 more calls add nothing.
                if up.summary["not_read"] == 0 or up.summary["read"] == 0:
                    break
            s = dict(up.summary)
            s.update(
                root=str(top),
                read=total_read,
                calls=calls,
                seconds=round(time.perf_counter() - t0, 3),
            )
            docs.append(s)
            lines.append(
                f"{top}: {s['files']:,} files, read {total_read:,}, removed {s['removed']:,}"
                f"{', partial' if s['partial'] else ''} ({s['seconds']:.1f} s)"
            )
        finally:
            await engine.close()
    progress.done()
    return "\n".join(lines), {"trees": docs}


def _status_text(st: dict[str, Any]) -> str:
    out = [f"project {st['project']}", f"index {st['index_dir']} ({st['index_bytes']:,} bytes)"]
    for t in st["trees"]:
        out.append(
            f"  {t['root']}: {t['files']:,} files, {t['bytes']:,} bytes, changed {t['changed']}"
        )
    if not st["trees"]:
        out.append("  no working tree indexed yet")
    out.append(f"earlier tasks: {'on' if st['earlier_tasks'] else 'off'}")
    out.append(f"embeddings: {st['embeddings']}")
    out.append(f"tasks {st['tasks_dir']}")
    return "\n".join(out)


def _run_async(coro: Any) -> Any:
    try:
        import uvloop  # noqa: PLC0415 - optional: it does not install everywhere
    except ImportError:  # not on this platform
        return asyncio.run(coro)
    return uvloop.run(coro)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: exit 0 done, 2 bad input, 1 anything else."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        ns = _parser().parse_args(args)
        text, doc = _run_async(_run(ns))
    except BadInput as e:
        if debug:
            raise
        print(f"nodwyn-retrieval: {e}", file=sys.stderr)
        return 2
    except RetrievalError as e:
        if debug:
            raise
        print(f"nodwyn-retrieval: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nodwyn-retrieval: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        print(
            f"nodwyn-retrieval: unexpected error: {type(e).__name__}: {e} (run with --debug)",
            file=sys.stderr,
        )
        return 1
    if getattr(ns, "json", False):
        print(json.dumps(doc, ensure_ascii=False, indent=None))
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
