"""store.paths: the directories and the project key (ADR 0050 §4)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store.paths import (
    config_dir,
    data_dir,
    git_common_dir,
    git_toplevel,
    project_dirs,
    project_key,
)

from tests.support import git, make_repo


def test_an_argument_wins_over_the_environment(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    data, config = dirs
    assert data_dir() == data
    assert config_dir() == config
    assert data_dir(tmp_path / "d") == tmp_path / "d"
    assert config_dir(str(tmp_path / "c")) == tmp_path / "c"


def test_without_argument_or_environment_the_platform_directory_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NODWYN_RETRIEVAL_DATA_DIR", raising=False)
    monkeypatch.delenv("NODWYN_RETRIEVAL_CONFIG_DIR", raising=False)
    assert "nodwyn-retrieval" in str(data_dir())
    assert "nodwyn-retrieval" in str(config_dir())


def test_a_worktree_shares_its_main_repositorys_key(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "My Repo!", {"a.py": "x = 1\n"})
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    (main / "sub").mkdir()
    key = project_key(main)
    assert re.fullmatch(r"My_Repo_-[0-9a-f]{12}", key)
    assert project_key(tmp_path / "wt") == key
    assert project_key(main / "sub") == key
    assert git_toplevel(tmp_path / "wt") == Path(os.path.realpath(tmp_path / "wt"))
    assert git_common_dir(tmp_path / "wt") == Path(os.path.realpath(main / ".git"))


def test_two_repositories_of_one_name_have_different_keys(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a" / "proj", {"x": "1\n"})
    b = make_repo(tmp_path / "b" / "proj", {"x": "1\n"})
    assert project_key(a) != project_key(b)
    assert project_key(a).startswith("proj-")


def test_outside_git_the_directory_itself_is_the_project(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "inner").mkdir(parents=True)
    assert git_toplevel(plain) is None
    assert git_common_dir(plain) is None
    assert project_key(plain).startswith("plain-")
    assert project_key(plain / "inner") != project_key(plain)


def test_git_variables_of_the_caller_do_not_redirect_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = make_repo(tmp_path / "a", {"x": "1\n"})
    b = make_repo(tmp_path / "b", {"x": "1\n"})
    key = project_key(a)
    monkeypatch.setenv("GIT_DIR", str(b / ".git"))
    assert project_key(a) == key


def test_project_dirs_lay_out_the_project(tmp_path: Path) -> None:
    d = project_dirs(tmp_path, "proj-0123456789ab")
    assert d.root == tmp_path / "projects" / "proj-0123456789ab"
    assert d.index == d.root / "index"
    assert d.chunks == d.index / "chunks"
    assert d.trees == d.index / "trees"
    assert d.tasks == d.root / "tasks"
    assert not d.root.exists()


@pytest.mark.parametrize("key", ["", "..", "../x", "a/b", ".hidden", "key\n"])
def test_a_key_that_could_leave_projects_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(BadInput, match=r"^project key .* is not a key this program makes$"):
        project_dirs(tmp_path, key)
