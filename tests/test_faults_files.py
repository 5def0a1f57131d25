"""Files that change, vanish, hang or point elsewhere while they are indexed (ADR 0050 §3, §4).

What is promised (docs/reliability.md): such a file never makes a search crash, hang or read
outside the tree; it is left out, or indexed as it was read and again once it changed, and the rest
of the tree is searched.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval import entry
from nodwyn_retrieval.guard import CheckResult, Verdict
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path

from tests._faults_support import FILES, ROOT, env, open_engine, paths_of, pdirs_of
from tests.support import git, make_repo

pytestmark = pytest.mark.slow

# -- files that change, vanish, hang or point elsewhere while they are indexed --------------------


def once(path: str, act: Callable[[], None]) -> Callable[[str, int], CheckResult]:
    """A checker that does act the first time the guard checks a read of path: between the
    listing (and its stat) and the read."""
    done: list[bool] = []

    def check(p: str, size: int) -> CheckResult:
        if p == path and not done:
            done.append(True)
            act()
        return CheckResult(Verdict.ALLOW)

    return check


@pytest.mark.asyncio
async def test_a_file_deleted_between_listing_and_read_is_left_out(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    gone = repo / "server/http.py"
    async with await open_engine(repo, *dirs, checkers=[once("server/http.py", gone.unlink)]) as e:
        out = await e.index_search("serve listen", "repo")
        assert "server/http.py" not in paths_of(out)
        assert not out.header["partial"]
        out = await e.index_search("check binding", "repo")
        assert paths_of(out)[0] == "keychain/bind.py"
    m = load_manifest(manifest_path(pdirs_of(repo, dirs[0]).trees, repo))
    assert m is not None
    assert "server/http.py" not in m.entries


@pytest.mark.parametrize("by", [200, 2 << 20], ids=["a-little", "past-1-MiB"])
@pytest.mark.asyncio
async def test_a_file_growing_between_listing_and_read_is_indexed_as_read_then_again(
    tmp_path: Path, dirs: tuple[Path, Path], by: int
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    grows = repo / "server/http.py"

    def grow() -> None:
        with grows.open("a") as f:
            f.write("def appended_quokka():\n    pass\n")
            f.write(("# " + "x" * 70 + "\n") * (by // 73))

    async with await open_engine(repo, *dirs, checkers=[once("server/http.py", grow)]) as e:
        first = await e.index_search("appended quokka", "repo")
        second = await e.index_search("appended quokka", "repo")
        up = await e.index_update()
    if by < 1 << 20:
        assert paths_of(second) == ["server/http.py"]
    else:
        # Past the 1 MiB a file is indexed whole up to (§2): left out, as too large.
        assert paths_of(first) == paths_of(second) == []
        assert up.summary["skipped"]["too_large"] == 1


def reader_blocked_on(fifo: Path) -> bool:
    """Whether some reader holds the FIFO open (a writer's non-blocking open succeeds only
    then); releases that reader with an end of file."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return False
    os.close(fd)
    return True


async def watching_fifo(coro: Any, fifo: Path) -> tuple[Any, bool]:
    """Run coro; a reader found blocked on fifo several looks in a row is released (so the test
    cannot hang) and reported."""
    task = asyncio.ensure_future(coro)
    seen = 0
    stuck = False
    while not task.done():
        await asyncio.wait([task], timeout=0.05)
        if task.done():
            break
        seen = seen + 1 if fifo.exists() and stat.S_ISFIFO(os.lstat(fifo).st_mode) else 0
        if seen >= 5 and reader_blocked_on(fifo):
            stuck = True
    return await task, stuck


@pytest.mark.asyncio
async def test_a_file_replaced_by_a_fifo_before_it_is_read_is_not_waited_on(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    fifo = repo / "server/http.py"

    def to_fifo() -> None:
        fifo.unlink()
        os.mkfifo(fifo)

    monkeypatch.setattr(entry, "SEARCH_SECONDS", 3.0)
    async with await open_engine(repo, *dirs, checkers=[once("server/http.py", to_fifo)]) as e:
        out, stuck = await watching_fifo(e.index_search("serve listen", "repo"), fifo)
    assert not stuck
    assert out.header["not_read"] == 0


@pytest.mark.asyncio
async def test_a_result_replaced_by_a_fifo_before_its_lines_are_read_is_left_out(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    fifo = repo / "server/http.py"
    checks: list[str] = []

    def check(p: str, size: int) -> CheckResult:
        checks.append(p)
        if p == "server/http.py" and checks.count(p) == 2:  # the live read of the result
            fifo.unlink()
            os.mkfifo(fifo)
        return CheckResult(Verdict.ALLOW)

    async with await open_engine(repo, *dirs, checkers=[check]) as e:
        out, stuck = await watching_fifo(e.index_search("serve listen", "repo"), fifo)
    assert not stuck
    assert "server/http.py" not in paths_of(out)


def drop_dac_prefix() -> list[str]:
    """A command prefix that runs a process as root without the right to read any file
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so chmod 000 stops its reads."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("tests run as root, where chmod 000 does not stop a read, and no setpriv")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, "--bounding-set", caps, "--inh-caps", caps]


def test_an_unreadable_file_is_left_out_and_the_rest_searched(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    locked = repo / "server/http.py"
    locked.chmod(0)
    prefix = drop_dac_prefix() if os.geteuid() == 0 else []
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "nodwyn_retrieval", "--json", "search",
             "serve listen binding", "--root", str(repo),
             "--data-dir", str(dirs[0]), "--config-dir", str(dirs[1])],
            cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        locked.chmod(0o644)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    paths = [h["path"] for h in doc["results"]]
    assert "keychain/bind.py" in paths
    assert "server/http.py" not in paths
    assert not doc["header"]["partial"]


@pytest.mark.parametrize("git_tree", [True, False], ids=["git", "plain"])
@pytest.mark.asyncio
async def test_a_directory_replaced_by_a_link_outside_the_root_is_never_indexed(
    tmp_path: Path, dirs: tuple[Path, Path], git_tree: bool
) -> None:
    inside = {"lib/a.py": "def inside_wombat():\n    pass\n", "main.py": "def main():\n    pass\n"}
    if git_tree:
        repo = make_repo(tmp_path / "repo", dict(inside))
    else:
        repo = tmp_path / "plain"
        for p, body in inside.items():
            (repo / p).parent.mkdir(parents=True, exist_ok=True)
            (repo / p).write_text(body)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("def outside_secret_narwhal():\n    pass\n")
    (outside / "b.py").write_text("def outside_secret_narwhal_two():\n    pass\n")
    async with await open_engine(repo, *dirs) as e:
        assert paths_of(await e.index_search("inside wombat", "repo")) == ["lib/a.py"]
        shutil.rmtree(repo / "lib")
        (repo / "lib").symlink_to(outside, target_is_directory=True)
        out = await e.index_search("outside secret narwhal", "repo")
        assert out.hits == []
        assert paths_of(await e.index_search("inside wombat", "repo")) == []
        up = await e.index_update()
        assert up.summary["read"] == 0
    fresh = (tmp_path / "fresh-data", dirs[1])
    async with await open_engine(repo, *fresh) as e:
        assert (await e.index_search("outside secret narwhal", "repo")).hits == []
    for data in (dirs[0], fresh[0]):
        store = ChunkStore(pdirs_of(repo, data).chunks)
        for key, _, _ in store.iter_entries():
            rec = store.get(key)
            assert rec is not None
            assert "narwhal" not in rec.vocab


@pytest.mark.parametrize("git_tree", [True, False], ids=["git", "plain"])
@pytest.mark.asyncio
async def test_symbolic_link_loops_are_neither_followed_nor_indexed(
    tmp_path: Path, dirs: tuple[Path, Path], git_tree: bool
) -> None:
    files: dict[str, str | bytes] = {"main.py": "def main_kiwi():\n    pass\n"}
    if git_tree:
        repo = make_repo(tmp_path / "repo", files)
    else:
        repo = tmp_path / "plain"
        repo.mkdir()
        (repo / "main.py").write_text(str(files["main.py"]))
    (repo / "self").symlink_to("self")
    (repo / "ping").symlink_to("pong")
    (repo / "pong").symlink_to("ping")
    (repo / "sub").mkdir()
    (repo / "sub" / "up").symlink_to("..", target_is_directory=True)
    (repo / "sub" / "inner.py").write_text("def inner_kiwi():\n    pass\n")
    if git_tree:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "links")
    async with await open_engine(repo, *dirs) as e:
        out = await e.index_search("kiwi", "repo")
        up = await e.index_update()
    assert sorted(paths_of(out)) == ["main.py", "sub/inner.py"]
    assert up.summary["files"] == 2


@pytest.mark.asyncio
async def test_a_name_with_a_newline_is_indexed_and_searchable(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    (repo / "two\nlines.py").write_text("def newline_named_ocelot():\n    pass\n")
    async with await open_engine(repo, *dirs) as e:
        out = await e.index_search("newline named ocelot", "repo")
        up = await e.index_update()
    assert paths_of(out) == ["two\nlines.py"]
    assert up.summary["files"] == len(FILES) + 1


@pytest.mark.asyncio
async def test_a_name_that_is_not_utf8_is_skipped_cleanly(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """Decided: such a name cannot be shown to the model in a UTF-8 result, so it is left out
    and counted (as not_utf8), and the rest of the tree is searched as usual."""
    repo = make_repo(tmp_path / "repo", FILES)
    odd = os.path.join(os.fsencode(repo), b"bad\n\xff\xfename.py")
    Path(os.fsdecode(odd)).write_bytes(b"def badly_named_okapi():\n    pass\n")
    async with await open_engine(repo, *dirs) as e:
        out = await e.index_search("check binding okapi", "repo")
        up = await e.index_update()
    assert paths_of(out)[0] == "keychain/bind.py"
    assert all("okapi" not in h["first_line"] for h in out.hits)
    assert up.summary["files"] == len(FILES)
    assert up.summary["skipped"]["not_utf8"] == 1
