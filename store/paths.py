"""Where things live: the data and configuration directories, project keys, a project's folders.

§4: an index lives in the data directory under the project's key, ``projects/<key>/index/``, and a
session in one of a repository's worktrees uses its main repository's key, so every working tree of
one project shares one chunk store. The key is derived from the main repository, never from the
working tree, and never from anything a clone can choose (a remote URL, a file in the tree).

git is run with fixed arguments and a hardened environment (§2: "the hardening git-status has"):
no optional locks, no pager, no system configuration, no file system monitor and no untracked
cache, so asking git where a repository is never starts a program the repository configured.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import platformdirs
from nodwyn_retrieval.errors import BadInput

__all__ = [
    "APP_NAME",
    "CONFIG_DIR_ENV",
    "DATA_DIR_ENV",
    "GIT_CONFIG",
    "ProjectDirs",
    "config_dir",
    "data_dir",
    "git_common_dir",
    "git_env",
    "git_output",
    "git_toplevel",
    "project_dirs",
    "project_key",
]

APP_NAME = "nodwyn-retrieval"
DATA_DIR_ENV = "NODWYN_RETRIEVAL_DATA_DIR"
CONFIG_DIR_ENV = "NODWYN_RETRIEVAL_CONFIG_DIR"

# A git that hangs (a network file system, a lock held elsewhere) must not hang a search.
_GIT_TIMEOUT = 10.0

# Options that stop git from starting anything the repository's configuration names.
# Fixed for every git call of the project: no configuration can run a program through these.
GIT_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.quotePath=false",
)  # fmt: skip

# The readable half of a key: what a person recognises in a listing of projects/.
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_MAX = 40
_KEY_OK = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,80}")


def data_dir(arg: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: ``arg``, else ``$NODWYN_RETRIEVAL_DATA_DIR``, else the platform's.

    Everything under it is derived and safe to delete (SPEC invariant 1, ADR 0050 §4).
    """
    return _choose(arg, DATA_DIR_ENV, platformdirs.user_data_dir(APP_NAME))


def config_dir(arg: str | os.PathLike[str] | None = None) -> Path:
    """The configuration directory: ``arg``, else ``$NODWYN_RETRIEVAL_CONFIG_DIR``, else the
    platform's. It holds what the person decides (``workspaces.toml``, ``config.toml``, §9, §10)."""
    return _choose(arg, CONFIG_DIR_ENV, platformdirs.user_config_dir(APP_NAME))


def _choose(arg: str | os.PathLike[str] | None, env: str, default: str) -> Path:
    if arg is not None and os.fspath(arg) != "":
        return Path(arg).expanduser().absolute()
    value = os.environ.get(env, "")
    if value:
        return Path(value).expanduser().absolute()
    return Path(default)


def git_env() -> dict[str, str]:
    """The environment git runs in: the caller's, without any GIT_* variable that could point
    git elsewhere (GIT_DIR, GIT_WORK_TREE, GIT_CONFIG_PARAMETERS...), and hardened."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "LC_ALL": "C",
        }
    )
    return env


def git_output(cwd: Path, *args: str) -> str | None:
    """Run ``git <args>`` in cwd; its stdout without the final newline, or None when git is
    missing, fails, or cwd is not in a repository. Never raises."""
    try:
        out = subprocess.run(
            ["git", *GIT_CONFIG, *args],
            cwd=cwd,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    try:
        text = out.stdout.decode("utf-8")
    except UnicodeDecodeError:
        text = os.fsdecode(out.stdout)
    text = text.removesuffix("\n")
    return text or None


def _start_dir(path: Path) -> Path:
    path = Path(path)
    return path if path.is_dir() else path.parent


def git_toplevel(path: Path) -> Path | None:
    """The top level of the working tree holding path (a worktree's own top level), or None
    outside git. CLI.md: the default ``--root``."""
    out = git_output(_start_dir(path), "rev-parse", "--show-toplevel")
    return Path(out) if out else None


def git_common_dir(path: Path) -> Path | None:
    """The main repository's git directory for the tree holding path, or None outside git.

    A worktree made with ``git worktree add`` answers its main repository's ``.git``: that is
    what makes its key the main repository's (§4, ADR 34, ADR 45 §7)."""
    start = _start_dir(path)
    out = git_output(start, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if out is None:
        return None
    common = Path(out)
    if not common.is_absolute():  # a git older than 2.31 ignores --path-format
        common = start / common
    return Path(os.path.realpath(common))


def _main_repository(root: Path) -> Path:
    common = git_common_dir(root)
    if common is None:
        return Path(os.path.realpath(root))
    if common.name == ".git":
        return common.parent
    # A bare repository's worktree, or a submodule (.git/modules/<name>): the git directory
    # itself is the one thing every tree of that repository shares.
    return common


def project_key(root: Path) -> str:
    """The project's key: ``<name>-<sha256(realpath of the main repository)[:12]>``.

    The name is the main repository's directory name, made safe for a file name, so a person can
    tell projects apart; the hash keeps two repositories of one name apart. Outside git the
    directory's own real path is hashed. Every worktree of a repository gets the same key (§4).
    """
    main = _main_repository(Path(root))
    real = os.path.realpath(main)
    name = main.name.removesuffix(".git") if main.name != ".git" else ""
    name = _NAME_UNSAFE.sub("_", name).lstrip(".-")[:_NAME_MAX] or "project"
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    return f"{name}-{digest}"


@dataclass(frozen=True, slots=True)
class ProjectDirs:
    """A project's folders in the data directory (§4). Nothing here is created by naming it."""

    root: Path
    """``<data>/projects/<key>``: everything of one project, and nothing else."""
    index: Path
    """``root/index``: the repository index (chunks and trees); ``forget`` deletes it."""
    chunks: Path
    """``index/chunks``: the content-addressed chunk store, shared by every working tree."""
    trees: Path
    """``index/trees``: one manifest per working tree, and its lock."""
    tasks: Path
    """``root/tasks``: the project's task logs, their ``.meta.json`` and ``.mem``."""


def project_dirs(data_dir: Path, key: str) -> ProjectDirs:
    """The folders of the project ``key`` under ``data_dir``.

    The key becomes a directory name, so one that could leave ``projects/`` is refused."""
    if not _KEY_OK.fullmatch(key) or key in {".", ".."}:
        raise BadInput(f"project key {key!r} is not a key this program makes")
    root = Path(data_dir) / "projects" / key
    index = root / "index"
    return ProjectDirs(
        root=root,
        index=index,
        chunks=index / "chunks",
        trees=index / "trees",
        tasks=root / "tasks",
    )
