"""What kind of file a path is, from the path alone, and how much a search trusts each kind.

A repository holds its code and much beside it: tests, documentation, examples, change logs,
issue templates and CI files, lock and requirements files, generated and vendored files, and
older copies of the code kept for compatibility. A query that does not ask for one of those means
the code, and a file of another kind that matches it as well is usually a use or a mention of what
the query means: the ranking multiplies a file's score by its kind's *prior* (:data:`PRIORS`)
unless the query names the kind ("the tests of the parser", "docs for ..."), and a fresh tree's
first search reads the source first (:func:`read_order`).

Everything is decided from the path's own words and the conventions of languages and tools
(``tests/``, ``test_*.py``, ``*_test.go``, ``*.spec.ts``, ``docs/``, ``*.md``, ``vendor/``,
``*.lock``, a dot-directory such as ``.github/``), never from a list of projects' names. One rule
looks at the tree as a whole: of sibling directories named by a version (``v1``, ``v2``, ``v3``)
the highest is current and the others are older copies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from nodwyn_retrieval.retrieval.words import stem, words

__all__ = [
    "KINDS",
    "LIFT_WORDS",
    "PRIORS",
    "file_kind",
    "in_version",
    "kind_markers",
    "kinds_of",
    "legacy_dirs",
    "lifted_kinds",
    "read_order",
    "versions_named",
]

KINDS = (
    "code", "other", "data", "doc", "example", "test", "legacy", "changelog", "meta", "deps",
    "generated", "vendored",
)  # fmt: skip
"""Every kind, "code" first."""

PRIORS: Mapping[str, float] = {
    "code": 1.0,
    "other": 0.8,
    "data": 0.6,
    "doc": 0.5,
    "example": 0.5,
    "test": 0.5,
    "legacy": 0.5,
    "changelog": 0.3,
    "meta": 0.3,
    "deps": 0.3,
    "generated": 0.3,
    "vendored": 0.3,
}
"""A file's score is multiplied by its kind's prior unless the query names the kind."""

_CODE_EXT = frozenset(
    [
        "py",
        "pyi",
        "pyx",
        "go",
        "rs",
        "c",
        "h",
        "cc",
        "cpp",
        "cxx",
        "hpp",
        "hh",
        "hxx",
        "java",
        "kt",
        "kts",
        "scala",
        "groovy",
        "ts",
        "tsx",
        "js",
        "jsx",
        "mjs",
        "cjs",
        "rb",
        "php",
        "cs",
        "fs",
        "swift",
        "m",
        "mm",
        "sh",
        "bash",
        "zsh",
        "fish",
        "ps1",
        "lua",
        "pl",
        "pm",
        "r",
        "jl",
        "ex",
        "exs",
        "erl",
        "hrl",
        "hs",
        "ml",
        "mli",
        "clj",
        "cljs",
        "dart",
        "vue",
        "svelte",
        "zig",
        "nim",
        "sql",
        "el",
        "vim",
        "f",
        "f90",
        "cu",
        "proto",
        "graphql",
    ]
)
_PROSE_EXT = frozenset(
    [
        "md",
        "markdown",
        "rst",
        "txt",
        "adoc",
        "asciidoc",
        "texi",
        "tex",
        "org",
        "pod",
        "rdoc",
        "1",
        "3",
        "5",
        "7",
    ]
)
_DATA_EXT = frozenset(
    [
        "json",
        "jsonc",
        "json5",
        "yml",
        "yaml",
        "toml",
        "cfg",
        "ini",
        "conf",
        "xml",
        "csv",
        "tsv",
        "svg",
        "plist",
        "properties",
        "env",
        "lock",
        "sum",
        "snap",
        "pickle",
    ]
)

# Directory names (whole path components, lowercased) of each kind.
_DIRS: dict[str, frozenset[str]] = {
    "vendored": frozenset(
        [
            "vendor",
            "vendored",
            "third_party",
            "third-party",
            "thirdparty",
            "node_modules",
            "bower_components",
        ]
    ),
    "generated": frozenset(["generated", "__generated__", "dist"]),
    "deps": frozenset(["requirements"]),
    "changelog": frozenset(
        ["changelog", "changelogs", "changes", "releases", "release-notes", "whatsnew"]
    ),
    "test": frozenset(
        [
            "test",
            "tests",
            "testing",
            "spec",
            "specs",
            "__tests__",
            "__test__",
            "testdata",
            "test_data",
            "testsuite",
            "fixtures",
            "e2e",
        ]
    ),
    "example": frozenset(
        [
            "example",
            "examples",
            "sample",
            "samples",
            "demo",
            "demos",
            "tutorial",
            "tutorials",
            "cookbook",
        ]
    ),
    "legacy": frozenset(["legacy", "deprecated", "obsolete", "old"]),
    "doc": frozenset(["doc", "docs", "documentation", "man", "manual"]),
}
_CHANGELOG_NAMES = frozenset(
    [
        "changelog",
        "changes",
        "history",
        "news",
        "releases",
        "release-notes",
        "release_notes",
        "whatsnew",
    ]
)
_LOCK_NAMES = frozenset(
    [
        "package-lock.json",
        "npm-shrinkwrap.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "go.sum",
        "cargo.lock",
        "poetry.lock",
        "pipfile.lock",
        "gemfile.lock",
        "composer.lock",
        "uv.lock",
    ]
)
_TEST_FILE = re.compile(
    r"^(?:test_.*|.*_tests?\.\w+|.*\.(?:test|spec)\.\w+|tests?\.\w+|conftest\.py"
    r"|.*(?:Test|Tests|Spec)\.(?:java|kt|scala|cs|swift|groovy|php))$"
)
_GENERATED_FILE = re.compile(
    r"^.*(?:\.min\.(?:js|css)|_pb2(?:_grpc)?\.py|\.pb\.go|\.pb\.(?:cc|h)|[._]generated\.\w+"
    r"|\.g\.dart|\.designer\.cs)$"
)
_REQUIREMENTS_FILE = re.compile(r"^(?:.*requirements.*\.(?:txt|in|ya?ml)|constraints.*\.txt)$")
_VERSION_DIR = re.compile(r"^v(\d+)$")
# A file named with a release's version (widget-2.4.1.js, lib_2.0.min.css) is a copy of another
# project's release.
_RELEASE_COPY = re.compile(r"^[a-z][\w.-]*?[-_.]v?\d+\.\d+(?:\.\d+)*(?:[-.](?:min|slim))*\.\w+$")

# The words a query uses to name each kind (their stems are compared).
_MARKERS: dict[str, tuple[str, ...]] = {
    "test": ("test", "tests", "testing", "spec", "fixture", "fixtures", "unittest"),
    "doc": ("doc", "docs", "documentation", "readme", "manual", "guide"),
    "example": ("example", "examples", "sample", "demo", "tutorial"),
    "changelog": ("changelog", "release", "releases", "history", "news", "changes"),
    "meta": ("template", "workflow", "ci", "github", "issue"),
    "deps": ("requirements", "lock", "lockfile", "dependency", "dependencies", "pin"),
    "generated": ("generated", "minified", "protobuf"),
    "vendored": ("vendor", "vendored"),
    "legacy": ("legacy", "deprecated", "old", "previous"),
    "data": ("json", "yaml", "yml", "toml", "config", "configuration", "settings"),
}


def kind_markers() -> Mapping[str, tuple[str, ...]]:
    """The words by which a query names each kind."""
    return _MARKERS


def file_kind(path: str, legacy_dirs: frozenset[str] = frozenset()) -> str:
    """The kind of the file at path (relative to the tree's root, "/"-separated).

    legacy_dirs are directories (paths) known to hold an older copy (:func:`kinds_of` finds the
    versioned ones).
    """
    parts = path.split("/")
    name = parts[-1]
    lname = name.lower()
    dirs = [d.lower() for d in parts[:-1]]
    dset = set(dirs)
    ext = lname.rsplit(".", 1)[-1] if "." in lname else ""
    if dset & _DIRS["vendored"] or _RELEASE_COPY.match(lname):
        return "vendored"
    if dset & _DIRS["generated"] or _GENERATED_FILE.match(lname):
        return "generated"
    if any(d.startswith(".") and len(d) > 1 for d in dirs):
        return "meta"
    if lname in _LOCK_NAMES or _REQUIREMENTS_FILE.match(lname) or dset & _DIRS["deps"]:
        return "deps"
    stem_name = lname.split(".", 1)[0]
    if stem_name in _CHANGELOG_NAMES or dset & _DIRS["changelog"]:
        return "changelog"
    if dset & _DIRS["test"] or _TEST_FILE.match(name) or _TEST_FILE.match(lname):
        return "test"
    if dset & _DIRS["example"]:
        return "example"
    if dset & _DIRS["legacy"] or (
        legacy_dirs and any("/".join(parts[: i + 1]) in legacy_dirs for i in range(len(dirs)))
    ):
        return "legacy"
    if dset & _DIRS["doc"] or ext in _PROSE_EXT or (not ext and lname.startswith("readme")):
        return "doc"
    if ext in _CODE_EXT:
        return "code"
    if ext in _DATA_EXT:
        return "data"
    return "other"


def legacy_dirs(paths: Iterable[str]) -> frozenset[str]:
    """Directories named by a version below the highest of their siblings (v3 beside v4)."""
    versions: dict[str, dict[int, str]] = {}
    for p in paths:
        parts = p.split("/")
        for i, d in enumerate(parts[:-1]):
            m = _VERSION_DIR.match(d.lower())
            if m:
                parent = "/".join(parts[:i])
                versions.setdefault(parent, {})[int(m.group(1))] = "/".join(parts[: i + 1])
    out: set[str] = set()
    for found in versions.values():
        if len(found) > 1:
            top = max(found)
            out.update(d for v, d in found.items() if v != top)
    return frozenset(out)


def kinds_of(paths: Sequence[str]) -> list[str]:
    """The kind of each path, the tree's versioned directories taken into account."""
    legacy = legacy_dirs(paths)
    return [file_kind(p, legacy) for p in paths]


LIFT_WORDS = 12
"""A query of more words than this (an issue text) lifts no kind: it names tests or docs in
passing ("the test fails", "as the documentation says"), not to ask for them."""


def lifted_kinds(query_words: Iterable[str], most: int = LIFT_WORDS) -> frozenset[str]:
    """The kinds a query of at most ``most`` words names, whose prior it lifts to the code's."""
    found = list(query_words)
    if len(found) > most:
        return frozenset()
    stems = {stem(w) for w in found}
    return frozenset(k for k, ms in _MARKERS.items() if any(stem(m) in stems for m in ms))


def versions_named(query_words: Iterable[str]) -> frozenset[str]:
    """The versions a query names (``v3``): an older copy in a directory of that name is what it
    asks for."""
    return frozenset(w for w in query_words if _VERSION_DIR.match(w))


def in_version(path: str, versions: frozenset[str]) -> bool:
    """Whether path is under a directory named by one of versions."""
    return any(d.lower() in versions for d in path.split("/")[:-1])


def read_order(paths: Sequence[str], query: str | None) -> list[int]:
    """The order in which a fresh tree's files are read for a search of query: source files
    whose path words match the query's first, then the other source files, then the rest; path
    order within each. Without a query, source first."""
    qstems = {stem(w) for w in words(query)} if query else set()
    kinds = kinds_of(paths)

    def rank(i: int) -> int:
        if kinds[i] != "code":
            return 2
        if qstems and any(stem(w) in qstems for w in words(paths[i])):
            return 0
        return 1

    return sorted(range(len(paths)), key=lambda i: (rank(i), i))
