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

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import platformdirs
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store.atomic import open_without_waiting

__all__ = [
    "APP_NAME",
    "CONFIG_DIR_ENV",
    "DATA_DIR_ENV",
    "GIT_CONFIG",
    "GitRepo",
    "ProjectDirs",
    "config_dir",
    "data_dir",
    "git_common_dir",
    "git_env",
    "git_files_regular",
    "git_output",
    "git_program",
    "git_repo",
    "git_toplevel",
    "project_dirs",
    "project_key",
    "repo_project_key",
    "run_git",
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


def git_program(env: dict[str, str] | None = None) -> str:
    """The git that is run: the first ``git`` in ``PATH``'s absolute directories.

    git is started in the working tree, and a relative directory of ``PATH`` (an empty entry,
    ``.``, ``bin``, ``node_modules/.bin``) names a directory of the tree there: its ``git``,
    which a clone can hold, would be the one run. Raises ``FileNotFoundError`` where no absolute
    directory of ``PATH`` holds git (the callers' "git is missing")."""
    dirs = os.get_exec_path(env)
    found = shutil.which("git", path=os.pathsep.join(d for d in dirs if os.path.isabs(d)))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "no git in PATH's absolute directories", "git")
    return found


def run_git(
    cwd: Path, args: list[str], *, timeout: float = _GIT_TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    """The one way git is started: :func:`git_program`, fixed options first, the hardened
    environment, no input.

    Raises what :func:`subprocess.run` raises (``FileNotFoundError`` when git is missing,
    ``TimeoutExpired``)."""
    env = git_env()
    return subprocess.run(
        [git_program(env), *GIT_CONFIG, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def git_output(cwd: Path, *args: str) -> str | None:
    """Run ``git <args>`` in cwd; its stdout without the final newline, or None when git is
    missing, fails, or cwd is not in a repository. Never raises."""
    try:
        out = run_git(cwd, list(args))
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


@dataclass(frozen=True, slots=True)
class GitRepo:
    """A working tree found from the file system, and agreed to by git.

    Every git call on the tree names both directories (:meth:`args`), so nothing in the
    repository's configuration or the caller's environment can point git elsewhere."""

    work_tree: Path
    """The working tree's top level, resolved: the directory holding ``.git``."""
    git_dir: Path
    """Its git directory, resolved (a linked worktree's own, under ``<main>/.git/worktrees``)."""
    common_dir: Path
    """The main repository's git directory, resolved (shared by every worktree)."""

    def args(self) -> list[str]:
        """``--git-dir`` and ``--work-tree``, to go before a git command."""
        return [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]

    def run(
        self, *args: str, timeout: float = _GIT_TIMEOUT, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """``git --git-dir=... --work-tree=... <args>`` in the working tree, or in cwd inside it
        (raises as :func:`run_git` does)."""
        return run_git(cwd or self.work_tree, [*self.args(), *args], timeout=timeout)


def _is_git_dir(d: str) -> bool:
    """What git itself asks of a git directory: a HEAD, and objects (or a commondir file)."""
    return os.path.isfile(os.path.join(d, "HEAD")) and (
        os.path.isdir(os.path.join(d, "objects")) or os.path.isfile(os.path.join(d, "commondir"))
    )


# The files of a git directory every git call opens (git's own: HEAD, the configuration, the
# index, a worktree's commondir and config.worktree). One that is there and not a regular file
# (a FIFO, a device) blocks git or never ends: each git call ran to its timeout, every search.
_OPENED_BY_GIT = ("HEAD", "config", "index", "commondir", "config.worktree")


_SHARED_INDEX = "sharedindex."  # a split index's shared part (git update-index --split-index)
_CONFIGS = ("config", "config.worktree")  # a git directory's own configuration files
_INCLUDE_DEPTH = 10  # git's own limit on includes within includes
_CONFIG_BYTES = 1 << 20  # a configuration past this is not read for its includes
_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"(?:[^"\\\n]|\\.)*")?\s*\]')
_KEY = re.compile(r"\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")


def _config_value(raw: str) -> str:
    """A git configuration value as git reads it: quotes removed, their escapes taken, a
    comment (``#`` or ``;`` outside quotes) and the blanks around it cut."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i + 1], raw[i + 1]))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def config_includes(path: str) -> list[str]:
    """The files the git configuration at path includes (``include.path`` and every
    ``includeIf.<condition>.path``, whatever the condition), resolved as git resolves them:
    ``~/`` from ``$HOME``, a relative path from the file's own directory. Read without waiting
    (a FIFO or a device there gives none: the caller checks the file itself) and up to 1 MiB."""
    # git follows a link to an included file (or to the configuration itself)
    text = _read_small(path, _CONFIG_BYTES, follow=True)
    if text is None:
        return []
    out: list[str] = []
    section = ""
    for line in text.splitlines():
        m = _SECTION.match(line)
        rest = line
        if m is not None:
            section = m.group(1).lower()
            rest = line[m.end() :]  # a key may follow its section's header on the same line
        if section not in ("include", "includeif"):
            continue
        k = _KEY.match(rest)
        if k is None or k.group(1).lower() != "path" or k.group(2) is None:
            continue
        value = _config_value(k.group(2))
        if not value:
            continue
        if value.startswith("~/"):
            home = os.environ.get("HOME", "")
            if not home:
                continue
            value = os.path.join(home, value[2:])
        elif value.startswith("%(prefix)/"):
            continue  # git's install prefix: not the clone's
        out.append(os.path.join(os.path.dirname(path), value))
    return out


def git_files_regular(git_dir: str | os.PathLike[str], common_dir: str | None = None) -> bool:
    """Whether each file git opens in git_dir (and the configuration of common_dir, the main
    repository's git directory, when given), each shared part of a split index there, and each
    file their configurations include, is a regular file or absent; links are followed. git
    opens them all at every call (the shared index at every listing) and waits on a FIFO among
    them."""
    places = [os.path.join(git_dir, name) for name in _OPENED_BY_GIT]
    configs = [os.path.join(git_dir, name) for name in _CONFIGS]
    if common_dir is not None:
        places.append(os.path.join(common_dir, "config"))
        configs.append(os.path.join(common_dir, "config"))
    places.extend(_shared_indexes(git_dir))
    for place in places:
        try:
            mode = os.stat(place).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            return False
    # The files the configurations include, and those they include in turn, as deep as git goes.
    seen: set[tuple[int, int]] = set()
    level = configs
    for _ in range(_INCLUDE_DEPTH):
        found = [p for c in level for p in config_includes(c)]
        level = []
        for place in found:
            try:
                st = os.stat(place)
            except OSError:
                continue  # git passes over an included file that is not there
            if not stat.S_ISREG(st.st_mode):
                return False
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                level.append(place)
        if not level:
            break
    return True


def _shared_indexes(git_dir: str | os.PathLike[str]) -> list[str]:
    """The split index's shared files in git_dir (``sharedindex.<hash>``): git opens the one its
    index names at every call that reads the index (``ls-files``), and waits on a FIFO there.
    Every such name is taken, not only the one the index names: the index is not parsed."""
    try:
        with os.scandir(git_dir) as entries:
            return [e.path for e in entries if e.name.startswith(_SHARED_INDEX)]
    except OSError:
        return []


def _read_small(path: str, limit: int = 8192, *, follow: bool = False) -> str | None:
    """The first limit bytes of the regular file at path, as text; None when it is not one (a
    FIFO is opened without waiting) or cannot be read. Unless follow, never through a link in
    its name: a .git file or a git directory's gitdir/commondir."""
    try:
        fd, mode = open_without_waiting(path, follow=follow)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _gitdir_of_file(dotgit: str) -> str:
    """The git directory a ``.git`` file names, resolved; BadInput when it names none."""
    text = _read_small(dotgit) or ""
    line = text.split("\n", 1)[0].strip()
    if not line.startswith("gitdir:"):
        raise BadInput(f"{dotgit} is a file but not a 'gitdir:' link: refused")
    target = line[len("gitdir:") :].strip()
    target = os.path.realpath(os.path.join(os.path.dirname(dotgit), target))
    if not _is_git_dir(target):
        raise BadInput(f"{dotgit} points to {target}, which is not a git directory: refused")
    return target


def _common_of(git_dir: str) -> str:
    text = _read_small(os.path.join(git_dir, "commondir"))
    if text is None or not text.strip():
        return git_dir
    return os.path.realpath(os.path.join(git_dir, text.strip()))


def _beneath(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def _linked_worktree(dotgit: str, git_dir: str) -> bool:
    """git's own back link: ``<git_dir>/gitdir`` names this very ``.git`` file, and git_dir is
    ``<common>/worktrees/<name>`` (what ``git worktree add`` writes)."""
    back = _read_small(os.path.join(git_dir, "gitdir"))
    if back is None:
        return False
    back_path = os.path.join(git_dir, back.strip())  # absolute; or relative to git_dir
    if os.path.realpath(back_path) != os.path.realpath(dotgit):
        return False
    common = _common_of(git_dir)
    return os.path.dirname(git_dir) == os.path.join(common, "worktrees")


def _submodule(work_tree: str, git_dir: str) -> bool:
    """A submodule's git directory lives under ``modules/`` of an enclosing repository's."""
    d = os.path.dirname(work_tree)
    while True:
        dotgit = os.path.join(d, ".git")
        outer: str | None = None
        if os.path.isdir(dotgit) and not os.path.islink(dotgit):
            outer = dotgit
        elif os.path.isfile(dotgit) and not os.path.islink(dotgit):
            with contextlib.suppress(BadInput):
                outer = _gitdir_of_file(dotgit)
        if outer is not None and _beneath(
            git_dir, os.path.join(os.path.realpath(outer), "modules")
        ):
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return False
        d = parent


def _discover(start: str) -> tuple[str, str] | None:
    """The nearest of start and its ancestors holding ``.git``, and its git directory, both
    resolved; None when there is none, or when the first ``.git`` met is no repository (it
    decides: the search does not go on to an enclosing one). Only the file system is asked: no
    environment variable, no configuration. A ``.git`` that is a link, or a ``.git`` file naming
    a git directory that is neither this tree's linked worktree nor a submodule's, is refused
    (BadInput)."""
    d = start
    while True:
        dotgit = os.path.join(d, ".git")
        try:
            mode = os.lstat(dotgit).st_mode
        except OSError:
            mode = 0
        if stat.S_ISLNK(mode):
            raise BadInput(f"{dotgit} is a symbolic link, not the repository's own: refused")
        if stat.S_ISDIR(mode) and _is_git_dir(dotgit):
            return d, dotgit
        if stat.S_ISREG(mode):
            git_dir = _gitdir_of_file(dotgit)
            if not (_linked_worktree(dotgit, git_dir) or _submodule(d, git_dir)):
                raise BadInput(
                    f"{dotgit} points to {git_dir}, which is not a worktree or submodule of this"
                    " repository: refused"
                )
            return d, git_dir
        if mode:
            # A .git that is there and is no repository (a directory without HEAD, or a HEAD
            # that is not a regular file; a FIFO, a socket, a device): the first .git met
            # decides, so this tree is a plain directory. Going on upwards would make an
            # enclosing repository (a home directory kept in git) the root.
            return None
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def git_repo(path: Path) -> GitRepo | None:
    """The working tree holding path (path itself or its ancestor holding ``.git``), or None
    outside git, or where git does not take it as a repository (git missing, a repository of
    another owner that ``safe.directory`` does not allow).

    Found from the file system, then asked of git, hardened, from that directory: when git's
    answer (its top level or git directory) is anything else, because of ``core.worktree`` in
    the repository's configuration, a file it includes or the person's own configuration, the
    tree is refused with :class:`~errors.BadInput`: it is never indexed.
    """
    start = os.path.realpath(_start_dir(path))
    found = _discover(start)
    if found is None:
        return None
    work_tree, git_dir = found
    common = _common_of(git_dir)
    if common != git_dir and os.path.dirname(git_dir) != os.path.join(common, "worktrees"):
        # git's own layout is <common>/worktrees/<name> (a linked worktree's); a commondir file
        # anywhere else would give this tree another repository's project key, and with it that
        # project's index, task logs and switches.
        raise BadInput(
            f"{git_dir} names {common} as its repository (a commondir file), which is not"
            f" where git keeps a worktree of it: refused"
        )
    if not git_files_regular(git_dir, common):
        # A FIFO as its configuration or its index: git would wait on it at every call. Like a
        # .git that is no repository, the tree is a plain directory.
        return None
    out = git_output(
        Path(work_tree),
        "rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir",
    )  # fmt: skip
    if out is None:
        return None
    lines = out.split("\n")
    if len(lines) != 2:
        raise BadInput(f"git does not take {work_tree} as the top of a working tree: refused")
    top, answered_dir = (os.path.realpath(x) for x in lines)
    if top != work_tree:
        raise BadInput(
            f"the repository at {work_tree} puts its working tree at {top} (core.worktree in"
            " its configuration or a file it includes): refused"
        )
    if answered_dir != git_dir:
        raise BadInput(
            f"git takes {answered_dir}, not {git_dir}, as the git directory of {work_tree}: refused"
        )
    return GitRepo(Path(work_tree), Path(git_dir), Path(common))


def git_toplevel(path: Path) -> Path | None:
    """The top level of the working tree holding path (a worktree's own top level), or None
    outside git. CLI.md: the default ``--root``.

    It is path itself or the ancestor holding ``.git``, never a place the repository's
    configuration or the environment names: see :func:`git_repo`, which raises
    :class:`~errors.BadInput` when git disagrees."""
    repo = git_repo(path)
    return repo.work_tree if repo is not None else None


def git_common_dir(path: Path) -> Path | None:
    """The main repository's git directory for the tree holding path, or None outside git.

    A worktree made with ``git worktree add`` answers its main repository's ``.git``: that is
    what makes its key the main repository's (§4, ADR 34, ADR 45 §7)."""
    repo = git_repo(path)
    return repo.common_dir if repo is not None else None


def _main_repository(root: Path, repo: GitRepo | None) -> Path:
    common = repo.common_dir if repo is not None else None
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
    return repo_project_key(root, git_repo(Path(root)))


def repo_project_key(root: Path, repo: GitRepo | None) -> str:
    """:func:`project_key` of root, whose repository :func:`git_repo` has already found (None:
    root is outside git): one run of git fewer for a caller that needs the repository too."""
    main = _main_repository(Path(root), repo)
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
