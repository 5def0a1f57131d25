"""What changed in a working tree since the last look, from inotify, with no background task.

§5 has every search compare each listed file's size, time and inode with the manifest. Listing and
stat-ing a whole tree costs 25 ms for sympy's 2,000 files and about 85 ms for 12,000, more than the
rest of a search. A :class:`TreeWatch` holds an inotify descriptor with a watch on each directory of
the tree; at a refresh the refresher drains the events queued since the last one (a non-blocking
read: nothing runs between searches, so nothing indexes in the background) and learns which paths
were touched.

The watch only ever narrows the work, never decides alone: any event it cannot account for exactly
(a directory created, moved or removed, a queue overflow, a watch that could not be added, an event
on the git directory) answers "unknown", and the refresher lists and stats the whole tree as §5
says. Elsewhere than Linux there is no watch, and every refresh is a full one.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from nodwyn_retrieval.actors._stat import add_watches

__all__ = ["Changes", "TreeWatch", "available"]

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000

_MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
)  # fmt: skip
_EVENT = struct.Struct("iIII")


@functools.cache
def _lib() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    # The C library the interpreter runs with holds inotify (glibc and musl): its symbols are
    # found without ctypes.util.find_library, which runs ldconfig in a new process (3 to 10 ms of
    # a new session's first search). Only a build that does not export them looks further.
    lib = _inotify(None)
    return lib if lib is not None else _inotify(ctypes.util.find_library("c") or "libc.so.6")


def _inotify(name: str | None) -> ctypes.CDLL | None:
    """The C library of that name (None: the interpreter's own symbols), if it has inotify."""
    try:
        lib = ctypes.CDLL(name, use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return lib


def available() -> bool:
    """Whether this system has inotify."""
    return _lib() is not None


@dataclass
class Changes:
    """What the queued events say."""

    unknown: bool = False
    """The events cannot be accounted for: list and stat the whole tree."""
    touched: set[str] = field(default_factory=set)
    """Files (relative paths) written, touched, created, removed or renamed."""
    created: set[str] = field(default_factory=set)
    """Of those, the names that appeared (a create or a rename into a directory)."""


class TreeWatch:
    """An inotify descriptor watching a set of directories under one root."""

    def __init__(self, root: Path, git_dir: Path | None = None) -> None:
        lib = _lib()
        if lib is None:
            raise OSError(errno.ENOSYS, "inotify is not available")
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self._lib = lib
        self.fd = fd
        self.root = root
        self._prefix = str(root) + os.sep
        self._wd: dict[int, str] = {}  # watch descriptor -> directory relative to root ("" = root)
        self._dirs: set[str] = set()
        self.git_dir = git_dir
        self._git_wds: set[int] = set()
        self.broken = False
        if git_dir is not None:
            for d in (git_dir, git_dir / "info"):
                wd = self._add(str(d))
                if wd is None:
                    self.broken = True
                else:
                    self._git_wds.add(wd)

    def __repr__(self) -> str:
        state = "broken" if self.broken else "watching"
        return f"<TreeWatch {state} {len(self._dirs)} directories of {str(self.root)!r}>"

    def _add(self, path: str) -> int | None:
        wd = int(self._lib.inotify_add_watch(self.fd, os.fsencode(path), _MASK))
        return None if wd < 0 else wd

    def watch_dirs(self, dirs: Iterable[str]) -> bool:
        """Watch each directory (relative to root, "" for the root); False if one could not be."""
        todo = list(dict.fromkeys(d for d in dirs if d not in self._dirs))
        if add_watches is not None:  # compiled: the system calls without the GIL
            wds = add_watches(self.fd, str(self.root), self._prefix, todo, _MASK)
        else:
            wds = self._add_each(todo)
        for d, wd in zip(todo, wds, strict=False):
            if wd < 0:
                if -wd in (errno.ENOENT, errno.ENOTDIR):
                    continue  # gone already: its parent's events say so
                self.broken = True  # the system's limit of watches (ENOSPC), or no permission
                return False
            self._wd[wd] = d
            self._dirs.add(d)
        return True

    def _add_each(self, dirs: list[str]) -> list[int]:
        """What ``add_watches`` gives, through ctypes: each watch descriptor or minus the error
        number, stopping after the first error other than ENOENT and ENOTDIR."""
        out: list[int] = []
        for d in dirs:
            wd = self._add(self._prefix + d if d else str(self.root))
            if wd is not None:
                out.append(wd)
                continue
            err = ctypes.get_errno()
            out.append(-err)
            if err not in (errno.ENOENT, errno.ENOTDIR):
                break
        return out

    def drain(self) -> Changes:
        """Read every queued event; what they say changed."""
        ch = Changes(unknown=self.broken)
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                ch.unknown = True
                self.broken = True
                break
            if not buf:
                break
            self._parse(buf, ch)
        return ch

    def _parse(self, buf: bytes, ch: Changes) -> None:
        i = 0
        n = len(buf)
        while i + _EVENT.size <= n:
            wd, mask, _cookie, length = _EVENT.unpack_from(buf, i)
            raw = buf[i + _EVENT.size : i + _EVENT.size + length].rstrip(b"\0")
            i += _EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                ch.unknown = True
                continue
            if wd in self._git_wds:
                # The index or the excludes changed: what git lists may have changed.
                name = raw.decode("utf-8", "surrogateescape")
                if name in ("index", "exclude", "info") or mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                    ch.unknown = True
                continue
            d = self._wd.get(wd)
            if d is None:
                continue
            if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                ch.unknown = True
                self._dirs.discard(d)
                self._wd.pop(wd, None)
                continue
            if mask & IN_ISDIR:
                ch.unknown = True  # a directory came, went or moved
                continue
            name = raw.decode("utf-8", "surrogateescape")
            rel = f"{d}/{name}" if d else name
            if name == ".gitignore":
                ch.unknown = True
            ch.touched.add(rel)
            if mask & (IN_CREATE | IN_MOVED_TO):
                ch.created.add(rel)

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()
