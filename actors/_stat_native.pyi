"""The refresher's stat of listed files, compiled (actors/_stat_native.c)."""

from collections.abc import Sequence

def lstat_all(base: str, paths: Sequence[str], /) -> list[tuple[int, int, int] | None]:
    """For each path, (size, mtime_ns, inode) when base + path is a regular file (links not
    followed), else None."""

def add_watches(fd: int, root: str, prefix: str, dirs: Sequence[str], mask: int, /) -> list[int]:
    """An inotify watch on each directory (root for "", prefix + dir otherwise); each one's watch
    descriptor, or minus the error number, stopping after the first error other than ENOENT and
    ENOTDIR."""
