"""The denylist: paths the guard refuses without reading them (ADR 0050 §3 and §4).

§3: every file that enters the index is read through the guard, and every refresh checks each
listed file against the pin and the denylist without a read, so a file the denylist refuses never
ranks. §4: the model's file tools cannot reach the data directory, so a clone can neither plant nor
poison an index: the data and configuration directories are on the denylist whenever they are known.

Patterns are gitignore-like globs over the path relative to the root, in POSIX form:

- ``*`` and ``?`` never cross a ``/``; ``**/`` is any number of directories; ``[abc]`` a class.
- A pattern without a ``/`` (other than a trailing one) matches any component of the path, the
  file's name or a directory's; a directory that matches takes everything under it.
- A pattern with a ``/`` inside is anchored at the root (a leading ``/`` is allowed and dropped).
- A trailing ``/`` matches directories only.
- Matching ignores case: on a case-insensitive file system ``.ENV`` is ``.env``.
- There is no negation: a user's patterns only add to the defaults.

The patterns are compiled into three regular expressions (names, directories, anchored paths), and
each distinct path component is matched once: the precheck runs for every listed file at every
refresh.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from nodwyn_retrieval.errors import BadInput

__all__ = ["DEFAULT_DENY", "Denylist"]

DEFAULT_DENY: tuple[str, ...] = (
    # The repository's internals: objects, hooks, config with remotes' credentials; a worktree's
    # ".git" file too. ".gitignore" and ".github/" are not ".git".
    ".git",
    # Environment files, templates included: a template is too often filled in and committed.
    ".env",
    ".env.*",
    # Keys and certificates with their private halves.
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh/",
    # Credential stores of common tools.
    "**/.aws/credentials",
    "**/.docker/config.json",
    "**/.kube/config",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".htpasswd",
    ".git-credentials",
    # Google's default names for an OAuth client's secret and a service account's key, and the
    # application default credentials gcloud writes.
    "credentials.json",
    "application_default_credentials.json",
)
"""The patterns every guard denies (docs/guard.md gives the reason for each)."""


def _glob(pattern: str) -> str:
    """A glob (no leading or trailing ``/``) as a regex over whole components, unanchored."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**/", i):
                out.append("(?:[^/]*/)*")
                i += 3
                continue
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j].replace("/", "")
                # Escape what Python's classes read specially (set operations, nested sets, and a
                # "]" kept first, which the negation's "^/" would otherwise make the class's end).
                body = "".join("\\" + ch if ch in "\\[]&~|" else ch for ch in body)
                if body[:1] in ("!", "^"):
                    body = "^/" + body[1:]  # a negated class never matches the separator
                out.append("[" + body + "]")
                i = j + 1
                continue
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


_FILE, _DIRECTORY, _ANCHORED = 0, 1, 2
"""How a pattern is matched: a component of any name, a directory component, the whole path."""


def _compile_one(pattern: str) -> tuple[int, str]:
    """A deny pattern as (how it is matched, regex source); BadInput when malformed.

    A pattern without an inner ``/`` is a glob over one component (fullmatch); one with an inner
    ``/`` is matched from the root against the whole path.
    """
    if not isinstance(pattern, str):
        raise BadInput(f"deny pattern must be a string, got {type(pattern).__name__}")
    p = pattern.strip()
    if not p:
        raise BadInput("deny pattern must not be empty")
    if p.startswith("!"):
        raise BadInput(f"deny pattern {pattern} negates: the denylist can only be added to")
    directory = p.endswith("/")
    p = p.rstrip("/")
    anchored = "/" in p
    p = p.lstrip("/")
    if not p:
        raise BadInput(f"deny pattern {pattern} names the root: a guard that denies every read")
    body = _glob(p)
    if anchored:
        how, source = _ANCHORED, body + ("/" if directory else "(?:/|$)")
    else:
        how, source = (_DIRECTORY if directory else _FILE), body
    try:
        re.compile(source)
    except re.error as exc:
        raise BadInput(f"deny pattern {pattern} is not a valid glob: {exc}") from None
    return how, source


_MEMO_LIMIT = 100_000
"""Components remembered per denylist; a tree has far fewer distinct names than this."""


class Denylist:
    """The compiled patterns, and the directories denied whole by their real location.

    Most patterns name one component (``.env``, ``*.pem``, ``.ssh/``). Each distinct component is
    matched once and remembered, so checking a path costs a split and a few dictionary lookups: a
    search over a tree's thousands of paths repeats the same directory names.
    """

    __slots__ = ("_anchored", "_dirs", "_dirs_rx", "_files_rx", "_memo", "patterns")

    def __init__(
        self, patterns: Iterable[str], directories: Iterable[tuple[str, str]] = ()
    ) -> None:
        """patterns: globs as above. directories: (absolute path, what it is) pairs, such as the
        data directory; each is denied by its real location and by its path as given."""
        self.patterns: tuple[str, ...] = tuple(patterns)
        """The patterns, defaults first, in the order given."""
        groups: tuple[list[str], list[str], list[str]] = ([], [], [])
        for i, p in enumerate(self.patterns):
            how, source = _compile_one(p)
            groups[how].append(f"(?P<p{i}>{source})")

        def joined(parts: list[str]) -> re.Pattern[str] | None:
            return re.compile("|".join(parts), re.IGNORECASE) if parts else None

        self._files_rx = joined(groups[_FILE])
        self._dirs_rx = joined(groups[_DIRECTORY])
        self._anchored = joined(groups[_ANCHORED])
        self._memo: dict[str, tuple[int, int]] = {}
        dirs: list[tuple[str, str]] = []
        for path, what in directories:
            lexical = os.path.normpath(os.path.abspath(path))
            real = os.path.realpath(path)
            dirs.append((real, what))
            if lexical != real:
                dirs.append((lexical, what))
        self._dirs = tuple(dirs)

    @staticmethod
    def _index(rx: re.Pattern[str] | None, part: str) -> int:
        if rx is None:
            return -1
        m = rx.fullmatch(part)
        if m is None or m.lastgroup is None:
            return -1
        return int(m.lastgroup[1:])

    def _component(self, part: str) -> tuple[int, int]:
        """(pattern index as a name, as a directory), -1 for none; remembered."""
        hit = self._memo.get(part)
        if hit is None:
            hit = (self._index(self._files_rx, part), self._index(self._dirs_rx, part))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[part] = hit
        return hit

    def match(self, rel: str) -> str | None:
        """The pattern a root-relative POSIX path matches, or None."""
        parts = rel.split("/")
        last = len(parts) - 1
        for k, part in enumerate(parts):
            as_name, as_dir = self._component(part)
            if as_name >= 0:
                return self.patterns[as_name]
            if as_dir >= 0 and k < last:
                return self.patterns[as_dir]
        if self._anchored is not None:
            m = self._anchored.match(rel)
            if m is not None and m.lastgroup is not None:
                return self.patterns[int(m.lastgroup[1:])]
        return None

    def directory(self, absolute: str) -> str | None:
        """What denied directory an absolute, normalised path is inside (or is), or None."""
        if not self._dirs:
            return None
        for d, what in self._dirs:
            if absolute == d or absolute.startswith(d if d.endswith(os.sep) else d + os.sep):
                return what
        return None

    def __repr__(self) -> str:
        return f"Denylist(patterns={len(self.patterns)}, directories={len(self._dirs)})"
