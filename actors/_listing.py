"""Which files a working tree's index covers (§2).

In a git repository: the files git lists (``git ls-files -z --cached --others --exclude-standard``),
run with fixed arguments and hardened as ``git status`` is for an agent (no file system monitor, no
external programs, no pager, no optional locks, no prompts). When that listing takes more than
``OTHERS_SECONDS`` (an ignore file that is a FIFO blocks git for ever), the index alone is listed
(``--cached``, no ignore file read) for ``INDEX_ONLY_SECONDS``, and it is said. ``.nodwyn/`` is
left out but for its tracked files. Elsewhere: a walk that skips hidden entries and symbolic links
and honours ``.gitignore`` files. A directory given to ``index-update`` is walked whole, ignored
files included.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from nodwyn_retrieval.errors import StoreError
from nodwyn_retrieval.guard.beneath import Beneath, clean_relative
from nodwyn_retrieval.store.paths import GitRepo, git_files_regular, git_repo

__all__ = ["Listing", "ListingCut", "git_ls_files", "list_tree", "walk_dir"]

NODWYN_DIR = ".nodwyn/"
GITIGNORE_BYTES = 1 << 20  # a .gitignore is read up to 1 MiB
GIT_SECONDS = 120.0  # git ls-files is given at most this, deadline or not
OTHERS_SECONDS = 5.0  # the listing with untracked files is given at most this, then the index's
INDEX_ONLY_SECONDS = 600.0  # after such a cut, how long a repository's index alone is listed
IGNORE_RULES = 1000  # the .gitignore rules applied at one directory (its own and those above)
IGNORE_RULES_WALK = 20_000  # the distinct .gitignore rules one walk compiles
CHECK_EVERY = 256  # names walked, or entries looked at, between two looks at the clock

log = logging.getLogger("nodwyn_retrieval.actors.listing")

# git directory -> the time.monotonic() until which its listing is the index's alone (the
# listing with untracked files did not finish in OTHERS_SECONDS: an ignore file that blocks).
_index_only: dict[Path, float] = {}
_index_only_lock = threading.Lock()


class ListingCut(TimeoutError):
    """The listing did not finish before the deadline it was given."""


def git_ls_files(root: Path, *, seconds: float | None = None) -> list[str] | None:
    """The files git lists in root, or None when root is not a git working tree.

    git is told the git directory and the working tree (:class:`store.paths.GitRepo`), so a
    repository's ``core.worktree``, a ``.git`` file or the environment cannot change what is
    listed; a tree git disagrees about is refused (``BadInput``) by :func:`store.paths.git_repo`.
    Every name is checked to be a plain relative path beneath root before it is used.

    ``seconds``: the time git is given; past it git is stopped and :class:`ListingCut` raised.
    Without it git has 120 s, and a listing past that is a ``StoreError``.
    """
    out = _git_output(root, seconds)
    if out is None:
        return None
    names, bad = _parse_items(out.split(b"\0"))
    _warn_bad(root, bad)
    return names


def _warn_bad(root: Path, bad: int) -> None:
    if bad:
        log.warning("git listed %d name(s) in %s that are not plain paths beneath it: left out",
                    bad, root)  # fmt: skip


def _git_output(
    root: Path,
    seconds: float | None,
    found: list[GitRepo] | None = None,
    early: _Early | None = None,
) -> bytes | None:
    """What ``git ls-files`` prints for root (as :func:`git_ls_files` runs it), or None.

    found, when given, receives the repository git was run in (its git directory is what a
    watch of the tree also watches). early: the listing already started (:meth:`Listing.start`)."""
    timeout = GIT_SECONDS if seconds is None else max(0.0, min(seconds, GIT_SECONDS))
    early = early or _Early.start(root, timeout)
    try:
        repo = git_repo(root)
    finally:
        # Its listing is taken only when git agrees it ran in the repository found (below).
        ran = early.wait() if early is not None else None
    if repo is None:
        return None
    if found is not None:
        found.append(repo)
    here = Path(os.path.realpath(root))
    if here != repo.work_tree and repo.work_tree not in here.parents:
        return None  # pragma: no cover - git_repo found root or an ancestor of it
    args = _ls_args(repo.git_dir)
    taken = (
        early is not None
        and early.repo == repo
        and here == repo.work_tree
        and ran is not None
        and early.args == args
    )
    try:
        if taken and ran is not None and ran.error is None:
            out = ran.result()
        elif taken and early is not None and early.blocked():
            out = _index_listing(repo, here, root, timeout - OTHERS_SECONDS)
        else:  # one cut by the deadline, or failed, is run again as before
            bound = _bound(args, timeout)
            try:
                out = repo.run("ls-files", *args, timeout=bound, cwd=here)
            except subprocess.TimeoutExpired:
                if bound < OTHERS_SECONDS:
                    raise
                out = _index_listing(repo, here, root, timeout - bound)
    except (FileNotFoundError, PermissionError):
        return None
    except subprocess.TimeoutExpired:
        if seconds is not None and seconds < GIT_SECONDS:
            raise ListingCut(f"git ls-files in {root} stopped at the deadline") from None
        raise StoreError(f"git ls-files in {root} took longer than 120 s") from None
    if out.returncode != 0:
        return None
    return out.stdout


_LS_FILES_ARGS = ("-z", "-t", "--cached", "--others", "--exclude-standard")
_LS_INDEX_ARGS = ("-z", "-t", "--cached")  # the index alone: no ignore file is read


def _ls_args(git_dir: Path) -> tuple[str, ...]:
    """The listing's arguments for a repository: with its untracked files, unless that listing
    was cut at OTHERS_SECONDS in the last INDEX_ONLY_SECONDS."""
    with _index_only_lock:
        until = _index_only.get(git_dir)
        if until is not None and time.monotonic() >= until:
            del _index_only[git_dir]
            until = None
    return _LS_FILES_ARGS if until is None else _LS_INDEX_ARGS


def _bound(args: tuple[str, ...], timeout: float) -> float:
    """The time git is given for a listing of these arguments: OTHERS_SECONDS at most for the
    one with untracked files, the whole timeout for the index's."""
    return min(timeout, OTHERS_SECONDS) if args is _LS_FILES_ARGS else timeout


def _index_listing(
    repo: GitRepo, here: Path, root: Path, seconds: float
) -> subprocess.CompletedProcess[bytes]:
    """The index's listing, after the one with untracked files took OTHERS_SECONDS: git reads
    each ``.gitignore`` it meets, ``.git/info/exclude`` and ``core.excludesFile``, and one of
    them that is a FIFO (a clone can hold one only by a hand that put it there) blocks it for
    ever. The files git tracks are listed and searched; untracked ones are not, and it is said."""
    with _index_only_lock:
        _index_only[repo.git_dir] = time.monotonic() + INDEX_ONLY_SECONDS
    log.warning(
        "git ls-files in %s did not finish in %.0f s (an ignore file that blocks, such as a "
        "FIFO, or a very large untracked tree): only the files git tracks are listed, and "
        "untracked files are left out for %.0f minutes",
        root, OTHERS_SECONDS, INDEX_ONLY_SECONDS / 60,
    )  # fmt: skip
    return repo.run("ls-files", *_LS_INDEX_ARGS, timeout=max(1.0, seconds), cwd=here)


class _Ran:
    """What a run of git in a thread gave: its completed process, or what it raised."""

    def __init__(self) -> None:
        self.value: subprocess.CompletedProcess[bytes] | None = None
        self.error: BaseException | None = None

    def result(self) -> subprocess.CompletedProcess[bytes]:
        if self.error is not None:
            raise self.error
        assert self.value is not None  # noqa: S101 - set when error is not
        return self.value


class _Early:
    """``git ls-files`` started, in a thread, while :func:`store.paths.git_repo` asks git whether
    the tree is the repository it seems to be: the two runs of git overlap (a new session's
    first search waited 3 to 8 ms for the check before the listing began). Only a tree whose
    root holds its own ``.git`` directory (not a link, not a worktree's ``.git`` file) is started
    early, in that repository; its listing is used only when ``git_repo`` answers that very
    repository, and otherwise the listing is run again in the one it answers."""

    def __init__(self, repo: GitRepo, timeout: float) -> None:
        self.repo = repo
        self.args = _ls_args(repo.git_dir)
        self.timeout = _bound(self.args, timeout)
        self._ran = _Ran()
        self._thread = threading.Thread(target=self._run, args=(self.timeout,), daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, root: Path, timeout: float) -> _Early | None:
        top = os.path.realpath(root)
        dotgit = os.path.join(top, ".git")
        try:
            if not stat.S_ISDIR(os.lstat(dotgit).st_mode):
                return None
        except OSError:
            return None
        if os.path.lexists(os.path.join(dotgit, "commondir")):
            return None  # a git directory shared with others: git_repo reads where it points
        if not os.path.isfile(os.path.join(dotgit, "HEAD")) or not git_files_regular(dotgit):
            return None  # no git directory, or one git would wait on (a FIFO): git_repo says so
        git_dir = Path(dotgit)
        return cls(GitRepo(Path(top), git_dir, git_dir), timeout)

    def _run(self, timeout: float) -> None:
        try:
            self._ran.value = self.repo.run(
                "ls-files", *self.args, timeout=timeout, cwd=self.repo.work_tree
            )
        except BaseException as e:  # noqa: BLE001 - raised where the listing is taken
            self._ran.error = e

    def wait(self) -> _Ran:
        self._thread.join()
        return self._ran

    def blocked(self) -> bool:
        """Whether its listing with untracked files ran out of OTHERS_SECONDS (not a deadline)."""
        return (
            self.args is _LS_FILES_ARGS
            and self.timeout >= OTHERS_SECONDS
            and isinstance(self._ran.error, subprocess.TimeoutExpired)
        )


# A part ".git" in any case, between two separators once every "/" is a NUL.
_GIT_PART = re.compile(r"\0\.git\0", re.IGNORECASE)


def _suspect(names: str) -> bool:
    """Whether a name of names (which begin and end with a NUL, and have one between them) has,
    between two separators (NUL between names, "/" between parts), an empty part, ".", ".." or
    ".git" in any case: a name that may not be a plain path beneath the root.

    The names are checked together in one pass; only when this finds something is each name
    checked alone (_beneath_root). It finds more than that check refuses, never less: every
    refused name has such a part (a leading "/" or a trailing one is an empty part). The empty,
    "." and ".." parts are looked for as substrings, quicker than one pattern for all four."""
    parts = names.replace("/", "\0")
    return (
        "\0\0" in parts
        or "\0.\0" in parts
        or "\0..\0" in parts
        or _GIT_PART.search(parts) is not None
    )


def _parse_items(items: list[bytes]) -> tuple[list[str], int]:
    """The names of ``git ls-files -z -t`` items, each once, and how many were not plain."""
    if b"? .nodwyn" in b"\0".join(items):  # perhaps an untracked name under .nodwyn/
        return _parse_items_one_by_one(items)
    # The names decoded together (a name holds no NUL, and os.fsdecode decodes byte by byte
    # where it cannot decode: the same names as one at a time), and made unique in C.
    kept = [item[2:] for item in items if len(item) >= 3]
    if not kept:
        return [], 0
    text = os.fsdecode(b"\0".join(kept))
    if _suspect("\0" + text + "\0"):
        return _parse_items_one_by_one(items)
    return list(dict.fromkeys(text.split("\0"))), 0


def _parse_items_one_by_one(items: list[bytes]) -> tuple[list[str], int]:
    """:func:`_parse_items` for a part where some name may be left out."""
    tagged = [(item[:1], os.fsdecode(item[2:])) for item in items if len(item) >= 3]
    bad = 0
    if _suspect("\0" + "\0".join(p for _, p in tagged) + "\0"):
        plain = [(tag, p) for tag, p in tagged if _beneath_root(p)]
        bad = len(tagged) - len(plain)
        tagged = plain
    # An untracked file under .nodwyn/ is another session's worktree, attachment or kept
    # version: never indexed. Tracked ones are the project's own.
    seen = {
        p: None
        for tag, p in tagged
        if tag != b"?" or not (p.startswith(NODWYN_DIR) or p == ".nodwyn")
    }
    return list(seen), bad


def _beneath_root(path: str) -> bool:
    """A name git may list: relative, plain components, none of them ``.git`` in any case."""
    return clean_relative(path) and not any(p.lower() == ".git" for p in path.split("/"))


_Rule = tuple[re.Pattern[str], bool, bool]  # a pattern, whether it negates, directories only


def _compile_rule(line: str) -> _Rule:
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.strip("/") if "/" in line.rstrip("/") else line.rstrip("/")
    anchored = "/" in line
    pat = fnmatch.translate(line).replace(".*", "[^/]*")
    pat = pat.replace("[^/]*[^/]*", ".*")  # "**" crosses directories
    return re.compile(pat if anchored else r"(?:.*/)?" + pat), negate, dir_only


class _Rules:
    """The ignore rules one walk compiles: each distinct line once, IGNORE_RULES_WALK at most.

    A clone's .gitignore files are the clone's: one of 95,000 patterns (1 MiB) took 5.5 s to
    compile and 27 ms to match each name, and each search of the tree ended at its deadline
    having listed a few hundred names and read none. Past these bounds the rules are not
    applied (the files they would leave out are listed, and the guard decides on them as on any
    other), and it is said once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._compiled: dict[str, _Rule] = {}
        self.left_out = 0

    def rule(self, line: str) -> _Rule | None:
        got = self._compiled.get(line)
        if got is None:
            if len(self._compiled) >= IGNORE_RULES_WALK:
                return None
            got = self._compiled[line] = _compile_rule(line)
        return got

    def leave_out(self, n: int) -> None:
        if n and not self.left_out:
            log.warning(
                "the .gitignore files of %s hold more rules than are applied (%d at a "
                "directory, %d in all): the rest are not, and what they would leave out is listed",
                self.root, IGNORE_RULES, IGNORE_RULES_WALK,
            )  # fmt: skip
        self.left_out += n


class _Ignore:
    """The patterns of one .gitignore file, matched against paths relative to its directory:
    at most room of them (what the .gitignore files above leave of IGNORE_RULES)."""

    def __init__(self, base: str, text: str, rules: _Rules | None = None, room: int = -1) -> None:
        self.base = base
        self.rules: list[_Rule] = []
        rules = rules or _Rules(Path(base))
        room = IGNORE_RULES if room < 0 else room
        left_out = 0
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            rule = rules.rule(line) if len(self.rules) < room else None
            if rule is None:
                left_out += 1
            else:
                self.rules.append(rule)
        rules.leave_out(left_out)

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
    return (
        name
        for name in _walk(root, start, honour_ignores=honour_ignores, skip_hidden=skip_hidden)
        if name is not None
    )


def _walk(
    root: Path, start: Path, *, honour_ignores: bool, skip_hidden: bool
) -> Iterator[str | None]:
    """:func:`walk_dir`'s names, and None after each directory and every CHECK_EVERY entries:
    where the caller may look at its clock though no name came (a tree of empty directories,
    or of names all ignored)."""
    rel_start = os.path.relpath(os.path.abspath(start), os.path.abspath(root)).replace(os.sep, "/")
    if rel_start == ".":
        rel_start = ""
    elif not clean_relative(rel_start):
        return
    rules = _Rules(root)
    with Beneath(root) as tree:
        stack: list[tuple[str, list[_Ignore]]] = [(rel_start, [])]
        while stack:
            yield None
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
                    room = IGNORE_RULES - sum(len(ig.rules) for ig in ignores)
                    text = data.decode("utf-8", "replace")
                    ignores = [*ignores, _Ignore(rel_dir, text, rules, room)]
            subdirs: list[str] = []
            files: list[str] = []
            for n, (name, kind) in enumerate(entries, 1):
                if n % CHECK_EVERY == 0:
                    yield None
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
    """The files the index covers, and whether git listed them: a :class:`Listing` (the one a
    refresh makes) run to its end with no deadline."""
    listing = Listing(root, [])
    try:
        listing.step(math.inf)
    finally:
        listing.close()
    return listing.names, listing.in_git


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Listing:
    """The files a refresh looks at, listed in steps that each stop at a deadline.

    git's listing is one run of git, given the time left: cut, it runs again at the next step.
    A walk (a tree outside git, and each directory ``index-update`` added) goes on at the next
    step from the directory it stopped in. ``names`` holds each listed name once, in the order
    found, complete when :meth:`step` has answered True. A name that is not UTF-8 cannot be shown
    in a result or stored as text: it is left out and counted in ``bad_names``.
    """

    CHECK_EVERY = CHECK_EVERY  # names walked between two looks at the clock
    PARSE_EVERY = 8192  # names of git's listing checked between two looks at the clock

    def __init__(self, root: Path, extra: list[str]) -> None:
        self.root = root
        self.extra = list(extra)
        self.names: list[str] = []
        self.in_git = False
        self.git_dir: Path | None = None  # the repository's, once git has listed the tree
        self.done = False
        self.bad_names = 0
        self._seen: set[str] = set()
        self._walks: list[Iterator[str | None]] | None = None
        self._items: list[bytes] | None = None  # git's listing, split, while it is parsed
        self._parsed = 0
        self._early: _Early | None = None  # git's run, started before the first step

    def start(self, until: float) -> None:
        """Start git's listing now, in a thread, for the first :meth:`step` to take (the caller
        does other work meanwhile: a refresh loads the manifest). Nothing for a tree whose root
        holds no ``.git`` directory of its own: the first step lists it as before."""
        left = until - time.monotonic()
        if self._early is None and self._items is None and self._walks is None and left > 0:
            self._early = _Early.start(self.root, min(left, GIT_SECONDS))

    def __repr__(self) -> str:
        state = "done" if self.done else "going"
        return f"<Listing {state} {len(self.names)} names of {str(self.root)!r}>"

    def _add_all(self, names: list[str]) -> None:
        """:meth:`_add` of each of names, which are unique: in C when none is seen already and
        all are UTF-8 (the common case), else one at a time."""
        if names and self._seen.isdisjoint(names):
            try:
                "\0".join(names).encode("utf-8")
            except UnicodeEncodeError:
                pass
            else:
                self._seen.update(names)
                self.names.extend(names)
                return
        for name in names:
            self._add(name)

    def _add(self, name: str) -> None:
        if name in self._seen:
            return
        self._seen.add(name)
        if _utf8(name):
            self.names.append(name)
        else:
            self.bad_names += 1

    def step(self, until: float) -> bool:
        """List until done or ``time.monotonic()`` reaches until; whether the listing is complete.

        Raises what :func:`git_ls_files` raises but :class:`ListingCut` (a cut step answers
        False)."""
        if self.done:
            return True
        if time.monotonic() >= until:
            # A run of git started for this step lists the tree as it was then: a later step
            # (a later search) runs git again.
            self.close_early()
            return False
        if self._walks is None:
            if self._items is None:
                found: list[GitRepo] = []
                try:
                    early, self._early = self._early, None
                    out = _git_output(self.root, until - time.monotonic(), found, early)
                except ListingCut:
                    return False
                self.in_git = out is not None
                self.git_dir = found[0].git_dir if self.in_git and found else None
                self._items = [] if out is None else out.split(b"\0")
            # git's names are checked and decoded a part at a time, and go on at the next step.
            items = self._items
            while self._parsed < len(items):
                part = items[self._parsed : self._parsed + self.PARSE_EVERY]
                names, bad = _parse_items(part)
                _warn_bad(self.root, bad)
                self._add_all(names)
                self._parsed += len(part)
                if time.monotonic() >= until and self._parsed < len(items):
                    return False
            self._items = []
            walks: list[Iterator[str | None]] = []
            if not self.in_git:
                walks.append(_walk(self.root, self.root, honour_ignores=True, skip_hidden=True))
            for d in self.extra:
                start = self.root / d
                if start.is_dir():
                    walks.append(_walk(self.root, start, honour_ignores=False, skip_hidden=False))
            self._walks = walks
        every = self.CHECK_EVERY
        while self._walks:
            walk = self._walks[0]
            for n, name in enumerate(walk, 1):
                if name is not None:
                    self._add(name)
                elif time.monotonic() >= until:
                    return False  # a directory done, or many entries looked at
                if n % every == 0 and time.monotonic() >= until:
                    return False
            self._walks.pop(0)
        self._seen = set()
        self.done = True
        return True

    def close_early(self) -> None:
        """Wait for git's run started by :meth:`start` and not taken, and drop it."""
        early, self._early = self._early, None
        if early is not None:
            early.wait()

    def close(self) -> None:
        """Stop the walks in progress (each closes its directory descriptors), and wait for git's
        run when it was started and not taken."""
        self.close_early()
        for walk in self._walks or []:
            close = getattr(walk, "close", None)
            if close is not None:
                close()
        self._walks = []


def listed_files(root: Path) -> int:
    """How many files the git index of the repository whose top is root lists, from its header
    (0 when there is none, or it cannot be read). The tree is a clone's, so neither ``.git`` nor
    the index is trusted: only a regular file is read (a FIFO or a device is not waited on), and
    only its first bytes."""
    git = root / ".git"
    try:
        if stat.S_ISREG(os.lstat(git).st_mode):  # a worktree's or a submodule's: "gitdir: <path>"
            line = _head(git, 4096).decode("utf-8").strip()
            if not line.startswith("gitdir:"):
                return 0
            git = root / line[len("gitdir:") :].strip()
        head = _head(git / "index", 12)
    except (OSError, UnicodeDecodeError, ValueError):
        return 0
    if len(head) < 12 or head[:4] != b"DIRC":
        return 0
    return int.from_bytes(head[8:12], "big")


def _head(path: Path, n: int) -> bytes:
    """The first n bytes of path when it is a regular file, else none; never blocks on a FIFO."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return b""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        return os.read(fd, n) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)
