"""Opening a file beneath a root without following a link at any component (ADR 0050 §2-§3).

A path checked and then opened by name can be changed in between: a directory on the way swapped
for a symbolic link to somewhere else, and ``O_NOFOLLOW`` guards only the last component. Every
read of a tree file goes through :class:`Beneath` instead, which never follows a link anywhere:

- on Linux 5.6 and later, one ``openat2`` call relative to the root's descriptor with
  ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``: the kernel resolves the whole
  path, refuses (``ELOOP``) a link at any component and (``EXDEV``) any step out of the root;
- elsewhere (an older kernel, or a sandbox whose seccomp filter answers ``ENOSYS`` or ``EPERM``),
  a walk of directory descriptors: each directory opened with ``O_DIRECTORY | O_NOFOLLOW``
  relative to its parent's descriptor, the file last with ``O_NOFOLLOW``. Each step names one
  entry of a directory already held open, so no later change of a name on the way can redirect
  it, and a link at that step is refused rather than followed.

Paths are relative POSIX paths as ``git ls-files`` lists them: an absolute path, an empty
component, ``.`` or ``..`` is refused before any call (:class:`OutsideRoot`).

Another process (a worker of the build) reads beneath the same root with :meth:`Beneath.reopen`
of the :class:`RootRef` the holder gives it: the root opened again by its path, and refused
(:class:`RootMoved`) unless it is the very directory the holder's descriptor names (the same
device and inode; the holder keeps its descriptor open, so that inode cannot be another's).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat as stat_mod
import threading
from dataclasses import dataclass

__all__ = [
    "Beneath",
    "LinkRefused",
    "OutsideRoot",
    "RootMoved",
    "RootRef",
    "clean_relative",
    "openat2_available",
]

# openat2(2) (Linux 5.6): struct open_how and the RESOLVE_* flags of <linux/openat2.h>.
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
# The syscall's number: 437 in the table every architecture added since 5.1 shares.
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437, "riscv64": 437, "ppc64le": 437,
                "s390x": 437, "armv7l": 437, "i686": 437, "i386": 437}  # fmt: skip
# What says "no openat2 here": absent (ENOSYS), refused by a sandbox's filter (EPERM), or a
# kernel that does not know the struct or a flag (E2BIG, EINVAL).
_UNAVAILABLE = frozenset({errno.ENOSYS, errno.EPERM, errno.E2BIG, errno.EINVAL})

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
# A FIFO or a device swapped in is not waited on (O_NONBLOCK) and never becomes a terminal.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY
# Directories kept open per Beneath by the walk; past this a walk opens and closes its own.
DIR_CACHE = 512


class OutsideRoot(OSError):
    """The path is not a clean relative path beneath the root (absolute, ``..``, empty)."""


class LinkRefused(OSError):
    """A component of the path is a symbolic link (or a step left the root): not followed."""


class RootMoved(OSError):
    """The directory at the root's path is no longer the one the holder of the root opened."""


@dataclass(frozen=True, slots=True)
class RootRef:
    """The root a :class:`Beneath` holds, as another process can open it again: its path, the
    device and inode of the directory its descriptor names, and whether its opens use openat2
    (False: the walk; a test forces it, and the other process follows)."""

    path: str
    dev: int
    ino: int
    openat2: bool


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_syscall = None
_state: dict[str, bool] = {}


def _libc_syscall() -> object | None:
    global _syscall  # noqa: PLW0603 - loaded once
    if _syscall is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.syscall
        except (OSError, AttributeError):
            return None
        fn.restype = ctypes.c_long
        _syscall = fn
    return _syscall


def _openat2(dirfd: int, path: str, flags: int) -> int:
    """One openat2 call; raises OSError with the kernel's errno."""
    number = _SYS_OPENAT2.get(platform.machine())
    fn = _libc_syscall()
    if number is None or fn is None:
        raise OSError(errno.ENOSYS, "openat2 is not known on this machine")
    how = _OpenHow(flags, 0, _RESOLVE)
    raw = os.fsencode(path)
    fd = fn(  # type: ignore[operator]
        ctypes.c_long(number),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(raw),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


def openat2_available() -> bool:
    """Whether this process can call openat2 (probed once: a kernel older than 5.6, another
    architecture or a seccomp filter says no)."""
    known = _state.get("openat2")
    if known is not None:
        return known
    ok = False
    if os.name == "posix" and _O_PATH:
        try:
            root = os.open("/", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        except OSError:
            root = -1
        if root >= 0:
            try:
                os.close(_openat2(root, ".", _O_PATH | _O_CLOEXEC))
                ok = True
            except OSError as e:
                ok = e.errno not in _UNAVAILABLE
            finally:
                os.close(root)
    _state["openat2"] = ok
    return ok


def clean_relative(path: str) -> bool:
    """A relative POSIX path of plain names: no leading ``/``, no empty, ``.`` or ``..`` part,
    no NUL."""
    if not path or path.startswith("/") or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _refuse(err: OSError, path: str) -> OSError:
    """ELOOP (a link at a component) and EXDEV (a step out of the root) as LinkRefused."""
    if err.errno in (errno.ELOOP, errno.EXDEV):
        return LinkRefused(err.errno, "a component is a link: not followed", path)
    return err


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat_mod.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


class Beneath:
    """Files opened beneath one root directory, never through a link. Thread-safe; close it.

    ``use_openat2``: None uses openat2 where the kernel has it; False forces the walk of
    directory descriptors (each directory held open is cached for the life of this object, up to
    :data:`DIR_CACHE`, so a build walks each directory once).
    """

    __slots__ = ("_busy", "_closing", "_dirs", "_lock", "_root_fd", "_use_openat2", "root")

    def __init__(self, root: str | os.PathLike[str], *, use_openat2: bool | None = None) -> None:
        self.root = os.fspath(root)
        self._root_fd = os.open(self.root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        self._use_openat2 = openat2_available() if use_openat2 is None else use_openat2
        self._dirs: dict[str, int] = {}
        self._lock = threading.Lock()
        self._busy = 0  # opens under way: close() waits for the last one to close descriptors
        self._closing = threading.Event()

    @classmethod
    def reopen(cls, ref: RootRef) -> Beneath:
        """The root ref names, opened again in this process (as its holder opens, openat2 or
        the walk, the walk where openat2 is not here); :class:`RootMoved` when the directory at
        its path is not the one the holder's descriptor names (renamed, replaced, a link
        swapped in on the path to it)."""
        tree = cls(ref.path, use_openat2=ref.openat2 and openat2_available())
        st = os.fstat(tree._root_fd)
        if (st.st_dev, st.st_ino) != (ref.dev, ref.ino):
            tree.close()
            raise RootMoved(errno.ESTALE, "the root is no longer the directory opened", ref.path)
        return tree

    def ref(self) -> RootRef:
        """What another process needs to read beneath this same root (:meth:`reopen`)."""
        with self._lock:
            if self._closing.is_set():
                raise ValueError("Beneath is closed")
            st = os.fstat(self._root_fd)
        return RootRef(self.root, st.st_dev, st.st_ino, self._use_openat2)

    @property
    def uses_openat2(self) -> bool:
        """Whether opens go through openat2 (False: the walk of directory descriptors)."""
        return self._use_openat2

    def close(self) -> None:
        """Close the root's descriptor and every cached directory's; idempotent. An open under
        way in another thread finishes first: its descriptors are closed when it is done."""
        with self._lock:
            self._closing.set()
            if self._busy:
                return
            fds = self._take_fds()
        self._close_fds(fds)

    def _take_fds(self) -> list[int]:
        fds = [*self._dirs.values(), self._root_fd]
        self._dirs.clear()
        self._root_fd = -1
        return fds

    @staticmethod
    def _close_fds(fds: list[int]) -> None:
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        how = "openat2" if self._use_openat2 else "walk"
        return f"<Beneath {self.root!r} {how} dirs={len(self._dirs)}>"

    # -- opening ---------------------------------------------------------------------------

    def open(self, path: str, flags: int = _FILE_FLAGS) -> int:
        """A descriptor of path beneath the root, opened with flags (``O_NOFOLLOW`` added).

        Raises :class:`OutsideRoot` for a path that is not clean and relative,
        :class:`LinkRefused` when a component is a link, and the ``OSError`` of the open
        otherwise (``FileNotFoundError``, ``NotADirectoryError``, ``PermissionError``...).
        """
        if not clean_relative(path):
            raise OutsideRoot(errno.EXDEV, "not a clean path beneath the root", path)
        flags |= os.O_NOFOLLOW | _O_CLOEXEC
        with self._lock:
            if self._closing.is_set():
                raise ValueError("Beneath is closed")
            self._busy += 1
        try:
            if self._use_openat2:
                try:
                    return _openat2(self._root_fd, path, flags)
                except OSError as e:
                    raise _refuse(e, path) from None
            return self._walk_open(path, flags)
        finally:
            fds: list[int] = []
            with self._lock:
                self._busy -= 1
                if self._closing.is_set() and not self._busy and self._root_fd >= 0:
                    fds = self._take_fds()
            self._close_fds(fds)

    def _walk_open(self, path: str, flags: int) -> int:
        head, _, name = path.rpartition("/")
        parent, owned = self._dir_fd(head)
        try:
            return os.open(name, flags, dir_fd=parent)
        except OSError as e:
            raise _refuse(OSError(e.errno, e.strerror, path), path) from None
        finally:
            if owned:
                os.close(parent)

    def _dir_fd(self, rel_dir: str) -> tuple[int, bool]:
        """The descriptor of rel_dir ("" is the root), and whether the caller must close it.

        Each directory is opened from its parent's descriptor, from the nearest one held down:
        a loop, not a call a level (a clone's tree 1,400 directories deep passed Python's
        recursion limit, and its files were never read)."""
        chain: list[str] = []  # the directories to open, the deepest first
        d = rel_dir
        with self._lock:
            held = self._dirs.get(d) if d else None
            while d and held is None:
                chain.append(d)
                d = d.rpartition("/")[0]
                held = self._dirs.get(d) if d else None
            parent = held if held is not None else self._root_fd
        owned = False
        for d in reversed(chain):
            name = d.rpartition("/")[2]
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except OSError as e:
                err = e
                # O_DIRECTORY | O_NOFOLLOW answers ENOTDIR for a link: say which it was.
                if e.errno == errno.ENOTDIR and _is_link(name, parent):
                    err = OSError(errno.ELOOP, e.strerror)
                if owned:
                    os.close(parent)
                raise _refuse(OSError(err.errno, err.strerror, d), d) from None
            if owned:
                os.close(parent)
            parent, owned = fd, True
            with self._lock:
                if len(self._dirs) < DIR_CACHE:
                    kept = self._dirs.setdefault(d, fd)
                    if kept != fd:  # another thread opened it first
                        os.close(fd)
                    parent, owned = kept, False
        return parent, owned

    def open_dir(self, path: str) -> int:
        """A descriptor of the directory at path ("" is the root itself), reached without a
        link; the caller closes it."""
        if path == "":
            with self._lock:
                if self._closing.is_set():
                    raise ValueError("Beneath is closed")
                return os.dup(self._root_fd)
        return self.open(path, os.O_RDONLY | _O_DIRECTORY)

    # -- reading -------------------------------------------------------------------------

    def read(self, path: str, limit: int) -> bytes:
        """At most limit bytes of the regular file at path (raises as :meth:`open` does, and
        ``IsADirectoryError`` for anything but a regular file)."""
        fd = self.open(path)
        try:
            if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
            os.set_blocking(fd, True)
            parts: list[bytes] = []
            left = limit
            while left > 0:
                piece = os.read(fd, min(left, 1 << 20))
                if not piece:
                    break
                parts.append(piece)
                left -= len(piece)
            return b"".join(parts)
        finally:
            os.close(fd)

    def stat(self, path: str) -> os.stat_result:
        """The status of path itself, reached without a link (an ``O_PATH`` open: nothing is
        read and a device or FIFO is not opened)."""
        fd = self.open(path, _O_PATH if _O_PATH else os.O_RDONLY | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if stat_mod.S_ISLNK(st.st_mode):  # O_PATH | O_NOFOLLOW opens a link itself
            raise LinkRefused(errno.ELOOP, "a component is a link: not followed", path)
        return st
