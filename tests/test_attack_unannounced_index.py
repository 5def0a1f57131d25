"""An index file written by hand, as a hostile clone can ship one: git lists its names as written.

docs/guard.md, "The root", 4: every listed name is checked before any use. `git update-index`
refuses `..`, an absolute name and `.git` parts, but `git ls-files` prints whatever the index
file holds; here the index is a real one (git's own format, its checksum right) naming files
outside the tree, and git is run on it as the listing runs it.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine

from tests._hostile import OUTSIDE_TEXT, assert_no_outside_bytes, cli
from tests.support import git, make_repo


def _write_index(path: Path, names: list[str]) -> None:
    """A version 2 index of regular files, each named as given (git's layout, its SHA-1 trailer)."""
    blob = hashlib.sha1(b"blob 0\0").digest()  # noqa: S324 - git's own object name
    entries = b""
    for name in sorted(names, key=str.encode):
        raw = name.encode()
        entry = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0) + blob
        entry += struct.pack(">H", min(len(raw), 0xFFF)) + raw
        entries += entry + b"\0" * (8 - len(entry) % 8)
    body = b"DIRC" + struct.pack(">II", 2, len(names)) + entries
    path.write_bytes(body + hashlib.sha1(body).digest())  # noqa: S324 - the index's checksum


@pytest.mark.asyncio
async def test_names_a_crafted_index_lists_outside_the_tree_are_never_read(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    (tmp_path / "up.py").write_text(OUTSIDE_TEXT, encoding="utf-8")
    clone = make_repo(tmp_path / "clone", {"a.py": "def inside_wombat():\n    pass\n"})
    (clone / "b").mkdir()
    hostile = ["../up.py", "b/../../up.py", str(tmp_path / "up.py"), ".git/config", "b/.GIT/x"]
    _write_index(clone / ".git" / "index", ["a.py", *hostile])
    listed = git(clone, "ls-files", "-z", "--cached").split("\0")
    assert set(hostile) <= set(listed)  # git prints them as the index holds them
    async with await Engine.open(clone, data_dir=dirs[0], config_dir=dirs[1], workers=1) as e:
        out = await e.index_search("inside wombat", "repo")
        upd = await e.index_update()
    assert {h["path"] for h in out.hits} == {"a.py"}
    found = cli("--root", str(clone), "search", "inside wombat", cwd=tmp_path, dirs=dirs)
    assert found.returncode == 0, found.stderr
    assert "not plain paths beneath it: left out" in found.stderr
    assert_no_outside_bytes(dirs[0], out.text, upd.text, found.stdout, found.stderr)
