"""The refresh's listing at its edges: cut at a deadline and going on, git stopped, the walk's
order and its ignore rules, and names that cannot be shown (actors/_listing.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.actors import _listing
from nodwyn_retrieval.actors._listing import Listing, ListingCut, list_tree
from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.store import paths

from tests.support import git, make_repo


class Ticks:
    """The listing's clock: one second more at every look, so a deadline falls between looks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        clock = self

        class Time:
            @staticmethod
            def monotonic() -> float:
                clock.now += 1.0
                return clock.now

        monkeypatch.setattr(_listing, "time", Time)


def plain_tree(root: Path, names: list[str]) -> Path:
    for n in names:
        (root / n).parent.mkdir(parents=True, exist_ok=True)
        (root / n).write_text(n + "\n")
    return root


def run_out(listing: Listing, clock: Ticks, looks: int) -> list[bool]:
    """Step the listing, each step given ``looks`` looks at the clock, until it is done."""
    answers: list[bool] = []
    while not answers or not answers[-1]:
        answers.append(listing.step(clock.now + looks + 0.5))
        assert len(answers) < 1000
    return answers


def test_a_listing_past_its_deadline_lists_nothing_and_says_so(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    listing = Listing(root, [])
    assert "going 0 names" in repr(listing)
    assert listing.step(float("-inf")) is False
    assert (listing.names, listing.in_git, listing.done) == ([], False, False)
    assert listing.step(float("inf")) is True
    assert (listing.names, listing.in_git, listing.done) == (["a.py"], True, True)
    # Done is done: a later step answers at once, the names as they were.
    assert listing.step(float("-inf")) is True
    assert listing.names == ["a.py"]
    assert "done 1 names" in repr(listing)


def test_git_stopped_at_the_deadline_is_run_again_at_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "a\n", "b.py": "b\n"})
    real = _listing._git_output
    calls: list[float | None] = []

    def stopped_once(r: Path, seconds: float | None, *found: Any) -> bytes | None:
        calls.append(seconds)
        if len(calls) == 1:
            raise ListingCut("stopped")
        return real(r, seconds, *found)

    monkeypatch.setattr(_listing, "_git_output", stopped_once)
    listing = Listing(root, [])
    assert listing.step(float("inf")) is False
    assert (listing.names, listing.in_git, listing.done) == ([], False, False)
    assert listing.step(float("inf")) is True
    assert (sorted(listing.names), listing.in_git) == (["a.py", "b.py"], True)
    assert len(calls) == 2


def test_git_given_no_time_is_cut_and_git_past_its_own_bound_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    # A step whose deadline passes before git runs: git is given no time, is stopped, and the
    # step says so.
    clock = Ticks(monkeypatch)
    listing = Listing(root, [])
    assert listing.step(clock.now + 1.5) is False  # one look, then no time is left
    assert listing.names == []
    # git past its own bound, with no deadline to blame: an error that says so.
    monkeypatch.setattr(_listing, "GIT_SECONDS", 1e-9)
    monkeypatch.setattr(_listing, "time", time)
    with pytest.raises(StoreError, match="took longer than"):
        list_tree(root)


def test_git_names_checked_a_part_at_a_time_go_on_from_where_they_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"f{i:02}.py": f"v{i}\n" for i in range(9)}
    root = make_repo(tmp_path / "repo", files)
    monkeypatch.setattr(Listing, "PARSE_EVERY", 2)
    clock = Ticks(monkeypatch)
    listing = Listing(root, [])
    # git prints 9 names and an empty item after the last NUL: 5 parts of 2. A step looks at the
    # clock as it begins, the first also before git, and each after a part that leaves more:
    # the first step parses 2 parts (its third look is past its deadline), the second the other
    # 3 (the look after the last part finds nothing left) and is done.
    answers = run_out(listing, clock, looks=3)
    assert answers == [False, True]
    assert sorted(listing.names) == sorted(files)
    assert len(listing.names) == len(set(listing.names))
    # With time enough, parts of two are one step.
    again = Listing(root, [])
    assert again.step(float("inf")) is True
    assert sorted(again.names) == sorted(files)


def test_a_walk_cut_at_the_deadline_goes_on_in_order_and_lists_each_name_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"{d}/f{i}.txt" for d in ("a", "b", "c") for i in range(4)] + ["top.txt"]
    root = plain_tree(tmp_path / "plain", names)
    whole = list_tree(root)[0]
    monkeypatch.setattr(Listing, "CHECK_EVERY", 2)
    clock = Ticks(monkeypatch)
    listing = Listing(root, [])
    # A step looks at the clock as it begins and before git (no repository here), then as each
    # directory begins and after every second name: the first step stops as the walk begins,
    # the next ones walk 1, 4, 1, 3 and 4 names, and the last finds the walk done: 13 names in
    # seven steps.
    answers = run_out(listing, clock, looks=2)
    assert answers == [False] * 6 + [True]
    assert listing.names == whole
    assert listing.in_git is False
    # With time enough, the walk is one step.
    again = Listing(root, [])
    assert again.step(float("inf")) is True
    assert again.names == whole


def test_the_walk_is_sorted_files_first_then_each_directory_in_name_order(
    tmp_path: Path,
) -> None:
    root = plain_tree(tmp_path / "plain", ["b/x.txt", "a/y.txt", "c/z.txt", "m.txt", "k.txt"])
    assert list_tree(root) == (["k.txt", "m.txt", "a/y.txt", "b/x.txt", "c/z.txt"], False)


def test_a_directory_given_to_update_is_walked_whole_hidden_and_ignored_files_too(
    tmp_path: Path,
) -> None:
    root = make_repo(
        tmp_path / "repo",
        {".gitignore": "build/\n", "a.py": "a\n"},
    )
    plain_tree(root, ["build/.hidden.txt", "build/out.log", "build/.gitignore"])
    (root / "build" / ".gitignore").write_text("*.log\n")
    listing = Listing(root, ["build"])
    assert listing.step(float("inf")) is True
    assert set(listing.names) == {
        ".gitignore",
        "a.py",
        "build/.gitignore",
        "build/.hidden.txt",
        "build/out.log",
    }


def test_the_walks_ignore_rules_read_as_git_reads_them(tmp_path: Path) -> None:
    root = plain_tree(
        tmp_path / "plain",
        ["#keep.txt", "logs", "x/logs/a.txt", "x/b.txt", "note.txt"],
    )
    (root / ".gitignore").write_text("# a comment\n#keep.txt\n\nlogs/\n")
    # A comment is no pattern; "logs/" names directories only, not a file called logs.
    assert sorted(list_tree(root)[0]) == ["#keep.txt", "logs", "note.txt", "x/b.txt"]


def test_a_name_of_one_character_is_listed_by_git(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a": "one\n", "bc": "two\n"})
    assert sorted(list_tree(root)[0]) == ["a", "bc"]


def test_a_name_that_is_not_utf8_is_left_out_of_a_walk_and_counted(tmp_path: Path) -> None:
    root = plain_tree(tmp_path / "plain", ["ok.txt"])
    bad = os.fsdecode(b"caf\xe9.txt")
    (root / bad).write_text("x\n")
    listing = Listing(root, [])
    assert listing.step(float("inf")) is True
    assert (listing.names, listing.bad_names) == (["ok.txt"], 1)


def test_a_git_listing_says_its_git_directory_and_a_walk_says_none(tmp_path: Path) -> None:
    from nodwyn_retrieval.store.paths import git_repo

    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    listing = Listing(root, [])
    assert listing.step(float("inf"))
    repo = git_repo(root)
    assert repo is not None
    assert (listing.in_git, listing.git_dir) == (True, repo.git_dir)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "b.py").write_text("b\n")
    walk = Listing(plain, [])
    assert walk.step(float("inf"))
    assert (walk.names, walk.in_git, walk.git_dir) == (["b.py"], False, None)


def test_names_git_lists_that_are_not_plain_are_left_out_and_their_count_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # What git prints for an index a hostile clone made by hand: git itself refuses to add these.
    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    printed = b"H a.py\0H ../up.py\0H sub/.GIT/config\0H b.py\0"
    monkeypatch.setattr(_listing, "_git_output", lambda *a, **k: printed)
    with caplog.at_level("WARNING", logger="nodwyn_retrieval.actors.listing"):
        assert _listing.git_ls_files(root) == ["a.py", "b.py"]
        listing = Listing(root, [])
        assert listing.step(float("inf")) is True
    assert sorted(listing.names) == ["a.py", "b.py"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert all(m.startswith("git listed 2 name(s) in ") for m in warned)


# -- git's listing started while git is asked about the tree -----------------------------------


def _ls_runs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The git directories ``git ls-files`` runs in, in the order they start."""
    from nodwyn_retrieval.store.paths import GitRepo

    runs: list[Path] = []
    real = GitRepo.run

    def run(self: GitRepo, *args: str, **kw: Any) -> Any:
        if args[:1] == ("ls-files",):
            runs.append(self.git_dir)
        return real(self, *args, **kw)

    monkeypatch.setattr(GitRepo, "run", run)
    return runs


def test_a_repositorys_listing_started_beside_gits_check_is_taken_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "r", {"a.py": "a\n", "sub/b.py": "b\n"})
    (root / "new.txt").write_text("untracked\n")
    runs = _ls_runs(monkeypatch)
    assert sorted(list_tree(root)[0]) == ["a.py", "new.txt", "sub/b.py"]
    assert runs == [Path(os.path.realpath(root / ".git"))]


def test_a_root_whose_git_directory_is_not_one_is_a_plain_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inner/.git is a directory but no repository: the first .git met decides, so inner is
    # walked as a plain directory, not listed by the enclosing repository, and git is not run.
    outer = make_repo(tmp_path / "outer", {"inner/x.py": "x\n", "top.py": "t\n"})
    (outer / "inner" / ".git").mkdir()
    runs = _ls_runs(monkeypatch)
    names, in_git = list_tree(outer / "inner")
    assert not in_git
    assert names == ["x.py"]
    assert runs == []


def test_a_worktrees_root_and_a_subdirectory_are_listed_after_gits_check_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import git

    main = make_repo(tmp_path / "main", {"m.py": "m\n", "d/e.py": "e\n"})
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "other")
    runs = _ls_runs(monkeypatch)
    assert sorted(list_tree(tmp_path / "wt")[0]) == ["d/e.py", "m.py"]
    assert list_tree(main / "d")[0] == ["e.py"]
    assert len(runs) == 2  # one run each: neither root holds a .git directory of its own


def test_a_tree_git_refuses_is_refused_though_its_listing_had_started(tmp_path: Path) -> None:
    from nodwyn_retrieval.errors import BadInput

    from tests.support import git

    root = make_repo(tmp_path / "r", {"a.py": "a\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(root, "config", "core.worktree", str(elsewhere))
    with pytest.raises(BadInput, match=r"core\.worktree"):
        list_tree(root)


def test_a_listing_started_early_is_taken_by_its_first_step_or_waited_for_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "r", {"a.py": "a\n"})
    runs = _ls_runs(monkeypatch)
    listing = Listing(root, [])
    listing.start(time.monotonic() + 60)
    (root / "b.py").write_text("b\n")  # made after git started: perhaps seen, never an error
    assert listing.step(time.monotonic() + 60)
    assert "a.py" in listing.names
    assert len(runs) == 1
    unused = Listing(root, [])
    unused.start(time.monotonic() + 60)
    unused.close()  # git's run is waited for, not left behind
    assert len(runs) == 2
    # Outside git there is nothing to start: the walk lists the tree at the first step.
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "c.txt").write_text("c\n")
    walked = Listing(plain, [])
    walked.start(time.monotonic() + 60)
    assert walked.step(time.monotonic() + 60)
    assert walked.names == ["c.txt"]
    assert not walked.in_git


@pytest.mark.asyncio
async def test_a_new_sessions_refresh_starts_git_before_it_loads_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.actors import refresher
    from nodwyn_retrieval.actors._watch import available as watch_available
    from nodwyn_retrieval.entry import Engine

    root = make_repo(tmp_path / "r", {"a.py": "def alpha_walrus():\n    pass\n"})
    data, config = tmp_path / "data", tmp_path / "config"
    async with await Engine.open(root, data_dir=data, config_dir=config) as engine:
        await engine.index_update()
    runs = _ls_runs(monkeypatch)
    seen_at_load: list[int] = []
    real_load = refresher.load_manifest

    def load(path: Path) -> Any:
        seen_at_load.append(len(runs))
        return real_load(path)

    monkeypatch.setattr(refresher, "load_manifest", load)
    (root / "b.py").write_text("def beta_walrus():\n    pass\n")
    async with await Engine.open(root, data_dir=data, config_dir=config) as engine:
        out = await engine.index_search("walrus", "repo")
        assert sorted(h["path"] for h in out.hits) == ["a.py", "b.py"]
        assert seen_at_load[:1] == [1]  # git's listing had started when the manifest was loaded
        assert len(runs) == 1
        if watch_available():
            # A later search the watch answers lists nothing: no git is started for it.
            await engine.index_search("walrus", "repo")
            assert len(runs) == 1


def test_a_listing_started_early_is_not_taken_by_a_step_past_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.store.paths import GitRepo

    root = make_repo(tmp_path / "r", {"a.py": "a\n"})
    done: list[bytes] = []
    real = GitRepo.run

    def run(self: GitRepo, *args: str, **kw: Any) -> Any:
        out = real(self, *args, **kw)
        if args[:1] == ("ls-files",):
            done.append(out.stdout)
        return out

    monkeypatch.setattr(GitRepo, "run", run)
    listing = Listing(root, [])
    listing.start(time.monotonic() + 60)
    give_up = time.monotonic() + 30
    while not done and time.monotonic() < give_up:
        time.sleep(0.01)
    assert done, "git's early run finished"
    assert not listing.step(time.monotonic() - 1)  # this search's time is up
    (root / "late.py").write_text("made before the next search\n")
    assert listing.step(time.monotonic() + 60)  # the next search lists the tree again
    assert sorted(listing.names) == ["a.py", "late.py"]
    assert len(done) == 2


def test_a_fifo_ignore_file_lists_the_index_alone_then_again_with_untracked_files_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "a\n", "sub/b.py": "b\n"})
    (root / "untracked.py").write_text("u\n", encoding="utf-8")
    assert sorted(list_tree(root)[0]) == ["a.py", "sub/b.py", "untracked.py"]
    monkeypatch.setattr(_listing, "OTHERS_SECONDS", 1.0)
    monkeypatch.setattr(_listing, "_index_only", {})  # what other tests' FIFOs left
    os.mkfifo(root / "sub" / ".gitignore")  # git opens it to read, and waits for a writer
    start = time.monotonic()
    names = sorted(list_tree(root)[0])
    first = time.monotonic() - start
    # The tracked files, found after the untracked listing's bound; the untracked file is not
    # listed, and the warning says why.
    assert names == ["a.py", "sub/b.py"]
    assert 1.0 <= first < 20, first
    assert "only the files git tracks are listed" in caplog.text
    # Within the window the index alone is listed at once: no wait for the FIFO again.
    start = time.monotonic()
    assert sorted(list_tree(root)[0]) == ["a.py", "sub/b.py"]
    assert time.monotonic() - start < 1.0
    listing = Listing(root, [])
    listing.start(time.monotonic() + 30)  # started early, by a new session's refresh
    assert listing.step(time.monotonic() + 30) is True
    assert sorted(listing.names) == ["a.py", "sub/b.py"]
    # Once the window is over the whole listing is tried again: with the FIFO gone, it lists the
    # untracked file again.
    (root / "sub" / ".gitignore").unlink()
    monkeypatch.setattr(
        _listing, "_index_only", {k: time.monotonic() - 1 for k in _listing._index_only}
    )
    assert sorted(list_tree(root)[0]) == ["a.py", "sub/b.py", "untracked.py"]
    assert _listing._index_only == {}  # the window over, and the whole listing done


def test_a_fifo_ignore_file_found_by_a_listing_started_early_is_not_waited_on_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    monkeypatch.setattr(_listing, "OTHERS_SECONDS", 1.0)
    monkeypatch.setattr(_listing, "_index_only", {})
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.unlink(missing_ok=True)
    os.mkfifo(exclude)  # read by every listing with untracked files
    runs = _ls_runs(monkeypatch)
    listing = Listing(root, [])
    start = time.monotonic()
    listing.start(start + 30)
    assert listing.step(start + 30) is True
    took = time.monotonic() - start
    assert listing.names == ["a.py"]
    assert 1.0 <= took < 2 * 1.0 + 0.9, took  # one bound waited, not two
    assert len(runs) == 2  # the listing with untracked files, cut; then the index's


def test_a_fifo_ignore_file_of_a_worktree_lists_its_index_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A worktree's .git is a file: no listing is started early, the listing runs in the step.
    main = make_repo(tmp_path / "main", {"a.py": "a\n"})
    work = tmp_path / "work"
    git(main, "worktree", "add", "-q", str(work))
    monkeypatch.setattr(_listing, "OTHERS_SECONDS", 1.0)
    monkeypatch.setattr(_listing, "_index_only", {})
    os.mkfifo(work / ".gitignore")
    runs = _ls_runs(monkeypatch)
    start = time.monotonic()
    assert sorted(list_tree(work)[0]) == ["a.py"]
    assert time.monotonic() - start >= 1.0
    assert len(runs) == 2
    assert "untracked files are left out for 10 minutes" in caplog.text


def _shared_index_blocks(tree: Path, git_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree's index split (git update-index --split-index), its shared file a FIFO: git's
    listing of the index waits on it, and git's rev-parse does not open it."""
    from tests.support import git

    git(tree, "update-index", "--split-index")
    shared = list(git_dirs.rglob("sharedindex.*"))
    assert len(shared) == 1, shared
    shared[0].unlink()
    os.mkfifo(shared[0])
    # As if the FIFO were swapped in after the repository's check looked at its files (a FIFO
    # there when it looks makes no repository: docs/guard.md): that look is left out.
    monkeypatch.setattr(paths, "_shared_indexes", lambda git_dir: [])


def test_a_listing_of_the_index_that_blocks_too_is_cut_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A FIFO as the ignore file and as the split index's shared file: the index's listing gets
    # what is left of the deadline once the untracked listing's bound is spent, and the step is
    # cut there. (A FIFO as the index itself makes no repository: git_files_regular.)
    root = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    monkeypatch.setattr(_listing, "OTHERS_SECONDS", 1.0)
    monkeypatch.setattr(_listing, "_index_only", {})
    os.mkfifo(root / ".gitignore")
    _shared_index_blocks(root, root / ".git", monkeypatch)
    listing = Listing(root, [])
    start = time.monotonic()
    assert listing.step(start + 3.0) is False
    took = time.monotonic() - start
    assert 2.9 <= took < 4.0, took  # 1 s, then the 2 s left: not 1 s and then 4 s


def test_a_worktree_whose_index_blocks_too_is_cut_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worktree has no early run: its step runs the listing with untracked files for its bound,
    # then the index's for what is left of the deadline (not the bound added to it).
    main = make_repo(tmp_path / "main", {"a.py": "a\n"})
    work = tmp_path / "work"
    git(main, "worktree", "add", "-q", str(work))
    monkeypatch.setattr(_listing, "OTHERS_SECONDS", 1.0)
    monkeypatch.setattr(_listing, "_index_only", {})
    os.mkfifo(work / ".gitignore")
    _shared_index_blocks(work, main / ".git", monkeypatch)
    runs = _ls_runs(monkeypatch)
    listing = Listing(work, [])
    start = time.monotonic()
    assert listing.step(start + 3.0) is False
    took = time.monotonic() - start
    assert 2.9 <= took < 4.0, took  # 1 s, then the 2 s left: not 1 s and then 4 s
    assert len(runs) == 2  # the listing with untracked files, cut; then the index's
