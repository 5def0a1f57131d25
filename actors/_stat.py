"""The refresher's stat of listed files: one call for a part of the listing, plain values back.

:func:`lstat_all` gives, for each path under the root, its signature ``(size, mtime_ns, inode)``
when it is a regular file (``lstat``: a link is not followed), and None when it is gone, is not a
regular file (a link, a directory, a FIFO), cannot be stat-ed, or cannot be a path at all (a NUL
in it, a name the file system's encoding cannot hold). §5 compares these with the manifest.

The compiled path (``actors/_stat_native.c``, built by ``pip install .`` where a C compiler is
found) makes the system calls without holding the GIL, so the snapshot's load runs beside it, and
makes no ``os.stat_result`` per file. The Python path, taken when the extension is not built or
``NODWYN_RETRIEVAL_PURE_PYTHON`` is set (not to ``0``), gives the same answers.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Callable, Sequence
from typing import Final

from nodwyn_retrieval.retrieval.chunks import pure_python

__all__ = ["NATIVE", "Sig", "add_watches", "lstat_all", "lstat_all_python"]

Sig = tuple[int, int, int]
"""A listed file's size, modification time in nanoseconds and inode, as ``os.lstat`` gives them."""


def lstat_all_python(base: str, paths: Sequence[str]) -> list[Sig | None]:
    """The Python path of :func:`lstat_all`: ``base`` ends with the separator."""
    out: list[Sig | None] = []
    append = out.append
    lstat = os.lstat
    is_reg = stat_mod.S_ISREG
    for p in paths:
        try:
            st = lstat(base + p)
        except (OSError, ValueError):
            append(None)
            continue
        append((st.st_size, st.st_mtime_ns, st.st_ino) if is_reg(st.st_mode) else None)
    return out


_native: Callable[[str, Sequence[str]], list[Sig | None]] | None
add_watches: Callable[[int, str, str, Sequence[str], int], list[int]] | None
"""``add_watches(fd, root, prefix, dirs, mask)``, compiled: an inotify watch on each directory
(``root`` for "", ``prefix + dir`` otherwise); each one's watch descriptor, or minus the error
number, stopping after the first error other than ENOENT and ENOTDIR. None without the extension
(actors/_watch.py then makes the same calls through ctypes)."""
try:  # built by `pip install .` where a C compiler is found; the Python path otherwise
    from nodwyn_retrieval.actors._stat_native import add_watches
    from nodwyn_retrieval.actors._stat_native import lstat_all as _native
except ImportError:  # pragma: no cover - depends on how the package was installed
    _native = add_watches = None
if pure_python():
    _native = add_watches = None

NATIVE: Final[bool] = _native is not None
"""Whether :func:`lstat_all` runs the compiled path."""

lstat_all: Final[Callable[[str, Sequence[str]], list[Sig | None]]] = (
    _native if _native is not None else lstat_all_python
)
"""``lstat_all(base, paths)``: each path's :data:`Sig` under ``base`` (which ends with the
separator), or None (module docstring)."""
