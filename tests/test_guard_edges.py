"""The guard's pin and denylist against a hostile tree, through every way of asking.

A clone is the attacker's: links out of the root at every depth, a sibling directory whose name
starts with the root's, `..` that climbs out from under a directory, a denied file behind an
innocent name, the data directory behind a link. Each is asked through `precheck`, the batched
`precheck_many` (which resolves each directory once per call, its own code path), `precheck_all`
and the guard for reads beneath the root; the answer a person reads (verdict, rule, reason) is
checked, and for the guard that decides paths as written, the read that follows is checked too:
nothing outside the root is ever read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest
from nodwyn_retrieval.guard import (
    Budget,
    Decision,
    DefaultGuard,
    ListRecorder,
    Verdict,
    default_guard,
    precheck_all,
)
from nodwyn_retrieval.guard.beneath import Beneath

OUTSIDE_WORD = "outside-wombat"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    t = tmp_path
    repo = t / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('app')\n")
    (repo / ".env").write_text("DB_PASSWORD=inside\n")
    (repo / "real" / "deep").mkdir(parents=True)
    (repo / "real" / "deep" / "f.py").write_text("deep = 1\n")
    (repo / "plain.txt").write_text("plain\n")
    (repo / "cfg").mkdir()
    (repo / ".data").mkdir()
    (repo / ".data" / "x").write_text("index\n")
    # A sibling whose name starts with the root's: outside, however its path begins.
    (t / "repo2").mkdir()
    (t / "repo2" / "secret.txt").write_text(f"{OUTSIDE_WORD} sibling\n")
    (t / "outside").mkdir()
    (t / "outside" / "f.txt").write_text(f"{OUTSIDE_WORD}\n")
    (repo / "sib").symlink_to(t / "repo2", target_is_directory=True)
    (repo / "out").symlink_to(t / "outside", target_is_directory=True)
    (repo / "dl").symlink_to("real", target_is_directory=True)  # a link inside the root
    (repo / "real" / "esc").symlink_to(t / "outside", target_is_directory=True)  # one deeper
    (repo / "notes.txt").symlink_to(".env")  # a denied file behind an innocent name
    (repo / "cfg" / ".env").symlink_to("../plain.txt")  # a denied name on an innocent file
    (repo / "broken").symlink_to(t / "nowhere", target_is_directory=True)
    (repo / "dd").symlink_to(".data", target_is_directory=True)  # the data directory
    (repo / "loop").symlink_to("loop")
    return repo


OUT = "outside the repository"
# (path, rule, what the reason says) for each refused path; None: allowed by the pin.
EXPECTED: list[tuple[str, str | None, str]] = [
    ("src/app.py", None, ""),
    ("a/../../outside/f.txt", "pin", "is " + OUT),
    ("../repo2/secret.txt", "pin", "is " + OUT),
    ("sib/secret.txt", "pin", "/repo2/secret.txt, " + OUT),
    ("out/f.txt", "pin", "/outside/f.txt, " + OUT),
    ("dl/deep/f.py", None, ""),
    ("real/deep/f.py", None, ""),
    ("dl/esc/f.txt", "pin", "/outside/f.txt, " + OUT),
    ("real/esc/f.txt", "pin", "/outside/f.txt, " + OUT),
    ("notes.txt", "denylist", "matches the denylist pattern .env"),
    ("cfg/.env", "denylist", "matches the denylist pattern .env"),
    ("broken/x", "pin", "/nowhere/x, " + OUT),
    ("dd/x", "denylist", "is inside the data directory"),
    (".data/x", "denylist", "is inside the data directory"),
    ("src//app.py", None, ""),
    ("./src/app.py", None, ""),
    ("src/", None, ""),
    ("missing/dir/f.py", None, ""),
    ("real/deep/../../.env", "denylist", "matches the denylist pattern .env"),
    ("real/deep/../../../outside/f.txt", "pin", "is " + OUT),
    ("src/app.py/x", None, ""),  # a file where a directory is expected: nothing to read
    ("loop/x", None, ""),  # a link loop inside the root: resolved no further
]


def _guard(repo: Path) -> DefaultGuard:
    return default_guard(repo, data_dir=repo / ".data")


def _check(d: Decision, path: str, rule: str | None, says: str) -> None:
    if rule is None:
        assert (d.verdict, d.rule, d.allowed) == (Verdict.ALLOW, "pin", True), (path, d)
    else:
        assert (d.verdict, d.rule, d.allowed) == (Verdict.DENY, rule, False), (path, d)
        assert d.reason.startswith(f"path {path} "), d.reason
        assert says in d.reason, (path, d.reason)
    assert d.path == path


def test_every_escape_is_refused_by_precheck_with_its_reason(hostile: Path) -> None:
    g = _guard(hostile)
    for path, rule, says in EXPECTED:
        _check(g.precheck(path), path, rule, says)


def test_the_batched_precheck_refuses_the_same_and_says_the_same(hostile: Path) -> None:
    g = _guard(hostile)
    paths = [p for p, _, _ in EXPECTED]
    # Twice in one call: the second time, every directory comes from the batch's cache.
    for answers in (g.precheck_many(paths + paths), precheck_all(g, paths + paths)):
        for d, (path, rule, says) in zip(answers, EXPECTED + EXPECTED, strict=True):
            _check(d, path, rule, says)
    # The refresher's form: names it has just seen are no links.
    names = [p for p in paths if not os.path.islink(hostile / p)]
    assert names != paths
    for d, path in zip(g.precheck_many(names, not_links=True), names, strict=True):
        assert d == g.precheck(path)


def test_absolute_paths_are_pinned_in_a_batch_too(hostile: Path) -> None:
    g = _guard(hostile)
    outside = str(hostile.parent / "outside" / "f.txt")
    sibling = str(hostile.parent / "repo2" / "secret.txt")
    inside = str(hostile / "src" / "app.py")
    for answers in (g.precheck_many([outside, sibling, inside]), [g.precheck(outside)]):
        assert answers[0].rule == "pin"
        assert not answers[0].allowed
        assert answers[0].reason.endswith("is " + OUT)
    d_sib, d_in = g.precheck_many([sibling, inside])
    assert (d_sib.allowed, d_sib.rule) == (False, "pin")
    assert d_in.allowed
    assert g.precheck_many([str(hostile)])[0].allowed  # the root itself


def test_a_directory_swapped_for_a_link_is_seen_by_the_next_batch(hostile: Path) -> None:
    g = _guard(hostile)
    assert [d.allowed for d in g.precheck_many(["real/deep/f.py", "real/x.py"])] == [True, True]
    os.rename(hostile / "real", hostile / "real.orig")
    os.symlink(hostile.parent / "outside", hostile / "real", target_is_directory=True)
    (hostile.parent / "outside" / "deep").mkdir()
    for d in g.precheck_many(["real/deep/f.py", "real/x.py"]):
        assert (d.allowed, d.rule) == (False, "pin")
        assert d.reason.endswith(OUT)


def test_a_guard_deciding_as_written_is_never_read_through_a_link(hostile: Path) -> None:
    """reading_beneath() decides a clean path as written; the read beneath the root then refuses
    whatever link is on its way, so the pair reads nothing outside the root, no denied file
    behind a link, and nothing of the data directory."""
    g = _guard(hostile).without_asking().reading_beneath()

    async def decide() -> list[Decision]:
        return [await g.check_read(p, 10) for p, _, _ in EXPECTED]

    read: dict[str, bytes] = {}
    with Beneath(hostile) as tree:
        for d in asyncio.run(decide()):
            if not d.allowed:
                continue
            with contextlib.suppress(OSError):  # a link on the way: refused, not followed
                read[d.path] = tree.read(d.path, 1 << 20)
    assert read == {"src/app.py": b"print('app')\n", "real/deep/f.py": b"deep = 1\n"}
    decided = {d.path: d for d in asyncio.run(decide())}
    # Decided as written: a link on the way is left to the read, which refuses it.
    for path in ("out/f.txt", "notes.txt", "dd/x", "sib/secret.txt", "dl/deep/f.py"):
        assert decided[path].allowed, path
        assert path not in read
    refused = {p for p, d in decided.items() if not d.allowed}
    # Escapes written with .. are resolved (they are not clean) and refused by the pin; a denied
    # name as written is refused by the denylist without resolving anything.
    assert {"a/../../outside/f.txt", "../repo2/secret.txt", "cfg/.env", ".data/x"} <= refused
    assert "real/deep/../../.env" in refused


def test_a_guard_at_the_file_systems_root(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x").write_text("index\n")
    (tmp_path / "f.txt").write_text("f\n")
    g = default_guard("/", data_dir=data)
    rel = str(tmp_path / "f.txt").lstrip("/")
    drel = str(data / "x").lstrip("/")
    paths = [rel, drel, "/" + rel, str(tmp_path).lstrip("/"), "tmp"]  # "tmp": at the root
    assert g.precheck_many(paths) == [g.precheck(p) for p in paths]
    assert [d.allowed for d in g.precheck_many(paths)] == [True, False, True, True, True]
    assert g.precheck(drel).reason == f"path {drel} is inside the data directory"

    b = g.reading_beneath()

    async def both() -> tuple[Decision, Decision]:
        return await b.check_read(rel, 2), await b.check_read(drel, 6)

    d_file, d_data = asyncio.run(both())
    assert d_file.allowed
    assert (d_data.allowed, d_data.rule) == (False, "denylist")
    assert d_data.reason == f"path {drel} is inside the data directory"


def test_a_path_that_changes_twice_while_resolved_is_decided_on_the_third_try(
    hostile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/guard.md: a path whose resolution keeps failing is tried three times, then refused;
    one that settles within the three is decided as usual."""
    real = os.path.realpath
    failures = {"n": 0}

    def flaky(path: str) -> str:
        if os.fspath(path).endswith("app.py") and failures["n"] < 2:
            failures["n"] += 1
            raise FileNotFoundError(2, "a link on the way vanished", path)
        return real(path)

    g = _guard(hostile)
    monkeypatch.setattr(os.path, "realpath", flaky)
    assert g.precheck("src/app.py").allowed
    assert failures["n"] == 2
    failures["n"] = -1  # three failures: refused
    d = g.precheck("src/app.py")
    assert (d.allowed, d.rule) == (False, "pin")
    assert d.reason == "path src/app.py kept changing while it was resolved"


def test_a_decision_that_cannot_be_recorded_keeps_its_budget_spent(hostile: Path) -> None:
    """docs/guard.md: a recorder that raises stops check_read; failing tightens, so the read's
    budget stays spent and the next read that would not fit is refused."""
    budget = Budget(reads=1)

    def full_disk(decision: Decision) -> None:
        raise OSError("no space left on device")

    g = default_guard(hostile, budget=budget, recorder=full_disk)
    with pytest.raises(OSError, match="no space left"):
        asyncio.run(g.check_read("src/app.py", 13))
    assert (budget.reads_used, budget.bytes_used) == (1, 13)
    quiet = default_guard(hostile, budget=budget)
    d = asyncio.run(quiet.check_read("plain.txt", 6))
    assert (d.allowed, d.rule) == (False, "budget")


def test_the_guard_for_reads_beneath_is_one_and_shares_everything(hostile: Path) -> None:
    budget, rec = Budget(reads=2), ListRecorder()
    g = default_guard(hostile, budget=budget, recorder=rec)
    b = g.reading_beneath()
    assert b.beneath
    assert not g.beneath
    assert b.reading_beneath() is b
    assert b.asking  # asking is kept
    assert b.without_asking().beneath  # and without_asking keeps reading beneath
    assert (b.budget, b.denylist, b.root) == (g.budget, g.denylist, g.root)
    asyncio.run(b.check_read("src/app.py", 1))
    asyncio.run(g.check_read("plain.txt", 1))
    assert budget.reads_used == 2
    assert [d.path for d in rec.decisions] == ["src/app.py", "plain.txt"]


def test_a_failing_checker_is_named_by_its_qualified_name(hostile: Path) -> None:
    class Checks:
        def size(self, path: str, size: int) -> None:
            raise RuntimeError("the size service is down")

    g = default_guard(hostile, checkers=[Checks().size])
    d = asyncio.run(g.check_read("src/app.py", 13))
    assert (d.allowed, d.rule) == (False, "check")
    assert d.reason == (
        "checker test_a_failing_checker_is_named_by_its_qualified_name.<locals>.Checks.size"
        " failed: RuntimeError: the size service is down"
    )


def test_a_link_inside_the_data_directory_is_still_the_data_directory(hostile: Path) -> None:
    """The path as written counts too: a link planted in the data directory that resolves to an
    ordinary file of the tree is refused as the data directory, by either precheck."""
    (hostile / ".data" / "lnk").symlink_to("../plain.txt")
    g = _guard(hostile)
    for d in (g.precheck(".data/lnk"), *g.precheck_many([".data/lnk", "plain.txt"])[:1]):
        assert (d.allowed, d.rule) == (False, "denylist")
        assert d.reason == "path .data/lnk is inside the data directory"
    assert g.precheck_many(["plain.txt"])[0].allowed


def test_a_batched_path_whose_directory_keeps_changing_says_so(
    hostile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = _guard(hostile)

    def vanishing(path: str) -> str:
        raise FileNotFoundError(2, "a link on the way vanished", path)

    monkeypatch.setattr(os.path, "realpath", vanishing)
    # dl/ is a link, so its real path is asked of realpath, which keeps failing.
    (d,) = g.precheck_many(["dl/deep/f.py"])
    assert (d.allowed, d.rule) == (False, "pin")
    assert d.reason == "path dl/deep/f.py kept changing while it was resolved"


def test_an_empty_file_is_read_with_a_size_of_zero(hostile: Path) -> None:
    (hostile / "empty.py").write_text("")
    budget = Budget(reads=2, bytes=10)
    g = default_guard(hostile, budget=budget)
    d = asyncio.run(g.check_read("empty.py", 0))
    assert d.allowed
    assert (budget.reads_used, budget.bytes_used) == (1, 0)
