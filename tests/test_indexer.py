"""The indexer: what it reads, what it keeps out, and what a search shows (ADR 0050 §2, §3, §7).

Through the Engine, as a person sees it: the ``index-update`` summary, the search's header and its
results. The refresher decides what to read (tests/test_refresher.py); these are the indexer's own
decisions once a file is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import GuardRefused
from nodwyn_retrieval.guard import CheckResult

from tests.support import make_repo


async def open_engine(repo: Path, dirs: tuple[Path, Path], **kw: object) -> Engine:
    return await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, **kw)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_binary_and_non_utf8_files_are_counted_and_not_read_again(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "a.py": "def gecko():\n    pass\n",
            "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00gecko",
            "latin.txt": "gecko caf\xe9\n".encode("latin-1"),
        },
    )
    async with await open_engine(repo, dirs) as engine:
        first = (await engine.index_update()).summary
        again = (await engine.index_update()).summary
        out = await engine.index_search("gecko", "repo")
    assert (first["files"], first["read"]) == (1, 3)
    assert (first["skipped"]["binary"], first["skipped"]["not_utf8"]) == (1, 1)
    # Looked at once: the next update does not read them again, and still counts them.
    assert (again["read"], again["skipped"]["binary"], again["skipped"]["not_utf8"]) == (0, 1, 1)
    assert [h["path"] for h in out.hits] == ["a.py"]


@pytest.mark.asyncio
async def test_a_file_that_grows_past_1_mib_leaves_the_index_and_comes_back_when_it_shrinks(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"big.txt": "iguana = 1\n", "b.py": "x = 1\n"})
    async with await open_engine(repo, dirs) as engine:
        assert [h["path"] for h in (await engine.index_search("iguana", "repo")).hits] == [
            "big.txt"
        ]
        (repo / "big.txt").write_text("iguana = 2\n" + "a" * 1_048_576 + "\n")
        grown = await engine.index_search("iguana", "repo")
        (repo / "big.txt").write_text("iguana = 3\n")
        shrunk = await engine.index_search("iguana", "repo")
    assert grown.hits == []
    assert grown.header["files"] == 1
    assert [h["path"] for h in shrunk.hits] == ["big.txt"]
    assert shrunk.header["files"] == 2


@pytest.mark.asyncio
async def test_a_result_shows_the_lines_of_its_chunk_numbered_and_redacted(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    secret = "ghp_" + "Qm4" * 12
    body = "\n".join(["def marmot_token():", f'    token = "{secret}"', "    return token", ""])
    repo = make_repo(tmp_path / "repo", {"pad.py": "x = 1\n" * 3, "m.py": body})
    async with await open_engine(repo, dirs) as engine:
        out = await engine.index_search("marmot token", "repo")
    (hit,) = out.hits
    assert (hit["path"], hit["start"], hit["end"]) == ("m.py", 1, 3)
    assert hit["first_line"] == "def marmot_token():"
    assert [line["n"] for line in hit["lines"]] == sorted(line["n"] for line in hit["lines"])
    assert all(1 <= line["n"] <= 3 for line in hit["lines"])
    assert secret not in out.text
    assert "m.py:1-3" in out.text


@pytest.mark.asyncio
async def test_a_file_the_guard_refuses_at_the_search_is_dropped_from_the_index(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(
        tmp_path / "repo", {"a.py": "def ferret():\n    pass\n", "b.py": "def ferret_two():\n"}
    )
    refuse: set[str] = set()

    def checker(path: str, size: int) -> CheckResult:
        return CheckResult.deny("held back by the test") if path in refuse else CheckResult.allow()

    async with await open_engine(repo, dirs, checkers=[checker]) as engine:
        before = await engine.index_search("ferret", "repo")
        refuse.add("a.py")
        with pytest.raises(GuardRefused, match=r"^the guard refused reading a\.py: "):
            await engine.index_search("ferret", "repo")
        refuse.clear()
        # Dropped from the index, and looked at again at the next refresh: found once allowed.
        after = await engine.index_search("ferret", "repo")
    assert sorted(h["path"] for h in before.hits) == ["a.py", "b.py"]
    assert sorted(h["path"] for h in after.hits) == ["a.py", "b.py"]


@pytest.mark.asyncio
async def test_a_new_session_searches_the_stored_index_without_reading_a_file(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"def lynx_{i}():\n    pass\n" for i in range(5)}
    repo = make_repo(tmp_path / "repo", files)
    async with await open_engine(repo, dirs) as engine:
        await engine.index_update()
    async with await open_engine(repo, dirs) as engine:
        out = await engine.index_search("lynx_3", "repo")
        summary = (await engine.index_update()).summary
    assert out.hits[0]["path"] == "m3.py"
    assert out.header["files"] == 5
    assert (summary["read"], summary["unchanged"], summary["files"]) == (0, 5, 5)


@pytest.mark.asyncio
async def test_a_text_file_rewritten_as_binary_leaves_the_index(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "okapi notes\n", "b.py": "x = 1\n"})
    async with await open_engine(repo, dirs) as engine:
        before = await engine.index_search("okapi", "repo")
        (repo / "a.txt").write_bytes(b"okapi\x00\x01\x02 binary now\n")
        after = await engine.index_search("okapi", "repo")
        summary = (await engine.index_update()).summary
    assert [h["path"] for h in before.hits] == ["a.txt"]
    assert after.hits == []
    assert after.header["files"] == 1
    assert (summary["files"], summary["skipped"]["binary"]) == (1, 1)


# -- the snapshot, the records, and files that change while they are read ---------------------


def _index_dir(repo: Path, data: Path) -> Path:
    from nodwyn_retrieval.store.paths import project_dirs, project_key

    return project_dirs(data, project_key(repo)).index


@pytest.mark.asyncio
async def test_a_new_session_starts_from_the_snapshot_even_with_no_record_left(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    import shutil

    files: dict[str, str | bytes] = {
        f"m{i}.py": f"def caracal_{i}():\n    pass\n" for i in range(5)
    }
    repo = make_repo(tmp_path / "repo", files)
    async with await open_engine(repo, dirs) as engine:
        await engine.index_update()
        # The update wrote the snapshot before it answered, not only at the session's end.
        snaps = list((_index_dir(repo, dirs[0]) / "trees").glob("*.snap"))
    assert len(snaps) == 1
    shutil.rmtree(_index_dir(repo, dirs[0]) / "chunks")
    events: list[dict[str, object]] = []
    async with await open_engine(repo, dirs, record=events.append) as engine:
        out = await engine.index_search("caracal_4", "repo")
        summary = (await engine.index_update()).summary
    # The index came from the snapshot: nothing to load from the (empty) store, nothing read,
    # by the search or by the update.
    assert [h["path"] for h in out.hits][:1] == ["m4.py"]
    assert (summary["read"], summary["files"]) == (0, 5)
    assert [e["read"] for e in events if e["kind"] == "index.update"] == [0]


@pytest.mark.asyncio
async def test_a_damaged_snapshot_is_dropped_counted_and_the_index_made_from_the_records(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"def margay_{i}():\n    pass\n" for i in range(5)}
    repo = make_repo(tmp_path / "repo", files)
    async with await open_engine(repo, dirs) as engine:
        await engine.index_update()
    (snap,) = (_index_dir(repo, dirs[0]) / "trees").glob("*.snap")
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap.write_bytes(bytes(data))
    events: list[dict[str, object]] = []
    async with await open_engine(repo, dirs, record=events.append) as engine:
        out = await engine.index_search("margay_2", "repo")
        summary = (await engine.index_update()).summary
    assert [h["path"] for h in out.hits][:1] == ["m2.py"]
    assert (summary["read"], summary["files"]) == (0, 5)
    updates = [e for e in events if e["kind"] == "index.update"]
    assert sum(int(str(u["rebuilt"])) for u in updates) == 1


@pytest.mark.asyncio
async def test_a_file_gone_between_the_guards_decision_and_the_read_is_left_out(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "kinkajou = 1\n", "b.py": "kinkajou = 2\n"})

    def checker(path: str, size: int) -> CheckResult:
        if path == "b.py":
            (repo / "b.py").unlink(missing_ok=True)  # gone before it is read
        return CheckResult.allow()

    async with await open_engine(repo, dirs, checkers=[checker]) as engine:
        summary = (await engine.index_update()).summary
        out = await engine.index_search("kinkajou", "repo")
    assert (summary["files"], summary["read"], summary["skipped"]["too_large"]) == (1, 1, 0)
    assert [h["path"] for h in out.hits] == ["a.py"]


@pytest.mark.asyncio
async def test_a_file_grown_past_1_mib_between_the_stat_and_the_read_is_left_out(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "fossa = 1\n", "b.py": "fossa = 2\n"})

    def checker(path: str, size: int) -> CheckResult:
        if path == "b.py" and size < 1 << 20:
            with open(repo / "b.py", "a") as f:  # grows after the listing's stat
                f.write("# padding\n" * (110_000))
        return CheckResult.allow()

    async with await open_engine(repo, dirs, checkers=[checker]) as engine:
        summary = (await engine.index_update()).summary
        out = await engine.index_search("fossa", "repo")
    assert (summary["files"], summary["skipped"]["too_large"]) == (1, 1)
    assert [h["path"] for h in out.hits] == ["a.py"]


@pytest.mark.asyncio
async def test_a_search_shows_at_most_its_limit_and_counts_every_match(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files: dict[str, str | bytes] = {f"m{i}.py": f"serval_{i} = {i}\n" for i in range(7)}
    files["other.py"] = "nothing = 0\n"
    repo = make_repo(tmp_path / "repo", files)
    async with await open_engine(repo, dirs) as engine:
        two = await engine.index_search("serval", "repo", limit=2)
        all_of_them = await engine.index_search("serval", "repo", limit=20)
    assert len(two.hits) == 2
    assert two.header["matched"] == 7
    assert sorted(h["path"] for h in all_of_them.hits) == [f"m{i}.py" for i in range(7)]
    assert all_of_them.header["files"] == 8


@pytest.mark.asyncio
async def test_a_build_big_enough_for_the_worker_pool_indexes_every_file(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    # 3 MiB of text: past the size from which analysis goes to the worker processes.
    pad = "# " + "x" * 98 + "\n"
    files: dict[str, str | bytes] = {
        f"big{i:02}.py": f"def genet_{i}():\n    pass\n" + pad * 1000 for i in range(30)
    }
    repo = make_repo(tmp_path / "repo", files)
    async with await open_engine(repo, dirs) as engine:
        summary = (await engine.index_update()).summary
        last = await engine.index_search("genet_29", "repo")
        first = await engine.index_search("genet_0", "repo")
    assert (summary["files"], summary["read"], summary["not_read"]) == (30, 30, 0)
    assert summary["bytes"] == sum(len(str(v)) for v in files.values())
    assert [h["path"] for h in last.hits][:1] == ["big29.py"]
    assert [h["path"] for h in first.hits][:1] == ["big00.py"]
