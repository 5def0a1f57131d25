"""Realistic session logs (LOG-FORMAT.md) of a given number of events and bytes, for benchmarks.

Usage:
    python bench/loggen.py OUT.jsonl --events 6849 --bytes 6.7e6 [--tree DIR] [--seed N]
    python bench/loggen.py TASKS_DIR --tasks 78 --events 17663 --bytes 17.3e6 [--tree DIR]

A log is a sequence of whole turns, each closed by ``turn.end``: a person's message (now and then
with an attached file), sometimes nodwyn's message, then rounds of a reply with tool calls and
their results: reads of the files of a real tree (the tree given, or this project's own files),
whole or in ranges and often again (the ADR counts 2,172 repeated reads of 3,864), grep output,
shell output of test runs and diffs, listings and edits; a search of the log or a recall now and
then; a helper agent's context (nodwyn's instructions to it, its replies and results, its
summary); plans, compactions with their notes, and the records that are never ranked (thinking,
guard decisions, model requests, egress). Tool results carry most of the bytes, as in the
person's logs. The sizes of the outputs follow the bytes still to write, so the log ends within a
few percent of ``--bytes`` at exactly ``--events`` events, its last one a ``turn.end``.

With ``--tasks``, the events and bytes are shared among that many tasks of varied length, each
``<task-id>.jsonl`` with its ``<task-id>.meta.json`` (a tenth archived), as a project's tasks
directory holds them.

Deterministic for a seed. Importable: :func:`generate_log` and :func:`generate_tasks`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {
    ".py", ".md", ".txt", ".toml", ".go", ".c", ".h", ".js", ".ts", ".rs", ".scm", ".json",
    ".yaml", ".yml", ".cfg", ".rst", ".sh", ".tex", ".html", ".css",
}  # fmt: skip
MAX_FILE = 256 * 1024
HELPERS = ("explorer", "planner", "second-look")
SHELL_CMDS = (
    "pytest -q",
    "go test ./...",
    "git diff --stat",
    "git log --oneline -20",
    "make check",
    "ruff check .",
    "mypy .",
    "ls -la",
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,40}")


def _avg_line(lines: list[str]) -> float:
    head = lines[:200]
    return max(sum(len(x) + 1 for x in head) / max(len(head), 1), 8.0)


@dataclass
class Tree:
    """The files a generated session reads: path, lines."""

    root: Path
    files: list[tuple[str, list[str]]]
    idents: list[str]
    by_path: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_path = dict(self.files)

    @classmethod
    def load(cls, root: Path, limit: int = 3000) -> Tree:
        files: list[tuple[str, list[str]]] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".") and d not in ("venv", "__pycache__")
            )
            for name in sorted(filenames):
                p = Path(dirpath, name)
                if p.suffix not in TEXT_SUFFIXES:
                    continue
                try:
                    if p.stat().st_size > MAX_FILE:
                        continue
                    text = p.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                if "\0" in text or not text.strip():
                    continue
                files.append((p.relative_to(root).as_posix(), text.splitlines()))
                if len(files) >= limit:
                    break
            if len(files) >= limit:
                break
        if not files:
            raise SystemExit(f"no text files under {root}")
        rng = random.Random(1)
        idents: set[str] = set()
        for _, lines in rng.sample(files, min(len(files), 200)):
            for line in lines[:200]:
                idents.update(_IDENT.findall(line))
        return cls(root, files, sorted(idents) or ["main"])


@dataclass
class _Gen:
    tree: Tree
    rng: random.Random
    out: Any
    target_events: int
    target_bytes: int
    clock: datetime
    seq: int = 0
    written: int = 0
    results: int = 0
    reads: list[tuple[str, int, int]] = field(default_factory=list)

    # -- writing ------------------------------------------------------------------------------

    def emit(self, kind: str, turn: int, agent: str = "main", **fields: Any) -> int:
        self.seq += 1
        self.clock += timedelta(milliseconds=self.rng.randint(50, 9000))
        ts = self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        event = {"seq": self.seq, "ts": ts, "kind": kind, "turn": turn, "agent": agent, **fields}
        line = json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode("utf-8")
        self.out.write(data)
        self.written += len(data)
        return self.seq

    @property
    def left(self) -> int:
        return self.target_events - self.seq

    def output_size(self) -> int:
        """How many bytes the next tool output should have, so the log ends near its target."""
        left_events = max(self.left, 1)
        left_bytes = max(self.target_bytes - self.written, 0)
        share = self.results / self.seq if self.seq > 50 else 0.3
        per_result = left_bytes / max(left_events * max(share, 0.05), 1.0)
        per_result -= 220  # the overhead of the event itself and of the small events around it
        return int(max(80.0, per_result * self.rng.uniform(0.3, 1.7)))

    # -- words --------------------------------------------------------------------------------

    def ident(self) -> str:
        return self.rng.choice(self.tree.idents)

    def sentence(self) -> str:
        r = self.rng
        a, b = self.ident(), self.ident()
        path = r.choice(self.tree.files)[0]
        forms = (
            f"Why does {a} in {path} call {b} twice?",
            f"Please make {a} handle an empty {b}, and add a test.",
            f"The build fails in {path}: {a} is undefined when {b} is set.",
            f"Can you rename {a} to {b} everywhere and keep the docs in step?",
            f"Look at how {a} reaches {b}; I think the lock is taken twice.",
            f"Let me read {path} to see where {a} is defined.",
            f"{a} is only used by {b}; I will check the callers in {path}.",
            f"The test for {a} passes now; {b} still needs a look.",
        )
        return r.choice(forms)

    def paragraph(self, n: int) -> str:
        return " ".join(self.sentence() for _ in range(n))

    # -- tool outputs ---------------------------------------------------------------------------

    def file_read(self) -> tuple[dict[str, Any], str]:
        """A read as the person's logs have them (ADR 0050, Context): of 3,864 reads, 2,172 read
        a path read before: 422 the same lines with no edit between, 420 after editing it, 110
        after a compaction, 1,220 other lines."""
        r = self.rng
        want = self.output_size()
        files = self.tree.by_path
        roll = r.random()
        if self.reads and roll < 0.56:
            path, start, count = r.choice(self.reads)
            lines = files[path]
            if roll < 0.24:  # the same lines again (none edited, edited, or after a compaction)
                if roll < 0.11:
                    lines = [*lines]
                    i = min(start - 1 + r.randrange(max(count, 1)), len(lines) - 1)
                    lines[i] = lines[i].replace(" ", f" {self.ident()} ", 1)
                return self._read(path, lines, start, count)
            # Other lines of a file read before.
            count = max(5, int(want / _avg_line(lines)))
            start = r.randint(1, max(len(lines) - count + 1, 1))
            return self._read(path, lines, start, count)
        path, lines = r.choice(self.tree.files)
        count = max(5, int(want / _avg_line(lines)))
        start = r.randint(1, max(len(lines) - count + 1, 1))
        return self._read(path, lines, start, count)

    def _read(
        self, path: str, lines: list[str], start: int, count: int
    ) -> tuple[dict[str, Any], str]:
        self.reads.append((path, start, count))
        if start == 1 and count >= len(lines):
            return {"path": path}, "\n".join(lines)
        args = {"path": path, "start": start, "count": count}
        return args, "\n".join(lines[start - 1 : start - 1 + count])

    def grep(self) -> tuple[dict[str, Any], str]:
        r = self.rng
        words = [self.ident() for _ in range(r.randint(2, 5))]
        want = self.output_size()
        out: list[str] = []
        size = 0
        for _ in range(400):
            path, lines = r.choice(self.tree.files)
            i = r.randrange(len(lines))
            line = f"{path}:{i + 1}:{lines[i][:300]}"
            out.append(line)
            size += len(line) + 1
            if size >= want:
                break
        return {"pattern": "|".join(words)}, "\n".join(out)

    def shell(self) -> tuple[dict[str, Any], str]:
        r = self.rng
        cmd = r.choice(SHELL_CMDS)
        want = self.output_size()
        out: list[str] = [f"$ {cmd}"]
        size = 0
        while size < want:
            path, lines = r.choice(self.tree.files)
            i = r.randrange(len(lines))
            roll = r.random()
            if roll < 0.5:
                line = f"{path}::test_{self.ident().lower()} PASSED"
            elif roll < 0.6:
                line = f"{path}:{i + 1}: error: {self.ident()} has no attribute {self.ident()}"
            elif roll < 0.8:
                line = f'  File "{path}", line {i + 1}, in {self.ident()}\n    {lines[i].strip()}'
            else:
                line = f"+{lines[i]}" if r.random() < 0.5 else f"-{lines[i]}"
            out.append(line)
            size += len(line) + 1
        out.append(f"exit status {r.choice((0, 0, 0, 1))}")
        return {"cmd": cmd}, "\n".join(out)

    def listing(self) -> tuple[dict[str, Any], str]:
        r = self.rng
        path = r.choice(self.tree.files)[0]
        folder = path.rsplit("/", 1)[0] if "/" in path else "."
        names = sorted(
            p.rsplit("/", 1)[-1] for p, _ in self.tree.files if p.startswith(folder + "/")
        )
        return {"path": folder}, "\n".join(names[:200]) or "(empty)"

    def call(self) -> tuple[str, dict[str, Any], str, bool]:
        r = self.rng
        roll = r.random()
        if roll < 0.42:
            args, out = self.file_read()
            return "fs-read", args, out, False
        if roll < 0.58:
            args, out = self.grep()
            return "index-grep", args, out, False
        if roll < 0.78:
            args, out = self.shell()
            return "shell", args, out, out.endswith("exit status 1")
        if roll < 0.84:
            args, out = self.listing()
            return "fs-list", args, out, False
        if roll < 0.88:
            return "git-status", {}, " M " + r.choice(self.tree.files)[0], False
        if roll < 0.94:
            path = r.choice(self.tree.files)[0]
            old, new = self.ident(), self.ident()
            return "fs-edit", {"path": path, "old": old, "new": new}, f"edited {path}", False
        if roll < 0.98:
            q = f"{self.ident()} {self.ident()}"
            out = "\n".join(f"seq {r.randint(1, max(self.seq, 1))} tool.result" for _ in range(4))
            return "index-search", {"query": q, "scope": "conversation"}, out, False
        return "recall", {"seq": r.randint(1, max(self.seq, 1))}, "(an earlier event)", False

    # -- turns ----------------------------------------------------------------------------------

    def round(self, turn: int, agent: str) -> None:
        """A reply with its calls, their guard records and results."""
        r = self.rng
        if r.random() < 0.3:
            self.emit("thinking", turn, agent, text=self.sentence())
        if r.random() < 0.5:
            self.emit("llm.req", turn, agent, model="m", tokens=r.randint(2000, 90000))
        calls = []
        for i in range(1 if r.random() < 0.7 else 2):
            name, args, out, err = self.call()
            calls.append((f"c{self.seq}-{i}", name, args, out, err))
        self.emit(
            "llm.resp",
            turn,
            agent,
            text=self.sentence(),
            calls=[{"id": cid, "name": n, "args": a} for cid, n, a, _, _ in calls],
        )
        for cid, name, args, out, err in calls:
            if name in ("fs-read", "index-grep", "fs-list"):
                self.emit(
                    "guard.decision",
                    turn,
                    agent,
                    path=args.get("path", "."),
                    verdict="allow",
                    rule="pin",
                    reason="inside the repository",
                    asked=False,
                    answer=None,
                )
            if name == "shell" and r.random() < 0.2:
                self.emit("egress", turn, agent, host="proxy.golang.org", verdict="allow")
            self.results += 1
            self.emit(
                "tool.result",
                turn,
                agent,
                call_id=cid,
                name=name,
                args=args,
                output=out,
                error=err,
            )

    def turn(self, turn: int) -> None:
        r = self.rng
        fields: dict[str, Any] = {"text": self.paragraph(r.randint(1, 3))}
        if r.random() < 0.1:
            path, lines = r.choice(self.tree.files)
            fields["attachments"] = [{"name": path, "text": "\n".join(lines[:60])}]
        self.emit("person.message", turn, **fields)
        if r.random() < 0.3:
            self.emit("nodwyn.message", turn, text="Repository notes: " + self.paragraph(2))
        if r.random() < 0.15:
            self.emit("plan", turn, text="\n".join(f"{i}. {self.sentence()}" for i in range(1, 5)))
        rounds = r.randint(2, 12)
        for i in range(rounds):
            if self.left <= 12:
                break
            if i == 2 and r.random() < 0.25:
                helper = r.choice(HELPERS)
                brief = f"You are the {helper}. " + self.paragraph(2)
                self.emit("nodwyn.message", turn, helper, text=brief)
                for _ in range(r.randint(1, 4)):
                    if self.left <= 12:
                        break
                    self.round(turn, helper)
                self.emit("summary", turn, helper, text=self.paragraph(2))
                continue
            if r.random() < 0.03:
                self.emit("compaction", turn, note="Earlier context: " + self.paragraph(3))
            if r.random() < 0.05:
                self.emit("note", turn, text="window at 70%")
            self.round(turn, "main")

    def close_turn(self, turn: int) -> None:
        """The turn's last reply and its turn.end; near the target, notes fill the events left, so
        the log ends at exactly its number of events."""
        if self.left >= 2:
            self.emit("llm.resp", turn, text=self.paragraph(2), calls=[])
        if self.left <= 20:
            while self.left > 1:
                self.emit("note", turn, text="idle")
        self.emit("turn.end", turn)


@dataclass(frozen=True)
class LogStats:
    """What a generated log holds."""

    path: Path
    events: int
    bytes: int
    turns: int


def generate_log(
    path: Path,
    *,
    events: int,
    size: int,
    tree: Tree | Path | None = None,
    seed: int = 0,
    start: datetime | None = None,
) -> LogStats:
    """Write a log of exactly ``events`` events and about ``size`` bytes at path."""
    if events < 3:
        raise ValueError("a generated log has at least 3 events: a message, a reply, a turn.end")
    t = tree if isinstance(tree, Tree) else Tree.load(Path(tree) if tree else PROJECT)
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    clock = start or datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
    with open(path, "wb") as f:
        g = _Gen(t, rng, f, events, size, clock)
        turn = 0
        while g.left > 0:
            turn += 1
            if g.left > 2:
                g.turn(turn)
            g.close_turn(turn)
    return LogStats(path, g.seq, g.written, turn)


def generate_tasks(
    tasks_dir: Path,
    *,
    tasks: int,
    events: int,
    size: int,
    tree: Tree | Path | None = None,
    seed: int = 0,
) -> list[LogStats]:
    """``tasks`` logs sharing ``events`` events and about ``size`` bytes, with their metas."""
    t = tree if isinstance(tree, Tree) else Tree.load(Path(tree) if tree else PROJECT)
    rng = random.Random(seed)
    weights = [rng.lognormvariate(0, 0.8) for _ in range(tasks)]
    total = sum(weights)
    counts = [max(8, int(events * w / total)) for w in weights]
    counts[-1] += events - sum(counts)
    if counts[-1] < 8:
        raise ValueError("too few events for that many tasks")
    out: list[LogStats] = []
    day = datetime(2026, 9, 30, 8, 0, tzinfo=UTC)
    for i, n in enumerate(counts):
        tid = f"t{i + 1:03d}-{rng.randrange(16**6):06x}"
        start = day + timedelta(hours=3 * i)
        stats = generate_log(
            tasks_dir / f"{tid}.jsonl",
            events=n,
            size=int(size * n / events),
            tree=t,
            seed=seed * 1000 + i,
            start=start,
        )
        meta = {
            "title": f"task {i + 1}: {t.idents[rng.randrange(len(t.idents))]}",
            "created": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "archived": rng.random() < 0.1,
            "root": str(t.root),
        }
        (tasks_dir / f"{tid}.meta.json").write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
        out.append(stats)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("out", type=Path, help="the log to write, or with --tasks the tasks directory")
    p.add_argument("--events", type=int, required=True)
    p.add_argument("--bytes", type=float, required=True)
    p.add_argument("--tasks", type=int, default=0)
    p.add_argument("--tree", type=Path, default=None, help="a tree to read (default: this project)")
    p.add_argument("--seed", type=int, default=0)
    ns = p.parse_args(argv)
    if ns.tasks:
        stats = generate_tasks(
            ns.out, tasks=ns.tasks, events=ns.events, size=int(ns.bytes), tree=ns.tree, seed=ns.seed
        )
        print(
            f"{len(stats)} tasks in {ns.out}: {sum(s.events for s in stats):,} events, "
            f"{sum(s.bytes for s in stats):,} bytes"
        )
    else:
        s = generate_log(ns.out, events=ns.events, size=int(ns.bytes), tree=ns.tree, seed=ns.seed)
        print(f"{s.path}: {s.events:,} events, {s.bytes:,} bytes, {s.turns:,} turns")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def add_image(src: Path, dst: Path, *, size: int = 2_000_000, wrap: int | None = 76) -> int:
    """Copy the log at src to dst with one more turn: a read of a screenshot whose output is
    ``size`` characters of real base64 (with ``+`` and ``/``), wrapped at ``wrap`` columns (None:
    one line), as a tool that returns an image gives it. Returns the result's seq."""
    data = src.read_bytes()
    last = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    seq, turn = int(last["seq"]), int(last.get("turn") or 0) + 1
    image = base64.b64encode(random.Random(seq).randbytes(size * 3 // 4)).decode()
    if wrap:
        image = "\n".join(image[i : i + wrap] for i in range(0, len(image), wrap))
    ts = str(last.get("ts") or "2026-10-01T09:00:00Z")
    events = [
        {"kind": "person.message", "text": "Look at the screenshot of the failing page."},
        {"kind": "llm.resp", "text": "Reading it.",
         "calls": [{"id": "img1", "name": "fs-read", "args": {"path": "screenshot.png"}}]},
        {"kind": "tool.result", "call_id": "img1", "name": "fs-read",
         "args": {"path": "screenshot.png"}, "output": f"image/png base64\n{image}\n"},
        {"kind": "turn.end"},
    ]  # fmt: skip
    with open(dst, "wb") as f:
        f.write(data)
        for i, e in enumerate(events, 1):
            line = {"seq": seq + i, "ts": ts, "turn": turn, "agent": "main", **e}
            f.write(json.dumps(line).encode() + b"\n")
    return seq + 3
