"""Where a refresh's bound is cut between its phases, and what a person sees at each cut.

A refresh (§5) keeps part of its bound for what comes after it: a search keeps time to rank and
read its results, and every refresh keeps time to write the manifest. The rest is split between
the listing, the watch of the directories, the stat, precheck and comparison of each name, the
ordering of the reads and the records a new session loads. These tests make the refresher's own
clock jump (the module's ``time``) by amounts far from every bound, so each cut is certain
without timing anything: a jump just short of the bound lets the scan go on, one just past it
stops it, and the answer says how many names it did not look at (``not_seen``) and that it is
partial; the next call goes on from there, with no name lost or counted twice.

The bounds are scaled up (a search of 10,000 s, a reserve of hundreds of seconds) so that the
real time the machine takes, under any load, is small beside the margins.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval import entry
from nodwyn_retrieval.actors import _listing, refresher
from nodwyn_retrieval.actors.messages import FileStat, IndexFiles
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.manifest import manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo

WORDS = ["aardvark", "bonobo", "caracal", "dingo", "echidna", "fossa", "gerenuk", "hyrax"]
WORDS += ["ibex", "jackal"]
PART = 4  # names compared between two looks at the clock, in these tests
BOUND = 10_000.0  # the bound of a search and of an update, in these tests
LOAD = 2.0  # the load per core the refresher is made to see


def body(i: int, word: str) -> str:
    return f"def {word}():\n    return {i}\n"


FILES: dict[str, str | bytes] = {f"f{i:02}.py": body(i, w) for i, w in enumerate(WORDS)}


class Clock:
    """The refresher's clock (and its listing's), moved by the test: ``jump`` seconds pass while
    the next part of the names is stat-ed; ``rewind`` sets it back that far when the next full
    scan begins (after the refresh has worked out its deadline), so the scan has that much time
    more than the indexer.

    Only the refresher's clock moves: the indexer and the event loop keep the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        self.pending = 0.0
        self.pending_compare = 0.0
        self.back = 0.0
        self.tick = 0.0  # seconds each reading of the clock takes
        self.stated: list[str] = []
        real_stat = refresher._stat_all
        real_listing = refresher.Listing
        real_vouched = refresher.vouched
        clock = self

        class Time:
            @staticmethod
            def monotonic() -> float:
                clock.offset += clock.tick
                return time.monotonic() + clock.offset

            perf_counter = staticmethod(time.perf_counter)
            time = staticmethod(time.time)

        def stat_all(root: Path, paths: list[str]) -> list[FileStat | None]:
            self.stated.extend(paths)
            self.offset += self.pending
            self.pending = 0.0
            return real_stat(root, paths)

        def vouched(*args: Any, **kwargs: Any) -> list[str]:
            self.offset += self.pending_compare  # as a part of the names is compared
            self.pending_compare = 0.0
            return list(real_vouched(*args, **kwargs))

        def listing(root: Path, extra: list[str]) -> _listing.Listing:
            self.offset -= self.back
            self.back = 0.0
            return real_listing(root, extra)

        monkeypatch.setattr(refresher, "time", Time)
        monkeypatch.setattr(_listing, "time", Time)
        monkeypatch.setattr(refresher, "_stat_all", stat_all)
        monkeypatch.setattr(refresher, "Listing", listing)
        monkeypatch.setattr(refresher, "vouched", vouched)
        monkeypatch.setattr(refresher, "SCAN_CHUNK", PART)

    def jump(self, seconds: float) -> None:
        """The next part stat-ed takes seconds; the clock is back to the real one first."""
        self.offset = 0.0
        self.pending = seconds

    def jump_in_compare(self, seconds: float) -> None:
        """The next part compared takes seconds (a scan of stats the watch kept stats nothing)."""
        self.offset = 0.0
        self.pending_compare = seconds

    def rewind(self, seconds: float) -> None:
        self.offset = 0.0
        self.back = seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of two cores with a load of four: the refresher's times are doubled."""
    monkeypatch.setattr(refresher, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (2 * LOAD, 2 * LOAD, 2 * LOAD))


@pytest.fixture
def no_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refresh lists and compares the whole tree."""
    monkeypatch.setattr(refresher, "watch_available", lambda: False)


async def open_engine(
    repo: Path, dirs: tuple[Path, Path], events: list[dict[str, Any]] | None = None
) -> Engine:
    record = events.append if events is not None else None
    return await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], record=record, workers=1)


def seen(header: dict[str, Any]) -> tuple[int, bool]:
    return header["not_seen"], header["partial"]


# -- the bound a search and an update keep, and what is left for the scan --------------------

# Each case: the refresher's constants, the call, and the time the scan may take, worked by hand
# at a load of 2 from a bound of 10,000 s with the ten files of the tree in the manifest:
#   a search keeps min(SEARCH_RESERVE, left / 25) x load, here min(1,000, 400) x 2 = 800 s;
#   an update keeps none;
#   the save keeps min(left / 20, (SAVE_FIXED + SAVE_PER_ENTRY x entries) x load):
#     (50 + 5 x 10) x 2 = 200 s, or, when that is more than a 20th of the bound, 500 s.
BOUNDS = {
    "search, the save by its entries": (False, 50.0, 9_000.0),
    "search, the save at most a 20th": (False, 100_000.0, 8_700.0),
    "update, no search reserve": (True, 50.0, 9_800.0),
}


@pytest.mark.asyncio
@pytest.mark.usefixtures("loaded", "no_watch")
@pytest.mark.parametrize("case", list(BOUNDS), ids=["by-entries", "a-20th", "update"])
async def test_the_scan_of_a_refresh_goes_on_until_its_share_of_the_bound_and_stops_after_it(
    tmp_path: Path,
    dirs: tuple[Path, Path],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    update, save_fixed, scan_time = BOUNDS[case]
    repo = make_repo(tmp_path / "repo", FILES)
    async with await open_engine(repo, dirs) as engine:
        built = (await engine.index_update()).summary
        monkeypatch.setattr(entry, "SEARCH_SECONDS", BOUND)
        monkeypatch.setattr(entry, "UPDATE_SECONDS", BOUND)
        monkeypatch.setattr(refresher, "SEARCH_RESERVE", 1_000.0)
        monkeypatch.setattr(refresher, "SAVE_FIXED_SECONDS", save_fixed)
        monkeypatch.setattr(refresher, "SAVE_SECONDS_PER_ENTRY", 5.0)

        async def refresh() -> tuple[int, bool]:
            if update:
                return seen((await engine.index_update()).summary)
            return seen((await engine.index_search(WORDS[9], "repo")).header)

        # The first part of the names takes 50 s less than the scan may: it goes on to the end.
        clock.jump(scan_time - 50.0)
        short = await refresh()
        # 50 s more than it may: the scan stops after that part, and says what it did not see.
        clock.jump(scan_time + 50.0)
        cut = await refresh()
        clock.jump(0.0)
        went_on = await refresh()
    assert (built["files"], built["not_seen"]) == (10, 0)
    assert short == (0, False)
    assert cut == (10 - PART, True)
    assert went_on == (0, False)


@pytest.mark.asyncio
@pytest.mark.usefixtures("loaded", "no_watch")
async def test_a_search_given_a_short_bound_keeps_a_25th_of_it_not_the_whole_reserve(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    async with await open_engine(repo, dirs) as engine:
        await engine.index_update()
        # A bound of 100 s: a search keeps at most a 25th of it (8 s at this load), not the
        # whole reserve, and has time to compare everything.
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 100.0)
        monkeypatch.setattr(refresher, "SEARCH_RESERVE", 1_000.0)
        clock.jump(80.0)
        whole = seen((await engine.index_search(WORDS[0], "repo")).header)
        clock.jump(95.0)
        cut = seen((await engine.index_search(WORDS[0], "repo")).header)
    assert whole == (0, False)
    assert cut == (10 - PART, True)


# -- the order of the reads -----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.usefixtures("loaded")
@pytest.mark.parametrize("spent", [0.0, 8_600.0], ids=["time-to-order", "no-time-to-order"])
async def test_the_files_a_search_needs_are_read_first_only_when_ordering_them_fits(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, monkeypatch: pytest.MonkeyPatch,
    spent: float,
) -> None:  # fmt: skip
    # Two files to read; in path order the notes come first, but a search for the animal needs
    # its source first. Ordering two files is made to cost 4 x 2 x 100 s x load 2 = 1,600 s: it
    # is done with the whole bound left, and not with 1,400 s left.
    repo = make_repo(
        tmp_path / "repo",
        {"a_notes.md": "# notes\n\nnothing here\n", "zebu.py": "def zebu():\n    return 1\n"},
    )
    asked: list[list[str]] = []
    real = refresher.IndexFiles

    def index_files(*args: Any, **kwargs: Any) -> IndexFiles:
        msg = real(*args, **kwargs)
        asked.append([st.path for st in msg.read])
        return msg

    monkeypatch.setattr(refresher, "IndexFiles", index_files)
    monkeypatch.setattr(refresher, "ORDER_SECONDS_PER_FILE", 100.0)
    monkeypatch.setattr(entry, "SEARCH_SECONDS", BOUND)
    async with await open_engine(repo, dirs) as engine:
        clock.jump(spent)
        # Each look at the clock takes a second: a scan that went on looking at it once it had
        # compared every name would spend the time the ordering needs.
        clock.tick = 1.0
        out = await engine.index_search("zebu", "repo")
    assert [h["path"] for h in out.hits] == ["zebu.py"]
    assert seen(out.header) == (0, False)
    if spent:
        assert asked[0] == ["a_notes.md", "zebu.py"]
    else:
        assert asked[0] == ["zebu.py", "a_notes.md"]


# -- what the answer says at each cut ---------------------------------------------------------

FIVE = {p: FILES[p] for p in sorted(FILES)[: PART + 1]}


@pytest.mark.asyncio
async def test_one_name_left_unseen_makes_the_answer_partial_and_none_does_not(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, no_watch: None
) -> None:
    repo = make_repo(tmp_path / "repo", FIVE)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        clock.jump(3600.0)
        first = (await engine.index_update()).summary
        clock.jump(0.0)
        second = (await engine.index_update()).summary
        # A search that reads nothing answers quickly, and says the same.
        clock.jump(3600.0)
        quick_cut = (await engine.index_search(WORDS[0], "repo")).header
        clock.jump(0.0)
        quick_whole = (await engine.index_search(WORDS[4], "repo")).header
    # The first part of five names is compared and read; the fifth is not seen.
    assert (first["read"], first["not_read"], first["not_seen"], first["partial"]) == (
        PART, 0, 1, True,
    )  # fmt: skip
    assert (second["read"], second["not_seen"], second["partial"]) == (1, 0, False)
    assert seen(quick_cut) == (1, True)
    assert seen(quick_whole) == (0, False)
    assert quick_cut["files"] == quick_whole["files"] == PART + 1
    ups = [e for e in events if e["kind"] == "index.update"]
    assert [(u["not_seen"], u["partial"]) for u in ups[:2]] == [(1, True), (0, False)]


@pytest.mark.asyncio
async def test_one_file_compared_and_not_read_in_time_makes_the_answer_partial(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", FIVE)
    async with await open_engine(repo, dirs) as engine:
        await engine.index_update()
        (repo / "f02.py").write_text(body(2, "manatee"))
        # The search's bound is spent when it starts; the watch saw the edit, and the refresh
        # plans its read without a look at the clock, but the read does not start.
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 0.0)
        late = (await engine.index_search("manatee", "repo")).header
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 10.0)
        read = await engine.index_search("manatee", "repo")
    assert (late["not_read"], late["not_seen"], late["partial"]) == (1, 0, True)
    assert (read.header["not_read"], read.header["partial"]) == (0, False)
    assert [h["path"] for h in read.hits] == ["f02.py"]


@pytest.mark.asyncio
async def test_a_tree_over_the_file_limit_is_said_partial_by_a_search_that_reads_nothing(
    tmp_path: Path, dirs: tuple[Path, Path], no_watch: None
) -> None:
    repo = make_repo(tmp_path / "repo", FIVE)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=refresher.Limits(files=3)
    ) as engine:
        built = (await engine.index_update()).summary
        quick = (await engine.index_search(WORDS[0], "repo")).header
    assert (built["files"], built["partial"], built["not_seen"]) == (3, True, 0)
    assert (quick["files"], quick["partial"], quick["not_seen"]) == (3, True, 0)


# -- the records a new session loads, cut at the deadline ------------------------------------

MANY = 256
CHUNK = 192  # the names a stopped scan compares before its stop, in the last case


def many_files() -> dict[str, str | bytes]:
    return {f"m{i:03}.py": f"def quoll_{i}():\n    pass\n" for i in range(MANY)}


async def new_session_without_snapshot(repo: Path, dirs: tuple[Path, Path]) -> None:
    async with await open_engine(repo, dirs) as engine:
        built = (await engine.index_update()).summary
    assert built["files"] == MANY
    mpath = manifest_path(project_dirs(dirs[0], project_key(repo)).trees, repo)
    mpath.with_suffix(".snap").unlink()


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["listing", "none", "stats"])
async def test_records_a_new_session_had_no_time_to_load_are_said_once_each(
    tmp_path: Path,
    dirs: tuple[Path, Path],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    repo = make_repo(tmp_path / "repo", many_files())
    await new_session_without_snapshot(repo, dirs)
    # The search's bound is spent when it starts: the indexer loads a few records and stops.
    monkeypatch.setattr(entry, "SEARCH_SECONDS", 0.0)
    if where != "listing":
        # The refresher's clock goes back an hour as its scan begins: it lists the tree in time,
        # and compares every name ("none") or the first CHUNK of them ("stats").
        clock.rewind(3600.0)
    if where == "stats":
        monkeypatch.setattr(refresher, "SCAN_CHUNK", CHUNK)
        clock.pending = 7200.0
    async with await open_engine(repo, dirs) as engine:
        cut = (await engine.index_search("quoll", "repo")).header
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 10.0)
        clock.jump(0.0)
        after = (await engine.index_search("quoll_255", "repo")).header
    loaded_in_time = cut["files"]
    assert loaded_in_time < CHUNK  # the indexer stopped early in the records
    assert cut["partial"] is True
    if where == "listing":
        # Nothing was compared: every file of the index is said as not seen, once.
        assert cut["not_seen"] == MANY
    elif where == "none":
        # Every name was compared; the files whose records are not loaded are not seen yet.
        assert cut["not_seen"] == MANY - loaded_in_time
    else:
        # The names past the stop, and the ones before it whose records are not loaded: each
        # file not in the index is counted once.
        assert cut["not_seen"] == MANY - loaded_in_time
    assert (after["files"], after["not_seen"], after["partial"]) == (MANY, 0, False)


# -- what the watch says while a scan is stopped ----------------------------------------------


def watched() -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")


@pytest.mark.asyncio
async def test_a_change_the_watch_cannot_account_for_during_a_stopped_scan_is_found_later(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    watched()
    repo = make_repo(tmp_path / "repo", FILES)
    async with await open_engine(repo, dirs) as engine:
        clock.jump(3600.0)
        cut = (await engine.index_update()).summary
        clock.jump(0.0)
        # f01, compared before the stop, is rewritten to the same size; a new directory comes
        # at the same time, and the watch can no longer say what changed.
        (repo / "f01.py").write_text(body(1, "baboon"))
        (repo / "new").mkdir()
        went_on = await engine.index_search(WORDS[9], "repo")
        first = await engine.index_search("baboon", "repo")
        second = await engine.index_search("baboon", "repo")
    assert (cut["read"], cut["not_seen"]) == (PART, 10 - PART)
    assert [h["path"] for h in went_on.hits] == ["f09.py"]
    assert seen(went_on.header) == (0, False)
    # The refresh after the one that finished the scan lists and compares the tree again.
    assert [h["path"] for h in first.hits] == ["f01.py"]
    assert [h["path"] for h in second.hits] == ["f01.py"]


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["a00.py", "f99.py"], ids=["before-the-stop", "after-it"])
async def test_a_file_created_while_a_scan_is_stopped_is_found(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, name: str
) -> None:
    watched()
    repo = make_repo(tmp_path / "repo", FILES)
    async with await open_engine(repo, dirs) as engine:
        clock.jump(3600.0)
        await engine.index_update()
        clock.jump(0.0)
        # Created after the tree was listed: the stopped scan's names do not hold it.
        (repo / name).write_text(body(99, "wombat"))
        went_on = await engine.index_search(WORDS[9], "repo")
        await engine.index_search("wombat", "repo")
        found = await engine.index_search("wombat", "repo")
        summary = (await engine.index_update()).summary
    assert seen(went_on.header) == (0, False)
    assert [h["path"] for h in found.hits] == [name]
    assert (summary["files"], summary["read"], summary["not_seen"]) == (11, 0, 0)


@pytest.mark.asyncio
async def test_a_file_edited_past_the_stop_of_a_scan_of_another_sessions_save_is_read(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    watched()
    repo = make_repo(tmp_path / "repo", FILES)
    async with await open_engine(repo, dirs) as here, await open_engine(repo, dirs) as there:
        await here.index_update()
        # Another session reads an edit and saves the manifest: this one compares the whole
        # tree with it, from the stats its watch keeps, and stops after the first part.
        (repo / "f00.py").write_text(body(0, "anteater"))
        await there.index_update()
        clock.jump_in_compare(3600.0)
        cut = await here.index_search("anteater", "repo")
        clock.jump(0.0)
        # f07, past the stop, is rewritten to the same size with a new word.
        (repo / "f07.py").write_text(body(7, "tapir"))
        went_on = await here.index_search("tapir", "repo")
        old = await here.index_search(WORDS[7], "repo")
    assert [h["path"] for h in cut.hits] == ["f00.py"]
    assert seen(cut.header) == (10 - PART, True)
    assert [h["path"] for h in went_on.hits] == ["f07.py"]
    assert seen(went_on.header) == (0, False)
    assert old.hits == []
