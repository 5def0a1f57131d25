"""A new session's refresh takes an unchanged file's precheck as done (actors/_fastpath.py).

Each shortcut is held to the freshness promise of §5: an edit, a rename-save that keeps the size
and the modification time, a new file, a deny pattern added between sessions and a directory
swapped for a link out of the tree are each seen by the first search of a new session.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nodwyn_retrieval.actors import _fastpath
from nodwyn_retrieval.actors._fastpath import guard_fingerprint, real_dirs, vouched
from nodwyn_retrieval.actors.refresher import _stat_all
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard.guard import default_guard
from nodwyn_retrieval.store.manifest import Entry, load_manifest

from tests.support import make_repo

FILES: dict[str, str | bytes] = {
    "pkg/alpha.py": "def alpha_walrus():\n    return 1\n",
    "pkg/sub/beta.py": "def beta_pelican():\n    return 2\n",
    "notes/gamma.md": "# Gamma\n\nThe gamma heron.\n",
    "top.py": "TOP_OSPREY = 3\n",
}


async def _session(root: Path, dirs: tuple[Path, Path]) -> Engine:
    data, config = dirs
    return await Engine.open(root, data_dir=data, config_dir=config, workers=1)


async def _paths(root: Path, dirs: tuple[Path, Path], query: str) -> list[str]:
    """The paths the first search of a new session finds for query."""
    async with await _session(root, dirs) as engine:
        out = await engine.index_search(query, "repo")
        return [h["path"] for h in out.hits]


async def _build(root: Path, dirs: tuple[Path, Path]) -> None:
    async with await _session(root, dirs) as engine:
        up = await engine.index_update()
        assert not up.summary["partial"]


def _prechecked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path the refresher's batch precheck is asked about, from now on."""
    seen: list[str] = []
    from nodwyn_retrieval.actors import refresher

    real = refresher.precheck_all

    def spy(guard: object, paths: list[str], **options: object) -> object:
        seen.extend(paths)
        return real(guard, paths, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(refresher, "precheck_all", spy)
    return seen


@pytest.mark.asyncio
async def test_an_unchanged_tree_is_not_prechecked_again_by_a_new_session(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    await _build(root, dirs)
    seen = _prechecked(monkeypatch)
    assert await _paths(root, dirs, "walrus") == ["pkg/alpha.py"]
    assert seen == []  # every file was vouched for by the manifest


@pytest.mark.asyncio
async def test_an_edit_is_seen_and_prechecked(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    await _build(root, dirs)
    with (root / "pkg/alpha.py").open("a") as f:
        f.write("def alpha_narwhal():\n    return 4\n")
    seen = _prechecked(monkeypatch)
    assert await _paths(root, dirs, "narwhal") == ["pkg/alpha.py"]
    assert seen == ["pkg/alpha.py"]


@pytest.mark.asyncio
async def test_a_rename_save_with_size_and_time_kept_is_seen(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    await _build(root, dirs)
    target = root / "pkg/sub/beta.py"
    old = target.stat()
    new_text = "def beta_penguin():\n    return 2\n"
    assert len(new_text) == old.st_size
    tmp = target.with_name(".beta.py.tmp")
    tmp.write_text(new_text)
    os.utime(tmp, ns=(old.st_atime_ns, old.st_mtime_ns))
    tmp.replace(target)
    st = target.stat()
    assert (st.st_size, st.st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    assert st.st_ino != old.st_ino
    seen = _prechecked(monkeypatch)
    assert await _paths(root, dirs, "penguin") == ["pkg/sub/beta.py"]
    assert await _paths(root, dirs, "pelican") == []
    assert "pkg/sub/beta.py" in seen


@pytest.mark.asyncio
async def test_a_new_file_is_seen_and_prechecked(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    await _build(root, dirs)
    (root / "pkg/sub/delta.py").write_text("def delta_cormorant():\n    pass\n")
    seen = _prechecked(monkeypatch)
    assert await _paths(root, dirs, "cormorant") == ["pkg/sub/delta.py"]
    assert seen == ["pkg/sub/delta.py"]


@pytest.mark.asyncio
async def test_a_deny_pattern_added_between_sessions_is_applied_to_unchanged_files(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    await _build(root, dirs)
    assert await _paths(root, dirs, "heron") == ["notes/gamma.md"]
    config = dirs[1]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[index]\ndeny = ["notes/**"]\n')
    assert await _paths(root, dirs, "heron") == []
    assert await _paths(root, dirs, "walrus") == ["pkg/alpha.py"]


@pytest.mark.asyncio
async def test_a_directory_swapped_for_a_link_out_of_the_tree_is_not_searched(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    await _build(root, dirs)
    outside = tmp_path / "outside"
    outside.mkdir()
    # The same files, inodes and times, now outside the root behind a link of the same name.
    (root / "pkg/sub").rename(outside / "sub")
    (root / "pkg/sub").symlink_to(outside / "sub")
    assert (root / "pkg/sub/beta.py").stat().st_ino == (outside / "sub/beta.py").stat().st_ino
    assert await _paths(root, dirs, "pelican") == []
    assert await _paths(root, dirs, "walrus") == ["pkg/alpha.py"]


def test_vouched_takes_only_unchanged_entries_in_real_directories(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    guard = default_guard(root)
    fp = guard_fingerprint(guard)
    paths = sorted(p for p in FILES)
    fs = dict(zip(paths, _stat_all(root, paths), strict=True))
    entries = {p: Entry(*st, "!binary") for p, st in fs.items() if st}
    assert vouched(root, guard, fs, entries, fingerprint=fp, manifest_guard=fp) == paths
    # Another guard's manifest, or none known, vouches for nothing.
    assert vouched(root, guard, fs, entries, fingerprint=fp, manifest_guard="") == []
    other = guard_fingerprint(default_guard(root, deny=["*.md"]))
    assert other != fp
    assert vouched(root, guard, fs, entries, fingerprint=fp, manifest_guard=other) == []
    # A changed signature, a path not in the manifest: prechecked.
    changed = dict(entries)
    e = changed["top.py"]
    changed["top.py"] = Entry(e.size, e.mtime_ns + 1, e.inode, e.key)
    del changed["notes/gamma.md"]
    got = vouched(root, guard, fs, changed, fingerprint=fp, manifest_guard=fp)
    assert got == ["pkg/alpha.py", "pkg/sub/beta.py"]


def test_real_dirs_stops_at_a_link(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "a/b/c").mkdir(parents=True)
    (tmp_path / "elsewhere/d").mkdir(parents=True)
    (root / "a/link").symlink_to(tmp_path / "elsewhere")
    got = real_dirs(root, {"a", "a/b", "a/b/c", "a/link", "a/link/d", "gone"})
    assert got == {"", "a", "a/b", "a/b/c"}


def test_the_manifest_records_the_guard_that_allowed_its_entries(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    import asyncio

    root = make_repo(tmp_path / "repo", FILES)
    asyncio.run(_build(root, dirs))
    data, config = dirs
    (path,) = data.rglob("*.manifest")
    m = load_manifest(path)
    assert m is not None
    guard = default_guard(root.resolve(), data_dir=data, config_dir=config)
    assert m.guard == guard_fingerprint(guard)
    assert len(m.guard) == 64
    assert _fastpath.guard_fingerprint(object()) == ""  # type: ignore[arg-type]


def test_vouched_vouches_for_nothing_it_cannot_prove(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    guard = default_guard(root)
    fp = guard_fingerprint(guard)
    paths = sorted(FILES)
    fs = dict(zip(paths, _stat_all(root, paths), strict=True))
    entries = {p: Entry(*st, "!binary") for p, st in fs.items() if st}
    # No entry as it was (a first build, or every file edited): an empty answer, not a failure.
    assert vouched(root, guard, fs, {}, fingerprint=fp, manifest_guard=fp) == []
    # The files of one root against the guard of another, whose rules are the same: nothing.
    other_root = make_repo(tmp_path / "other", FILES)
    other = default_guard(other_root)
    assert guard_fingerprint(other) != fp  # the root is part of what the rules depend on
    ofp = guard_fingerprint(other)
    assert vouched(root, other, fs, entries, fingerprint=ofp, manifest_guard=ofp) == []
    # A link to the root is the root: its real path is the guard's.
    (tmp_path / "link").symlink_to(root)
    assert vouched(tmp_path / "link", guard, fs, entries, fingerprint=fp, manifest_guard=fp) == (
        paths
    )
