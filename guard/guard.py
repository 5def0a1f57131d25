"""The read guard: repository pin, denylist, checkers and the turn's budget (ADR 0050 §3).

§3: the indexer reads each file as fs-read does, so the repository pin, the denylist, the person's
register-check checkers and the turn's budget all apply, and each read logs its ``guard.decision``.
A read the guard would ask about is not asked during a build (``without_asking``): it is refused,
recorded with the answer ``no`` and the actor ``not asked``, so a build never prompts once per file.

Rules run in this order, and the first that does not allow decides:

1. ``pin``: the path, resolved through symbolic links and ``..`` (``os.path.realpath``), must be
   the root or inside it.
2. ``denylist``: the path relative to the root, both as written and as resolved, against the
   patterns of :mod:`guard.denylist`; and the data and configuration directories by location.
3. ``check``: the checkers, in order; the first answer other than allow wins.
4. ``budget``: an allowed read consumes one read and its size from the turn's budget; a read that
   does not fit is denied. A confirm that does not fit is denied too (nobody is asked about a read
   that could not happen); a confirm that fits consumes nothing until it is answered.

:meth:`DefaultGuard.precheck` runs 1 and 2 only, reads nothing and records nothing: a refresh runs
it for every listed file (§3, "checks each listed file against the pin and the denylist without a
read"). :meth:`DefaultGuard.check_read` runs all four and hands the decision to the recorder.

The guard decides; it does not read. The caller reads the file right after an allowing decision,
beneath the root and through no link (:mod:`guard.beneath`): a path changed in between (a
directory swapped for a link) is then refused by the open itself. A caller that reads only so can
use :meth:`DefaultGuard.reading_beneath`, which decides a plain relative path as written.
"""

from __future__ import annotations

import inspect
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from nodwyn_retrieval.errors import BadInput, NotFound

from .budget import Budget
from .decision import Checker, CheckResult, Decision, Recorder, Verdict
from .denylist import DEFAULT_DENY, Denylist

__all__ = ["DefaultGuard", "Guard", "default_guard", "precheck_all"]

_ALLOWED_REASON = "inside the repository, refused by no rule"


class Guard(Protocol):
    """What the index needs of a guard; an agent loop may supply its own (§3)."""

    @property
    def root(self) -> Path:
        """The repository root every read is pinned to."""
        ...

    def precheck(self, path: str) -> Decision:
        """Pin and denylist only: no read, not recorded, cheap (it runs for every listed file)."""
        ...

    async def check_read(self, path: str, size: int) -> Decision:
        """The whole guard for a read of size bytes: recorded, and counted against the budget."""
        ...

    def without_asking(self) -> Guard:
        """The same guard where a confirm is a refusal: answer ``no``, actor ``not asked``."""
        ...


class _Resolved:
    """A path located: as written (normalised) and as resolved, absolute and root-relative."""

    __slots__ = ("lexical", "lexical_rel", "real", "real_rel")

    def __init__(
        self, real: str, real_rel: str | None, lexical: str, lexical_rel: str | None
    ) -> None:
        self.real = real
        self.real_rel = real_rel
        self.lexical = lexical
        self.lexical_rel = lexical_rel


class _Rules:
    """What a guard and its ``without_asking`` twin share: one budget, one recorder, one list."""

    __slots__ = ("budget", "checkers", "denylist", "prefix", "recorder", "root", "root_str")

    def __init__(
        self,
        root: Path,
        denylist: Denylist,
        checkers: tuple[Checker, ...],
        budget: Budget,
        recorder: Recorder | None,
    ) -> None:
        self.root = root
        self.root_str = str(root)
        self.prefix = self.root_str if self.root_str.endswith(os.sep) else self.root_str + os.sep
        self.denylist = denylist
        self.checkers = checkers
        self.budget = budget
        self.recorder = recorder


def _check_path(path: str) -> None:
    if not isinstance(path, str):
        raise BadInput(f"path must be a string, got {type(path).__name__}")
    if not path:
        raise BadInput("path must not be empty")
    if "\0" in path:
        raise BadInput(f"path {path!r} holds a NUL byte")


_CHANGING = ""  # the resolved path of one that kept changing while it was resolved


def _realpath(path: str) -> str:
    """``os.path.realpath``, or :data:`_CHANGING` when the path keeps changing under it.

    realpath raises when a link on the way vanishes between its ``lstat`` and its ``readlink``
    (a directory swapped back and forth): tried three times, then refused by the pin."""
    for _ in range(3):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    return _CHANGING


def _checker_name(checker: object) -> str:
    name = getattr(checker, "__qualname__", None) or getattr(checker, "__name__", None)
    return name if isinstance(name, str) else type(checker).__name__


def _is_clean(path: str) -> bool:
    """A relative POSIX path with no empty, ``.`` or ``..`` component (as git lists them)."""
    if path.startswith("/") or path.endswith("/") or "//" in path or os.sep != "/":
        return False
    return not any(part in (".", "..") for part in path.split("/"))


class DefaultGuard:
    """The guard §3 describes; make one with :func:`default_guard`."""

    __slots__ = ("_asking", "_beneath", "_rules")

    def __init__(self, rules: _Rules, *, asking: bool, beneath: bool = False) -> None:
        self._rules = rules
        self._asking = asking
        self._beneath = beneath

    @property
    def root(self) -> Path:
        """The repository root, resolved (``os.path.realpath``)."""
        return self._rules.root

    @property
    def asking(self) -> bool:
        """Whether a confirm is asked (True) or refused unasked (``without_asking``)."""
        return self._asking

    @property
    def budget(self) -> Budget:
        """The turn's budget, shared with the ``without_asking`` twin."""
        return self._rules.budget

    @property
    def denylist(self) -> Denylist:
        """The compiled denylist, defaults and the user's patterns."""
        return self._rules.denylist

    @property
    def beneath(self) -> bool:
        """Whether this guard decides for reads made beneath the root without following a link
        (:meth:`reading_beneath`)."""
        return self._beneath

    def without_asking(self) -> DefaultGuard:
        """This guard with every confirm refused unasked; same budget and recorder (§3)."""
        if not self._asking:
            return self
        return DefaultGuard(self._rules, asking=False, beneath=self._beneath)

    def reading_beneath(self) -> DefaultGuard:
        """This guard for a caller that reads every file it allows with
        :class:`guard.beneath.Beneath` (the index build): same rules, budget and recorder.

        Such a read never follows a link at any component, so for a plain relative path the
        file read, if any, is the path as written: the pin and the denylist are decided on it
        without resolving links (``os.path.realpath``, most of a decision's cost), and a path
        with a link on its way is not read at all. Any other path is resolved as always.
        """
        if self._beneath:
            return self
        return DefaultGuard(self._rules, asking=self._asking, beneath=True)

    # --- locating a path --------------------------------------------------------------------------

    def _relative(self, absolute: str) -> str | None:
        rules = self._rules
        if absolute == _CHANGING:
            return None
        if absolute == rules.root_str:
            return "."
        if absolute.startswith(rules.prefix):
            rel = absolute[len(rules.prefix) :]
            return rel if os.sep == "/" else rel.replace(os.sep, "/")
        return None

    def _resolve(self, path: str) -> _Resolved:
        rules = self._rules
        joined = path if os.path.isabs(path) else os.path.join(rules.root_str, path)
        real = _realpath(joined)
        lexical = os.path.normpath(joined)
        return _Resolved(real, self._relative(real), lexical, self._relative(lexical))

    def _real_dir(self, head: str, dirs: dict[str, str]) -> str:
        """The real path of the root-relative directory head ("" is the root), each directory
        resolved once per batch: its parent's real path joined with its name, unless the name is
        a link, which is resolved in full. Equal to ``os.path.realpath`` for a clean path.

        A loop from the nearest directory already resolved, not a call a level: a tree 1,400
        directories deep (a clone's path of 2,800 bytes) passed Python's recursion limit, and
        every refresh of it failed."""
        chain: list[str] = []  # the directories not resolved yet, the deepest first
        d = head
        while (real := dirs.get(d)) is None:
            if not d:
                real = dirs[""] = self._rules.root_str
                break
            chain.append(d)
            d = d.rpartition("/")[0]
        for d in reversed(chain):
            if real == _CHANGING:
                return _CHANGING  # a directory above kept changing: so does this one
            name = d.rpartition("/")[2]
            real = real + "/" + name if real != "/" else "/" + name
            try:
                is_link = stat.S_ISLNK(os.lstat(real).st_mode)
            except FileNotFoundError:
                is_link = False  # realpath leaves a missing name as it is
            except OSError:
                is_link = True
            if is_link:
                real = _realpath(real)
            if real != _CHANGING:
                dirs[d] = real
        return real

    def _resolve_cached(
        self, path: str, dirs: dict[str, str], *, not_link: bool = False
    ) -> _Resolved:
        """:meth:`_resolve` with each directory's real path resolved once per batch.

        Equal to ``os.path.realpath`` of the whole path: the directory's real path joined with the
        name, unless the name itself is a link, which is resolved in full. ``not_link``: the
        caller has just seen the name is no link (an ``lstat``), so it is not looked at again.
        """
        if not _is_clean(path):
            return self._resolve(path)
        # A clean path is POSIX and relative, so plain "/" joins are exact here.
        root = self._rules.root_str
        head, _, name = path.rpartition("/")
        real_dir = self._real_dir(head, dirs)
        if real_dir == _CHANGING:
            return self._resolve(path)
        candidate = real_dir + "/" + name if real_dir != "/" else "/" + name
        mode = 0
        if not not_link:
            try:
                mode = os.lstat(candidate).st_mode
            except FileNotFoundError:
                mode = 0  # realpath leaves a missing name as it is
            except OSError:
                return self._resolve(path)
        real = _realpath(candidate) if stat.S_ISLNK(mode) else candidate
        lexical = root + "/" + path if root != "/" else "/" + path
        return _Resolved(real, self._relative(real), lexical, path)

    # --- the rules --------------------------------------------------------------------------------

    def _pin_and_deny(self, path: str, where: _Resolved) -> Decision | None:
        """The refusal of the pin or the denylist, or None when both let the path through."""
        rules = self._rules
        if where.real_rel is None:
            if where.real == _CHANGING:
                reason = f"path {path} kept changing while it was resolved"
            elif where.lexical_rel is None:
                reason = f"path {path} is outside the repository"
            else:
                reason = f"path {path} resolves to {where.real}, outside the repository"
            return Decision(path, Verdict.DENY, "pin", reason)
        what = rules.denylist.directory(where.real)
        if what is None and where.lexical != where.real:
            what = rules.denylist.directory(where.lexical)
        if what is not None:
            return Decision(path, Verdict.DENY, "denylist", f"path {path} is inside the {what}")
        pattern = rules.denylist.match(where.real_rel)
        if (
            pattern is None
            and where.lexical_rel is not None
            and where.lexical_rel != where.real_rel
        ):
            pattern = rules.denylist.match(where.lexical_rel)
        if pattern is not None:
            return Decision(
                path,
                Verdict.DENY,
                "denylist",
                f"path {path} matches the denylist pattern {pattern}",
            )
        return None

    def precheck(self, path: str) -> Decision:
        """The pin and the denylist, without a read and without a record (§3)."""
        _check_path(path)
        return self._pin_and_deny(path, self._resolve(path)) or Decision(
            path, Verdict.ALLOW, "pin", _ALLOWED_REASON
        )

    def precheck_many(self, paths: Iterable[str], *, not_links: bool = False) -> list[Decision]:
        """:meth:`precheck` of each path, each directory resolved once for the whole batch.

        For a refresh over thousands of files: resolving every path component again for every file
        is most of the cost of a precheck. The cache lives for this call only, so a directory
        swapped for a link is seen by the next call. ``not_links``: the caller has just seen
        (``lstat``) that no path's last component is a link, so each name is not looked at again.
        """
        dirs: dict[str, str] = {}
        out: list[Decision] = []
        for path in paths:
            _check_path(path)
            where = self._resolve_cached(path, dirs, not_link=not_links)
            out.append(
                self._pin_and_deny(path, where)
                or Decision(path, Verdict.ALLOW, "pin", _ALLOWED_REASON)
            )
        return out

    async def _checked(self, path: str, rel: str, size: int) -> Decision | None:
        """The first checker answer other than allow, as a decision; None when all allow."""
        for checker in self._rules.checkers:
            name = _checker_name(checker)
            try:
                answer: object = checker(rel, size)
                if inspect.isawaitable(answer):
                    answer = await answer
            except Exception as exc:  # noqa: BLE001 - a checker that fails refuses: fail closed
                reason = f"checker {name} failed: {type(exc).__name__}: {exc}"
                return Decision(path, Verdict.DENY, "check", reason)
            if not isinstance(answer, CheckResult):
                reason = f"checker {name} answered {type(answer).__name__}, not a CheckResult"
                return Decision(path, Verdict.DENY, "check", reason)
            if answer.verdict is not Verdict.ALLOW:
                reason = answer.reason or f"checker {name} answered {answer.verdict.value}"
                return Decision(path, answer.verdict, "check", reason)
        return None

    def _resolve_beneath(self, path: str) -> _Resolved:
        """A plain relative path as written: what a read that follows no link can open."""
        root = self._rules.root_str
        full = root + "/" + path if root != "/" else "/" + path
        return _Resolved(full, path, full, path)

    async def _decide(self, path: str, size: int) -> Decision:
        if self._beneath and _is_clean(path):
            where = self._resolve_beneath(path)
        else:
            where = self._resolve(path)
        refused = self._pin_and_deny(path, where)
        if refused is not None:
            return refused
        assert where.real_rel is not None  # noqa: S101 - the pin let it through
        checked = await self._checked(path, where.real_rel, size)
        budget = self._rules.budget
        if checked is None:
            why = budget.take(size)
            if why is not None:
                return Decision(path, Verdict.DENY, "budget", why)
            return Decision(path, Verdict.ALLOW, "pin", _ALLOWED_REASON)
        if checked.verdict is Verdict.CONFIRM:
            if not self._asking:
                return Decision(path, Verdict.CONFIRM, checked.rule, checked.reason, False, "no")
            why = budget.refusal(size)
            if why is not None:
                return Decision(path, Verdict.DENY, "budget", why)
            return Decision(path, Verdict.CONFIRM, checked.rule, checked.reason, True, None)
        return checked

    async def check_read(self, path: str, size: int) -> Decision:
        """The whole guard for a read of size bytes (§3): decided, counted, then recorded once."""
        _check_path(path)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise BadInput(f"size must be an integer of at least 0, got {size!r}")
        decision = await self._decide(path, size)
        if self._rules.recorder is not None:
            self._rules.recorder(decision)
        return decision

    def __repr__(self) -> str:
        return (
            f"DefaultGuard(root={self._rules.root_str!r}, asking={self._asking},"
            f" checkers={len(self._rules.checkers)}, budget={self._rules.budget!r})"
        )


def precheck_all(guard: Guard, paths: Sequence[str], *, not_links: bool = False) -> list[Decision]:
    """:meth:`Guard.precheck` of many paths, batched when the guard is a :class:`DefaultGuard`
    (``not_links`` as :meth:`DefaultGuard.precheck_many` takes it)."""
    if isinstance(guard, DefaultGuard):
        return guard.precheck_many(paths, not_links=not_links)
    return [guard.precheck(p) for p in paths]


def default_guard(
    root: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    config_dir: str | os.PathLike[str] | None = None,
    deny: Iterable[str] = (),
    checkers: Iterable[Checker] = (),
    budget: Budget | None = None,
    recorder: Recorder | None = None,
) -> DefaultGuard:
    """The guard of §3 over the repository at root.

    data_dir, config_dir: denied whole when given (§4: the model's tools cannot reach them).
    deny: patterns added to :data:`guard.denylist.DEFAULT_DENY`. checkers: the register-check
    checkers, asked in order. budget: the turn's, unbounded when None. recorder: receives each
    decision of :meth:`DefaultGuard.check_read`; None records nothing.
    """
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        raise NotFound(f"root {os.fspath(root)} is not a directory")
    if isinstance(deny, str):
        raise BadInput("deny must be a sequence of patterns, not one string")
    directories: list[tuple[str, str]] = []
    if data_dir is not None:
        directories.append((os.fspath(data_dir), "data directory"))
    if config_dir is not None:
        directories.append((os.fspath(config_dir), "configuration directory"))
    denylist = Denylist((*DEFAULT_DENY, *deny), directories)
    checks = tuple(checkers)
    for c in checks:
        if not callable(c):
            raise BadInput(f"checker must be callable, got {type(c).__name__}")
    rules = _Rules(
        Path(real_root), denylist, checks, budget if budget is not None else Budget(), recorder
    )
    return DefaultGuard(rules, asking=True)
