"""The read guard (ADR 0050 §3): pin, denylist, checkers, budget, without_asking, records.

Every test runs on real files in a temporary git repository, with real symbolic links.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput, GuardRefused, NotFound
from nodwyn_retrieval.guard import (
    DEFAULT_DENY,
    Budget,
    CheckResult,
    Decision,
    DefaultGuard,
    Guard,
    ListRecorder,
    Verdict,
    default_guard,
    precheck_all,
)

from tests.support import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with ordinary files, a secret file and a file outside it."""
    (tmp_path / "outside.txt").write_text("not the project's\n")
    return make_repo(
        tmp_path / "repo",
        {
            "src/app.py": "print('hello')\n",
            "README.md": "# hello\n",
            ".env": "DB_PASSWORD=x\n",
            ".gitignore": "*.log\n",
            "docs/guide.md": "guide\n",
        },
    )


def _allowed(d: Decision) -> bool:
    return d.verdict is Verdict.ALLOW and d.allowed


# --- the pin ------------------------------------------------------------------------------------


def test_a_file_inside_the_root_is_allowed(repo: Path) -> None:
    guard = default_guard(repo)
    d = guard.precheck("src/app.py")
    assert _allowed(d)
    assert d == Decision(
        "src/app.py", Verdict.ALLOW, "pin", "inside the repository, refused by no rule"
    )


def test_dotdot_leaving_the_root_is_refused_by_the_pin(repo: Path) -> None:
    d = default_guard(repo).precheck("../outside.txt")
    assert (d.verdict, d.rule) == (Verdict.DENY, "pin")
    assert d.reason == "path ../outside.txt is outside the repository"


def test_dotdot_that_stays_inside_is_judged_where_it_lands(repo: Path) -> None:
    guard = default_guard(repo)
    assert _allowed(guard.precheck("src/../README.md"))
    d = guard.precheck("src/../.env")
    assert (d.verdict, d.rule) == (Verdict.DENY, "denylist")


def test_a_symlink_escaping_the_root_is_refused_by_the_pin(repo: Path) -> None:
    (repo / "link.txt").symlink_to(repo.parent / "outside.txt")
    d = default_guard(repo).precheck("link.txt")
    assert (d.verdict, d.rule) == (Verdict.DENY, "pin")
    real = os.path.realpath(repo.parent / "outside.txt")
    assert d.reason == f"path link.txt resolves to {real}, outside the repository"


def test_a_linked_directory_escaping_the_root_is_refused_by_the_pin(repo: Path) -> None:
    (repo.parent / "elsewhere").mkdir()
    (repo.parent / "elsewhere" / "a.py").write_text("x = 1\n")
    (repo / "vendor").symlink_to(repo.parent / "elsewhere", target_is_directory=True)
    assert default_guard(repo).precheck("vendor/a.py").rule == "pin"


def test_an_absolute_path_is_pinned_like_a_relative_one(repo: Path) -> None:
    guard = default_guard(repo)
    assert _allowed(guard.precheck(str(repo / "src" / "app.py")))
    outside = str(repo.parent / "outside.txt")
    d = guard.precheck(outside)
    assert d.reason == f"path {outside} is outside the repository"


def test_the_root_is_resolved(repo: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(repo, target_is_directory=True)
    guard = default_guard(alias)
    assert guard.root == Path(os.path.realpath(repo))
    assert _allowed(guard.precheck("src/app.py"))


# --- the denylist ---------------------------------------------------------------------------------


def test_a_dotenv_file_is_denied(repo: Path) -> None:
    d = default_guard(repo).precheck(".env")
    assert d == Decision(
        ".env", Verdict.DENY, "denylist", "path .env matches the denylist pattern .env"
    )
    assert not d.allowed


def test_git_internals_are_denied_but_git_files_of_the_tree_are_not(repo: Path) -> None:
    guard = default_guard(repo)
    assert guard.precheck(".git/config").rule == "denylist"
    assert guard.precheck(".git/HEAD").reason.endswith("pattern .git")
    assert _allowed(guard.precheck(".gitignore"))
    assert _allowed(guard.precheck(".github/workflows/ci.yml"))


@pytest.mark.parametrize(
    "path",
    [
        ".env.local",
        "config/.env",
        "certs/server.pem",
        "server.key",
        "keys/id_rsa",
        "keys/id_rsa.pub",
        "id_ed25519",
        "id_ecdsa_sk",
        "home/.ssh/config",
        ".aws/credentials",
        "ops/.aws/credentials",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "store.p12",
        "store.pfx",
        ".git-credentials",
        "credentials.json",
        "CREDENTIALS.JSON",
        ".ENV",
    ],
)
def test_the_default_denylist_denies_secret_files(repo: Path, path: str) -> None:
    assert default_guard(repo).precheck(path).rule == "denylist"


@pytest.mark.parametrize(
    "path", ["src/keys.py", "docs/env.md", ".aws/config", "environment.yml", "monkey.py", "a.keys"]
)
def test_the_default_denylist_leaves_ordinary_files(repo: Path, path: str) -> None:
    assert _allowed(default_guard(repo).precheck(path))


def test_a_symlink_to_a_denied_file_is_denied(repo: Path) -> None:
    (repo / "notes.txt").symlink_to(repo / ".env")
    d = default_guard(repo).precheck("notes.txt")
    assert (d.rule, d.reason) == ("denylist", "path notes.txt matches the denylist pattern .env")


def test_a_path_through_a_linked_directory_is_denied_where_it_lands(repo: Path) -> None:
    (repo / ".ssh").mkdir()
    (repo / ".ssh" / "config").write_text("Host x\n")
    (repo / "settings").symlink_to(repo / ".ssh", target_is_directory=True)
    assert default_guard(repo).precheck("settings/config").rule == "denylist"


def test_a_user_pattern_adds_to_the_denylist(repo: Path) -> None:
    guard = default_guard(repo, deny=("*.sqlite", "private/", "/build/out"))
    assert guard.precheck("db/app.sqlite").reason == (
        "path db/app.sqlite matches the denylist pattern *.sqlite"
    )
    assert guard.precheck("a/private/notes.md").rule == "denylist"
    assert guard.precheck("build/out/x.js").rule == "denylist"
    assert _allowed(guard.precheck("src/build/out/x.js"))  # anchored at the root
    assert _allowed(guard.precheck("private"))  # a trailing "/" names directories only
    assert _allowed(guard.precheck("privateer.md"))
    assert guard.precheck(".env").rule == "denylist"  # the defaults stay
    assert guard.denylist.patterns == (*DEFAULT_DENY, "*.sqlite", "private/", "/build/out")


def test_a_double_star_pattern_crosses_directories(repo: Path) -> None:
    guard = default_guard(repo, deny=("fixtures/**/*.bin",))
    assert guard.precheck("fixtures/a/b/c.bin").rule == "denylist"
    assert guard.precheck("fixtures/c.bin").rule == "denylist"
    assert _allowed(guard.precheck("other/fixtures/c.bin"))


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", r"^deny pattern must not be empty$"),
        ("  ", r"^deny pattern must not be empty$"),
        ("!keep.pem", r"^deny pattern !keep\.pem negates: the denylist can only be added to$"),
        ("/", r"^deny pattern / names the root: a guard that denies every read$"),
    ],
)
def test_a_malformed_deny_pattern_is_refused(repo: Path, pattern: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        default_guard(repo, deny=(pattern,))


def test_deny_given_as_one_string_is_refused(repo: Path) -> None:
    with pytest.raises(BadInput, match=r"^deny must be a sequence of patterns, not one string$"):
        default_guard(repo, deny="*.pem")


def test_a_data_dir_inside_the_root_is_denied(repo: Path) -> None:
    data = repo / ".data"
    (data / "projects").mkdir(parents=True)
    (data / "projects" / "index.bin").write_bytes(b"x")
    guard = default_guard(repo, data_dir=data, config_dir=repo / "conf")
    d = guard.precheck(".data/projects/index.bin")
    assert (d.rule, d.reason) == (
        "denylist",
        "path .data/projects/index.bin is inside the data directory",
    )
    assert guard.precheck("conf/workspaces.toml").reason == (
        "path conf/workspaces.toml is inside the configuration directory"
    )
    assert _allowed(guard.precheck("src/app.py"))


def test_a_data_dir_reached_through_a_link_is_denied(repo: Path) -> None:
    data = repo / "var" / "data"
    data.mkdir(parents=True)
    (data / "x.bin").write_bytes(b"x")
    (repo / "shortcut").symlink_to(data, target_is_directory=True)
    guard = default_guard(repo, data_dir=data)
    assert guard.precheck("shortcut/x.bin").reason == (
        "path shortcut/x.bin is inside the data directory"
    )


# --- precheck -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_precheck_records_nothing_and_spends_nothing(repo: Path) -> None:
    recorder = ListRecorder()
    budget = Budget(reads=1)
    guard = default_guard(
        repo, recorder=recorder, budget=budget, checkers=[lambda p, s: CheckResult.deny("no")]
    )
    assert _allowed(guard.precheck("src/app.py"))  # checkers are not asked
    assert guard.precheck(".env").rule == "denylist"
    assert recorder.decisions == []
    assert budget.reads_used == 0


def test_precheck_many_decides_as_precheck_does(repo: Path) -> None:
    (repo / "link.txt").symlink_to(repo.parent / "outside.txt")
    (repo / "notes.txt").symlink_to(repo / ".env")
    (repo / "docs" / "up").symlink_to(repo, target_is_directory=True)
    paths = [
        "src/app.py", ".env", "link.txt", "notes.txt", "../outside.txt", "src/../.env",
        "docs/up/src/app.py", "docs/up/.env", "missing/file.py", "README.md", "docs/guide.md",
        str(repo / "README.md"), ".git/config",
    ]  # fmt: skip
    guard = default_guard(repo)
    assert guard.precheck_many(paths) == [guard.precheck(p) for p in paths]
    assert precheck_all(guard, paths) == [guard.precheck(p) for p in paths]


def test_precheck_all_works_with_any_guard(repo: Path) -> None:
    class Wrapper:
        def __init__(self, inner: DefaultGuard) -> None:
            self.inner = inner

        @property
        def root(self) -> Path:
            return self.inner.root

        def precheck(self, path: str) -> Decision:
            return self.inner.precheck(path)

        async def check_read(self, path: str, size: int) -> Decision:
            return await self.inner.check_read(path, size)

        def without_asking(self) -> Guard:
            return self

    wrapper: Guard = Wrapper(default_guard(repo))
    assert [d.allowed for d in precheck_all(wrapper, ["README.md", ".env"])] == [True, False]


@pytest.mark.parametrize(
    ("path", "message"),
    [("", r"^path must not be empty$"), ("a\0b", r"^path 'a\\x00b' holds a NUL byte$")],
)
def test_a_malformed_path_is_refused_as_bad_input(repo: Path, path: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        default_guard(repo).precheck(path)


def test_a_root_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(NotFound, match=rf"^root {missing} is not a directory$"):
        default_guard(missing)


# --- checkers -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_checker_that_denies_refuses_the_read(repo: Path) -> None:
    def no_docs(path: str, size: int) -> CheckResult:
        if path.startswith("docs/"):
            return CheckResult.deny("docs are off limits")
        return CheckResult.allow()

    guard = default_guard(repo, checkers=[no_docs])
    d = await guard.check_read("docs/guide.md", 6)
    assert d == Decision("docs/guide.md", Verdict.DENY, "check", "docs are off limits")
    assert _allowed(await guard.check_read("src/app.py", 15))


@pytest.mark.asyncio
async def test_an_async_checker_is_awaited(repo: Path) -> None:
    async def slow_no(path: str, size: int) -> CheckResult:
        await asyncio.sleep(0)
        return CheckResult(Verdict.DENY, f"{path} is {size} bytes")

    d = await default_guard(repo, checkers=[slow_no]).check_read("src/app.py", 15)
    assert (d.verdict, d.rule, d.reason) == (Verdict.DENY, "check", "src/app.py is 15 bytes")


@pytest.mark.asyncio
async def test_the_first_checker_that_does_not_allow_wins(repo: Path) -> None:
    asked: list[str] = []

    def allow(path: str, size: int) -> CheckResult:
        asked.append("allow")
        return CheckResult.allow()

    def confirm(path: str, size: int) -> CheckResult:
        asked.append("confirm")
        return CheckResult.confirm("a person should look")

    def deny(path: str, size: int) -> CheckResult:
        asked.append("deny")
        return CheckResult.deny("never")

    d = await default_guard(repo, checkers=[allow, confirm, deny]).check_read("README.md", 8)
    assert (d.verdict, d.reason) == (Verdict.CONFIRM, "a person should look")
    assert asked == ["allow", "confirm"]


@pytest.mark.asyncio
async def test_checkers_see_the_resolved_path_relative_to_the_root(repo: Path) -> None:
    seen: list[tuple[str, int]] = []

    def record(path: str, size: int) -> CheckResult:
        seen.append((path, size))
        return CheckResult.allow()

    (repo / "readme-link").symlink_to(repo / "README.md")
    guard = default_guard(repo, checkers=[record])
    await guard.check_read("readme-link", 8)
    await guard.check_read(str(repo / "src" / "app.py"), 15)
    assert seen == [("README.md", 8), ("src/app.py", 15)]


@pytest.mark.asyncio
async def test_a_checker_that_fails_refuses_the_read(repo: Path) -> None:
    def broken(path: str, size: int) -> CheckResult:
        raise RuntimeError("rule file unreadable")

    def wrong(path: str, size: int) -> CheckResult:
        return "allow"  # type: ignore[return-value]

    d = await default_guard(repo, checkers=[broken]).check_read("README.md", 8)
    assert (d.verdict, d.rule) == (Verdict.DENY, "check")
    assert d.reason.endswith("broken failed: RuntimeError: rule file unreadable")
    d = await default_guard(repo, checkers=[wrong]).check_read("README.md", 8)
    assert d.reason.endswith("wrong answered str, not a CheckResult")


def test_a_check_result_takes_a_verdict_by_name_and_refuses_others() -> None:
    assert CheckResult("deny", "x").verdict is Verdict.DENY  # type: ignore[arg-type]
    with pytest.raises(
        BadInput, match=r"^verdict must be one of allow, confirm, deny, got 'maybe'$"
    ):
        CheckResult("maybe")  # type: ignore[arg-type]


def test_a_checker_must_be_callable(repo: Path) -> None:
    with pytest.raises(BadInput, match=r"^checker must be callable, got int$"):
        default_guard(repo, checkers=[3])  # type: ignore[list-item]


# --- asking ---------------------------------------------------------------------------------------


def _confirm(path: str, size: int) -> CheckResult:
    return CheckResult.confirm("large generated file")


@pytest.mark.asyncio
async def test_a_confirm_is_asked_in_the_default_guard(repo: Path) -> None:
    recorder = ListRecorder()
    d = await default_guard(repo, checkers=[_confirm], recorder=recorder).check_read("README.md", 8)
    assert d == Decision("README.md", Verdict.CONFIRM, "check", "large generated file", True, None)
    assert not d.allowed
    assert d.to_event()["actor"] == "person"
    assert recorder.decisions == [d]


@pytest.mark.asyncio
async def test_a_confirm_without_asking_is_recorded_as_no_and_not_asked(repo: Path) -> None:
    recorder = ListRecorder()
    guard = default_guard(repo, checkers=[_confirm], recorder=recorder).without_asking()
    d = await guard.check_read("README.md", 8)
    assert d == Decision("README.md", Verdict.CONFIRM, "check", "large generated file", False, "no")
    assert not d.allowed
    assert recorder.events() == [
        {
            "kind": "guard.decision",
            "path": "README.md",
            "verdict": "confirm",
            "rule": "check",
            "reason": "large generated file",
            "asked": False,
            "answer": "no",
            "actor": "not asked",
        }
    ]


@pytest.mark.asyncio
async def test_without_asking_only_tightens_and_shares_budget_and_recorder(repo: Path) -> None:
    recorder = ListRecorder()
    budget = Budget(reads=2)
    asking = default_guard(repo, budget=budget, recorder=recorder)
    quiet = asking.without_asking()
    assert quiet.without_asking() is quiet
    assert (asking.asking, quiet.asking) == (True, False)
    assert quiet.budget is budget
    assert quiet.root == asking.root
    assert _allowed(await quiet.check_read("README.md", 8))
    assert (await quiet.check_read(".env", 14)).rule == "denylist"
    assert _allowed(await asking.check_read("src/app.py", 15))
    assert (await quiet.check_read("docs/guide.md", 6)).rule == "budget"
    assert budget.reads_used == 2
    assert len(recorder.decisions) == 4


# --- the budget -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_read_budget_once_spent_denies_the_next_read(repo: Path) -> None:
    guard = default_guard(repo, budget=Budget(reads=2))
    assert _allowed(await guard.check_read("README.md", 8))
    assert _allowed(await guard.check_read("src/app.py", 15))
    d = await guard.check_read("docs/guide.md", 6)
    assert d == Decision(
        "docs/guide.md", Verdict.DENY, "budget", "the turn's read budget is spent: 2 of 2 reads"
    )


@pytest.mark.asyncio
async def test_the_byte_budget_denies_a_read_that_would_pass_it(repo: Path) -> None:
    budget = Budget(bytes=20)
    guard = default_guard(repo, budget=budget)
    assert _allowed(await guard.check_read("README.md", 8))
    d = await guard.check_read("src/app.py", 15)
    assert (d.rule, d.reason) == (
        "budget",
        "the turn's read budget is spent: 8 of 20 bytes read, this read is 15",
    )
    assert _allowed(await guard.check_read("docs/guide.md", 6))  # a smaller one still fits
    assert (budget.reads_used, budget.bytes_used) == (2, 14)


@pytest.mark.asyncio
async def test_refused_and_unanswered_reads_spend_no_budget(repo: Path) -> None:
    budget = Budget(reads=1)
    guard = default_guard(repo, budget=budget, checkers=[_confirm])
    assert (await guard.check_read(".env", 14)).rule == "denylist"
    assert (await guard.check_read("../outside.txt", 18)).rule == "pin"
    assert (await guard.check_read("README.md", 8)).verdict is Verdict.CONFIRM
    assert (await guard.without_asking().check_read("README.md", 8)).answer == "no"
    assert budget.reads_used == 0


@pytest.mark.asyncio
async def test_a_confirm_that_could_not_fit_the_budget_is_denied_unasked(repo: Path) -> None:
    budget = Budget(reads=0)
    d = await default_guard(repo, budget=budget, checkers=[_confirm]).check_read("README.md", 8)
    assert (d.verdict, d.rule, d.asked) == (Verdict.DENY, "budget", False)


@pytest.mark.asyncio
async def test_concurrent_reads_never_overspend_the_budget(repo: Path) -> None:
    async def yielding(path: str, size: int) -> CheckResult:
        await asyncio.sleep(0)
        return CheckResult.allow()

    budget = Budget(reads=3)
    guard = default_guard(repo, budget=budget, checkers=[yielding])
    decisions = await asyncio.gather(*(guard.check_read("README.md", 8) for _ in range(10)))
    assert sum(d.allowed for d in decisions) == 3
    assert budget.reads_used == 3


def test_a_budget_resets_for_a_new_turn_and_shows_its_state() -> None:
    budget = Budget(reads=5, bytes=100)
    assert budget.take(40) is None
    assert repr(budget) == "Budget(reads=1/5, bytes=40/100)"
    budget.reset()
    assert repr(budget) == "Budget(reads=0/5, bytes=0/100)"
    assert repr(Budget()) == "Budget(reads=0/unbounded, bytes=0/unbounded)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reads": -1}, r"^reads must be an integer of at least 0 or None, got -1$"),
        ({"bytes": 1.5}, r"^bytes must be an integer of at least 0 or None, got 1\.5$"),
        ({"reads": True}, r"^reads must be an integer of at least 0 or None, got True$"),
    ],
)
def test_a_malformed_budget_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        Budget(**kwargs)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_negative_size_is_refused(repo: Path) -> None:
    with pytest.raises(BadInput, match=r"^size must be an integer of at least 0, got -1$"):
        await default_guard(repo).check_read("README.md", -1)


# --- records --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_check_read_records_each_decision_once_in_order(repo: Path) -> None:
    recorder = ListRecorder()
    guard = default_guard(repo, recorder=recorder)
    first = await guard.check_read("README.md", 8)
    second = await guard.check_read(".env", 14)
    assert recorder.decisions == [first, second]
    assert repr(recorder) == "ListRecorder(decisions=2)"


@pytest.mark.asyncio
async def test_a_recorder_that_fails_stops_the_read(repo: Path) -> None:
    def full_disk(decision: Decision) -> None:
        raise OSError("no space left on device")

    with pytest.raises(OSError, match=r"^no space left on device$"):
        await default_guard(repo, recorder=full_disk).check_read("README.md", 8)


def test_the_event_body_is_about_300_bytes_of_json() -> None:
    d = Decision(
        "internal/retrieval/store.go", Verdict.DENY, "denylist",
        "path internal/retrieval/store.go matches the denylist pattern *.go",
    )  # fmt: skip
    event = d.to_event()
    assert list(event) == [
        "kind", "path", "verdict", "rule", "reason", "asked", "answer", "actor",
    ]  # fmt: skip
    assert event["actor"] == "not asked"
    assert 150 <= len(json.dumps(event)) <= 350


@pytest.mark.asyncio
async def test_raise_if_refused_says_why(repo: Path) -> None:
    guard = default_guard(repo, checkers=[_confirm])
    with pytest.raises(
        GuardRefused,
        match=r"^read of README\.md awaits a confirmation \(check\): large generated file$",
    ):
        (await guard.check_read("README.md", 8)).raise_if_refused()
    with pytest.raises(
        GuardRefused,
        match=r"^read of \.env refused \(denylist\): "
        r"path \.env matches the denylist pattern \.env$",
    ):
        guard.precheck(".env").raise_if_refused()
    Decision("a", Verdict.CONFIRM, "check", "r", True, "yes").raise_if_refused()


def test_the_default_guard_satisfies_the_protocol(repo: Path) -> None:
    guard: Guard = default_guard(repo)
    twin: Guard = guard.without_asking()
    assert isinstance(twin, DefaultGuard)
    assert repr(guard).startswith(
        f"DefaultGuard(root={str(guard.root)!r}, asking=True, checkers=0,"
    )
