"""A refresh's plan before it reads anything, the full scan's state between refreshes, and the §2
limits they keep (actors/refresher.py makes and uses them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nodwyn_retrieval.actors._listing import Listing
from nodwyn_retrieval.actors._stat import Sig
from nodwyn_retrieval.actors._work import MAX_FILE_BYTES
from nodwyn_retrieval.actors.messages import FileStat
from nodwyn_retrieval.store.manifest import Entry

__all__ = ["MAX_TREE_BYTES", "MAX_TREE_FILES", "Limits", "Plan", "Scan", "dirs_of"]

MAX_TREE_FILES = 20_000  # §2: a tree indexes at most 20,000 files
MAX_TREE_BYTES = 128 << 20  # §2: and 128 MiB of text


@dataclass(frozen=True, slots=True)
class Limits:
    """The §2 limits; tests lower them."""

    files: int = MAX_TREE_FILES
    bytes: int = MAX_TREE_BYTES
    file_bytes: int = MAX_FILE_BYTES


@dataclass
class Plan:
    """What a refresh will do before it reads anything."""

    to_read: list[FileStat] = field(default_factory=list)
    drop: dict[str, Entry | None] = field(default_factory=dict)
    skipped: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("binary", "too_large", "not_utf8", "over_limit", "denied"), 0
        )
    )
    over: bool = False
    not_seen: int = 0
    """Listed names not compared with the manifest yet (the full scan stopped at the deadline);
    when the listing itself did not finish, the manifest's entries, which were not checked."""
    unseen_from: str | None = None
    """The first name not compared, when the scan stopped between two names."""


@dataclass
class Scan:
    """A full comparison of the tree with the manifest, made in steps that stop at a deadline.

    A refresh that runs out of time in it keeps it, with what it has listed, stat-ed and compared,
    and the next refresh goes on from there: what was compared was read or dropped by the refresh
    that compared it, what was not is said as not seen yet. The watch, set when the listing is
    complete, says which of the names compared already changed since (they are looked at again);
    when it cannot say, the scan is finished as it is and the next refresh lists the tree again.
    """

    listing: Listing | None  # None: the names and their stats are given
    names: list[str] = field(default_factory=list)  # the listing, sorted, once complete
    given: dict[str, Sig | None] | None = None  # the stats, when given
    at: int = 0  # names[:at] are stat-ed and compared
    fs: dict[str, Sig | None] = field(default_factory=dict)
    keep: set[str] = field(default_factory=set)  # the files the index holds, of names[:at]
    n_bytes: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: Plan().skipped)
    over: bool = False
    stale: bool = False  # what the watch cannot account for happened during the scan
    to_watch: list[str] = field(default_factory=list)  # directories to watch before the stats
    watched: int = 0  # of them, watched
    calls: int = 0


def dirs_of(paths: list[str]) -> set[str]:
    """Every directory holding a listed file, and their parents up to the root ("")."""
    dirs = {""}
    for p in paths:
        d = p.rpartition("/")[0]
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    return dirs
