"""The ADR's numbers, pinned as numbers (ADR 0050 §1, §2, §4, §5, §6, the amendment of 2026-10-16).

Every expectation here is written as a literal, never computed from the constant it checks: a
deliberate change of one (a tuned k1, a longer grace) must change this file and docs/quality.md
with it, and an accidental one fails here. Where a number shapes what a person sees (a score, a
chunk's lines, how many results, which file is left out) it is checked through the Engine.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.actors.gc import collect
from nodwyn_retrieval.actors.refresher import Limits
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.tree import TreeIndex, TreeSegment
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.paths import project_dirs

from tests.support import make_repo

LN_1_2 = 0.1823215567939546  # ln(1.2): the idf of a word in both of two chunks


async def open_engine(repo: Path, dirs: tuple[Path, Path]) -> Engine:
    return await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1)


def scores(files: dict[str, str], query: list[str]) -> dict[str, float]:
    """Each file's score for the query, files of one chunk each."""
    seg = TreeSegment.build([(p, f"k{i}", analyze(t)) for i, (p, t) in enumerate(files.items())])
    return {h.path: h.score for h in TreeIndex(seg).search(query, 20)}


# -- BM25 (§6): k1 1.2, b 0.75, Lucene's idf, the path's words and the first line three times ----


TWO_FILES = {"docs/one.txt": "zebra zebra okapi\nokapi\nlemur\n", "two.txt": "lemur\nzebra\n"}


def test_a_bm25_score_equals_the_figure_worked_by_hand() -> None:
    # docs/one.txt, one chunk: zebra twice in the first line (2 + 2*2 = 6), okapi once there and
    # once below (1*3 + 1 = 4), lemur 1, the path's words docs, one, txt three times each (9):
    # length 20. two.txt: lemur in the first line (3), zebra 1, two and txt three times (6):
    # length 10. avgdl 15; zebra is in both chunks, idf = ln(1 + 0.5/2.5) = ln 1.2.
    # one: 6 * 2.2 / (6 + 1.2 * (0.25 + 0.75 * 20/15)) = 13.2 / 7.5 = 1.76 times the idf
    # two: 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 10/15)) = 2.2 / 1.9 times the idf
    got = scores(TWO_FILES, ["zebra"])
    assert got["docs/one.txt"] == pytest.approx(1.76 * LN_1_2, rel=1e-12)
    assert got["two.txt"] == pytest.approx(2.2 / 1.9 * LN_1_2, rel=1e-12)
    assert got["docs/one.txt"] == pytest.approx(0.32088593995736, rel=1e-12)
    assert got["two.txt"] == pytest.approx(0.21110917102458, rel=1e-12)


def test_a_rare_word_weighs_by_lucenes_idf() -> None:
    # okapi is in one chunk of two: idf = ln(1 + 1.5/1.5) = ln 2; tf 4 in a chunk of length 20.
    got = scores(TWO_FILES, ["okapi"])
    assert list(got) == ["docs/one.txt"]
    assert got["docs/one.txt"] == pytest.approx(math.log(2) * 4 * 2.2 / (4 + 1.5), rel=1e-12)


def test_a_word_in_the_first_line_counts_three_times() -> None:
    # The same words in both files, only the line differs; equal lengths (3 + 1 + the path's 6).
    # In the first line: tf 3, norm 1.2, 3 * 2.2 / 4.2; below it: tf 1, 1 * 2.2 / 2.2 = 1.
    got = scores({"aa/first.txt": "x\nscrub\n", "zz/first.txt": "scrub\nx\n"}, ["scrub"])
    assert list(got) == ["zz/first.txt", "aa/first.txt"]
    assert got["zz/first.txt"] == pytest.approx(LN_1_2 * 6.6 / 4.2, rel=1e-12)
    assert got["aa/first.txt"] == pytest.approx(LN_1_2, rel=1e-12)


def test_a_word_of_the_path_counts_three_times_in_every_chunk() -> None:
    # scrub only in one file's name: tf 3 there; both chunks have length 3 (the first line's
    # word) + 9 (the path's three words) = 12, so norm = 1.2: 3 * 2.2 / (3 + 1.2) times ln 2.
    got = scores({"a/scrub.txt": "x\n", "a/other.txt": "y\n"}, ["scrub"])
    assert list(got) == ["a/scrub.txt"]
    assert got["a/scrub.txt"] == pytest.approx(math.log(2) * 6.6 / 4.2, rel=1e-12)


@pytest.mark.asyncio
async def test_the_score_a_search_shows_is_the_hand_worked_figure(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", dict(TWO_FILES))
    async with await open_engine(repo, dirs) as engine:
        out = await engine.index_search("zebra", "repo")
    assert [(h["path"], h["score"]) for h in out.hits] == [
        ("docs/one.txt", 0.3209),
        ("two.txt", 0.2111),
    ]


# -- chunks (§6): a declaration starts one after 20 lines, none is longer than 80 --------------


@pytest.mark.asyncio
async def test_a_file_without_declarations_is_cut_every_80_lines(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    lines = [f"plain line {n}" for n in range(1, 201)]
    lines[99] = "the narwhal is here"  # line 100
    lines[179] = "and the walrus here"  # line 180
    repo = make_repo(tmp_path / "repo", {"notes.txt": "\n".join(lines) + "\n"})
    async with await open_engine(repo, dirs) as engine:
        first = await engine.index_search("narwhal", "repo")
        second = await engine.index_search("walrus", "repo")
    # a search shows a file once, by its best chunk: one word in each chunk shows each chunk
    assert [(h["start"], h["end"]) for h in first.hits] == [(81, 160)]
    assert [(h["start"], h["end"]) for h in second.hits] == [(161, 200)]


@pytest.mark.asyncio
async def test_a_declaration_starts_a_chunk_only_once_the_one_before_has_20_lines(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    # A def every 10 lines (1, 11, 21, ...): chunks start at lines 1, 21, 41, 61, 81.
    lines = []
    for f in range(10):
        lines += [f"def f{f}():"] + [f"    x{f}_{k} = {k}" for k in range(1, 10)]
    lines[34] = "    narwhal = 1"  # line 35, in the chunk of lines 21 to 40
    lines[60] = "def walrus_again():"  # line 61 starts the chunk of lines 61 to 80
    repo = make_repo(tmp_path / "repo", {"m.py": "\n".join(lines) + "\n"})
    async with await open_engine(repo, dirs) as engine:
        first = await engine.index_search("narwhal", "repo")
        second = await engine.index_search("walrus", "repo")
    assert [(h["start"], h["end"]) for h in first.hits] == [(21, 40)]
    assert [(h["start"], h["end"]) for h in second.hits] == [(61, 80)]


# -- the search's limit (§1): 8 by default, at most 20 -----------------------------------------


@pytest.mark.asyncio
async def test_a_search_gives_8_results_by_default_and_at_most_20(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {
        f"m{i:02d}.py": f"def pangolin_{i}():\n    return {i}\n" for i in range(25)
    }
    repo = make_repo(tmp_path / "repo", files)
    async with await open_engine(repo, dirs) as engine:
        default = await engine.index_search("pangolin", "repo")
        most = await engine.index_search("pangolin", "repo", limit=20)
        one = await engine.index_search("pangolin", "repo", limit=1)
        with pytest.raises(BadInput, match=r"^limit must be between 1 and 20, got 21$"):
            await engine.index_search("pangolin", "repo", limit=21)
        with pytest.raises(BadInput, match=r"^limit must be between 1 and 20, got 0$"):
            await engine.index_search("pangolin", "repo", limit=0)
    assert (len(default.hits), len(most.hits), len(one.hits)) == (8, 20, 1)


def test_the_tool_definition_says_8_and_20() -> None:
    from nodwyn_retrieval.entry import tool_definitions

    (search,) = [t for t in tool_definitions() if t["name"] == "index-search"]
    limit = search["input_schema"]["properties"]["limit"]
    assert (limit.get("default"), limit.get("minimum"), limit.get("maximum")) == (8, 1, 20)


# -- what a tree indexes (§2): files up to 1 MiB, 20,000 files and 128 MiB ----------------------


def test_the_tree_limits_are_20000_files_128_mib_and_1_mib_a_file() -> None:
    assert Limits() == Limits(files=20_000, bytes=134_217_728, file_bytes=1_048_576)


@pytest.mark.asyncio
async def test_a_file_of_1_mib_is_indexed_and_one_byte_more_is_not(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    def sized(word: str, size: int) -> str:
        head = f"{word} = 1\n"
        return head + "a" * (size - len(head) - 1) + "\n"

    repo = make_repo(
        tmp_path / "repo",
        {"fits.txt": sized("capybara", 1_048_576), "over.txt": sized("tapir", 1_048_577)},
    )
    assert (repo / "fits.txt").stat().st_size == 1_048_576
    assert (repo / "over.txt").stat().st_size == 1_048_577
    async with await open_engine(repo, dirs) as engine:
        summary = (await engine.index_update()).summary
        fits = await engine.index_search("capybara", "repo")
        over = await engine.index_search("tapir", "repo")
    assert (summary["files"], summary["skipped"]["too_large"]) == (1, 1)
    assert [h["path"] for h in fits.hits] == ["fits.txt"]
    assert over.hits == []


# -- words (amendment 2026-10-16): at most 64 bytes ------------------------------------------------


@pytest.mark.asyncio
async def test_a_word_of_64_bytes_is_found_and_one_of_65_is_not_a_word(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    w64 = "q" * 64
    w65 = "r" * 65
    repo = make_repo(tmp_path / "repo", {"a.txt": f"{w64}\n", "b.txt": f"{w65}\n"})
    async with await open_engine(repo, dirs) as engine:
        found = await engine.index_search(w64, "repo")
        with pytest.raises(BadInput, match=r"has no words to search for"):
            await engine.index_search(w65, "repo")
    assert [h["path"] for h in found.hits] == ["a.txt"]


# -- the collection (§4): an unnamed record is kept for seven days -----------------------------


def test_an_unnamed_record_is_kept_for_seven_days_and_no_longer(tmp_path: Path) -> None:
    pdirs = project_dirs(tmp_path / "data", "proj-0123456789ab")
    store = ChunkStore(pdirs.chunks)
    now = time.time()
    week = 604_800  # seven days of seconds, written out
    keys = {}
    for name, age in (("kept", week - 120), ("taken", week + 120)):
        text = f"def {name}():\n    pass\n"
        keys[name] = ChunkStore.key(hashlib.sha256(text.encode()).hexdigest())
        store.put(keys[name], analyze(text))
        os.utime(store.path(keys[name]), (now - age, now - age))
    done = collect(pdirs, force=True, now=now)
    assert (done.chunks, done.kept_unnamed) == (1, 1)
    assert store.exists(keys["kept"])
    assert not store.exists(keys["taken"])
