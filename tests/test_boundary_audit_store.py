"""The boundary audit: a stored file that is no file, or claims a size no write made.

Only the library writes its data directory, and always a regular file renamed into place; a
directory, a FIFO or a sparse terabyte found where a manifest, a snapshot or a ``.mem`` belongs is
damage like any other: rebuilt, never a hang, never a ``MemoryError``, and what was in the way is
cleared so the next save is made. Through the command line, each run a process of its own (a hang
fails the test at its timeout instead of hanging it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import Log, run_cli, small_repo


def _directory(p: Path) -> None:
    p.unlink()
    p.mkdir()
    (p / "x").write_bytes(b"x")


def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _sparse_terabyte(p: Path) -> None:
    try:
        os.truncate(p, 1 << 40)
    except OSError as exc:  # a file system without sparse files of that size
        pytest.skip(f"no sparse file of 1 TiB here: {exc}")


def _stored(tmp_path: Path, suffix: str) -> Path:
    """The one file of the data directory (or beside the log) with that suffix."""
    found = [*tmp_path.glob(f"data/projects/*/index/trees/*{suffix}"), *tmp_path.glob(f"*{suffix}")]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("suffix", "damage"),
    [
        (".manifest", _directory),
        (".manifest", _fifo),
        (".manifest", _sparse_terabyte),
        (".snap", _directory),
        (".snap", _fifo),
        (".mem", _fifo),
    ],
    ids=[
        "manifest-directory",
        "manifest-fifo",
        "manifest-huge",
        "snapshot-directory",
        "snapshot-fifo",
        "mem-fifo",
    ],
)
def test_a_stored_file_that_is_no_file_is_rebuilt_without_a_hang(
    tmp_path: Path, suffix: str, damage: Callable[[Path], None]
) -> None:
    repo = small_repo(tmp_path)
    log = Log(tmp_path / "t1.jsonl")
    log.add("user.msg", text="find the petrel")
    log.result("petrel in a.py\nline two", path="a.py")
    log.end_turn()
    log.add("user.msg", text="and again")
    log.end_turn()
    conv = ("search", "petrel", "--scope", "conversation", "--log", str(log.path))
    for args in (("update",), ("search", "albatross"), conv):
        done = run_cli(repo, tmp_path, *args)
        assert done.returncode == 0, done.stderr
    target = _stored(tmp_path, suffix)
    damage(target)

    searched = run_cli(repo, tmp_path, "search", "albatross")
    assert searched.returncode == 0, searched.stderr
    assert b"a.py:1-2" in searched.stdout
    assert b"could not be saved" not in searched.stdout
    updated = run_cli(repo, tmp_path, "update")
    assert updated.returncode == 0, updated.stderr
    assert b"could not be saved" not in updated.stdout
    recalled = run_cli(repo, tmp_path, *conv)
    assert recalled.returncode == 0, recalled.stderr
    assert b"petrel" in recalled.stdout
    # What was in the way is gone: the file there now, if any, is a regular one the next
    # session reads.
    assert not target.exists() or target.is_file()
    if suffix == ".manifest":
        assert target.is_file()
