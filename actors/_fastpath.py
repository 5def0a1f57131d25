"""A new session's refresh without the precheck of files that are provably as they were allowed.

The precheck of §3 (the pin to the root and the denylist) depends on a file's path only: where its
real path lies and what its components are called. For a file that is

- in the manifest with its size, modification time and inode unchanged, so the guard allowed it
  when it was indexed (a file the precheck denies is never in the manifest);
- under a manifest whose ``guard`` fingerprint is this guard's: the same real root, the same
  denylist patterns, the same denied directories;
- a regular file (``lstat``) in directories that are all real directories, not links, from the
  root down (one ``lstat`` per directory, not per file), with the root's real path the guard's,

the precheck gives the answer it gave then: its real path is its path under the root, so the pin
holds and the denylist sees the same names. Such files skip it; any other is prechecked as before.
An edit, a rename-save or a new file changes the signature or the entry, so it is prechecked.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
import stat as stat_mod
from collections.abc import Mapping
from pathlib import Path

from nodwyn_retrieval.actors._stat import Sig
from nodwyn_retrieval.guard import Guard
from nodwyn_retrieval.guard.guard import DefaultGuard
from nodwyn_retrieval.store.manifest import Entry

__all__ = ["guard_fingerprint", "real_dirs", "vouched"]

_HEAD = operator.itemgetter(0)


def guard_fingerprint(guard: Guard) -> str:
    """A hash of what a :class:`DefaultGuard`'s precheck depends on; "" for any other guard.

    "" is never a match (:func:`vouched`): a guard whose rules cannot be read is prechecked whole.
    """
    if not isinstance(guard, DefaultGuard):
        return ""
    denylist = guard.denylist
    dirs = getattr(denylist, "_dirs", None)
    patterns = getattr(denylist, "patterns", None)
    if not isinstance(dirs, tuple) or not isinstance(patterns, tuple):
        return ""
    h = hashlib.sha256(b"nodwyn-guard-1\0")
    for part in (str(guard.root), *patterns, "\0dirs", *(f"{d}\0{w}" for d, w in dirs)):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def real_dirs(root: Path, dirs: set[str]) -> set[str]:
    """Those of dirs (relative, "" the root) that are real directories with real parents."""
    base = str(root) + os.sep
    lstat = os.lstat
    is_dir = stat_mod.S_ISDIR
    real: set[str] = {""}
    # Parents before children: a path sorts after its parent.
    for d in sorted(dirs):
        if not d or d.rpartition("/")[0] not in real:
            continue
        try:
            mode = lstat(base + d).st_mode
        except (OSError, ValueError):
            continue
        if is_dir(mode):
            real.add(d)
    return real


def vouched(
    root: Path,
    guard: Guard,
    fs: Mapping[str, Sig | None],
    entries: Mapping[str, Entry],
    *,
    fingerprint: str,
    manifest_guard: str,
) -> list[str]:
    """The listed paths whose precheck is known to allow them, by the rule of the module."""
    if not fingerprint or manifest_guard != fingerprint or not isinstance(guard, DefaultGuard):
        return []
    if os.path.realpath(root) != str(guard.root):
        return []
    same: list[str] = []
    get = entries.get
    for path, sig in fs.items():
        if sig is None:
            continue
        e = get(path)
        if e is not None and e.size == sig[0] and e.mtime_ns == sig[1] and e.inode == sig[2]:
            same.append(path)
    if not same:
        return []
    # Each file's directory, by C calls (this runs for every listed file of a new session).
    parents = list(map(_HEAD, map(str.rpartition, same, itertools.repeat("/"))))
    distinct = set(parents)
    wanted: set[str] = set()
    for parent in distinct:
        d = parent
        while d and d not in wanted:
            wanted.add(d)
            d = d.rpartition("/")[0]
    real = real_dirs(root, wanted)
    if real.issuperset(distinct):
        return same
    return [p for p, d in zip(same, parents, strict=True) if d in real]
