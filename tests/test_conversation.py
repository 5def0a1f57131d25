"""The conversation: this session's log searched and recalled through its actor and the command
line (ADR 0050 §8, ADR 51's amendment)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors.conversation import ConversationActor, LogSearch, Recall
from nodwyn_retrieval.actors.messages import SearchOutput, ToolOutput
from nodwyn_retrieval.bus import ActorSystem
from nodwyn_retrieval.errors import BadInput, NotFound
from nodwyn_retrieval.store.config import Config
from nodwyn_retrieval.store.mem import MemIndex, mem_path

from tests.support import Log, make_repo

ROOT = Path(__file__).resolve().parent.parent
CANARY = "ghp_" + "Zq9" * 12  # a GitHub token's shape: ghp_ and 36 letters and digits


def at_nine(seq: int) -> str:
    """Every event at one time: results show it, and the tests pin it."""
    return "2026-10-15T09:00:00Z"


BIND_GO = "\n".join(
    [
        "package keychain",
        "",
        "// Bind ties a credential to the host it may be sent to.",
        "func Bind(host string) error {",
        '\tif host == "localhost" {',
        '\t\treturn errors.New("a credential binding never names localhost")',
        "\t}",
        "\treturn nil",
        "}",
    ]
)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    """Two whole turns: a read of bind.go, a helper's shell run, a compaction; then an open turn."""
    lg = Log(tmp_path / "task.jsonl", ts=at_nine)
    lg.add("person.message", text="Why does the credential binding reject localhost?\nThanks")
    lg.add("guard.decision", path="keychain/bind.go", verdict="allow", rule="pin")
    lg.call("fs-read", BIND_GO, path="keychain/bind.go")
    lg.add("thinking", text="the binding is in keychain")
    lg.add("llm.resp", text="Bind refuses localhost on purpose.", calls=[])
    lg.end_turn()
    lg.add("person.message", text="Run the tests")
    lg.add("nodwyn.message", "explorer", text="You are the explorer: run the tests of keychain")
    lg.call("shell", "ok  keychain 0.3s\nPASS TestBindRefusesLocalhost", "explorer", cmd="go test")
    lg.add("summary", "explorer", text="The keychain tests pass.")
    lg.add("compaction", note="Earlier: the binding refuses localhost; tests pass.")
    lg.end_turn()
    lg.add("person.message", text="Now the docs")
    return lg


async def ask(path: Path, message: object, config: Config | None = None) -> Any:
    async with ActorSystem() as system:
        ref = system.spawn(ConversationActor(path, config or Config()), name="conversation")
        return await ref.ask(message)


async def search(path: Path, query: str, limit: int = 8) -> SearchOutput:
    out = await ask(path, LogSearch(query, limit))
    assert isinstance(out, SearchOutput)
    return out


async def recall(
    path: Path, seq: int, start: int | None = None, count: int | None = None
) -> ToolOutput:
    out = await ask(path, Recall(seq, start, count))
    assert isinstance(out, ToolOutput)
    return out


@pytest.mark.asyncio
async def test_an_elided_result_is_recalled_whole(log: Log) -> None:
    out = await recall(log.path, 4)
    assert out.text == (
        "seq 4 · tool.result · turn 1 · 2026-10-15T09:00:00Z\n"
        'result of fs-read {"path": "keychain/bind.go"}\n' + BIND_GO
    )
    assert out.data["call"] == {"name": "fs-read", "args": {"path": "keychain/bind.go"}}


@pytest.mark.asyncio
async def test_an_elided_result_is_recalled_in_a_range(log: Log) -> None:
    out = await recall(log.path, 4, start=4, count=3)
    assert out.text.splitlines()[2:] == [
        "[lines 4-6 of 9]",
        "func Bind(host string) error {",
        '\tif host == "localhost" {',
        '\t\treturn errors.New("a credential binding never names localhost")',
    ]
    assert out.data["lines"] == {"start": 4, "end": 6, "total": 9}


@pytest.mark.asyncio
async def test_a_reply_names_the_seq_of_each_calls_result(log: Log) -> None:
    out = await recall(log.path, 3)
    assert out.text.splitlines()[-1] == (
        '[call fs-read {"path": "keychain/bind.go"}: its result is seq 4]'
    )
    assert out.data["results"] == [
        {"call": {"name": "fs-read", "args": {"path": "keychain/bind.go"}}, "seq": 4}
    ]


@pytest.mark.asyncio
async def test_a_helper_agents_result_is_labelled_with_its_agent(log: Log) -> None:
    out = await search(log.path, "TestBindRefusesLocalhost")
    hit = out.hits[0]
    assert (hit["seq"], hit["kind"], hit["agent"]) == (11, "tool.result", "explorer")
    assert '  seq 11 tool.result (explorer) of shell {"cmd": "go test"}' in out.text.splitlines()
    recalled = await recall(log.path, 11)
    assert recalled.text.splitlines()[0] == (
        "seq 11 · tool.result · explorer's context · turn 2 · 2026-10-15T09:00:00Z"
    )


@pytest.mark.asyncio
async def test_nodwyns_message_to_a_helper_is_neither_found_nor_recalled(log: Log) -> None:
    out = await search(log.path, "explorer")
    assert 9 not in [h["seq"] for h in out.hits]
    with pytest.raises(
        BadInput,
        match=r"^seq 9 is a nodwyn.message in explorer's context, which recall does not read$",
    ):
        await recall(log.path, 9)


@pytest.mark.asyncio
async def test_a_compaction_is_named_as_a_note_and_not_taken_for_an_agents_context(
    log: Log,
) -> None:
    out = await search(log.path, "earlier tests pass")
    hit = next(h for h in out.hits if h["seq"] == 13)
    assert (hit["kind"], hit["agent"], hit["call"]) == ("compaction", "main", None)
    assert "  seq 13 compaction note" in out.text.splitlines()
    assert "compacted at seq 13" in hit["card"]


@pytest.mark.asyncio
async def test_results_and_recalls_carry_external_log_provenance(log: Log) -> None:
    out = await search(log.path, "credential binding")
    assert out.hits
    assert {h["provenance"] for h in out.hits} == {"external:log"}
    assert (await recall(log.path, 1)).provenance == "external:log"


@pytest.mark.asyncio
async def test_results_are_grouped_under_their_turns_card_with_lines_numbered_as_recall_does(
    log: Log,
) -> None:
    out = await search(log.path, "credential binding localhost", limit=3)
    lines = out.text.splitlines()
    assert lines[0] == "ranked 10 of the 15 events in this conversation (3 turns)"
    card = (
        'turn 1 · seq 1-7 · 2026-10-15 09:00 · "Why does the credential binding reject localhost?"'
        " · 1 tool call"
    )
    assert lines[1] == card
    hit = next(h for h in out.hits if h["seq"] == 4)
    assert hit["card"] == card
    assert hit["turn"] == 1
    assert {
        "n": 6,
        "text": '\t\treturn errors.New("a credential binding never names localhost")',
    } in (hit["lines"])
    assert out.header == {"events": 15, "ranked": 10, "turns": 3, "text": lines[0]}


@pytest.mark.asyncio
async def test_recall_of_a_turns_first_message_adds_its_card_and_every_seq_it_holds(
    log: Log,
) -> None:
    out = await recall(log.path, 8)
    assert out.text.splitlines()[1:3] == [
        'card: turn 2 · seq 8-14 · 2026-10-15 09:00 · "Run the tests" · 1 tool call'
        " · compacted at seq 13",
        "turn 2 holds seqs 8-14",
    ]
    assert out.data["turn_seqs"] == list(range(8, 15))


@pytest.mark.asyncio
async def test_a_search_never_finds_its_own_call(log: Log) -> None:
    log.add(
        "llm.resp",
        text="Searching.",
        calls=[{"id": "s1", "name": "index-search", "args": {"query": "zebra quagga"}}],
    )
    log.add(
        "tool.result",
        call_id="s1",
        name="index-search",
        args={"query": "zebra quagga"},
        output="seq 4 zebra quagga",
    )
    out = await search(log.path, "zebra quagga")
    assert out.hits == []
    assert out.text.splitlines()[-1] == "no event matches those words"


@pytest.mark.asyncio
async def test_a_canary_credential_reaches_no_result_recall_or_mem(log: Log) -> None:
    log.add("llm.resp", text="env", calls=[])
    _, seq = log.call("shell", f"GITHUB_TOKEN={CANARY}\nHOME=/root", cmd="env")
    log.end_turn()
    out = await search(log.path, "GITHUB_TOKEN HOME")
    assert seq in [h["seq"] for h in out.hits]
    assert CANARY not in out.text
    assert CANARY not in json.dumps(out.hits)
    recalled = await recall(log.path, seq)
    assert CANARY not in recalled.text
    assert "GITHUB_TOKEN=[REDACTED:github-token]" in recalled.text
    assert CANARY.encode() not in mem_path(log.path).read_bytes()


@pytest.mark.asyncio
async def test_a_log_that_grew_between_two_searches_is_searched_to_its_end(log: Log) -> None:
    assert (await search(log.path, "zanzibar")).hits == []
    log.call("fs-read", "zanzibar in an open turn", path="z.md")
    assert [h["seq"] for h in (await search(log.path, "zanzibar")).hits] == [17]
    log.end_turn()
    log.add("person.message", text="zanzibar again")
    out = await search(log.path, "zanzibar")
    assert sorted(h["seq"] for h in out.hits) == [17, 19]
    with MemIndex.open(mem_path(log.path)) as mem:
        assert mem.last_seq == 18  # extended to the turn that closed


@pytest.mark.asyncio
async def test_a_torn_last_line_is_left_until_it_is_completed(log: Log) -> None:
    torn = b'{"seq":16,"ts":"x","kind":"person.message","turn":3,"agent":"main","text":"quux'
    log.path.write_bytes(log.path.read_bytes() + torn)
    assert (await search(log.path, "quux")).hits == []
    log.path.write_bytes(log.path.read_bytes() + b' done"}\n')
    assert [h["seq"] for h in (await search(log.path, "quux")).hits] == [16]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 3],
        lambda b: b"not a mem at all " * 100,
        lambda b: b[: len(b) - 200] + bytes(x ^ 0xA5 for x in b[len(b) - 200 :]),
        lambda b: b[:1500] + bytes(x ^ 0x0F for x in b[1500:3000]) + b[3000:],
    ],
    ids=["truncated", "foreign", "corrupt cards", "corrupt postings"],
)
@pytest.mark.asyncio
async def test_a_damaged_mem_is_rebuilt_and_the_search_answers_as_before(
    log: Log, damage: Any
) -> None:
    before = await search(log.path, "credential binding localhost tests")
    recalled = await recall(log.path, 4)
    assert recalled.text.splitlines()[-len(BIND_GO.splitlines()) :] == BIND_GO.splitlines()
    mp = mem_path(log.path)
    damaged = damage(mp.read_bytes())
    mp.write_bytes(damaged)
    after = await search(log.path, "credential binding localhost tests")
    assert after.text == before.text
    with MemIndex.open(mp) as mem:
        assert mem.n_events == 14
    mp.write_bytes(damaged)
    assert (await recall(log.path, 4)).text == recalled.text
    assert mp.read_bytes() != damaged  # the recall rebuilt it too


@pytest.mark.asyncio
async def test_a_resumed_2000_event_log_counts_every_event_and_recalls_its_first_result(
    tmp_path: Path,
) -> None:
    lg = Log(tmp_path / "long.jsonl", ts=at_nine)
    first: int | None = None
    while lg.seq < 1990:
        lg.add("person.message", text=f"step {lg.turn}: look at module{lg.turn}")
        for k in range(3):
            lg.add("guard.decision", path=f"m{k}.py", verdict="allow")
            _, res = lg.call("fs-read", f"def f{lg.turn}_{k}():\n    return {k}", path=f"m{k}.py")
            first = res if first is None else first
        lg.end_turn()
    while lg.seq < 1999:
        lg.add("note", text="window at 70%")
    lg.end_turn()
    assert lg.seq == 2000
    out = await search(lg.path, "f1_0")
    assert out.header["events"] == 2000
    assert out.hits[0]["seq"] == first
    recalled = await recall(lg.path, out.hits[0]["seq"])
    assert recalled.text.splitlines()[2:] == ["def f1_0():", "    return 0"]


@pytest.mark.asyncio
async def test_a_whole_recall_is_cut_at_the_result_cap(log: Log) -> None:
    _, seq = log.call(
        "fs-read", "\n".join(f"line {i} " + "w" * 90 for i in range(1, 401)), path="big.txt"
    )
    out = await ask(log.path, Recall(seq, None, None), Config(result_cap=4_000))
    assert isinstance(out, ToolOutput)
    assert len(out.text) <= 4_000
    last = out.data["lines"]["end"]
    assert out.text.splitlines()[-1] == (
        f"[cut at 4,000 characters: recall seq {seq} with start {last + 1} to read on]"
    )


@pytest.mark.asyncio
async def test_recall_of_a_seq_the_log_does_not_hold_names_its_seqs(log: Log) -> None:
    with pytest.raises(
        NotFound, match=r"^no event with seq 99 in this log \(it has seqs 1 to 15\)$"
    ):
        await recall(log.path, 99)


@pytest.mark.asyncio
async def test_recall_of_a_kind_it_does_not_read_says_so(log: Log) -> None:
    with pytest.raises(BadInput, match=r"^seq 2 is a guard.decision, which recall does not read$"):
        await recall(log.path, 2)


@pytest.mark.asyncio
async def test_recall_of_a_start_past_the_events_lines_says_how_many_it_has(log: Log) -> None:
    with pytest.raises(BadInput, match=r"^start 500 is past the event's 9 lines$"):
        await recall(log.path, 4, start=500)


@pytest.mark.asyncio
async def test_recall_of_a_count_below_one_is_bad_input(log: Log) -> None:
    with pytest.raises(BadInput, match=r"^count must be at least 1, got 0$"):
        await recall(log.path, 4, start=1, count=0)


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo, {"README.md": "a project\n"})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "nodwyn_retrieval",
            *args,
            "--root",
            str(repo),
            "--data-dir",
            str(tmp_path / "data"),
            "--config-dir",
            str(tmp_path / "config"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["recall", "99"], "no event with seq 99 in this log (it has seqs 1 to 15)"),
        (["recall", "2"], "seq 2 is a guard.decision, which recall does not read"),
        (["recall", "4", "--start", "500"], "start 500 is past the event's 9 lines"),
    ],
    ids=["no such seq", "a kind it does not read", "start past the lines"],
)
def test_the_command_line_says_each_error_in_one_line_and_exits_2(
    log: Log, tmp_path: Path, args: list[str], message: str
) -> None:
    done = cli(tmp_path, *args, "--log", str(log.path))
    assert done.returncode == 2
    assert done.stderr == f"nodwyn-retrieval: {message}\n"
    assert done.stdout == ""


def test_the_command_line_searches_the_conversation_as_json(log: Log, tmp_path: Path) -> None:
    done = cli(
        tmp_path,
        "search",
        "credential binding",
        "--scope",
        "conversation",
        "--log",
        str(log.path),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["scope"] == "conversation"
    hit = doc["results"][0]
    assert set(hit) >= {
        "seq",
        "kind",
        "agent",
        "turn",
        "card",
        "call",
        "lines",
        "score",
        "provenance",
    }
    assert hit["provenance"] == "external:log"
    assert doc["header"]["events"] == 15


@pytest.mark.asyncio
async def test_a_damaged_mem_is_rebuilt_and_an_index_update_record_says_so(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    from nodwyn_retrieval.entry import Engine
    from nodwyn_retrieval.store.log import LogWriter, read_log
    from nodwyn_retrieval.store.mem import mem_path

    from tests.support import make_repo

    repo = make_repo(tmp_path / "repo", {"a.py": "def a():\n    pass\n"})
    log = tmp_path / "task.jsonl"
    with LogWriter(log) as w:
        w.append("person.message", turn=1, text="Why is the axolotl cache cold?")
        w.append("turn.end", turn=1)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], log=log, owns_log=True
    ) as engine:
        first = await engine.index_search("axolotl cache", "conversation")
        mem_path(log).write_bytes(b"not a .mem at all")
        again = await engine.index_search("axolotl cache", "conversation")
    assert [h["seq"] for h in first.hits] == [h["seq"] for h in again.hits] == [1]
    records = [e for e in read_log(log).events if e["kind"] == "index.update"]
    assert [(e["scope"], e["task"], e["rebuilt"]) for e in records] == [("conversation", "task", 1)]
    assert records[0]["reason"]
