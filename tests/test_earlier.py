"""Earlier tasks: the project's other logs searched as one collection when the person allows it
(ADR 0050 §9, ADR 51's amendment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nodwyn_retrieval.actors.earlier as earlier_module
import pytest
from nodwyn_retrieval.actors.earlier import DISABLED, EarlierActor, EarlierRecall, EarlierSearch
from nodwyn_retrieval.actors.messages import SearchOutput, ToolOutput
from nodwyn_retrieval.bus import ActorSystem
from nodwyn_retrieval.errors import BadInput, Disabled, NotFound
from nodwyn_retrieval.retrieval.bm25 import Part, SegmentBuilder, search_all
from nodwyn_retrieval.retrieval.events import (
    conversation_terms,
    conversation_words,
    event_counts,
)
from nodwyn_retrieval.retrieval.words import query_words
from nodwyn_retrieval.store.config import Config
from nodwyn_retrieval.store.log import write_task_meta
from nodwyn_retrieval.store.mem import mem_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo

ROOT = Path(__file__).resolve().parent.parent
DAY = 86_400 * 10**9


def write_task(
    tasks: Path,
    tid: str,
    turns: list[list[tuple[str, dict[str, Any]]]],
    *,
    day: int,
    archived: bool = False,
    title: str = "",
) -> Path:
    """A task's log (whole turns of events) and meta, its log last changed on day ``day``."""
    tasks.mkdir(parents=True, exist_ok=True)
    path = tasks / f"{tid}.jsonl"
    lines = []
    seq = 0
    for n, events in enumerate(turns, 1):
        for kind, fields in [*events, ("turn.end", {})]:
            seq += 1
            lines.append(
                json.dumps(
                    {
                        "seq": seq,
                        "ts": f"2026-10-{day:02d}T09:00:00Z",
                        "kind": kind,
                        "turn": n,
                        "agent": "main",
                        **fields,
                    }
                )
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_task_meta(
        path, title=title or tid, created=f"2026-10-{day:02d}T09:00:00.000Z", archived=archived
    )
    os.utime(path, ns=(day * DAY, day * DAY))
    return path


def read(text: str, path: str = "a.go") -> list[tuple[str, dict[str, Any]]]:
    """A reply reading a file and the read's result."""
    return [
        (
            "llm.resp",
            {"text": "Reading.", "calls": [{"id": "c", "name": "fs-read", "args": {"path": path}}]},
        ),
        (
            "tool.result",
            {"call_id": "c", "name": "fs-read", "args": {"path": path}, "output": text},
        ),
    ]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    """This project's tasks: an old archived one, a newer one, and the current one."""
    d = tmp_path / "projects" / "p" / "tasks"
    fix = [("person.message", {"text": "Fix the credential binding"})]
    write_task(
        d, "t-old", [[*fix, *read("func Bind(host string) error")]], day=3, archived=True,
        title="binding fix",
    )  # fmt: skip
    rename = [("person.message", {"text": "Rename ScrubEnv"})]
    document = [("person.message", {"text": "Document the credential binding"})]
    doc = "binding docs\nline two\nline three\nthe binding rule"
    first = [*rename, *read("func ScrubEnv(env []string)", "env.go")]
    write_task(d, "t-new", [first, [*document, *read(doc, "doc.md")]], day=9, title="rename")
    write_task(
        d,
        "t-current",
        [[("person.message", {"text": "credential binding in the current task"})]],
        day=12,
    )
    other = tmp_path / "projects" / "q" / "tasks"
    write_task(
        other,
        "t-other",
        [[("person.message", {"text": "credential binding of another project"})]],
        day=10,
    )
    return d


async def ask(actor: EarlierActor, message: object) -> Any:
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="earlier")
        return await ref.ask(message)


def earlier(tasks: Path) -> EarlierActor:
    return EarlierActor(
        tasks, "p", tasks.parent / "config", Config(), current=tasks / "t-current.jsonl"
    )


async def search(
    tasks: Path, query: str, *, allowed: bool = True, person: bool = False
) -> SearchOutput:
    out = await ask(earlier(tasks), EarlierSearch(query, 8, allowed, person))
    assert isinstance(out, SearchOutput)
    return out


async def recall(
    tasks: Path,
    task: str,
    seq: int,
    start: int | None = None,
    count: int | None = None,
    *,
    allowed: bool = True,
) -> ToolOutput:
    out = await ask(earlier(tasks), EarlierRecall(task, seq, start, count, allowed))
    assert isinstance(out, ToolOutput)
    return out


@pytest.mark.asyncio
async def test_searching_earlier_tasks_is_off_unless_allowed(tasks: Path) -> None:
    with pytest.raises(
        Disabled,
        match=r"^searching earlier tasks is off for this project; a person turns it on with "
        r"`nodwyn-retrieval earlier on`$",
    ):
        await search(tasks, "credential binding", allowed=False)


@pytest.mark.asyncio
async def test_recall_with_a_task_is_off_unless_allowed(tasks: Path) -> None:
    with pytest.raises(Disabled, match=rf"^{DISABLED.replace('`', '.')}$"):
        await recall(tasks, "t-old", 1, allowed=False)


@pytest.mark.asyncio
async def test_this_projects_tasks_are_found_and_the_archived_one_marked(tasks: Path) -> None:
    out = await search(tasks, "credential binding")
    found = {(h["task"], h["seq"]) for h in out.hits}
    assert ("t-old", 1) in found
    assert ("t-new", 5) in found
    old = next(h for h in out.hits if h["task"] == "t-old")
    assert (old["date"], old["archived"], old["title"]) == ("2026-10-03", True, "binding fix")
    assert 'task t-old (2026-10-03, archived) "binding fix" · turn 1' in out.text
    assert out.header == {"events": 12, "ranked": 9, "tasks": 2, "text": out.text.splitlines()[0]}
    assert {h["provenance"] for h in out.hits} == {"external:log"}


@pytest.mark.asyncio
async def test_neither_the_current_task_nor_another_projects_is_ever_found(tasks: Path) -> None:
    out = await search(tasks, "current another project")
    assert {h["task"] for h in out.hits} <= {"t-old", "t-new"}
    assert "current" not in out.text
    assert "another project" not in out.text


@pytest.mark.asyncio
async def test_a_task_is_recalled_in_a_range(tasks: Path) -> None:
    out = await recall(tasks, "t-new", 7, start=2, count=2)
    assert out.text.splitlines() == [
        "seq 7 of task t-new · tool.result · turn 2 · 2026-10-09T09:00:00Z",
        'result of fs-read {"path": "doc.md"}',
        "[lines 2-3 of 4]",
        "line two",
        "line three",
    ]
    assert out.provenance == "external:log"
    assert out.data["task"] == "t-new"


@pytest.mark.asyncio
async def test_another_projects_task_is_refused(tasks: Path) -> None:
    with pytest.raises(NotFound, match=r"^task t-other is not a task of this project$"):
        await recall(tasks, "t-other", 1)


@pytest.mark.parametrize("task", ["../q/tasks/t-other", "a/b", "..", "x..y"])
@pytest.mark.asyncio
async def test_a_task_id_that_names_a_path_is_bad_input(tasks: Path, task: str) -> None:
    with pytest.raises(BadInput, match=r"^task id '.*' is not a task id: it names a path$"):
        await recall(tasks, task, 1)


@pytest.mark.asyncio
async def test_a_missing_seq_of_a_task_names_the_seqs_it_has(tasks: Path) -> None:
    with pytest.raises(
        NotFound, match=r"^no event with seq 40 in task t-old \(it has seqs 1 to 4\)$"
    ):
        await recall(tasks, "t-old", 40)


@pytest.mark.asyncio
async def test_a_log_that_grew_is_read_again(tasks: Path) -> None:
    assert (await search(tasks, "zanzibar")).hits == []
    log = tasks / "t-old.jsonl"
    more = {
        "seq": 5,
        "ts": "x",
        "kind": "person.message",
        "turn": 2,
        "agent": "main",
        "text": "zanzibar",
    }
    log.write_text(log.read_text() + json.dumps(more) + "\n")
    assert [(h["task"], h["seq"]) for h in (await search(tasks, "zanzibar")).hits] == [("t-old", 5)]


@pytest.mark.asyncio
async def test_a_deleted_task_is_gone_with_its_mem(tasks: Path) -> None:
    await search(tasks, "credential")
    assert mem_path(tasks / "t-old.jsonl").exists()
    (tasks / "t-old.jsonl").unlink()
    out = await search(tasks, "credential binding")
    assert {h["task"] for h in out.hits} == {"t-new"}
    assert not mem_path(tasks / "t-old.jsonl").exists()
    with pytest.raises(NotFound, match=r"^task t-old is not a task of this project$"):
        await recall(tasks, "t-old", 1)


@pytest.mark.asyncio
async def test_a_corrupt_mem_of_one_task_is_rebuilt_while_the_others_are_used(tasks: Path) -> None:
    before = await search(tasks, "credential binding ScrubEnv")
    old, new = mem_path(tasks / "t-old.jsonl"), mem_path(tasks / "t-new.jsonl")
    kept = os.stat(new)
    data = bytearray(old.read_bytes())
    for i in range(len(data) - 300, len(data)):
        data[i] ^= 0xA5
    old.write_bytes(bytes(data))
    after = await search(tasks, "credential binding ScrubEnv")
    assert after.text == before.text
    assert (os.stat(new).st_ino, os.stat(new).st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)
    assert old.read_bytes() != bytes(data)


@pytest.mark.asyncio
async def test_scores_across_several_mems_equal_those_of_one_collection(tasks: Path) -> None:
    query = "credential binding env rename"
    out = await search(tasks, query)
    # One segment holding every event of both tasks, the newer task's first.
    b = SegmentBuilder()
    names = []
    for tid in ("t-new", "t-old"):
        for n, line in enumerate((tasks / f"{tid}.jsonl").read_text().splitlines(), 1):
            counts = event_counts(json.loads(line))
            if counts is not None:
                b.add(counts)
                names.append((tid, n))
    seg = b.build()
    # The terms as the search finds them: the query's words and their forms the logs hold.
    terms = conversation_terms(
        conversation_words(query), lambda ws: [w for w in ws if seg.word_id(w) is not None]
    )
    assert {t.word for t in terms} > set(query_words(query))  # "bind" for "binding"
    want = search_all([Part(seg)], {t.word: t.weight for t in terms}, 8)
    assert [(h["task"], h["seq"], h["score"]) for h in out.hits] == [
        (*names[w.doc], round(w.score, 4)) for w in want
    ]


@pytest.mark.asyncio
async def test_a_tie_goes_to_the_newer_task(tmp_path: Path) -> None:
    d = tmp_path / "tasks"
    same = [[("person.message", {"text": "the same words"})]]
    write_task(d, "a-older", same, day=1)
    write_task(d, "b-newer", same, day=2)
    out = await search(d, "same words")
    assert [h["task"] for h in out.hits] == ["b-newer", "a-older"]
    assert out.hits[0]["score"] == out.hits[1]["score"]


@pytest.mark.asyncio
async def test_a_person_searches_and_recalls_every_task_whatever_the_switch(tasks: Path) -> None:
    out = await search(tasks, "credential binding", allowed=False, person=True)
    assert "t-current" in {h["task"] for h in out.hits}
    recalled = await ask(earlier(tasks), EarlierRecall("t-old", 1, None, None, False, person=True))
    assert recalled.text.splitlines()[-1] == "Fix the credential binding"


@pytest.mark.asyncio
async def test_a_search_keeps_no_file_open_after_it(tasks: Path) -> None:
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc here")
    actor = earlier(tasks)
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="earlier")
        await ref.ask(EarlierSearch("credential", 8, True))
        open_before = len(list(fds.iterdir()))
        await ref.ask(EarlierSearch("credential binding", 8, True))
        await ref.ask(EarlierRecall("t-new", 7, 1, 2, True))
        assert len(list(fds.iterdir())) == open_before


@pytest.mark.slow
@pytest.mark.asyncio
async def test_logs_folded_in_worker_processes_search_as_logs_folded_here(
    tasks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = await search(tasks, "credential binding ScrubEnv")
    for m in tasks.glob("*.mem"):
        m.unlink()
    monkeypatch.setattr(earlier_module, "POOL_MIN_BYTES", 0)
    actor = earlier(tasks)
    async with ActorSystem() as system:
        ref = system.spawn(actor, name="earlier")
        there = await ref.ask(EarlierSearch("credential binding ScrubEnv", 8, True))
    assert isinstance(there, SearchOutput)
    assert there.text == here.text
    assert sorted(m.name for m in tasks.glob("*.mem")) == ["t-new.mem", "t-old.mem"]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", *args, "--root", str(tmp_path / "repo"),
         "--data-dir", str(tmp_path / "data"), "--config-dir", str(tmp_path / "config")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository and its tasks in the data directory, as the command line finds them."""
    repo = make_repo(tmp_path / "repo", {"README.md": "a project\n"})
    d = project_dirs(tmp_path / "data", project_key(repo)).tasks
    write_task(d, "t-1", [[("person.message", {"text": "Fix the credential binding"})]], day=3)
    return d


def test_the_switch_is_off_by_default_and_a_person_turns_it_on(
    tmp_path: Path, project: Path
) -> None:
    off = cli(tmp_path, "search", "credential binding", "--scope", "earlier")
    assert (off.returncode, off.stderr) == (1, f"nodwyn-retrieval: {DISABLED}\n")
    assert cli(tmp_path, "earlier", "on").returncode == 0
    on = cli(tmp_path, "search", "credential binding", "--scope", "earlier", "--json")
    assert on.returncode == 0, on.stderr
    (hit,) = json.loads(on.stdout)["results"]
    assert (hit["task"], hit["seq"], hit["date"]) == ("t-1", 1, "2026-10-03")


def test_memory_search_and_recall_work_whatever_the_switch(tmp_path: Path, project: Path) -> None:
    found = cli(tmp_path, "memory", "search", "credential binding")
    assert found.returncode == 0, found.stderr
    assert "task t-1 (2026-10-03)" in found.stdout
    got = cli(tmp_path, "memory", "recall", "t-1", "1")
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[-1] == "Fix the credential binding"
    gone = cli(tmp_path, "memory", "recall", "t-9", "1")
    assert (gone.returncode, gone.stderr) == (
        2,
        "nodwyn-retrieval: task t-9 is not a task of this project\n",
    )


@pytest.mark.asyncio
async def test_a_tasks_meta_is_read_again_only_when_it_changed(
    tasks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The actor keeps each task's meta between searches while its file's stat and its log's
    time are the same: a title rewritten (atomically, or in place with the same size), a meta
    removed, or a log touched is seen at the next search; an unchanged one is not read again."""
    from nodwyn_retrieval.store import mem_log

    monkeypatch.setattr(mem_log, "RACY_NS", 0)  # every meta here is older than the window
    reads: list[str] = []
    real = earlier_module.task_meta

    def counted(path: Path) -> Any:
        reads.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(earlier_module, "task_meta", counted)

    def old_hit(out: SearchOutput) -> dict[str, Any]:
        return next(h for h in out.hits if h["task"] == "t-old")

    meta = tasks / "t-old.meta.json"
    async with ActorSystem() as system:
        ref = system.spawn(earlier(tasks), name="earlier")
        first = await ref.ask(EarlierSearch("credential binding", 8, True))
        assert old_hit(first)["title"] == "binding fix"
        assert "t-old.jsonl" in reads
        reads.clear()
        again = await ref.ask(EarlierSearch("credential binding", 8, True))
        assert old_hit(again)["title"] == "binding fix"
        assert reads == []  # nothing changed: no meta read

        write_task_meta(tasks / "t-old.jsonl", title="binding mend", created="2026-10-03T09:00:00Z")
        out = await ref.ask(EarlierSearch("credential binding", 8, True))
        assert (old_hit(out)["title"], old_hit(out)["archived"]) == ("binding mend", False)
        assert reads == ["t-old.jsonl"]

        # In place, the same size: the change times differ.
        text = meta.read_text(encoding="utf-8")
        with meta.open("r+", encoding="utf-8") as f:
            f.write(text.replace("binding mend", "binding MEND"))
        out = await ref.ask(EarlierSearch("credential binding", 8, True))
        assert old_hit(out)["title"] == "binding MEND"

        meta.unlink()  # gone: the title falls back, created comes from the log's time
        out = await ref.ask(EarlierSearch("credential binding", 8, True))
        assert (old_hit(out)["title"], old_hit(out)["date"]) == ("", "1970-01-04")

        os.utime(tasks / "t-old.jsonl", ns=(4 * DAY, 4 * DAY))  # created follows the log
        out = await ref.ask(EarlierSearch("credential binding", 8, True))
        assert old_hit(out)["date"] == "1970-01-05"


@pytest.mark.asyncio
async def test_a_meta_written_within_the_racy_window_is_read_at_every_search(
    tasks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A meta changed in the same clock tick as the search's read could keep its stat: it is
    not kept until it is older than the window (store.mem_log.RACY_NS)."""
    from nodwyn_retrieval.store import mem_log

    monkeypatch.setattr(mem_log, "RACY_NS", 3_600 * 10**9)
    reads: list[str] = []
    real = earlier_module.task_meta
    monkeypatch.setattr(
        earlier_module, "task_meta", lambda p: reads.append(Path(p).name) or real(p)
    )
    async with ActorSystem() as system:
        ref = system.spawn(earlier(tasks), name="earlier")
        for _ in range(3):
            await ref.ask(EarlierSearch("credential binding", 8, True))
    assert reads.count("t-old.jsonl") == 3


@pytest.mark.asyncio
async def test_a_meta_that_cannot_be_statted_labels_its_task_with_defaults(tasks: Path) -> None:
    """A meta whose stat fails other than by its absence (a link to itself: ELOOP) is read by
    task_meta, which says what is wrong and gives the defaults: the task is still found."""
    meta = tasks / "t-old.meta.json"
    meta.unlink()
    meta.symlink_to(meta.name)  # a loop
    out = await search(tasks, "credential binding")
    old = next(h for h in out.hits if h["task"] == "t-old")
    assert (old["title"], old["archived"]) == ("", False)
