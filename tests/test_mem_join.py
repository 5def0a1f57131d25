"""The tasks directory's joined words (store.mem_join): a later search of earlier tasks reads them
for every task whose log is unchanged, answers exactly as the tasks' own views do, and sees every
log that changed since they were written."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path
from typing import Any

import nodwyn_retrieval.actors.earlier as earlier_mod
import numpy as np
import pytest
from nodwyn_retrieval.actors.earlier import EarlierActor, EarlierRecall, EarlierSearch
from nodwyn_retrieval.actors.messages import SearchOutput
from nodwyn_retrieval.bus import ActorSystem
from nodwyn_retrieval.errors import Disabled, FormatError
from nodwyn_retrieval.store import mem as mem_module
from nodwyn_retrieval.store import mem_encode, mem_log
from nodwyn_retrieval.store.config import Config
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path, word_keys
from nodwyn_retrieval.store.mem_join import (
    Join,
    JoinDamaged,
    JoinedMem,
    encode_join,
    join_path,
)

from tests.test_earlier import read, write_task

QUERIES = (
    "credential binding",
    "ScrubEnv rename",
    "lock taken twice",
    "segment postings",
    "error undefined test",
    "the",
    "zanzibar",
)


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs count as settled as soon as their .mem is built: a test's logs are written a moment
    before their first search, inside the racy window (store.mem_log.RACY_NS) that a project's
    earlier tasks are long out of."""
    monkeypatch.setattr(mem_log, "RACY_NS", 0)


WORDS = [
    "credential",
    "binding",
    "lock",
    "taken",
    "twice",
    "segment",
    "postings",
    "error",
    "undefined",
    "test",
    "rename",
    "ScrubEnv",
    "the",
    "of",
    "a",
    "reader",
    "writer",
    "cache",
    "index",
    "merge",
    "flush",
    "sort",
    "docs",
    "words",
]


def make_tasks(d: Path, n: int = 7, seed: int = 3) -> Path:
    """n tasks of a few turns each, sharing words in different numbers, a few near-duplicates."""
    rng = random.Random(seed)
    for i in range(n):
        turns: list[list[tuple[str, dict[str, Any]]]] = []
        for _ in range(rng.randint(1, 4)):
            said = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
            out = "\n".join(
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))
                for _ in range(rng.randint(1, 5))
            )
            turns.append(
                [
                    ("person.message", {"text": said}),
                    *read(out, f"f{rng.randint(0, 3)}.go"),
                    ("llm.resp", {"text": f"So {said}."}),
                ]
            )
        write_task(d, f"t{i:02d}", turns, day=1 + i, title=f"task {i}")
    return d


def actor(d: Path) -> EarlierActor:
    return EarlierActor(d, "p", d.parent / "config", Config())


async def search(d: Path, query: str, limit: int = 8, *, allowed: bool = True) -> SearchOutput:
    async with ActorSystem() as system:
        ref = system.spawn(actor(d), name="earlier")
        out = await ref.ask(EarlierSearch(query, limit, allowed))
    assert isinstance(out, SearchOutput)
    return out


def seen(out: SearchOutput) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    return out.text, out.hits, out.header


async def by_views(d: Path, query: str, limit: int = 8) -> SearchOutput:
    """The search as the tasks' own views answer it: no join there (each .mem is built again
    from its log), then the join written again by the next search."""
    join_path(d).unlink(missing_ok=True)
    out = await search(d, query, limit)
    await search(d, query, limit)
    assert join_path(d).exists()
    return out


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every .mem a search opens."""
    names: list[str] = []
    real = MemIndex.open.__func__  # type: ignore[attr-defined]

    def spy(cls: type[MemIndex], path: Path | str) -> MemIndex:
        names.append(Path(path).name)
        return real(cls, path)  # type: ignore[no-any-return]

    monkeypatch.setattr(MemIndex, "open", classmethod(spy))
    return names


async def joined(d: Path) -> None:
    """Searched twice: the .mem files written, then the join (which takes them in)."""
    await search(d, "credential")
    assert not join_path(d).exists()  # a search that wrote a .mem leaves the join to the next
    assert list(d.glob("*.mem"))
    await search(d, "credential")
    assert join_path(d).exists()
    assert not list(d.glob("*.mem"))


# -- the answers ---------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_later_search_reads_the_join_and_no_mem(tmp_path: Path, opened: list[str]) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    opened.clear()
    out = await search(d, "credential binding")
    assert out.hits
    assert opened == []


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_the_join_gives_the_answers_of_the_tasks_own_views(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks", n=9)
    await joined(d)
    for q in QUERIES:
        for limit in (1, 3, 8, 20):
            want = seen(await by_views(d, q, limit))
            assert seen(await search(d, q, limit)) == want, (q, limit)


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_tasks_the_join_does_not_hold_rank_with_those_it_does(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    # An unfinished turn after t03's last whole one: t03 is read through its view, with its tail.
    log = d / "t03.jsonl"
    last = json.loads(log.read_text().splitlines()[-1])
    more = {**last, "seq": last["seq"] + 1, "kind": "person.message", "turn": last["turn"] + 1}
    more["text"] = "zanzibar credential binding"
    with log.open("a") as f:
        f.write(json.dumps(more) + "\n")
    os.utime(log, ns=(4 * 86_400 * 10**9,) * 2)
    for q in QUERIES:
        got = seen(await search(d, q))
        assert got == seen(await by_views(d, q)), q
    assert any(h["task"] == "t03" for h in (await search(d, "zanzibar")).hits)


# -- every log checked ---------------------------------------------------------------------------


def append_turn(log: Path, text: str) -> None:
    lines = log.read_text().splitlines()
    last = json.loads(lines[-1])
    seq, turn = last["seq"], last["turn"] + 1
    base = {"ts": "2026-10-20T09:00:00Z", "turn": turn, "agent": "main"}
    new = [
        {**base, "seq": seq + 1, "kind": "person.message", "text": text},
        {**base, "seq": seq + 2, "kind": "turn.end"},
    ]
    log.write_text("\n".join([*lines, *map(json.dumps, new)]) + "\n")


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_log_appended_to_is_seen_by_the_next_search(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    append_turn(d / "t02.jsonl", "zanzibar")
    assert [h["task"] for h in (await search(d, "zanzibar")).hits] == ["t02"]
    await search(d, "zanzibar")  # joins it again
    assert Join.open(d) is not None
    assert [h["task"] for h in (await search(d, "zanzibar")).hits] == ["t02"]


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_log_changed_or_truncated_is_seen_by_the_next_search(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    before = await search(d, "credential binding lock")
    # t01 rewritten with other words (its size kept), t04 cut to its first turn.
    log = d / "t01.jsonl"
    text = log.read_text()
    log.write_text(text.replace("credential", "zanzibarsk"))
    cut = d / "t04.jsonl"
    lines = cut.read_text().splitlines()
    end = next(i for i, x in enumerate(lines) if json.loads(x)["kind"] == "turn.end")
    cut.write_text("\n".join(lines[: end + 1]) + "\n")
    for q in ("credential binding lock", "zanzibarsk"):
        got = seen(await search(d, q))
        assert got == seen(await by_views(d, q)), q
    assert [h["task"] for h in (await search(d, "zanzibarsk")).hits][:1] == ["t01"]
    assert seen(await search(d, "credential binding lock")) != seen(before)


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_removed_or_added_task_is_seen_by_the_next_search(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    (d / "t05.jsonl").unlink()
    write_task(d, "t99", [[("person.message", {"text": "zanzibar credential"})]], day=30)
    out = await search(d, "credential zanzibar", 20)
    assert "t05" not in {h["task"] for h in out.hits}
    assert out.hits[0]["task"] == "t99"
    assert out.header["tasks"] == 7
    await search(d, "credential")  # joins t99, and leaves t05 out
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert "t05" not in j.entries
        assert "t99" in j.entries
    assert seen(out) == seen(await by_views(d, "credential zanzibar", 20))


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_removed_task_leaves_the_join_at_the_next_search(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks", n=3)
    await joined(d)
    (d / "t01.jsonl").unlink()
    out = await search(d, "credential binding", 20)
    assert "t01" not in {h["task"] for h in out.hits}
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert sorted(j.entries) == ["t00", "t02"]
    for tid in ("t00", "t02"):
        (d / f"{tid}.jsonl").unlink()
    assert (await search(d, "credential")).hits == []
    assert not join_path(d).exists()


@pytest.mark.asyncio
async def test_a_log_changed_within_the_racy_window_is_not_joined(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks", n=3)
    for _ in range(3):
        await search(d, "credential")
    assert not join_path(d).exists()


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_the_switch_holds_with_a_join_there(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks", n=3)
    await joined(d)
    with pytest.raises(Disabled):
        await search(d, "credential", allowed=False)


# -- a damaged join ------------------------------------------------------------------------------


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        del data[len(data) * 2 // 3 :]
    elif how == "head":
        data[20] ^= 0x40
    elif how == "postings":
        # The middle of the file is the documents and frequencies: flip a byte in every 512.
        for i in range(len(data) // 3, len(data) * 2 // 3, 512):
            data[i] ^= 0x5A
    elif how == "kept":
        for i in range(len(data) - 64, len(data)):  # the cards kept from the last task
            data[i] ^= 0x5A
    else:
        data[:] = os.urandom(len(data))
    path.write_bytes(bytes(data))


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
@pytest.mark.parametrize("how", ["truncated", "head", "postings", "kept", "garbage"])
async def test_a_damaged_join_is_written_again_and_never_a_crash(tmp_path: Path, how: str) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    want = {q: seen(await search(d, q, 20)) for q in QUERIES}
    damage(join_path(d), how)
    for q in QUERIES:
        assert seen(await search(d, q, 20)) == want[q], q
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert len(j.entries) == 7


def test_a_join_reads_whole_or_is_refused_with_a_format_error(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks", n=4)
    parts = []
    for i in range(4):
        log = d / f"t{i:02d}.jsonl"
        with LogView.open(log):
            pass
        parts.append((f"t{i:02d}", mem_path(log).read_bytes()))
    good = encode_join(parts)
    keys = word_keys(WORDS)
    rng = random.Random(5)
    cases = [good[:n] for n in range(0, len(good), max(1, len(good) // 97))]
    for _ in range(300):
        b = bytearray(good)
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        cases.append(bytes(b))
    refused = 0
    for data in cases:
        join_path(d).write_bytes(data)
        try:
            with Join.open(d) as j:  # type: ignore[union-attr]
                for e in j.entries.values():
                    _, where = j.found(e, keys)
                    for g in where:
                        j.postings(e, g, 0)
                    j.lengths(e)
                    for name in ("doc_event", "ev_seq", "names", "cards"):
                        j.kept(e, name)
        except JoinDamaged:
            refused += 1
        except FormatError as exc:  # pragma: no cover - the test's failure
            pytest.fail(f"not a JoinDamaged: {exc!r}")
    assert refused > len(cases) // 2
    assert len(good) < sum(len(m) for _, m in parts)  # no word is kept twice


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_search_keeps_no_file_open_after_it(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc here")
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    before = {os.readlink(p) for p in fds.iterdir() if p.exists()}
    await search(d, "credential binding")
    after = {os.readlink(p) for p in fds.iterdir() if p.exists()}
    assert str(join_path(d)) not in after
    assert after <= before | {x for x in after if "socket" in x or "pipe" in x or "anon" in x}


# -- the .mem files taken in ---------------------------------------------------------------------


def folds_equal(a: Any, b: Any) -> None:
    for name in ("keys", "pair_doc", "pair_word", "pair_tf", "doc_len", "doc_event"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.ev.keys() == b.ev.keys()
    for name in a.ev:
        assert np.array_equal(a.ev[name], b.ev[name]), name
    assert (a.kinds, a.agents, a.cards) == (b.kinds, b.agents, b.cards)


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_the_join_takes_the_mem_files_in_and_holds_what_they_held(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await search(d, "credential")
    files = {p.stem: p.read_bytes() for p in d.glob("*.mem")}
    await search(d, "credential")
    assert not list(d.glob("*.mem"))
    assert join_path(d).stat().st_size < sum(map(len, files.values()))  # smaller on disk
    for tid, data in files.items():
        log = d / f"{tid}.jsonl"
        with LogView.open(log, write=False) as view:
            assert isinstance(view.mem, JoinedMem)
            assert not view.wrote
            mem = MemIndex.from_bytes(data)
            folds_equal(view.mem.fold(), mem.fold())
            assert (view.mem.skipped, view.mem.total_length) == (mem.skipped, mem.total_length)
        assert not mem_path(log).exists()


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_joined_task_is_recalled_from_the_join(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    hit = (await search(d, "credential binding")).hits[0]
    async with ActorSystem() as system:
        ref = system.spawn(actor(d), name="earlier")
        out = await ref.ask(EarlierRecall(hit["task"], hit["seq"], None, None, True))
    assert out.text.splitlines()[0].startswith(f"seq {hit['seq']} of task {hit['task']}")
    assert not list(d.glob("*.mem"))  # read from the join, nothing written


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_joined_task_that_grew_is_extended_from_the_join(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    log = d / "t02.jsonl"
    append_turn(log, "zanzibar credential")
    with LogView.open(log) as view:
        assert view.wrote
    grown = MemIndex.open(mem_path(log))
    alone = tmp_path / "alone" / "t02.jsonl"
    alone.parent.mkdir()
    alone.write_bytes(log.read_bytes())
    with LogView.open(alone) as view:
        assert view.mem is not None
        folds_equal(grown.fold(), view.mem.fold())
    grown.close()


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_without_its_join_a_task_whose_mem_it_held_is_built_again(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    want = seen(await search(d, "credential binding"))
    join_path(d).unlink()
    assert seen(await search(d, "credential binding")) == want
    assert len(list(d.glob("*.mem"))) == 7


def test_a_join_of_many_documents_and_words_holds_each_tasks_fold(tmp_path: Path) -> None:
    # Past 256 documents and 256 words, so that sorting the postings needs more than a byte.
    d = tmp_path / "tasks"
    for t in range(3):
        turns = [
            [("person.message", {"text": f"w{t}x{i} w{i % 300}y common {'more ' * (i % 5)}"})]
            for i in range(320)
        ]
        write_task(d, f"t{t}", turns, day=1 + t)
    mems = []
    for t in (2, 0, 1):  # newest first, as a search ranks them
        log = d / f"t{t}.jsonl"
        with LogView.open(log):
            pass
        mems.append((f"t{t}", mem_path(log).read_bytes()))
    join_path(d).write_bytes(encode_join(mems))
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert j.n_docs == 960
        assert j.n_words > 900
        for tid, data in mems:
            folds_equal(JoinedMem(j, j.entries[tid]).fold(), MemIndex.from_bytes(data).fold())
        # Taken again from that join, in another order, with one task from its .mem.
        again = encode_join([("t0", None), ("t1", mems[2][1]), ("t2", None)], j)
    join_path(d).write_bytes(again)
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert list(j.entries) == ["t0", "t1", "t2"]
        for tid, data in mems:
            folds_equal(JoinedMem(j, j.entries[tid]).fold(), MemIndex.from_bytes(data).fold())


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_joined_task_that_grew_reads_only_what_it_grew_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    log = d / "t02.jsonl"
    before = len(log.read_text().splitlines())
    append_turn(log, "zanzibar")
    folded: list[int] = []
    real = mem_module.fold_events

    def spy(events: Any) -> Any:
        folded.append(len(events))
        return real(events)

    monkeypatch.setattr(mem_encode, "fold_events", spy)
    with LogView.open(log) as view:
        assert view.wrote
    assert folded == [len(log.read_text().splitlines()) - before]  # the new turn's events only


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_recall_from_the_join_keeps_no_file_open(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc here")
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    async with ActorSystem() as system:
        ref = system.spawn(actor(d), name="earlier")
        await ref.ask(EarlierRecall("t01", 1, None, None, True))
        opened = {os.readlink(p) for p in fds.iterdir() if p.exists()}
    assert str(join_path(d)) not in opened


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_a_log_replaced_by_another_file_is_seen_by_the_next_search(tmp_path: Path) -> None:
    d = make_tasks(tmp_path / "tasks")
    await joined(d)
    log = d / "t03.jsonl"
    other = tmp_path / "t03.jsonl"
    other.write_text(log.read_text().replace("binding", "zanzibarb"))
    os.replace(other, log)  # another inode, the same size
    got = await search(d, "zanzibarb")
    assert [h["task"] for h in got.hits][:1] == ["t03"]
    assert seen(got) == seen(await by_views(d, "zanzibarb"))


@pytest.mark.asyncio
@pytest.mark.usefixtures("settled")
async def test_the_join_is_written_after_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search that finds the join behind answers before it is written (in a thread); the
    next search waits for it and reads it."""
    d = make_tasks(tmp_path / "tasks")
    await search(d, "credential")  # the .mem files, no join yet
    gate = threading.Event()
    real = earlier_mod.encode_join

    def held(*args: Any, **kwargs: Any) -> bytes:
        if not gate.wait(10):
            raise AssertionError("the join was written before the search answered")
        return real(*args, **kwargs)

    monkeypatch.setattr(earlier_mod, "encode_join", held)
    async with ActorSystem() as system:
        ref = system.spawn(actor(d), name="earlier")
        first = await ref.ask(EarlierSearch("credential", 8, True))
        assert not join_path(d).exists()
        assert list(d.glob("*.mem"))
        gate.set()
        second = await ref.ask(EarlierSearch("credential", 8, True))
        assert join_path(d).exists()
        assert not list(d.glob("*.mem"))
    assert isinstance(first, SearchOutput)
    assert isinstance(second, SearchOutput)
    assert seen(first) == seen(second)
