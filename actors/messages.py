"""The messages the actors exchange: commands named as verbs, facts named as what happened.

Each is a frozen, slotted dataclass; nothing mutable crosses a mailbox except the dictionaries
listed as such, which the sender hands over and never touches again.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FileStat",
    "Forget",
    "IndexFiles",
    "IndexedFiles",
    "Refresh",
    "Refreshed",
    "SaveSnapshot",
    "SearchOutput",
    "SearchTree",
    "ToolOutput",
    "TreeFound",
    "TreeSearched",
    "UpdateOutput",
    "utf8_text",
]


@dataclass(frozen=True, slots=True)
class FileStat:
    """What the refresher knows of a listed file without reading it."""

    path: str
    """Relative to the root, as listed."""
    size: int
    """Bytes, from lstat."""
    mtime_ns: int
    """Modification time in nanoseconds."""
    inode: int
    """The inode: a file replaced by another of the same size and time still differs."""


# -- refresher ------------------------------------------------------------------------------


@dataclass(slots=True)
class Progress:
    """How far one refresh has gone, for a progress display (the command line's bar).

    The refresher fills in what it is to read once it has listed the tree; the indexer counts
    each of those files once it is handled: read and analysed, or refused, gone or too large.
    Shared within the process and read from any thread; nothing in it decides anything."""

    planned: bool = False
    """The tree is listed and the files to read are known."""
    to_read: int = 0
    """Files to read in this call."""
    bytes_to_read: int = 0
    """Their size."""
    read: int = 0
    """Files handled so far."""
    bytes_read: int = 0
    """Bytes read so far."""
    started: float = 0.0
    """``time.monotonic()`` when reading began."""

    def plan(self, files: int, nbytes: int) -> None:
        self.to_read, self.bytes_to_read = files, nbytes
        self.started = time.monotonic()
        self.planned = True

    def advance(self, nbytes: int) -> None:
        self.read += 1
        self.bytes_read += nbytes


@dataclass(frozen=True, slots=True)
class Refresh:
    """Bring the tree's index up to date (§5)."""

    deadline: float
    """Event loop time past which no read starts: 10 s into a search, 60 s into an update."""
    directory: str | None = None
    """index-update PATH with a directory: walk it whole, ignored files included."""
    update: bool = False
    """An index-update (it records its summary even when nothing changed)."""
    progress: Progress | None = None
    """Filled in as the refresh goes, for a progress display."""
    query: str | None = None
    """The search this refresh is for: the files it is likeliest to need are read first."""


@dataclass(frozen=True, slots=True)
class Forget:
    """Drop a file from the manifest: a live read of it was refused (§3)."""

    path: str
    """The file."""


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What a refresh did; the summary an update prints and the header a search shows."""

    files: int
    """Files the index holds now."""
    read: int
    """Files read (changed or new)."""
    unchanged: int
    """Listed files whose size, time and inode matched the manifest."""
    removed: int
    """Files dropped from the index (gone, or refused now)."""
    skipped: dict[str, int]
    """Counts by reason: binary, too_large, not_utf8, over_limit."""
    refused: tuple[str, ...]
    """Files the guard refused (named, never indexed as empty)."""
    left_out_unasked: tuple[str, ...]
    """Files the guard would have asked about: left out, not asked (§3)."""
    not_read: int
    """Changed files not read again before the deadline."""
    partial: bool
    """The index does not hold the whole tree: over a limit, or not everything was read in time."""
    over_limit: bool
    """The tree passed 20,000 files or 128 MiB of text (§2)."""
    seconds: float
    """How long the refresh took."""
    bytes: int
    """Bytes of text read."""
    saved: bool = True
    """Whether the manifest was written (not on a full disk: the search answers from memory)."""
    store_error: str | None = None
    """Why the index could not be saved, when it could not."""
    rebuilt: int = 0
    """Stored entries found corrupt, foreign or of another version and rebuilt."""
    not_seen: int = 0
    """Listed files not yet compared with the index: the listing and comparison of a big tree
    stopped at the deadline, and the next refresh goes on from there. When the listing itself
    did not finish, the files the index holds, which were not checked."""


# -- indexer --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexFiles:
    """Make the in-memory index match the manifest's keys, then read and index files."""

    target: dict[str, str] | None
    """Every file the manifest holds, path to content key, before this refresh's reads; None
    when the indexer already holds the manifest's last state."""
    read: tuple[FileStat, ...]
    """Files to read (changed or new), in path order."""
    deadline: float
    """No read starts past this event loop time."""
    drop: tuple[str, ...] = ()
    """Files to take out of the index (gone, or refused now)."""
    progress: Progress | None = None
    """Counts each file of ``read`` as it is handled, for a progress display."""


@dataclass(frozen=True, slots=True)
class TreeFound:
    """The outcome of one file the indexer was asked to read."""

    stat: FileStat
    """The file as listed."""
    key: str | None
    """Its content key when indexed."""
    skip: str | None
    """binary, not_utf8, too_large, refused, unasked or gone (deleted, or no longer a file)."""
    text_bytes: int = 0
    """Bytes of text read."""


@dataclass(frozen=True, slots=True)
class IndexedFiles:
    """What the indexer did with an IndexFiles."""

    found: tuple[TreeFound, ...]
    """One per file read before the deadline."""
    missing: tuple[str, ...]
    """Files of the target whose stored chunks were gone or unreadable: read them again."""
    rebuilt: int = 0
    """Stored records found damaged (and dropped)."""
    store_error: str | None = None
    """The first error writing the chunk store, if any (a full disk)."""
    not_loaded: tuple[str, ...] = ()
    """Files of the target whose stored records were not loaded before the deadline (a new
    session's first refresh): not in the index yet; the next refresh with a target goes on."""


@dataclass(frozen=True, slots=True)
class SearchTree:
    """Rank the tree's chunks and read the results live (§6, §7)."""

    query: str
    """The query as given."""
    limit: int
    """How many results, 1 to 20."""
    path: str | None = None
    """A file or directory, relative to the root, to narrow to."""


@dataclass(frozen=True, slots=True)
class TreeSearched:
    """The results of a SearchTree, read from the files now."""

    results: tuple[object, ...]
    """retrieval.render.RepoResult values, best first."""
    chunks: int
    """Chunks ranked."""
    files: int
    """Files ranked."""
    refused: str | None = None
    """A live read the guard refused: the answer is that refusal (§3)."""
    refusal: str | None = None
    """The guard's reason."""
    gone: tuple[str, ...] = field(default_factory=tuple)
    """Results left out because their lines are gone."""
    matched: int = 0
    """Chunks that hold at least one of the query's words (within the path, when given)."""


@dataclass(frozen=True, slots=True)
class SaveSnapshot:
    """Write the tree's whole index to the store, so a new session loads instead of rebuilding."""

    deadline: float | None = None
    """Event loop time by which it must be done; not written when it would not be (None: now)."""


# -- what the engine answers ---------------------------------------------------------------

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """text as UTF-8 can carry it: each lone surrogate (a name's byte that is not UTF-8, or an
    event's ``"\\udcff"`` escape, which JSON allows) shown as that escape, ``\\udcff``, and the
    rest as it is. A model's API, a JSON line of MCP and a terminal encode what they send as
    UTF-8, which has no lone surrogate: one would fail there, after the tool has answered."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


@dataclass(frozen=True, slots=True)
class SearchOutput:
    """What index-search answers."""

    scope: str
    """repo, conversation or earlier."""
    query: str
    """The query as given."""
    text: str
    """Exactly what the model reads."""
    header: dict[str, Any]
    """The header's figures: chunks or events ranked, files, partial, not_read, and its text."""
    hits: list[dict[str, Any]]
    """Structured results (CLI.md's JSON)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", utf8_text(self.text))

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "query": self.query,
            "header": self.header,
            "results": self.hits,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class UpdateOutput:
    """What index-update answers."""

    text: str
    """What the model reads."""
    summary: dict[str, Any]
    """CLI.md's JSON of an update."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", utf8_text(self.text))

    def to_json(self) -> dict[str, Any]:
        return dict(self.summary)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool call's result as an agent loop hands it to the model."""

    text: str
    """The text the model reads."""
    is_error: bool = False
    """Whether the call failed (bad arguments, a refusal, a disabled scope)."""
    provenance: str = "external:file"
    """external:file for the repository, external:log for the conversation and earlier tasks."""
    data: dict[str, Any] = field(default_factory=dict)
    """The structured form (the command line's JSON)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", utf8_text(self.text))
