"""A plain tree's .gitignore files cannot make its walk endless.

Outside git (and a clone is outside git as soon as its ``.git`` is no repository: a FIFO as its
``HEAD`` is enough) the walk applies the tree's ``.gitignore`` files itself. One of 95,000
distinct patterns (1 MiB, what the walk reads of one) took 5.5 s to compile and 27 ms to match
each name: every search of such a tree ended at its deadline having listed a few hundred names
and read none. The rules applied at a directory are bounded now (``IGNORE_RULES``, and
``IGNORE_RULES_WALK`` compiled in a walk), and the walk gives its caller the clock after each
directory, where a tree of empty directories gave it none.
"""

from __future__ import annotations

import asyncio
import logging
import random
import string
from pathlib import Path

import pytest
from nodwyn_retrieval.actors import _listing
from nodwyn_retrieval.actors._listing import (
    IGNORE_RULES,
    IGNORE_RULES_WALK,
    Listing,
    _Ignore,
    _Rules,
    walk_dir,
)
from nodwyn_retrieval.entry import Engine

FILES = 2000


def _bomb(n_bytes: int = 1 << 20, seed: int = 1) -> str:
    """A .gitignore of distinct patterns matching nothing of the tree, n_bytes long."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while size < n_bytes - 20:
        line = "*" + "".join(rng.choice(string.ascii_lowercase) for _ in range(8)) + "*"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


@pytest.mark.asyncio
async def test_a_gitignore_of_a_hundred_thousand_patterns_does_not_stop_the_search(
    tmp_path: Path, dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / ".gitignore").write_text(_bomb() + "ignored.py\n")
    (root / "ignored.py").write_text("def kangaroo_kept_anyway():\n    pass\n")
    for i in range(FILES):
        (root / "src" / f"f{i:04d}.py").write_text(f"def inside_wombat_{i}():\n    return {i}\n")
    caplog.set_level(logging.WARNING, "nodwyn_retrieval.actors.listing")
    async with await Engine.open(root, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        # The whole walk was more than a minute of one core; bounded, it is well under a second.
        out = await asyncio.wait_for(engine.index_search("inside wombat 1999", "repo"), 120)
        kept = await asyncio.wait_for(engine.index_search("kangaroo kept anyway", "repo"), 120)
    assert "partial" not in out.text, out.text[:300]
    assert "src/f1999.py" in {h["path"] for h in out.hits}, out.text[:300]
    # The rule past the bound is not applied: its file is listed (and searched) as any other.
    assert {h["path"] for h in kept.hits} == {"ignored.py"}, kept.text[:300]
    assert "hold more rules than are applied" in caplog.text


def test_the_rules_applied_at_a_directory_are_bounded(tmp_path: Path) -> None:
    text = _bomb(1 << 18)
    rules = _Rules(tmp_path)
    top = _Ignore("", text, rules, IGNORE_RULES)
    assert len(top.rules) == IGNORE_RULES
    below = _Ignore("sub/", "*.log\n", rules, IGNORE_RULES - len(top.rules))
    assert below.rules == []  # the directory's bound is spent by the file above
    assert rules.left_out > 0
    # Each distinct line is compiled once in a walk, and no more than the walk's bound.
    many = _Rules(tmp_path)
    for seed in range(IGNORE_RULES_WALK // IGNORE_RULES + 2):
        _Ignore("", _bomb(1 << 14, seed), many, IGNORE_RULES)
    assert len(many._compiled) == IGNORE_RULES_WALK
    # What a small .gitignore says is applied as before.
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / ".gitignore").write_text("*.log\n!keep.log\n")
    for name in ("a.log", "keep.log", "a.py"):
        (tmp_path / "t" / name).write_text("x")
    got = sorted(walk_dir(tmp_path / "t", tmp_path / "t", honour_ignores=True, skip_hidden=True))
    assert got == ["a.py", "keep.log"]


class _Clock:
    """A stand-in for the listing's ``time``: each step's first look at the clock is before its
    deadline (1.0), every later look after it."""

    def __init__(self) -> None:
        self.looks = 0

    def monotonic(self) -> float:
        self.looks += 1
        return 0.0 if self.looks == 1 else 2.0


def test_a_tree_of_empty_directories_gives_the_listing_its_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk that meets no file still stops at the step's deadline, and goes on at the next:
    before, it looked at the clock only between names, and a tree of a million empty directories
    was walked whole in one step, whatever its deadline."""
    root = tmp_path / "plain"
    for i in range(50):
        (root / f"d{i:02d}" / "e").mkdir(parents=True)
    (root / "zz.py").write_text("x = 1\n")
    clock = _Clock()
    monkeypatch.setattr(_listing, "time", clock)
    listing = Listing(root, [])
    try:
        steps = 0
        while True:
            steps += 1
            clock.looks = 0
            if listing.step(1.0):
                break
            assert steps < 1000
        assert steps > 100  # one directory a step: 101 of them, none holding a file but the top
        assert listing.names == ["zz.py"]
    finally:
        listing.close()
