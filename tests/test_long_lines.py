"""Recall reaches every character: a line longer than PIECE_CHARS is paged in numbered pieces."""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest
from nodwyn_retrieval.retrieval.events import PIECE_CHARS, event_text

from tests.support import Log
from tests.test_conversation import recall, search


def prose(n: int, seed: int) -> str:
    """n characters of words separated by spaces, none of them a word used on purpose below."""
    rnd = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < n:
        w = "".join(rnd.choice("bcdfghjklmnpqrstvwz") for _ in range(rnd.randint(3, 8)))
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


@pytest.mark.asyncio
async def test_a_word_at_character_30000_of_a_40000_character_line_is_recalled(
    tmp_path: Path,
) -> None:
    line = prose(40_000, 1)
    line = line[:30_000] + " quixoticwombat " + line[30_016:]
    assert len(line) == 40_000
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="look at the long line")
    seq = lg.result("header line\n" + line + "\nlast line", path="long.txt")
    lg.end_turn()

    found = await search(lg.path, "quixoticwombat")
    hit = found.hits[0]
    assert hit["seq"] == seq
    (shown,) = [x for x in hit["lines"] if "quixoticwombat" in x["text"]]
    n = shown["n"]  # the piece holding it, numbered as recall numbers it
    assert n == 2 + 30_001 // PIECE_CHARS

    out = await recall(lg.path, seq, start=n, count=1)
    assert "quixoticwombat" in out.text
    assert f"[lines 2-11 are one line of 40,000 characters, in pieces of {PIECE_CHARS:,}]" in (
        out.text.splitlines()
    )

    # Paging from the start with the text's own directions reaches every character, once.
    pieces: list[str] = []
    start: int | None = None
    for _ in range(50):
        out = await recall(lg.path, seq, start=start)
        lines = out.text.splitlines()
        marker = next(i for i, x in enumerate(lines) if x.startswith("[lines "))
        body = [x for x in lines[marker + 1 :] if not x.startswith("[")]
        pieces.extend(body)
        m = re.search(r"with start (\d+) to read on\]$", out.text)
        if m is None:
            break
        start = int(m.group(1))
    assert pieces[0] == "header line"
    assert pieces[-1] == "last line"
    assert "".join(pieces[1:-1]) == line


@pytest.mark.asyncio
async def test_a_5_mb_single_line_tool_output_is_paged_to_its_end(tmp_path: Path) -> None:
    rnd = random.Random(2)
    alphabet = string.ascii_lowercase + "     "
    body = "".join(rnd.choice(alphabet) for _ in range(5_000_000))
    body = body[:4_500_000] + " farendmarker " + body[4_500_014:]
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="dump it")
    seq = lg.result(body, name="shell", cmd="cat big.json")
    lg.end_turn()
    total = -(-len(body) // PIECE_CHARS)
    et_lines = event_text({"kind": "tool.result", "output": body}).lines
    assert len(et_lines) == total
    assert "".join(et_lines) == body
    found = await search(lg.path, "farendmarker")
    assert found.hits[0]["seq"] == seq
    n = next(x["n"] for x in found.hits[0]["lines"] if "farendmarker" in x["text"])
    out = await recall(lg.path, seq, start=n, count=2)
    assert "farendmarker" in out.text
    assert f"[lines {n}-{n + 1} of {total}]" in out.text.splitlines()
    last = await recall(lg.path, seq, start=total)
    assert last.text.endswith(body[(total - 1) * PIECE_CHARS :])
    assert last.data["cut"] is False


def test_short_lines_are_not_renumbered() -> None:
    et = event_text({"kind": "tool.result", "output": "a\n" + "x" * PIECE_CHARS + "\nb"})
    assert et.lines == ("a", "x" * PIECE_CHARS, "b")
    assert et.pieces == ()
    et = event_text({"kind": "tool.result", "output": "a\n" + "x" * (PIECE_CHARS + 1) + "\nb"})
    assert et.lines == ("a", "x" * PIECE_CHARS, "x", "b")
    assert et.pieces == ((2, 3, PIECE_CHARS + 1),)
