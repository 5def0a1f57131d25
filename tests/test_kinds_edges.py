"""A file's kind at the edges of its rules (retrieval/kinds.py): which rule wins when a path fits
two, a dot-directory against a "." alone, names in either case, versioned siblings, the length of
a query that names a kind, and the read order of a fresh tree."""

from __future__ import annotations

import pytest
from nodwyn_retrieval.retrieval.kinds import (
    KINDS,
    LIFT_WORDS,
    PRIORS,
    file_kind,
    in_version,
    kind_markers,
    kinds_of,
    legacy_dirs,
    lifted_kinds,
    read_order,
    versions_named,
)


def test_every_kind_has_a_prior_and_code_is_trusted_most() -> None:
    assert KINDS[0] == "code"
    assert set(PRIORS) == set(KINDS)
    assert PRIORS["code"] == 1.0
    assert all(PRIORS[k] < 1.0 for k in KINDS[1:])
    assert LIFT_WORDS == 12
    assert set(kind_markers()) <= set(KINDS)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        # the first rule that fits wins: vendored, generated, meta, deps, changelog, test, ...
        ("vendor/tests/test_x.py", "vendored"),
        ("lib/jquery-3.6.0.min.js", "vendored"),
        ("dist/tests/app.js", "generated"),
        ("tests/api_pb2.py", "generated"),
        (".github/workflows/requirements.txt", "meta"),
        ("requirements/tests/base.txt", "deps"),
        ("tests/requirements-dev.txt", "deps"),
        ("changes/tests/a.py", "changelog"),
        ("tests/examples/a.py", "test"),
        ("examples/legacy/a.py", "example"),
        ("old/docs/a.py", "legacy"),
        ("docs/a.py", "doc"),
        # a "." directory alone is no dot-directory
        ("./src/app.py", "code"),
        (".config/app.py", "meta"),
        (".x/app.py", "meta"),
        # names and directories in any case
        ("Vendor/lib.c", "vendored"),
        ("src/CHANGELOG", "changelog"),
        ("History.md", "changelog"),
        ("Tests/Widget.py", "test"),
        ("src/WidgetTests.cs", "test"),
        ("src/TEST_widget.py", "test"),
        ("src/widget_test.py", "test"),
        ("src/widget_tests.rs", "test"),
        ("src/test.py", "test"),
        ("conftest.py", "test"),
        ("README", "doc"),
        ("Readme", "doc"),
        ("readme.rst", "doc"),
        ("readme.py", "code"),
        ("man/ls.1", "doc"),
        ("src/notes.txt", "doc"),
        ("Cargo.lock", "deps"),
        ("go.sum", "deps"),
        ("src/lib.rs", "code"),
        ("src/Main.Java", "code"),
        ("config/app.yaml", "data"),
        ("Makefile", "other"),
        ("src/app.bin", "other"),
        ("src/widget.generated.ts", "generated"),
        ("src/model_generated.py", "generated"),
        ("src/widget.designer.cs", "generated"),
    ],
)
def test_a_paths_kind(path: str, kind: str) -> None:
    assert file_kind(path) == kind


def test_of_versioned_siblings_only_the_highest_is_current() -> None:
    paths = ["api/v1/a.py", "api/v2/a.py", "api/v10/a.py", "web/v1/b.py", "V3/c.py", "V4/c.py"]
    assert legacy_dirs(paths) == {"api/v1", "api/v2", "V3"}
    assert kinds_of(paths) == ["legacy", "legacy", "code", "code", "legacy", "code"]
    assert legacy_dirs(["v1/a.py", "v1/b.py"]) == frozenset()  # one version: current
    assert legacy_dirs(["a/v1.py", "a/v2.py"]) == frozenset()  # files, not directories
    assert legacy_dirs(["x/v1/y/v2/a.py", "x/v1/y/v3/a.py"]) == {"x/v1/y/v2"}


def test_a_legacy_directory_given_holds_older_copies_at_any_depth() -> None:
    legacy = frozenset({"lib/v1"})
    assert file_kind("lib/v1/a.py", legacy) == "legacy"
    assert file_kind("lib/v1/deep/a.py", legacy) == "legacy"
    assert file_kind("lib/v1/deep/er/a.py", legacy) == "legacy"
    assert file_kind("lib/v2/a.py", legacy) == "code"
    assert file_kind("v1/a.py", legacy) == "code"  # a directory of the same name elsewhere
    assert file_kind("lib/v1.py", legacy) == "code"  # a file named as the directory


def test_a_query_of_at_most_12_words_names_kinds_by_their_stems() -> None:
    assert lifted_kinds(["tests"]) == {"test"}
    assert lifted_kinds(["documented", "parser"]) == {"doc"}
    assert lifted_kinds(["unittest", "readme"]) == {"test", "doc"}
    twelve = ["test", *(f"w{i}" for i in range(11))]
    assert lifted_kinds(twelve) == {"test"}
    assert lifted_kinds([*twelve, "w11"]) == frozenset()
    assert lifted_kinds([*twelve, "w11"], most=13) == {"test"}
    assert lifted_kinds([]) == frozenset()


def test_the_versions_a_query_names() -> None:
    assert versions_named(["v1", "v22", "version", "v", "2", "vv1", "v1x"]) == {"v1", "v22"}
    assert in_version("lib/V1/core.ts", frozenset({"v1"}))
    assert not in_version("lib/core/v1", frozenset({"v1"}))  # the file itself is no directory
    assert not in_version("lib/core.ts", frozenset())


def test_a_fresh_tree_reads_matching_source_then_source_then_the_rest() -> None:
    paths = ["docs/parser.md", "b/lexer.py", "a/parsers.py", "tests/test_parser.py", "c/parse.go"]
    order = [paths[i] for i in read_order(paths, "Parser errors")]
    # "parsers" has the stem of "parser" ("parse" has not); the test and the doc come last anyway
    assert order == [
        "a/parsers.py",
        "b/lexer.py",
        "c/parse.go",
        "docs/parser.md",
        "tests/test_parser.py",
    ]
    assert read_order(paths, "") == read_order(paths, None) == [1, 2, 4, 0, 3]
    assert read_order([], "x") == []
