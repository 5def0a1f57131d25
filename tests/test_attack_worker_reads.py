"""The build's workers read its files themselves: the guard's promises hold there exactly.

A big refresh sends each worker the paths the guard allowed, not their bytes, and the worker reads
them beneath the root the session holds open (actors/_work.py ``analyze_read``, guard/beneath.py
``Beneath.reopen``). Each test here attacks that read in a real worker process, between the
guard's decision (a register-check checker acts as the read is decided, so the change lands
every time before the worker reads) and the worker's open: a directory on the way swapped for a
link to outside, a file swapped for a FIFO, a file grown past the cap, a file removed, and the
root itself replaced by another directory. Each runs with openat2 and with the walk forced in the
session (the worker follows it), and checks that the batch did go to a worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import _batches
from nodwyn_retrieval.actors._batches import read_and_analyze
from nodwyn_retrieval.actors._work import MAX_FILE_BYTES, Analyzed, Contention, analyze_read
from nodwyn_retrieval.actors.messages import FileStat, TreeFound
from nodwyn_retrieval.bus import ProcessPool
from nodwyn_retrieval.guard import CheckResult, Verdict, default_guard
from nodwyn_retrieval.guard.beneath import Beneath, RootMoved
from nodwyn_retrieval.retrieval.tree import TreeBuilder
from nodwyn_retrieval.store.chunkstore import ChunkStore

from tests._hostile import OUTSIDE_WORDS, plant_outside
from tests.support import make_repo

NAMES = tuple(f"m{i:02d}.py" for i in range(6))


def _body(name: str) -> str:
    stem = name.removesuffix(".py")
    return f"def inside_{stem}():\n    return 'numbat {stem}'\n"


def _repo(tmp_path: Path) -> Path:
    files: dict[str, str | bytes] = {f"d/{n}": _body(n) for n in NAMES}
    files["top.py"] = _body("top.py")
    return make_repo(tmp_path / "repo", files)


def _stats(root: Path) -> list[FileStat]:
    out = []
    for p in sorted(str(q.relative_to(root)) for q in root.rglob("*.py")):
        st = os.lstat(root / p)
        out.append(FileStat(p, st.st_size, st.st_mtime_ns, st.st_ino))
    return out


def _on(path: str, act: Callable[[], None]) -> Any:
    """A checker that does act once, when path's read is decided (before any worker reads)."""
    armed = [True]

    def check(p: str, size: int) -> CheckResult:
        if armed and p == path:
            armed.clear()
            act()
        return CheckResult(Verdict.ALLOW)

    check.armed = armed  # type: ignore[attr-defined]
    return check


async def _build(
    tmp_path: Path,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    check: Any,
    *,
    packed: bool,
) -> tuple[list[tuple[FileStat, Analyzed, bytes]], list[TreeFound], list[str]]:
    """The files of root read and analysed as a big refresh is: every file decided by the
    guard (check among its checkers), then sent, a batch at a time, to a real worker that reads
    it. The worker functions run, by name, beside the results."""
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 1 << 20)
    monkeypatch.setattr(_batches, "READ_CONCURRENCY", 1)
    stats = _stats(root)
    found: list[TreeFound] = []
    guard = default_guard(root, data_dir=tmp_path / "data", checkers=[check]).without_asking()
    ran: list[str] = []
    async with ProcessPool(max_workers=1, preload=["nodwyn_retrieval.actors._work"]) as pool:
        real_run = pool.run

        async def run(fn: Any, *args: Any, **kw: Any) -> Any:
            ran.append(fn.__name__)
            return await real_run(fn, *args, **kw)

        monkeypatch.setattr(pool, "run", run)
        got = await asyncio.wait_for(
            read_and_analyze(
                stats, asyncio.get_running_loop().time() + 60.0, found,
                root=root, guard=guard.reading_beneath(), pool=pool,
                chunks_dir=str(tmp_path / "chunks"), contention=Contention(lambda: 1.0),
                builder=TreeBuilder() if packed else None,
            ),
            timeout=50.0,  # a FIFO waited on would hang here
        )  # fmt: skip
    assert check.armed == [], "the checker never ran: the test proves nothing"
    return got, found, ran


def _stored_words(tmp_path: Path) -> set[str]:
    store = ChunkStore(tmp_path / "chunks")
    words: set[str] = set()
    for key, _, _ in store.iter_entries():
        rec = store.get(key)
        assert rec is not None
        words.update(rec.vocab)
    return words


def _skips(found: list[TreeFound]) -> dict[str, str | None]:
    return {f.stat.path: f.skip for f in found}


@pytest.mark.asyncio
@pytest.mark.parametrize("packed", [True, False], ids=["first-build", "refresh"])
async def test_a_directory_swapped_for_a_link_after_the_decision_is_not_followed_by_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, packed: bool
) -> None:
    root = _repo(tmp_path)
    outside = plant_outside(tmp_path / "outside", NAMES)

    def swap() -> None:
        os.rename(root / "d", root / "d.orig")
        os.symlink(outside, root / "d", target_is_directory=True)

    check = _on("d/m03.py", swap)
    got, found, ran = await _build(tmp_path, root, monkeypatch, check, packed=packed)
    assert ran == ["analyze_read"]
    # Decided before the swap, read after it: not one of d/ is read through the link.
    read = [st.path for st, _, _ in got]
    assert "top.py" in read
    assert not [p for p in read if p.startswith("d/")]
    assert {p: s for p, s in _skips(found).items() if p.startswith("d/")} == {
        f"d/{n}": "gone" for n in NAMES
    }
    assert not _stored_words(tmp_path) & set(OUTSIDE_WORDS)
    assert _stored_words(tmp_path) >= {"inside", "numbat"}


@pytest.mark.asyncio
async def test_a_fifo_swapped_in_after_the_decision_is_neither_waited_on_nor_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    root = _repo(tmp_path)

    def fifo() -> None:
        os.unlink(root / "d" / "m02.py")
        os.mkfifo(root / "d" / "m02.py")

    got, found, ran = await _build(tmp_path, root, monkeypatch, _on("d/m02.py", fifo), packed=True)
    assert ran == ["analyze_read"]
    assert _skips(found) == {"d/m02.py": "gone"}
    assert sorted(st.path for st, _, _ in got) == sorted(
        p.path for p in _stats(root) if p.path != "d/m02.py"
    )


@pytest.mark.asyncio
async def test_a_file_grown_past_the_cap_after_the_decision_is_too_large_in_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    root = _repo(tmp_path)
    big = ("x = 'quokka'\n" * (MAX_FILE_BYTES // 13 + 1)).encode()
    assert len(big) > MAX_FILE_BYTES

    def grow() -> None:
        (root / "d" / "m01.py").write_bytes(big)

    got, found, ran = await _build(tmp_path, root, monkeypatch, _on("d/m01.py", grow), packed=True)
    assert ran == ["analyze_read"]
    assert _skips(found) == {"d/m01.py": "too_large"}
    assert "d/m01.py" not in [st.path for st, _, _ in got]
    assert "quokka" not in _stored_words(tmp_path)


@pytest.mark.asyncio
async def test_a_file_exactly_at_the_cap_is_read_whole_by_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    root = _repo(tmp_path)
    line = b"y = 'bilby'\n"
    full = line * (MAX_FILE_BYTES // len(line)) + b"#" * (MAX_FILE_BYTES % len(line))
    assert len(full) == MAX_FILE_BYTES

    def grow() -> None:
        (root / "d" / "m01.py").write_bytes(full)

    got, found, ran = await _build(tmp_path, root, monkeypatch, _on("d/m01.py", grow), packed=False)
    assert ran == ["analyze_read"]
    assert found == []
    ((_, a, _),) = [g for g in got if g[0].path == "d/m01.py"]
    assert a.skip is None
    assert a.text_bytes == MAX_FILE_BYTES
    assert "bilby" in _stored_words(tmp_path)


@pytest.mark.asyncio
@pytest.mark.parametrize("extra", [0, 1], ids=["at-the-cap", "past-it"])
async def test_a_batch_its_worker_fails_is_read_here_with_the_same_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, extra: int
) -> None:
    """os.getpid takes no arguments: the batch fails in its worker, and the session reads and
    analyses it itself: a file exactly at the cap whole, one byte past it too large, one removed
    after its decision gone."""
    root = _repo(tmp_path)
    line = b"y = 'bilby'\n"
    full = line * (MAX_FILE_BYTES // len(line)) + b"#" * (MAX_FILE_BYTES % len(line) + extra)

    def grow() -> None:
        (root / "d" / "m01.py").write_bytes(full)
        os.unlink(root / "d" / "m04.py")

    monkeypatch.setattr(_batches, "analyze_read", os.getpid)
    got, found, ran = await _build(tmp_path, root, monkeypatch, _on("d/m01.py", grow), packed=True)
    assert ran == ["getpid"]
    assert len(got) == len(NAMES) - extra
    if extra:
        assert _skips(found) == {"d/m01.py": "too_large", "d/m04.py": "gone"}
    else:
        assert _skips(found) == {"d/m04.py": "gone"}
        ((_, a, _),) = [g for g in got if g[0].path == "d/m01.py"]
        assert a.text_bytes == MAX_FILE_BYTES


@pytest.mark.asyncio
async def test_a_file_removed_after_the_decision_is_gone_and_the_others_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    root = _repo(tmp_path)
    check = _on("d/m04.py", lambda: os.unlink(root / "d" / "m04.py"))
    got, found, ran = await _build(tmp_path, root, monkeypatch, check, packed=True)
    assert ran == ["analyze_read"]
    assert _skips(found) == {"d/m04.py": "gone"}
    assert len(got) == len(NAMES)  # the five others of d/ and top.py


@pytest.mark.asyncio
async def test_a_root_replaced_after_the_session_opened_it_is_refused_by_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The root's path made to name another directory (of outside files, by the same names)
    once the session holds the root: the worker refuses it (not the directory the session
    opened), and the session reads the batch itself, beneath the directory it holds."""
    root = _repo(tmp_path)

    def replace() -> None:
        os.rename(root, tmp_path / "moved")
        plant_outside(root / "d", NAMES)
        plant_outside(root, ("top.py",))

    got, found, ran = await _build(tmp_path, root, monkeypatch, _on("top.py", replace), packed=True)
    assert ran == ["analyze_read"]
    assert found == []
    assert sorted(st.path for st, _, _ in got) == [*(f"d/{n}" for n in NAMES), "top.py"]
    for _, _, data in got:  # analysed here, from the files the session's descriptor names
        assert b"numbat" in data
    assert not _stored_words(tmp_path) & set(OUTSIDE_WORDS)


def test_reopen_is_the_directory_the_holder_opened_and_nothing_else(
    tmp_path: Path, how: str
) -> None:
    root = _repo(tmp_path)
    with Beneath(root) as tree:
        ref = pickle.loads(pickle.dumps(tree.ref()))  # noqa: S301 - as it travels to a worker
        assert ref == tree.ref()
        assert ref.openat2 == (how == "openat2")
        with Beneath.reopen(ref) as again:
            assert again.uses_openat2 == (how == "openat2")
            assert again.read("d/m00.py", 100) == _body("m00.py").encode()
        # A holder that walks has its readers walk, openat2 here or not.
        with Beneath.reopen(dataclasses.replace(ref, openat2=False)) as walking:
            assert not walking.uses_openat2
            assert walking.read("d/m00.py", 100) == _body("m00.py").encode()
        os.rename(root, tmp_path / "elsewhere")
        root.mkdir()
        with pytest.raises(RootMoved):
            Beneath.reopen(ref)
        os.rmdir(root)
        os.symlink(tmp_path / "elsewhere", root)  # the same directory, through a link: it
        with Beneath.reopen(ref) as again:
            assert again.read("top.py", 100) == _body("top.py").encode()
    with pytest.raises(ValueError, match="closed"):
        tree.ref()


def test_analyze_read_says_each_file_it_did_not_read_and_analyses_the_others(
    tmp_path: Path, how: str
) -> None:
    root = _repo(tmp_path)
    os.symlink(root / "top.py", root / "link.py")
    os.mkfifo(root / "d" / "pipe.py")
    (root / "d" / "huge.py").write_bytes(b"z" * (MAX_FILE_BYTES + 1))
    (root / "d" / "bin.py").write_bytes(b"\0\1\2")
    full = b"w = 1\n" * (MAX_FILE_BYTES // 6) + b"#" * (MAX_FILE_BYTES % 6)
    (root / "d" / "full.py").write_bytes(full)
    paths = ["d/bin.py", "d/full.py", "d/huge.py", "d/m00.py", "d/nothere.py", "d/pipe.py",
             "link.py"]  # fmt: skip
    with Beneath(root) as tree:
        ref = tree.ref()
    with Beneath(root) as holder:  # held open, as the session holds it
        assert holder.ref() == ref
        for packed in (False, True):
            got = analyze_read(paths, ref, str(tmp_path / f"chunks{packed}"), packed)
            assert [a.skip for a in got.analyzed] == [
                "binary", None, "too_large", None, "gone", "gone", "gone"
            ]  # fmt: skip
            assert got.sizes == [
                3, MAX_FILE_BYTES, MAX_FILE_BYTES + 1, len(_body("m00.py")), 0, 0, 0
            ]  # fmt: skip
            assert got.analyzed[1].text_bytes == MAX_FILE_BYTES  # at the cap: read whole
            assert got.analyzed[3].packed == packed
            assert (got.pairs is not None) == packed
            assert got.kept == {}
        # A record the store held when looked for: its bytes come back with it (not packed).
        again = analyze_read(["d/m00.py"], ref, str(tmp_path / "chunksFalse"), False)
        assert again.analyzed[0].record is None
        assert again.kept == {0: _body("m00.py").encode()}


@pytest.mark.asyncio
@pytest.mark.parametrize("extra", [0, 1], ids=["at-the-cap", "past-it"])
async def test_a_small_refresh_read_in_the_session_keeps_the_same_cap(
    tmp_path: Path, how: str, extra: int
) -> None:
    """Under the pool's threshold the session reads each file itself (read_file): the same cap
    as the workers', a file exactly at it read whole and one byte past it too large, one removed
    since it was listed gone."""
    root = _repo(tmp_path)
    (root / "d" / "m01.py").write_bytes(b"#" * (MAX_FILE_BYTES + extra))
    stats = _stats(root)
    os.unlink(root / "d" / "m04.py")  # listed, then removed: gone
    found: list[TreeFound] = []
    got = await read_and_analyze(
        stats, asyncio.get_running_loop().time() + 60.0, found,
        root=root, guard=default_guard(root, data_dir=tmp_path / "data").without_asking(),
        pool=None, chunks_dir=str(tmp_path / "chunks"), contention=Contention(lambda: 1.0),
    )  # fmt: skip
    assert _skips(found) == ({"d/m01.py": "too_large"} if extra else {}) | {"d/m04.py": "gone"}
    assert ("d/m01.py" in [st.path for st, _, _ in got]) == (not extra)
