"""The boundary audit: a log, or the engine's records beside it, of a size no process can hold
(a sparse terabyte). Never a ``MemoryError``: the records are let go with a warning and the
search goes on; a log that cannot be read says so, as the library's own one-line error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nodwyn_retrieval import Engine, StoreError

from tests.support import Log, one_line_error, run_cli, small_repo

TERABYTE = 1 << 40


@pytest.fixture(autouse=True)
def _allocations_are_refused() -> None:
    """A terabyte is refused at its allocation where memory is not overcommitted without a
    limit; where it is (mode 1), the read would be attempted, and that is no test of this."""
    try:
        mode = Path("/proc/sys/vm/overcommit_memory").read_text().strip()
    except OSError:
        mode = "0"
    if mode == "1":
        pytest.skip("memory is overcommitted without a limit here: a terabyte is not refused")


def _sparse(path: Path) -> None:
    try:
        os.truncate(path, TERABYTE)
    except OSError as exc:
        pytest.skip(f"no sparse file of 1 TiB here: {exc}")


@pytest.mark.asyncio
async def test_records_too_large_to_continue_are_let_go_and_the_search_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "t1.jsonl"
    records = tmp_path / "t1.records.ndjson"
    records.write_bytes(b"")
    _sparse(records)
    async with await Engine.open(
        small_repo(tmp_path), data_dir=tmp_path / "data", config_dir=tmp_path / "cfg", log=log,
        workers=1,
    ) as engine:  # fmt: skip
        found = await engine.index_search("albatross", scope="repo")
        assert "a.py:1-2" in found.text
        updated = await engine.index_update()
        assert updated.summary["files"] == 2
    assert "records are not kept" in caplog.text
    assert "too large to read" in caplog.text
    assert records.stat().st_size == TERABYTE  # let go, not cut or rewritten


@pytest.mark.asyncio
async def test_a_session_log_too_large_to_read_is_a_store_error(tmp_path: Path) -> None:
    log = Log(tmp_path / "t1.jsonl")
    log.add("user.msg", text="find the petrel")
    log.end_turn()
    _sparse(log.path)
    async with await Engine.open(
        small_repo(tmp_path), data_dir=tmp_path / "data", config_dir=tmp_path / "cfg",
        log=log.path, workers=1,
    ) as engine:  # fmt: skip
        with pytest.raises(StoreError, match="too large to read"):
            await engine.index_search("petrel", scope="conversation")
        with pytest.raises(StoreError, match="too large to read"):
            await engine.recall(1)
        assert "a.py" in (await engine.index_search("albatross", scope="repo")).text
    with pytest.raises(StoreError, match="too large to read"):
        await Engine.open(
            tmp_path / "repo", data_dir=tmp_path / "data", config_dir=tmp_path / "cfg",
            log=log.path, owns_log=True, workers=1,
        )  # fmt: skip
    assert log.path.stat().st_size == TERABYTE


def test_the_cli_says_a_log_too_large_to_read_in_one_line(tmp_path: Path) -> None:
    log = Log(tmp_path / "t1.jsonl")
    log.add("user.msg", text="find the petrel")
    _sparse(log.path)
    repo = small_repo(tmp_path)
    done = run_cli(repo, tmp_path, "search", "petrel", "--scope", "conversation", "--log", log.path)
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    one_line_error(err)
    assert "too large to read" in err
