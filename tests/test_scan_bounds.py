"""A refresh that runs out of time while it lists and stats the tree stops, and the next goes on.

§5 bounds a search at 10 s and an update at 60 s a call, and every part of a refresh keeps to it:
the listing, the stat and the check of each name, the reads, the save. On a big tree under load
the listing and the stats alone can take longer than a search may. A refresh stopped in them
answers with what it compared, says how many files it has not looked at yet (``not_seen``), and
the next refresh goes on from where it stopped, with nothing lost: every file ends up indexed,
each name is listed once and stat-ed once (but the ones looked at again), and the files compared
before the stop stay fresh (a change to one of them is seen by the next refresh).

The stop is made certain without timing: the refresher's clock is made to jump past its deadline
while it stats a part of the names, and the parts are made small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval import entry
from nodwyn_retrieval.actors import _listing, refresher
from nodwyn_retrieval.actors.messages import FileStat
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

from tests.support import make_repo, shifted_time

OLD = ["aardvark", "bonobo", "caracal", "dingo", "echidna", "fossa", "gerenuk", "hyrax"]
OLD += ["ibex", "jackal"]
# Same sizes as the words they replace: a rewrite that only the time and the words tell apart.
NEW = {2: "manatee", 3: "okapi", 7: "tapir"}
assert all(len(NEW[i]) == len(OLD[i]) for i in NEW)
PART = 4  # names compared between two looks at the clock, in these tests


def body(i: int, word: str) -> str:
    return f"def {word}():\n    return {i}\n"


FILES: dict[str, str | bytes] = {f"f{i:02}.py": body(i, w) for i, w in enumerate(OLD)}


class Clock:
    """The refresher's clock, made to pass its deadline while it stats one part of the names.

    Only the refresher's own clock jumps (the module's ``time``): the reads after the stop keep
    the real deadline, so what the stopped scan compared is read in the same call.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cut = False
        self.offset = 0.0
        self.listed = 0
        self.stated: list[str] = []
        real_stat = refresher._stat_all
        real_ls = _listing._git_output
        clock = self

        def stat_all(root: Path, paths: list[str]) -> list[FileStat | None]:
            self.stated.extend(paths)
            if self.cut:
                self.offset += 3600.0  # an hour passes while this part is stat-ed
            return real_stat(root, paths)

        def git_output(root: Path, seconds: float | None, *found: Any) -> bytes | None:
            self.listed += 1
            return real_ls(root, seconds, *found)

        monkeypatch.setattr(refresher, "time", shifted_time(lambda: clock.offset))
        monkeypatch.setattr(refresher, "_stat_all", stat_all)
        monkeypatch.setattr(refresher, "SCAN_CHUNK", PART)
        monkeypatch.setattr(_listing, "_git_output", git_output)

    def stop_next(self) -> None:
        self.cut = True

    def run_on(self) -> None:
        self.cut = False
        self.offset = 0.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture(params=[True, False], ids=["watched", "no-watch"])
def watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if not request.param:
        monkeypatch.setattr(refresher, "watch_available", lambda: False)
    return bool(request.param)


async def open_engine(repo: Path, dirs: tuple[Path, Path], events: list[dict[str, Any]]) -> Engine:
    return await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1
    )


async def found(engine: Engine, word: str) -> list[str]:
    out = await engine.index_search(word, "repo", limit=20)
    return sorted(h["path"] for h in out.hits)


def stored(repo: Path, data: Path) -> dict[str, Any]:
    m = load_manifest(manifest_path(project_dirs(data, project_key(repo)).trees, repo))
    assert m is not None
    return dict(m.entries)


@pytest.mark.asyncio
async def test_an_update_stopped_in_the_stats_goes_on_at_the_next_call_and_loses_nothing(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        clock.stop_next()
        first = (await engine.index_update()).summary
        clock.run_on()
        second = (await engine.index_update()).summary
        hits = {w: await found(engine, w) for w in OLD}
    # The first call compared one part of the names, ran out of time there and read what it had
    # compared; it says what it did not look at.
    assert (first["read"], first["not_seen"], first["not_read"]) == (PART, 6, 0)
    assert (first["files"], first["partial"]) == (PART, True)
    # The second went on from there: the tree was listed once for both, and each name stat-ed
    # once.
    assert (second["read"], second["not_seen"], second["not_read"]) == (6, 0, 0)
    assert (second["files"], second["partial"]) == (10, False)
    assert clock.listed == 1
    assert sorted(clock.stated) == sorted(FILES)
    assert hits == {w: [f"f{i:02}.py"] for i, w in enumerate(OLD)}
    assert set(stored(repo, dirs[0])) == set(FILES)
    # Both calls are recorded, the first as partial with its count of files not seen.
    ups = [e for e in events if e["kind"] == "index.update"]
    assert [(u["not_seen"], u["partial"]) for u in ups[:2]] == [(6, True), (0, False)]


@pytest.mark.asyncio
async def test_a_search_past_its_deadline_before_the_listing_is_done_goes_on_at_the_next(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 0.0)
        cut = await engine.index_search("bonobo", "repo")
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 10.0)
        after = await found(engine, "bonobo")
        up = (await engine.index_update()).summary
    # Nothing listed in time: nothing is known, and the search says the index is partial.
    assert cut.hits == []
    assert cut.header["partial"] is True
    assert cut.header["not_seen"] >= 1
    assert "not looked at yet in time" in cut.text.splitlines()[0]
    assert after == ["f01.py"]
    assert (up["files"], up["read"], up["not_seen"], up["partial"]) == (10, 0, 0, False)


@pytest.mark.asyncio
async def test_a_scan_stopped_halfway_keeps_what_it_compared_fresh_and_drops_what_is_gone(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, watch: bool
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        built = (await engine.index_update()).summary
        # f01 (in the part the next scan compares first) and f08 (past it) go; f02 and f07 are
        # rewritten to the same size with new words.
        (repo / "f01.py").unlink()
        (repo / "f08.py").unlink()
        (repo / "f02.py").write_text(body(2, NEW[2]))
        (repo / "f07.py").write_text(body(7, NEW[7]))
        clock.stop_next()
        cut = (await engine.index_update()).summary
        clock.run_on()
        # After the stop, a file already compared changes: f03, rewritten to the same size.
        (repo / "f03.py").write_text(body(3, NEW[3]))
        went_on = await engine.index_search(NEW[3], "repo", limit=20)
        next_one = await found(engine, NEW[3])
        final = (await engine.index_update()).summary
        words = {w: await found(engine, w) for w in [*OLD, *NEW.values()]}
    assert (built["files"], built["read"]) == (10, 10)
    # The stopped call listed ten names (git lists a deleted file it tracks) and compared the
    # first four: f01 is gone and removed, f02 read again; f08, past the stop, is not yet known
    # to be gone, and f07 not yet known to be changed.
    assert (cut["removed"], cut["read"], cut["not_seen"], cut["partial"]) == (1, 1, 6, True)
    assert cut["files"] == 9
    # The next refresh, a search, goes on from f04 and finishes: nothing is left unseen.
    assert went_on.header["not_seen"] == 0
    if watch:
        # The watch saw f03 change after it was compared: the refresh that went on read it.
        assert [h["path"] for h in went_on.hits] == ["f03.py"]
    else:
        # Without a watch nothing says f03 changed since it was compared: the scan finishes as
        # it is, and the refresh after it lists and stats the tree again.
        assert went_on.hits == []
    assert next_one == ["f03.py"]
    assert (final["files"], final["read"], final["removed"]) == (8, 0, 0)
    expected = {w: [f"f{i:02}.py"] for i, w in enumerate(OLD) if i not in (1, 8, *NEW)}
    expected |= {w: [f"f{i:02}.py"] for i, w in NEW.items()}
    expected |= {OLD[i]: [] for i in (1, 8, *NEW)}
    assert words == expected
    assert set(stored(repo, dirs[0])) == set(FILES) - {"f01.py", "f08.py"}


@pytest.mark.asyncio
async def test_a_new_session_loading_stored_records_stops_at_the_deadline_and_goes_on(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 150 files indexed by one session; the next has no snapshot to start from (gone), so every
    # file's record is loaded from the chunk store, and its first search is given no time.
    files: dict[str, str | bytes] = {
        f"m{i:03}.py": f"def quoll_{i}():\n    pass\n" for i in range(150)
    }
    repo = make_repo(tmp_path / "repo", files)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        built = (await engine.index_update()).summary
    mpath = manifest_path(project_dirs(dirs[0], project_key(repo)).trees, repo)
    mpath.with_suffix(".snap").unlink()
    async with await open_engine(repo, dirs, events) as engine:
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 0.0)
        cut = await engine.index_search("quoll", "repo")
        monkeypatch.setattr(entry, "SEARCH_SECONDS", 10.0)
        after = await engine.index_search("quoll_149", "repo")
        up = (await engine.index_update()).summary
    assert (built["files"], built["read"]) == (150, 150)
    # Some records were loaded before the clock was looked at, not all; the rest are said.
    assert 0 < cut.header["files"] < 150
    assert cut.header["partial"] is True
    assert cut.header["not_seen"] >= 150 - cut.header["files"]
    # The next search loaded the rest: the whole index, and no file was read again for it.
    assert after.header["files"] == 150
    assert [h["path"] for h in after.hits][:1] == ["m149.py"]
    assert (up["files"], up["read"], up["not_seen"]) == (150, 0, 0)


@pytest.mark.asyncio
async def test_past_the_file_limit_no_later_name_is_stat_ed_and_each_is_counted(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    limits = refresher.Limits(files=3)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1, limits=limits
    ) as engine:
        summary = (await engine.index_update()).summary
        hits = {w: await found(engine, w) for w in OLD}
    # The first part (f00-f03) fills the index and finds f03 past the limit; no name after it
    # is stat-ed, and all seven past the limit are counted.
    assert (summary["files"], summary["skipped"]["over_limit"], summary["partial"]) == (3, 7, True)
    assert sorted(set(clock.stated)) == sorted(FILES)[:PART]
    assert hits == {w: ([f"f{i:02}.py"] if i < 3 else []) for i, w in enumerate(OLD)}


@pytest.mark.asyncio
async def test_a_file_compared_before_the_stop_and_not_read_is_read_when_the_scan_goes_on(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    from nodwyn_retrieval.guard import CheckResult

    repo = make_repo(tmp_path / "repo", FILES)
    refuse = {"f02.py"}

    def checker(path: str, size: int) -> CheckResult:
        return CheckResult.deny("not now") if path in refuse else CheckResult.allow()

    events: list[dict[str, Any]] = []
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], record=events.append, workers=1,
        checkers=[checker],
    ) as engine:  # fmt: skip
        clock.stop_next()
        cut = (await engine.index_update()).summary
        clock.run_on()
        refuse.clear()
        # The next refresh goes on past the stop, and reads again the file refused before it.
        went_on = await engine.index_search(OLD[2], "repo")
    assert (cut["refused"], cut["read"], cut["not_seen"]) == (["f02.py"], PART - 1, 6)
    assert [h["path"] for h in went_on.hits] == ["f02.py"]
    assert went_on.header["files"] == 10


def padded(word: str, i: int, size: int) -> str:
    """A file defining word, padded with a comment to exactly size bytes."""
    text = body(i, word)
    return text + "#" * (size - len(text) - 1) + "\n"


@pytest.mark.asyncio
async def test_a_file_compared_before_the_stop_and_grown_to_the_size_limit_keeps_its_place(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", FILES)
    limits = refresher.Limits(files=9, file_bytes=40)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limits
    ) as engine:
        clock.stop_next()
        cut = (await engine.index_update()).summary
        clock.run_on()
        # f01, compared before the stop, grows to exactly the size limit: it stays indexed and
        # still takes one of the nine places, so the last name in path order has none.
        (repo / "f01.py").write_text(padded("wolverine", 1, 40))
        # f02, compared too, is rewritten to the same size: it keeps its place as well.
        (repo / "f02.py").write_text(body(2, NEW[2]))
        went_on = await engine.index_search("wolverine", "repo")
        last = await found(engine, OLD[9])
        rewritten = await found(engine, NEW[2])
        summary = (await engine.index_update()).summary
    assert (cut["read"], cut["not_seen"]) == (PART, 6)
    assert [h["path"] for h in went_on.hits] == ["f01.py"]
    assert (went_on.header["files"], went_on.header["partial"]) == (9, True)
    assert last == []
    assert rewritten == ["f02.py"]
    assert (summary["files"], summary["skipped"]["over_limit"]) == (9, 1)


@pytest.mark.asyncio
async def test_a_file_too_large_before_the_stop_and_shrunk_after_it_is_found(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", {**FILES, "f01.py": padded("wolverine", 1, 60)})
    limits = refresher.Limits(file_bytes=40)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limits
    ) as engine:
        clock.stop_next()
        cut = (await engine.index_update()).summary
        clock.run_on()
        # f01 was left out as too large by the part compared before the stop; it shrinks.
        (repo / "f01.py").write_text(padded("wolverine", 1, 30))
        await engine.index_search(OLD[0], "repo")
        after = await found(engine, "wolverine")
        final = (await engine.index_update()).summary
    assert (cut["skipped"]["too_large"], cut["read"]) == (1, PART - 1)
    assert after == ["f01.py"]
    assert (final["files"], final["read"], final["skipped"]["too_large"]) == (10, 0, 0)


@pytest.mark.asyncio
async def test_a_file_compared_before_the_stop_and_deleted_after_it_frees_its_place(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", FILES)
    limits = refresher.Limits(files=9)
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limits
    ) as engine:
        clock.stop_next()
        await engine.index_update()
        clock.run_on()
        (repo / "f01.py").unlink()
        went_on = await engine.index_search(OLD[9], "repo")
        gone = await found(engine, OLD[1])
    # The place f01 held goes to the last name in path order, which the limit kept out.
    assert [h["path"] for h in went_on.hits] == ["f09.py"]
    assert went_on.header["files"] == 9
    assert gone == []


@pytest.mark.asyncio
async def test_a_same_size_rewrite_after_the_stop_takes_no_more_of_the_byte_limit(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    repo = make_repo(tmp_path / "repo", FILES)
    total = sum(len(str(b).encode()) for b in FILES.values())
    limits = refresher.Limits(bytes=total)  # exactly the whole tree
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, limits=limits
    ) as engine:
        clock.stop_next()
        await engine.index_update()
        clock.run_on()
        (repo / "f02.py").write_text(body(2, NEW[2]))
        went_on = await engine.index_search(OLD[9], "repo")
        summary = (await engine.index_update()).summary
    assert [h["path"] for h in went_on.hits] == ["f09.py"]
    assert (went_on.header["files"], went_on.header["partial"]) == (10, False)
    assert (summary["files"], summary["skipped"]["over_limit"]) == (10, 0)
    assert summary["partial"] is False


@pytest.mark.asyncio
async def test_a_deny_pattern_added_then_a_stopped_scan_still_keeps_the_file_out_later(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
    dirs[1].mkdir(parents=True, exist_ok=True)
    (dirs[1] / "config.toml").write_text('[index]\ndeny = ["f07.py"]\n')
    (repo / "f00.py").write_text(body(0, "quagga"))
    async with await open_engine(repo, dirs, events) as engine:
        # Under the new denylist the scan stops after the first part: f07, past the stop, was
        # allowed by the old guard only, and the saved manifest must not say otherwise.
        clock.stop_next()
        cut = (await engine.index_update()).summary
        clock.run_on()
    async with await open_engine(repo, dirs, events) as engine:
        denied = await found(engine, OLD[7])
        summary = (await engine.index_update()).summary
        kept = await found(engine, "quagga")
    assert (cut["read"], cut["not_seen"]) == (1, 6)
    assert denied == []
    assert (summary["files"], summary["skipped"]["denied"]) == (9, 1)
    assert kept == ["f00.py"]
    assert "f07.py" not in stored(repo, dirs[0])


@pytest.mark.asyncio
async def test_a_file_deleted_where_the_stopped_scan_goes_on_is_dropped(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        await engine.index_update()
        # f04 is the first name the next scan does not compare before its stop.
        (repo / "f04.py").unlink()
        clock.stop_next()
        cut = (await engine.index_update()).summary
        clock.run_on()
        went_on = await engine.index_search(OLD[4], "repo")
    assert (cut["removed"], cut["not_seen"]) == (0, 6)
    assert went_on.hits == []
    assert went_on.header["files"] == 9
    assert "f04.py" not in stored(repo, dirs[0])


@pytest.mark.asyncio
async def test_an_update_stopped_while_it_watches_the_directories_goes_on_at_the_next_call(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.actors import _watch

    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    files: dict[str, str | bytes] = {f"d{i}/f.py": body(i, w) for i, w in enumerate(OLD[:6])}
    repo = make_repo(tmp_path / "repo", files)
    real_watch_dirs = _watch.TreeWatch.watch_dirs
    parts: list[int] = []  # the parts of the directories watched, by call

    def watch_dirs(self: Any, part: Any) -> bool:
        parts[-1] += 1
        if clock.cut:
            clock.offset += 3600.0  # an hour passes while these directories are watched
        return bool(real_watch_dirs(self, part))

    monkeypatch.setattr(_watch.TreeWatch, "watch_dirs", watch_dirs)
    monkeypatch.setattr(refresher, "WATCH_EVERY", 2)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        clock.stop_next()
        parts.append(0)
        cut = (await engine.index_update()).summary
        clock.run_on()
        parts.append(0)
        went_on = (await engine.index_update()).summary
        hits = {w: await found(engine, w) for w in OLD[:6]}
        # The watch holds every directory: an edit is seen by the next search.
        (repo / "d5/f.py").write_text(body(5, "fossil"))
        edited = await found(engine, "fossil")
    # Nothing was compared before the stop: every name is said as not looked at yet.
    assert (cut["read"], cut["not_seen"], cut["partial"]) == (0, 6, True)
    assert (went_on["read"], went_on["not_seen"], went_on["partial"]) == (6, 0, False)
    # Seven directories (the root and d0-d5), two a part: the stopped call watched one part and
    # no more once its clock said the time was spent; the next watched the other three.
    assert parts == [1, 3]
    assert hits == {w: [f"d{i}/f.py"] for i, w in enumerate(OLD[:6])}
    assert edited == ["d5/f.py"]
    assert clock.stated.count("d0/f.py") == 1


@pytest.mark.asyncio
async def test_more_directories_than_a_part_are_all_watched_in_one_call_with_time_left(
    tmp_path: Path, dirs: tuple[Path, Path], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not refresher.watch_available():  # pragma: no cover - inotify is there on Linux
        pytest.skip("no watch on this system")
    files: dict[str, str | bytes] = {f"d{i}/f.py": body(i, w) for i, w in enumerate(OLD[:6])}
    repo = make_repo(tmp_path / "repo", files)
    monkeypatch.setattr(refresher, "WATCH_EVERY", 2)
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, dirs, events) as engine:
        summary = (await engine.index_update()).summary
        (repo / "d5/f.py").write_text(body(5, "fossil"))
        edited = await found(engine, "fossil")
    assert (summary["read"], summary["not_seen"], summary["partial"]) == (6, 0, False)
    assert edited == ["d5/f.py"]
