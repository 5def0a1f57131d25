"""The command line: ``nodwyn-retrieval`` (docs/cli.md).

Parsing the arguments imports nothing heavy: ``--version`` and ``--help`` answer before the
engine, numpy or the worker pool are loaded; each command imports what it needs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from nodwyn_retrieval import __version__
from nodwyn_retrieval.errors import BadInput, NotFound, RetrievalError
from nodwyn_retrieval.tools import DEFAULT_LIMIT, FORMATS, MAX_LIMIT, SCOPES

if TYPE_CHECKING:
    from nodwyn_retrieval.actors.messages import Progress, UpdateOutput
    from nodwyn_retrieval.entry import Engine

__all__ = ["main"]

PROG = "nodwyn-retrieval"

DESCRIPTION = """\
Find things in a repository by what they do, not by the one name you would have to guess: ranked
search of the working tree (refreshed by every search), of a coding agent's conversation log and
of the project's earlier tasks, and recall of one logged event by its seq.
"""

EPILOG = """\
examples:
  nodwyn-retrieval search "credential binding"
  nodwyn-retrieval search "why localhost" --scope conversation --log task.jsonl
  nodwyn-retrieval recall 812 --start 40 --count 20 --log task.jsonl
  nodwyn-retrieval update                     # one index-update call, at most 60 s
  nodwyn-retrieval refresh ~/src/a ~/src/b    # bring several trees fully up to date

Exit status: 0 done (a search with no match included), 2 bad input, 1 anything else.
The commands and their JSON: docs/cli.md.
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as BadInput (exit 2, one line, with a "did you mean")."""

    options: tuple[str, ...] = ()
    """Every option of every command, for a suggestion on a mistyped one."""

    def error(self, message: str) -> NoReturn:
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m is not None:
            choices = re.findall(r"'([^']*)'", m.group(2)) or m.group(2).split(", ")
            close = difflib.get_close_matches(m.group(1), choices, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            message = f"{message}{hint}"
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m is not None and m.group(1).startswith("-"):
            close = difflib.get_close_matches(m.group(1).split("=")[0], self.options, n=1)
            if close:
                message = f"{message}; did you mean {close[0]}?"
        raise BadInput(f"{message} (see --help)")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _parser() -> _Parser:
    common = _Parser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument(
        "--data-dir", metavar="DIR", default=s,
        help="where the index and task logs live (default: $NODWYN_RETRIEVAL_DATA_DIR, else the "
        "user data directory)",
    )  # fmt: skip
    common.add_argument(
        "--config-dir", metavar="DIR", default=s,
        help="where workspaces.toml lives (default: $NODWYN_RETRIEVAL_CONFIG_DIR, else the user "
        "config directory)",
    )  # fmt: skip
    common.add_argument(
        "--root", metavar="DIR", default=s,
        help="the working tree (default: the git top level of the current directory)",
    )  # fmt: skip
    common.add_argument(
        "--json", action="store_true", default=s,
        help="print one JSON document on stdout instead of text (default: text)",
    )  # fmt: skip
    common.add_argument(
        "--workers", metavar="N", type=int, default=s,
        help="worker processes for a big build (default: one per core)",
    )  # fmt: skip
    common.add_argument(
        "--debug", action="store_true", default=s,
        help="show a traceback on an error (default: one line)",
    )  # fmt: skip

    p = _Parser(
        prog=PROG, parents=[common], description=DESCRIPTION, epilog=EPILOG,
        formatter_class=_Formatter,
    )  # fmt: skip
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
        title="commands",
    )  # fmt: skip

    def cmd(name: str, help_: str) -> _Parser:
        q: _Parser = sub.add_parser(
            name, parents=[common], help=help_, description=help_, formatter_class=_Formatter
        )
        return q

    def log_opts(q: argparse.ArgumentParser, earlier: bool = False) -> None:
        g = q.add_mutually_exclusive_group()
        task_help = (
            "an earlier task's id: read its event instead (needs `earlier on`)"
            if earlier
            else "this session's task id: its log in the project's tasks directory"
        )
        g.add_argument("--task", metavar="ID", help=f"{task_help} (default: none)")
        g.add_argument(
            "--log", metavar="FILE", help="this session's log, a .jsonl file (default: none)"
        )

    def lines_opts(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--start", metavar="A", type=int,
            help="the first line to show, from 1 (default: the whole event)",
        )  # fmt: skip
        q.add_argument(
            "--count", metavar="N", type=int,
            help="how many lines from --start (default: all that fit)",
        )  # fmt: skip

    def limit_opt(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--limit", metavar="N", type=int, default=DEFAULT_LIMIT,
            help=f"how many results, 1 to {MAX_LIMIT} (default: {DEFAULT_LIMIT})",
        )  # fmt: skip

    q = cmd("search", "rank what matches plain words or names (index-search)")
    q.add_argument("query", help="plain words or names; a query that starts with - follows --")
    q.add_argument(
        "--scope", metavar="{" + ",".join(SCOPES) + "}", default="repo",
        help="repo: the working tree; conversation: this session's log (--log or --task); "
        "earlier: the project's other tasks, when allowed (default: repo)",
    )  # fmt: skip
    limit_opt(q)
    q.add_argument(
        "--path", metavar="P",
        help="scope repo only: a file or directory to search within (default: all)",
    )  # fmt: skip
    log_opts(q)
    q = cmd("update", "bring the index up to date, at most 60 s a call (index-update)")
    q.add_argument(
        "path", nargs="?",
        help="a file or directory to index now; a directory whole, ignored files included "
        "(default: the whole tree)",
    )  # fmt: skip
    q = cmd("recall", "show one event of a session's log by its seq")
    q.add_argument("seq", type=int, help="the event's seq, as [elided seq=N] names it")
    lines_opts(q)
    log_opts(q, earlier=True)
    cmd("status", "the project's index: its trees, files, size and switches")
    cmd("forget", "delete the project's index (never the task logs)")
    m = cmd("memory", "a person's search and reading of all the project's tasks")
    msub = m.add_subparsers(
        dest="memory_command", required=True, parser_class=_Parser, metavar="SUBCOMMAND"
    )
    what = "rank the events of every task of the project"
    q = msub.add_parser("search", parents=[common], help=what, description=what)
    q.add_argument("query", help="plain words or names")
    limit_opt(q)
    what = "show one event of any task of the project by its seq"
    q = msub.add_parser("recall", parents=[common], help=what, description=what)
    q.add_argument("task", help="the task's id")
    q.add_argument("seq", type=int, help="the event's seq")
    lines_opts(q)
    q = cmd("earlier", "let the model search the project's earlier tasks, or stop it")
    q.add_argument("state", choices=["on", "off"], help="on or off (the default is off)")
    q = cmd("refresh", "bring each tree's index fully up to date (headless, for many trees)")
    q.add_argument("roots", nargs="+", metavar="ROOT", help="a working tree")
    q = cmd("tools", "print the tool definitions an agent loop offers its model, and the rule")
    q.add_argument(
        "--format", choices=FORMATS, default="anthropic",
        help="the API the definitions are for (default: anthropic)",
    )  # fmt: skip
    q = cmd("mcp", "serve the tools over the Model Context Protocol on stdio (docs/mcp.md)")
    q.add_argument(
        "--log", metavar="FILE",
        help="this session's transcript or log (default: the newest transcript of the root)",
    )  # fmt: skip

    options: set[str] = set()
    stack: list[argparse.ArgumentParser] = [p]
    while stack:
        parser = stack.pop()
        for action in parser._actions:
            options.update(o for o in action.option_strings if o.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    _Parser.options = tuple(sorted(options))
    return p


def _opt(ns: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(ns, name, default)


def _root_of(ns: argparse.Namespace) -> Path:
    from nodwyn_retrieval.store.paths import git_toplevel  # noqa: PLC0415

    r = _opt(ns, "root")
    here = Path(r) if r else Path.cwd()
    if not here.is_dir():
        raise NotFound(f"root {here} is not a directory")
    return git_toplevel(here) or here.resolve()


def _log_of(ns: argparse.Namespace, root: Path) -> Path | None:
    from nodwyn_retrieval.store.log import log_path  # noqa: PLC0415
    from nodwyn_retrieval.store.paths import data_dir, project_dirs, project_key  # noqa: PLC0415

    if _opt(ns, "log") == "":
        raise BadInput("--log needs the path of a session's .jsonl, got ''")
    if _opt(ns, "log"):
        p = Path(ns.log)
        if not p.is_file():
            raise NotFound(f"no log at {p}: give the path of a session's .jsonl")
        return p
    if _opt(ns, "task") is not None:
        tasks = project_dirs(data_dir(_opt(ns, "data_dir")), project_key(root)).tasks
        p = log_path(tasks, ns.task)
        if not p.is_file():
            raise NotFound(f"no task {ns.task} in this project (its logs are in {tasks})")
        return p
    return None


def _discard(event: dict[str, Any]) -> None:
    """The command line is not a session: it keeps no records of its own."""


async def _engine(ns: argparse.Namespace, root: Path, log: Path | None = None) -> Engine:
    from nodwyn_retrieval.entry import Engine  # noqa: PLC0415

    # The command line reads a session's log and never writes it or beside it: a log has one
    # writer, the agent loop whose session it is (docs/log-format.md).
    return await Engine.open(
        root, data_dir=_opt(ns, "data_dir"), config_dir=_opt(ns, "config_dir"), log=log,
        record=_discard, workers=_opt(ns, "workers"),
    )  # fmt: skip


async def _run(ns: argparse.Namespace) -> tuple[str, Any, str | None]:
    """Run one command; return its text, its JSON document and a failure to report (exit 1)."""
    cmd = ns.command
    if cmd == "tools":
        from nodwyn_retrieval.tools import tool_definitions, working_rule  # noqa: PLC0415

        defs = tool_definitions(ns.format)
        rule = working_rule()
        names = [d.get("name") or d["function"]["name"] for d in defs]
        text = "\n\n".join(
            f"{n}: {d.get('description') or d['function']['description']}"
            for n, d in zip(names, defs, strict=True)
        )
        return text + f"\n\nrule: {rule}", {"tools": defs, "rule": rule}, None
    if cmd == "earlier":
        from nodwyn_retrieval.store.config import set_earlier_tasks  # noqa: PLC0415
        from nodwyn_retrieval.store.paths import config_dir, project_key  # noqa: PLC0415

        root = _root_of(ns)
        key = project_key(root)
        set_earlier_tasks(config_dir(_opt(ns, "config_dir")), key, ns.state == "on", root=str(root))
        doc = {"project": key, "earlier_tasks": ns.state == "on"}
        return f"earlier tasks {ns.state} for {key}", doc, None
    if cmd == "refresh":
        return await _refresh_many(ns)
    root = _root_of(ns)
    # recall --task names an earlier task (switch-gated, §9); search --task names this session.
    task_is_earlier = cmd == "recall" and _opt(ns, "task") is not None
    log = _log_of(ns, root) if cmd in ("search", "recall") and not task_is_earlier else None
    if cmd == "search" and ns.scope == "conversation" and log is None:
        raise BadInput(
            "search --scope conversation needs this session's log: --log FILE or --task ID"
        )
    if cmd == "recall" and log is None and not task_is_earlier:
        raise BadInput("recall needs a session's log: --log FILE or --task ID")
    engine = await _engine(ns, root, log)
    try:
        if cmd == "search":
            out = await engine.index_search(ns.query, ns.scope, ns.limit, ns.path)
            return out.text, out.to_json(), None
        if cmd == "update":
            # One call, as the tool makes it: at most 60 s, and the next call goes on (§5).
            bar = _bar(ns)
            up = await _update(engine, ns.path, bar, root.name or str(root))
            if bar is not None:
                bar.clear()
            return up.text, up.to_json(), _unsaved(up.summary)
        if cmd == "recall":
            task = ns.task if task_is_earlier else None
            r = await engine.recall(ns.seq, ns.start, ns.count, task)
            return r.text, r.data, None
        if cmd == "status":
            st = await engine.index_status()
            from nodwyn_retrieval.mcp_server import record_logs  # noqa: PLC0415 - status only

            st["server_logs"] = [str(p) for p in record_logs(engine.dirs)]
            return _status_text(st), st, None
        if cmd == "forget":
            fg = await engine.index_forget()
            text = f"forgot the index of {fg['project']} ({_plural(fg['deleted_bytes'], 'byte')})"
            return text, fg, None
        if cmd == "memory":
            if ns.memory_command == "search":
                out = await engine.memory_search(ns.query, ns.limit)
                return out.text, out.to_json(), None
            r = await engine.memory_recall(ns.task, ns.seq, ns.start, ns.count)
            return r.text, r.data, None
    finally:
        await engine.close()
    raise BadInput(f"unknown command {cmd!r}")


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _unsaved(summary: dict[str, Any]) -> str | None:
    if summary.get("saved", True):
        return None
    return f"the index was not saved: {summary.get('store_error') or 'the store failed'}"


class _ProgressBar:
    """One live line on a terminal: files read of files to read, MB/s and time left."""

    WIDTH = 24

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._shown = False
        self._t0 = time.monotonic()
        utf8 = (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8"
        self._full, self._empty = ("\u2588", "\u2591") if utf8 else ("#", "-")

    def draw(
        self, label: str, p: Progress, before: tuple[int, int] = (0, 0), running: bool = False
    ) -> None:
        if not p.planned:
            text = f"{label}: listing files ({time.monotonic() - self._t0:.0f} s)"
        else:
            done = before[0] + p.read
            total = before[0] + p.to_read
            elapsed = max(time.monotonic() - p.started, 1e-6)
            rate = p.bytes_read / elapsed
            left = (p.bytes_to_read - p.bytes_read) / rate if rate > 0 else None
            eta = "--:--" if left is None else _clock(left)
            rest = f"{done:,} of {_plural(total, 'file')} read, {rate / 1e6:.1f} MB/s, {eta} left"
            if running and p.read >= p.to_read:
                rest += ", saving the index"
            # The bar takes what the line leaves, between 8 and WIDTH cells.
            width = max(8, min(self.WIDTH, _columns(self.stream) - 3 - len(label) - len(rest)))
            share = done / total if total else 1.0
            n = min(width, int(share * width))
            text = f"{label} {self._full * n}{self._empty * (width - n)} {rest}"
        cols = _columns(self.stream) - 1
        self.stream.write("\r" + text[:cols] + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


def _clock(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def _columns(stream: Any) -> int:
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        cols = 0
    return cols if cols > 20 else 80  # a terminal that says nothing of its size


def _bar(ns: argparse.Namespace) -> _ProgressBar | None:
    """A live progress bar on a terminal's stderr; none when stderr is not a terminal."""
    if _opt(ns, "json") or not sys.stderr.isatty():
        return None
    return _ProgressBar(sys.stderr)


async def _update(
    engine: Engine, path: str | None, bar: _ProgressBar | None, label: str,
    before: tuple[int, int] = (0, 0),
) -> UpdateOutput:  # fmt: skip
    """One index-update call, drawing its progress on the bar (if any) four times a second.

    ``before`` is what earlier calls on this tree read (files, bytes), for a bar per tree. The bar
    is drawn from a thread of its own, so it moves on while the event loop is busy (storing and
    merging a big index)."""
    if bar is None:
        return await engine.index_update(path)
    import threading  # noqa: PLC0415 - loaded when a command runs, not for --version

    from nodwyn_retrieval.actors.messages import Progress  # noqa: PLC0415

    progress = Progress()
    stop = threading.Event()

    def paint() -> None:
        while not stop.wait(0.25):
            bar.draw(label, progress, before, running=True)

    bar.draw(label, progress, before, running=True)
    painter = threading.Thread(target=paint, name="progress bar", daemon=True)
    painter.start()
    try:
        up = await engine.index_update(path, progress=progress)
    finally:
        stop.set()
        painter.join()
    bar.draw(label, progress, before)
    return up


async def _refresh_many(ns: argparse.Namespace) -> tuple[str, Any, str | None]:
    """Headless batch refresh: each tree brought fully up to date, one summary line each."""
    from nodwyn_retrieval.store.paths import git_toplevel  # noqa: PLC0415

    bar = _bar(ns)
    lines: list[str] = []
    docs: list[dict[str, Any]] = []
    failed: str | None = None
    roots = [Path(r) for r in ns.roots]
    for r in roots:
        if not r.is_dir():
            raise NotFound(f"root {r} is not a directory")
    for i, r in enumerate(roots, 1):
        top = git_toplevel(r) or r.resolve()
        label = f"[{i}/{len(roots)}] {top.name or top}" if len(roots) > 1 else str(top.name or top)
        engine = await _engine(ns, top)
        try:
            calls = 0
            seen_left = 1 << 62  # files not looked at yet after the last call
            total_read = 0
            total_bytes = 0
            t0 = time.perf_counter()
            while True:
                calls += 1
                up = await _update(engine, None, bar, label, (total_read, total_bytes))
                total_read += up.summary["read"]
                total_bytes += up.summary["bytes"]
                # Done when nothing is left unread; past a limit of §2 more calls add nothing.
                # A call stopped before it looked at every file goes on at the next, while the
                # calls still get further.
                not_seen = up.summary.get("not_seen", 0)
                if (not_seen == 0 or not_seen >= seen_left) and (
                    up.summary["not_read"] == 0 or up.summary["read"] == 0
                ):
                    break
                seen_left = not_seen
            s = dict(up.summary)
            s.update(
                root=str(top),
                read=total_read,
                bytes=total_bytes,
                calls=calls,
                seconds=round(time.perf_counter() - t0, 3),
            )
            docs.append(s)
            failed = failed or _unsaved(s)
            lines.append(
                f"{top}: {_plural(s['files'], 'file')}, read {total_read:,}, removed "
                f"{s['removed']:,}{', partial' if s['partial'] else ''}"
                f"{', not saved' if not s.get('saved', True) else ''} ({s['seconds']:.1f} s)"
            )
        finally:
            if bar is not None:
                bar.clear()
            await engine.close()
    return "\n".join(lines), {"trees": docs}, failed


def _status_text(st: dict[str, Any]) -> str:
    out = [
        f"project {st['project']}",
        f"index {st['index_dir']} ({_plural(st['index_bytes'], 'byte')})",
    ]
    for t in st["trees"]:
        out.append(
            f"  {t['root']}: {_plural(t['files'], 'file')}, {_plural(t['bytes'], 'byte')}, "
            f"changed {t['changed']}"
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
    import asyncio  # noqa: PLC0415 - loaded when a command runs, not for --version

    try:
        import uvloop  # noqa: PLC0415 - optional: it does not install everywhere
    except ImportError:  # not on this platform
        return asyncio.run(coro)
    return uvloop.run(coro)


def _log_to_stderr(debug: bool) -> None:
    """Every line a logger (the library's, or a warning) writes on stderr starts as the command
    line's own errors do: ``nodwyn-retrieval: ``."""
    import logging  # noqa: PLC0415 - loaded when a command runs, not for --version

    class _Prefixed(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            text = super().format(record)
            if sys.stderr.isatty():  # a warning may name a cloned file
                text = _visible(text)
            return "\n".join(f"{PROG}: {line}" for line in text.splitlines() or [""])

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Prefixed("%(message)s"))
    for name in ("nodwyn_retrieval", "py.warnings"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if debug else logging.WARNING)
        logger.propagate = False
    logging.captureWarnings(True)


# C0 and C1 control characters but the newline and the tab, and DEL: what a terminal takes as
# a command (ESC ] 2 ; sets its title, ESC [ 2 J clears it, CSI is one byte in C1).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str, *, as_json: bool = False) -> str:
    """Text for a terminal: each control character a file or a file's name holds shown as
    ``\\x1b`` (in JSON as ``\\u001b``, which JSON reads back), so a cloned tree cannot write
    commands to the person's terminal."""
    form = "\\u{:04x}" if as_json else "\\x{:02x}"
    return _CONTROLS.sub(lambda m: form.format(ord(m.group())), text)


def _say(text: str) -> None:
    """One line on stderr, its control characters shown when stderr is a terminal."""
    print(_visible(text) if sys.stderr.isatty() else text, file=sys.stderr)


def _print(text: str, *, as_json: bool = False) -> int:
    """Print to stdout; a reader that closed the pipe (``| head -1``) ends the command quietly,
    as rg and grep do. To a terminal, control characters are shown, not sent (:func:`_visible`)."""
    from nodwyn_retrieval.actors.messages import utf8_text  # noqa: PLC0415

    # A lone surrogate (a name's byte that is not UTF-8, an event's "\\ud800") is no UTF-8: a
    # UTF-8 stdout refuses it. It is written as its escape, which JSON reads back as it was.
    text = utf8_text(text)
    try:
        if sys.stdout.isatty():
            text = _visible(text, as_json=as_json)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that says nothing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: exit 0 done, 2 bad input, 1 anything else."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        ns = _parser().parse_args(args)
        _log_to_stderr(debug)
        if ns.command == "mcp":
            from nodwyn_retrieval import mcp_server  # noqa: PLC0415 - the server only

            return mcp_server.main(ns)
        text, doc, failed = _run_async(_run(ns))
    except BadInput as e:
        if debug:
            raise
        _say(f"{PROG}: {e}")
        return 2
    except RetrievalError as e:
        if debug:
            raise
        _say(f"{PROG}: {e}")
        return 1
    except KeyboardInterrupt:
        _say(f"{PROG}: interrupted")
        return 130
    except Exception as e:
        if debug:
            raise
        _say(f"{PROG}: unexpected error: {type(e).__name__}: {e} (run with --debug)")
        return 1
    if _opt(ns, "json"):
        _print(json.dumps(doc, ensure_ascii=False, indent=None), as_json=True)
    else:
        _print(text)
    if failed is not None:
        _say(f"{PROG}: {failed}")
        return 1
    return 0
