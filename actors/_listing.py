"""Which files a working tree's index covers (§2).

In a git repository: the files git lists (``git ls-files -z --cached --others --exclude-standard``),
run with fixed arguments and hardened as ``git status`` is for an agent (no file system monitor, no
external programs, no pager, no optional locks, no prompts). ``.nodwyn/`` is left out but for its
tracked files. Elsewhere: a walk that skips hidden entries and symbolic links and honours
``.gitignore`` files. A directory given to ``index-update`` is walked whole, ignored files included.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.guard.beneath import Beneath, clean_relative
from nodwyn_retrieval.store.paths import git_repo

__all__ = ["git_ls_files", "list_tree", "walk_dir"]

NODWYN_DIR = ".nodwyn/"
GITIGNORE_BYTES = 1 << 20  # a .gitignore is read up to 1 MiB

log = logging.getLogger("nodwyn_retrieval.actors.listing")


def git_ls_files(root: Path) -> list[str] | None:
    """The files git lists in root, or None when root is not a git working tree.

    git is told the git directory and the working tree (:class:`store.paths.GitRepo`), so a
    repository's ``core.worktree``, a ``.git`` file or the environment cannot change what is
    listed; a tree git disagrees about is refused (``BadInput``) by :func:`store.paths.git_repo`.
    Every name is checked to be a plain relative path beneath root before it is used.
    """
    repo = git_repo(root)
    if repo is None:
        return None
    here = Path(os.path.realpath(root))
    if here != repo.work_tree and repo.work_tree not in here.parents:
        return None  # pragma: no cover - git_repo found root or an ancestor of it
    try:
        out = repo.run(
            "ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard",
            timeout=120, cwd=here,
        )  # fmt: skip
    except (FileNotFoundError, PermissionError):
        return None
    except subprocess.TimeoutExpired:
        raise StoreError(f"git ls-files in {root} took longer than 120 s") from None
    if out.returncode != 0:
        return None
    seen: dict[str, None] = {}
    bad = 0
    for item in out.stdout.split(b"\0"):
        if len(item) < 3:
            continue
        tag, raw = item[:1], item[2:]
        path = os.fsdecode(raw)
        if not _beneath_root(path):
            bad += 1
            continue
        # An untracked file under .nodwyn/ is another session's worktree, attachment or kept
        # version: never indexed. Tracked ones are the project's own.
        if tag == b"?" and (path.startswith(NODWYN_DIR) or path == ".nodwyn"):
            continue
        seen.setdefault(path, None)
    if bad:
        log.warning("git listed %d name(s) in %s that are not plain paths beneath it: left out",
                    bad, root)  # fmt: skip
    return list(seen)


def _beneath_root(path: str) -> bool:
    """A name git may list: relative, plain components, none of them ``.git`` in any case."""
    return clean_relative(path) and not any(p.lower() == ".git" for p in path.split("/"))


class _Ignore:
    """The patterns of one .gitignore file, matched against paths relative to its directory."""

    def __init__(self, base: str, text: str) -> None:
        self.base = base
        self.rules: list[tuple[re.Pattern[str], bool, bool]] = []
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.strip("/") if "/" in line.rstrip("/") else line.rstrip("/")
            anchored = "/" in line
            pat = fnmatch.translate(line).replace(".*", "[^/]*")
            pat = pat.replace("[^/]*[^/]*", ".*")  # "**" crosses directories
            rx = re.compile(pat if anchored else r"(?:.*/)?" + pat)
            self.rules.append((rx, negate, dir_only))

    def decide(self, rel: str, is_dir: bool) -> bool | None:
        """True if ignored, False if re-included, None if no rule speaks."""
        verdict: bool | None = None
        for rx, negate, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if rx.fullmatch(rel):
                verdict = not negate
        return verdict


def walk_dir(root: Path, start: Path, *, honour_ignores: bool, skip_hidden: bool) -> Iterator[str]:
    """Files under start, relative to root, in a sorted walk; symbolic links are never followed.

    Each directory is opened beneath root without following a link at any component
    (:class:`guard.beneath.Beneath`) and listed through its descriptor, and so is each
    ``.gitignore`` read: a directory swapped for a link during the walk is not entered.
    """
    rel_start = os.path.relpath(os.path.abspath(start), os.path.abspath(root)).replace(os.sep, "/")
    if rel_start == ".":
        rel_start = ""
    elif not clean_relative(rel_start):
        return
    with Beneath(root) as tree:
        stack: list[tuple[str, list[_Ignore]]] = [(rel_start, [])]
        while stack:
            directory, ignores = stack.pop()
            rel_dir = directory + "/" if directory else ""
            try:
                entries = _entries(tree, directory)
            except OSError:
                continue
            if honour_ignores and any(name == ".gitignore" for name, _ in entries):
                try:
                    data = tree.read(rel_dir + ".gitignore", GITIGNORE_BYTES)
                except OSError:
                    pass
                else:
                    ignores = [*ignores, _Ignore(rel_dir, data.decode("utf-8", "replace"))]
            subdirs: list[str] = []
            files: list[str] = []
            for name, kind in entries:
                if name == ".git" or (skip_hidden and name.startswith(".")) or kind is None:
                    continue
                rel = rel_dir + name
                is_dir = kind == "dir"
                if honour_ignores and _ignored(ignores, rel, is_dir):
                    continue
                if is_dir:
                    subdirs.append(rel)
                else:
                    files.append(rel)
            yield from sorted(files)
            stack.extend((d, ignores) for d in subdirs)


def _entries(tree: Beneath, directory: str) -> list[tuple[str, str | None]]:
    """A directory's entries, in reverse name order, each "dir", "file" (regular) or None
    (a link, or anything else); read through a descriptor of the directory."""
    fd = tree.open_dir(directory)
    try:
        out: list[tuple[str, str | None]] = []
        for e in os.scandir(fd):
            kind: str | None = None
            if e.is_symlink():
                kind = None
            elif e.is_dir(follow_symlinks=False):
                kind = "dir"
            elif e.is_file(follow_symlinks=False):
                kind = "file"
            out.append((e.name, kind))
    finally:
        os.close(fd)
    out.sort(reverse=True)
    return out


def _ignored(ignores: list[_Ignore], rel: str, is_dir: bool) -> bool:
    verdict: bool | None = None
    for ig in ignores:
        d = ig.decide(rel[len(ig.base) :], is_dir)
        if d is not None:
            verdict = d
    return bool(verdict)


def list_tree(root: Path) -> tuple[list[str], bool]:
    """The files the index covers, and whether git listed them."""
    listed = git_ls_files(root)
    if listed is not None:
        return listed, True
    return list(walk_dir(root, root, honour_ignores=True, skip_hidden=True)), False
