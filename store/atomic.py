"""Atomic writes and locks: a process killed at any instant leaves a file the next one can use.

§4: a manifest "is updated as a policy file is: under a lock beside it, written to a temporary file
and renamed into place". Every file this package writes goes through :func:`write_atomic`, so a
reader sees the old bytes or the new bytes, never a mix; and every file two processes could write
at once is written under :func:`file_lock`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nodwyn_retrieval.errors import FormatError, StoreError

if TYPE_CHECKING:
    import filelock

__all__ = [
    "TEMP_SUFFIX",
    "clear_in_way",
    "file_lock",
    "open_stored",
    "open_without_waiting",
    "read_stored",
    "store_error",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"
"""Temporary files are ``.<name>.<random>.tmp`` beside their target; a collection may delete
one left behind by a killed process once it is old."""

_REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOENT: "a directory on the way is missing",
    errno.ENOTDIR: "a path on the way is not a directory",
    errno.EISDIR: "it is a directory",
    errno.EIO: "input/output error",
}


def store_error(action: str, path: Path | str, exc: OSError) -> StoreError:
    """A :class:`StoreError` that names what failed and where, e.g. "no space left on device
    writing /x/y". ``action`` is a verb in -ing form ("writing", "reading", "removing")."""
    reason = _REASONS.get(exc.errno or 0)
    if reason is None:
        reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    return StoreError(f"{reason} {action} {path}")


def open_without_waiting(path: Path | str, *, follow: bool = True) -> tuple[int, int]:
    """A descriptor of path opened for reading, and its mode, without waiting on what is no
    file: a FIFO or a device's ``open`` (or its first read) may wait for ever, so it is opened
    without blocking, and the caller decides what a mode other than a regular file's means.
    Unless follow, not through a link in its last component. Raises what ``os.open`` and
    ``os.fstat`` raise (the descriptor then closed)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    try:
        return fd, os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise


def open_stored(path: Path | str, what: str) -> int:
    """A stored file opened for reading (a descriptor), without waiting on what is no file.

    Only this package writes the data directory, and always a regular file, renamed into place;
    anything else found where one belongs is damage: a directory, a link loop, or a FIFO or a
    device, whose ``open`` or first read would wait for ever. Each is a :class:`FormatError`
    naming ``what`` ("manifest"), so its reader rebuilds it. FileNotFoundError when there is
    none; StoreError when it cannot be opened (a permission)."""
    try:
        fd, mode = open_without_waiting(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.ENOTDIR):
            raise FormatError(f"{what} {path} is not a file ({exc.strerror}): rebuild") from None
        raise store_error("reading", path, exc) from exc
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise FormatError(f"{what} {path} is {kind}: rebuild")
    return fd


def read_stored(path: Path | str, what: str) -> bytes:
    """A stored file's bytes, read whole (:func:`open_stored`'s refusals apply). One that claims
    more bytes than this process can hold (a size no write of this package made) is a
    :class:`FormatError` too, not a ``MemoryError`` out of the read."""
    fd = open_stored(path, what)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except MemoryError:
        raise FormatError(f"{what} {path} is too large to read: rebuild") from None
    except OSError as exc:
        raise store_error("reading", path, exc) from exc
    finally:
        os.close(fd)


def clear_in_way(path: Path | str) -> None:
    """Remove what is at a stored file's path when it is no regular file (the damage
    :func:`open_stored` refuses: a directory, a FIFO, a link), so that the file can be written
    there again; a regular file, or nothing, is left as it is. Only this package writes the data
    directory, so nothing found there is anyone's to keep. Fails quietly: the write that follows
    says what is still in the way."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def write_atomic(path: Path, data: bytes | Sequence[bytes], *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, whole.
    ``data`` may be given in pieces (a sequence of bytes), written one after the other: a large
    file is then never joined into one buffer first. A ``bytearray`` or a ``memoryview`` is one
    piece, as ``bytes`` is.

    A uniquely named temporary file beside ``path`` is written, flushed, fsync'ed and renamed over
    it with :func:`os.replace`. Parent directories are created. An existing file's permission bits
    are kept (a person's ``workspaces.toml``); a new file gets the owner's read and write only,
    as the index lives "under the same protection" as the logs (§3).

    ``sync=False`` skips the fsync: still atomic against a killed process, but a power cut may
    leave an empty or partial file. Only for files a reader validates and rebuilds (the chunk
    store), where thousands of fsyncs would cost more than the rebuild they avoid.

    On any :class:`OSError` the temporary file is removed and :class:`errors.StoreError` raised,
    naming the path and the reason ("no space left on device writing <path>").
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise store_error("writing", path, exc) from exc
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        raise store_error("writing", path, exc) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                f.write(piece)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise store_error("writing", path, exc) from exc


def file_lock(path: Path, timeout: float = 30) -> filelock.BaseFileLock:
    """An inter-process lock on the file ``path`` (created with its parent directories).

    Use it as a context manager. Not acquiring it within ``timeout`` seconds raises
    :class:`filelock.Timeout`, a :class:`TimeoutError`. The lock file itself is never removed:
    removing it while another process waits on it would let two processes hold "the" lock.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise store_error("locking", path, exc) from exc
    # Imported here: a worker writing packs never takes a lock, nor pays for the import.
    import filelock  # noqa: PLC0415

    return filelock.FileLock(str(path), timeout=timeout)
