"""Which files a working tree's index covers (§2).

In a git repository: the files git lists (``git ls-files -z --cached --others --exclude-standard``),
run with fixed arguments and hardened as ``git status`` is for an agent (no file system monitor, no
external programs, no pager, no optional locks, no prompts). ``.nodwyn/`` is left out but for its
tracked files. Elsewhere: a walk that skips hidden entries and symbolic links and honours
``.gitignore`` files. A directory given to ``index-update`` is walked whole, ignored files included.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.store.paths import GIT_CONFIG, git_env

__all__ = ["git_ls_files", "list_tree", "walk_dir"]

NODWYN_DIR = ".nodwyn/"


def git_ls_files(root: Path) -> list[str] | None:
    """The files git lists in root, or None when root is not a git working tree."""
    try:
        out = subprocess.run(
            ["git", *GIT_CONFIG, "ls-files", "-z", "-t", "--cached", "--others",
             "--exclude-standard"],
            cwd=root,
            env=git_env(),
            capture_output=True,
            check=False,
            timeout=120,
        )  # fmt: skip
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        raise StoreError(f"git ls-files in {root} took longer than 120 s") from None
    if out.returncode != 0:
        return None
    seen: dict[str, None] = {}
    for item in out.stdout.split(b"\0"):
        if len(item) < 3:
            continue
        tag, raw = item[:1], item[2:]
        path = os.fsdecode(raw)
        # An untracked file under .nodwyn/ is another session's worktree, attachment or kept
        # version: never indexed. Tracked ones are the project's own.
        if tag == b"?" and (path.startswith(NODWYN_DIR) or path == ".nodwyn"):
            continue
        seen.setdefault(path, None)
    return list(seen)


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
    """Files under start, relative to root, in a sorted walk; symbolic links are never followed."""
    stack: list[tuple[Path, list[_Ignore]]] = [(start, [])]
    while stack:
        directory, ignores = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        rel_dir = os.path.relpath(directory, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        if honour_ignores:
            gi = directory / ".gitignore"
            with contextlib.suppress(OSError):
                ignores = [*ignores, _Ignore(rel_dir, gi.read_text("utf-8", "replace"))]
        subdirs: list[Path] = []
        files: list[str] = []
        for e in entries:
            if e.name == ".git" or (skip_hidden and e.name.startswith(".")):
                continue
            if e.is_symlink():
                continue
            rel = rel_dir + e.name
            is_dir = e.is_dir(follow_symlinks=False)
            if honour_ignores and _ignored(ignores, rel, is_dir):
                continue
            if is_dir:
                subdirs.append(Path(e.path))
            elif e.is_file(follow_symlinks=False):
                files.append(rel)
        yield from sorted(files)
        stack.extend((d, ignores) for d in subdirs)


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
