"""A clone's `.git` directory cannot move the root out of the clone, nor take another project's
key.

Two attacks on docs/guard.md's "The root: what a repository cannot move", each through a `.git`
directory (not a `.git` file, not a link), each with words found nowhere else planted outside:

- a `.git` directory that is no git directory (no `HEAD`, a `HEAD` that is a FIFO) inside an
  enclosing repository (a home directory kept in git): the first `.git` met decides, so the
  clone is a plain directory, and the enclosing repository's files are neither listed nor read;
- a `.git` directory whose `commondir` file names another project's git directory: the key is
  the project's own, so the clone is refused rather than given that project's index, its task
  logs and its switches;
- a FIFO as the git directory's configuration, index or commondir, which git waits on at every
  call: the tree is a plain directory, not one whose every search runs git to its timeouts.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._listing import _Early
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store.config import set_earlier_tasks
from nodwyn_retrieval.store.log import write_task_meta
from nodwyn_retrieval.store.paths import git_repo, project_dirs, project_key

from tests._hostile import OUTSIDE_TEXT, OUTSIDE_WORDS, assert_no_outside_bytes, cli
from tests.support import git, make_repo

INSIDE = {"app.py": "def inside_wombat():\n    return 1\n"}


def _enclosing(tmp_path: Path) -> Path:
    """A repository holding the outside words, as a person's home directory kept in git."""
    return make_repo(tmp_path / "home", {"notes.py": OUTSIDE_TEXT})


@pytest.mark.asyncio
@pytest.mark.parametrize("broken", ["no-head", "head-fifo", "empty"])
async def test_a_git_directory_that_is_none_does_not_climb_to_an_enclosing_repository(
    tmp_path: Path, dirs: tuple[Path, Path], broken: str
) -> None:
    home = _enclosing(tmp_path)
    clone = make_repo(home / "src" / "clone", INSIDE)
    head = clone / ".git" / "HEAD"
    if broken == "no-head":
        head.unlink()
    elif broken == "head-fifo":
        head.unlink()
        os.mkfifo(head)
    else:
        for p in sorted((clone / ".git").rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    assert git_repo(clone) is None  # a plain directory: not the enclosing repository
    # Nor is git started early there: on a HEAD that is a FIFO it waited 5 s every search.
    assert _Early.start(clone, 60.0) is None
    async with await Engine.open(clone, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        assert engine.root == clone.resolve()
        out = await engine.index_search(" ".join(OUTSIDE_WORDS), "repo")
        inside = await engine.index_search("inside wombat", "repo")
    assert {h["path"] for h in inside.hits} == {"app.py"}
    assert out.hits == []
    assert "notes.py" not in out.text  # the query's own words are echoed: the file is not
    cli_out = cli("--root", str(clone), "search", "quokka wallaby", cwd=tmp_path, dirs=dirs)
    assert cli_out.returncode == 0, cli_out.stderr
    assert "notes.py" not in cli_out.stdout
    assert_no_outside_bytes(dirs[0], inside.text, cli_out.stderr)


def _victim_with_an_earlier_task(tmp_path: Path, config: Path) -> Path:
    """Another project of the person's, indexed, with an earlier task holding the outside words
    and earlier tasks switched on for it."""
    victim = make_repo(tmp_path / "src" / "victim", {"lib.py": "def victim_kestrel():\n    pass\n"})
    key = project_key(victim)
    tasks = project_dirs(Path(os.environ["NODWYN_RETRIEVAL_DATA_DIR"]), key).tasks
    tasks.mkdir(parents=True)
    log = tasks / "t-victim.jsonl"
    events = [
        {"seq": 1, "ts": "2026-10-01T09:00:00Z", "kind": "person.message", "turn": 1,
         "agent": "main", "text": "the quokka wallaby platypus bandicoot plan"},
        {"seq": 2, "ts": "2026-10-01T09:00:01Z", "kind": "turn.end", "turn": 1, "agent": "main"},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    write_task_meta(log, title="victim's task", created="2026-10-01T09:00:00.000Z")
    set_earlier_tasks(config, key, True, root=str(victim))
    return victim


@pytest.mark.asyncio
async def test_a_commondir_naming_another_project_is_refused_not_given_its_key(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    victim = _victim_with_an_earlier_task(tmp_path, dirs[1])
    victim_key = project_key(victim)
    victim_index = project_dirs(dirs[0], victim_key).index
    up = cli("--root", str(victim), "update", cwd=tmp_path, dirs=dirs)
    assert up.returncode == 0, up.stderr
    assert victim_index.is_dir()

    clone = make_repo(tmp_path / "src" / "clone", INSIDE)
    (clone / ".git" / "commondir").write_text("../../victim/.git\n")
    with pytest.raises(BadInput, match="refused"):
        git_repo(clone)
    with pytest.raises(BadInput, match="refused"):
        await Engine.open(clone, data_dir=dirs[0], config_dir=dirs[1], workers=1)
    for args in (("search", "quokka wallaby", "--scope", "earlier"), ("status", "--json")):
        out = cli("--root", str(clone), *args, cwd=tmp_path, dirs=dirs)
        assert out.returncode == 2, (out.stdout, out.stderr)
        assert "refused" in out.stderr
        for w in OUTSIDE_WORDS:
            assert w not in out.stdout + out.stderr
        assert victim_key not in out.stdout + out.stderr
    assert victim_index.is_dir()  # still the victim's, and still there


def test_a_submodule_whose_git_directory_names_another_project_is_refused(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """The same through a `.git` file: a submodule's git directory (under the enclosing
    repository's `modules/`, which the clone holds) with a `commondir` naming the victim."""
    victim = make_repo(tmp_path / "src" / "victim", {"lib.py": "def victim_kestrel():\n    pass\n"})
    clone = make_repo(tmp_path / "src" / "clone", INSIDE)
    sub_origin = make_repo(tmp_path / "origin", {"lib.py": "def sub_kangaroo():\n    pass\n"})
    git(clone, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_origin), "sub")
    modules = clone / ".git" / "modules" / "sub"
    assert modules.is_dir()
    assert git_repo(clone / "sub") is not None  # a submodule as git makes it is accepted
    (modules / "commondir").write_text(os.path.relpath(victim / ".git", modules) + "\n")
    with pytest.raises(BadInput, match="refused"):
        git_repo(clone / "sub")
    out = cli("--root", str(clone / "sub"), "status", "--json", cwd=tmp_path, dirs=dirs)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert project_key(victim) not in out.stdout + out.stderr


def test_a_linked_worktree_still_shares_its_main_repositorys_key(tmp_path: Path) -> None:
    """What the commondir check keeps: git's own layout, `<common>/worktrees/<name>`."""
    main = make_repo(tmp_path / "main", INSIDE)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    repo = git_repo(linked)
    assert repo is not None
    assert repo.common_dir == (main / ".git").resolve()
    assert project_key(linked) == project_key(main)


@pytest.mark.asyncio
@pytest.mark.parametrize("planted", ["config", "index", "commondir"])
async def test_a_fifo_among_the_git_directorys_own_files_does_not_stall_every_search(
    tmp_path: Path, dirs: tuple[Path, Path], planted: str
) -> None:
    """git opens its configuration and its index at every call and waits on a FIFO there: each
    search ran git to its timeouts (10 s and more a search) and found nothing, every time. Such
    a tree is a plain directory, searched at once."""
    clone = make_repo(tmp_path / "clone", INSIDE)
    fifo = clone / ".git" / planted
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    assert git_repo(clone) is None
    async with await Engine.open(clone, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        for _ in range(2):
            start = time.monotonic()
            out = await asyncio.wait_for(engine.index_search("inside wombat", "repo"), 120)
            took = time.monotonic() - start
            assert {h["path"] for h in out.hits} == {"app.py"}, out.text
            # git waits 10 s on a FIFO before its timeout: under that, with room for a loaded
            # machine (the hits above already fail when git's listing stalled)
            assert took < 9, took
