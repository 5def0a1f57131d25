"""The command line: ``nodwyn-retrieval`` (docs/cli.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from nodwyn_retrieval import mcp_server
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import BadInput, NotFound, RetrievalError
from nodwyn_retrieval.store.config import set_earlier_tasks
from nodwyn_retrieval.store.log import log_path
from nodwyn_retrieval.store.paths import (
    config_dir,
    data_dir,
    git_toplevel,
    project_dirs,
    project_key,
)
from nodwyn_retrieval.tools import DEFAULT_LIMIT, WORKING_RULE, tool_definitions

__all__ = ["main"]

DESCRIPTION = (
    "Ranked search of a repository, a coding agent's conversation and its earlier tasks, with "
    "recall of logged events."
)



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
        description=DESCRIPTION,
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
    mcp_server.add_parser(sub, common)
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
            st["server_logs"] = [str(p) for p in mcp_server.record_logs(engine.dirs)]
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
    for p in st.get("server_logs", [])[:3]:
        out.append(f"server session log {p}")
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
        if ns.command == "mcp":
            return mcp_server.main(ns)
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
