"""git's listing parsed a part at a time in C calls: the names, their order and the count of those
left out are those of the one-by-one parse, whatever the part holds (actors/_listing.py)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from nodwyn_retrieval.actors import _listing
from nodwyn_retrieval.actors._listing import Listing

from tests.support import make_repo

ITEMS: list[bytes] = [
    b"H a.py",
    b"H pkg/b.py",
    b"H pkg/b.py",  # listed twice (an unmerged file is)
    b"? new.py",
    b"H caf\xe9.py",  # not UTF-8
    b"H ../up.py",
    b"H sub/.GIT/config",
    b"H sub/.gIt",
    b"H x/./y.py",
    b"H x//y.py",
    b"H /abs.py",
    b"H trailing/",
    b"H .github/ci.yml",  # ".git" begins the name, is not it
    b"H a.gitx/b.py",
    b"H x/.git.py",
    b"H ...py",
    b"H dir/..x/y",
    b"? .nodwyn/wt/a.py",  # another session's worktree: never indexed
    b"H .nodwyn/config.toml",  # tracked: the project's own
    b"? .nodwyn",
    b"? .nodwynx/a.py",
    b"? x/? .nodwyn.py",
    b"H",
    b"H ",
    b"",
    b"H z",
]


def _both(items: list[bytes]) -> tuple[list[str], int]:
    got = _listing._parse_items(items)
    assert got == _listing._parse_items_one_by_one(items), items
    return got


@pytest.mark.parametrize("name", [i for i in ITEMS if len(i) >= 3])
def test_each_kind_of_name_alone_and_among_plain_ones(name: bytes) -> None:
    plain = [b"H p%d.py" % i for i in range(5)]
    _both([name])
    _both([*plain[:2], name, *plain[2:]])


def test_every_kind_of_name_together_and_in_random_parts() -> None:
    names, bad = _both(ITEMS)
    assert bad == 7  # ../up.py, sub/.GIT/config, sub/.gIt, x/./y.py, x//y.py, /abs.py, trailing/
    assert names[:4] == ["a.py", "pkg/b.py", "new.py", os.fsdecode(b"caf\xe9.py")]
    assert ".nodwyn/config.toml" in names
    assert ".nodwyn/wt/a.py" not in names
    assert ".nodwyn" not in names
    assert ".nodwynx/a.py" in names
    assert ".github/ci.yml" in names
    rng = random.Random(7)
    for _ in range(300):
        part = rng.sample(ITEMS, rng.randint(0, len(ITEMS)))
        _both(part)
    assert _both([]) == ([], 0)
    assert _both([b"H", b""]) == ([], 0)


def test_a_dot_git_part_in_any_case_is_found_by_the_quick_check() -> None:
    # Every spelling the one-by-one check refuses, and Unicode letters that case-fold to ASCII.
    for spelling in ("GIT", "Git", "gIT", "git"):
        assert _both([b"H x/." + spelling.encode() + b"/y"]) == ([], 1)
        assert _both([b"H ." + spelling.encode()]) == ([], 1)
    for odd in ("\u0130", "\u0131"):  # dotted capital I, dotless i
        name = f"x/.g{odd}t/y".encode()
        _both([b"H " + name])


def test_names_added_together_are_those_added_one_at_a_time(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    parts = [
        ["a.py", "b.py"],
        ["c.py", "a.py"],  # a name seen in an earlier part
        [os.fsdecode(b"caf\xe9.py"), "d.py"],  # a name that is not UTF-8
        [],
        ["e.py"],
    ]
    together, alone = Listing(root, []), Listing(root, [])
    for part in parts:
        together._add_all(part)
        for name in part:
            alone._add(name)
    assert together.names == alone.names == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    assert together.bad_names == alone.bad_names == 1


def test_a_real_listing_with_odd_names_is_the_one_by_one_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: dict[str, str | bytes] = {f"d{i % 7}/f{i}.py": f"F{i} = 1\n" for i in range(300)}
    files[".github/ci.yml"] = "on: push\n"
    files[".nodwyn/config.toml"] = "x = 1\n"
    root = make_repo(tmp_path / "repo", files)
    with open(os.fsencode(root) + b"/caf\xe9.py", "wb") as f:
        f.write(b"X = 1\n")
    (root / ".nodwyn/wt").mkdir()
    (root / ".nodwyn/wt/a.py").write_text("A = 1\n")
    (root / "untracked.py").write_text("U = 1\n")
    monkeypatch.setattr(Listing, "PARSE_EVERY", 64)
    quick = Listing(root, [])
    assert quick.step(float("inf"))
    monkeypatch.setattr(_listing, "_parse_items", _listing._parse_items_one_by_one)
    slow = Listing(root, [])
    assert slow.step(float("inf"))
    assert quick.names == slow.names
    assert quick.bad_names == slow.bad_names == 1
    assert "untracked.py" in quick.names
    assert ".nodwyn/config.toml" in quick.names
    assert ".nodwyn/wt/a.py" not in quick.names
    assert len(quick.names) == 303
