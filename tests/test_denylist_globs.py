"""The denylist's glob language (guard/denylist.py), pattern by pattern, with what each must and
must not match: classes, negated classes, a ``]`` first in a class, an unclosed ``[``, escapes,
``?``, ``**``, directory patterns and anchored ones, and directories denied by location."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.guard.denylist import Denylist

GLOBS: list[tuple[str, list[str], list[str]]] = [
    # pattern, paths it denies, paths it leaves
    ("data[0-9].csv", ["data1.csv", "x/data7.csv"], ["dataa.csv", "data10.csv", "data.csv"]),
    ("[!a]x.txt", ["bx.txt", "1x.txt"], ["ax.txt", "x.txt"]),
    ("[^a]y.txt", ["by.txt"], ["ay.txt"]),
    ("[]]z.txt", ["]z.txt"], ["az.txt", "z.txt"]),
    ("[!]]w.txt", ["aw.txt"], ["]w.txt"]),
    ("lock[", ["lock["], ["lockx", "lock"]),
    ("a[b", ["a[b"], ["ab"]),
    ("[ab]c[de]", ["ace", "bcd"], ["abc", "acf"]),
    ("[a&&b]q", ["aq", "&q", "bq"], ["cq"]),
    ("[a|b]r", ["|r", "ar"], ["cr"]),
    ("[a\\b]s", ["\\s", "as", "bs"], ["cs"]),
    ("[a~]t", ["~t", "at"], ["bt"]),
    ("[x[]u", ["[u", "xu"], ["yu"]),
    ("a\\*b", ["a*b"], ["axb", "ab"]),
    ("q\\?", ["q?"], ["qx"]),
    ("end\\", ["end\\"], ["end"]),
    ("?.ini", ["a.ini", "d/b.ini"], ["ab.ini", ".ini"]),
    ("*.secret", ["a.secret", "d/e/.secret"], ["a.secret.txt", "asecret"]),
    ("vault/", ["vault/a", "x/vault/b/c"], ["vault", "vaults/a", "x/vault"]),
    ("/top/keys", ["top/keys", "top/keys/a"], ["a/top/keys", "top/keysx"]),
    ("deep/**/pw.txt", ["deep/pw.txt", "deep/a/b/pw.txt"], ["x/deep/pw.txt", "deep/apw.txt"]),
    ("conf/**", ["conf/a", "conf/a/b"], ["x/conf/a"]),
    ("/out/", ["out/x"], ["out", "a/out/x"]),
    ("a.b+c(d)", ["a.b+c(d)"], ["aab+c(d)", "a.bbc(d)"]),
]

CASES = [(p, path, True) for p, yes, _ in GLOBS for path in yes] + [
    (p, path, False) for p, _, no in GLOBS for path in no
]


@pytest.mark.parametrize(
    ("pattern", "path", "denied"), CASES, ids=[f"{p}|{q}|{d}" for p, q, d in CASES]
)
def test_a_glob_matches_what_it_says_and_nothing_else(
    pattern: str, path: str, denied: bool
) -> None:
    got = Denylist([pattern]).match(path)
    assert got == (pattern if denied else None)


def test_the_pattern_of_the_first_component_that_matches_is_named() -> None:
    d = Denylist(["other/", "*.pem", "keys/", "/build/out"])
    assert d.match("keys/a.pem") == "keys/"
    assert d.match("a/b.pem") == "*.pem"
    assert d.match("keys/a.txt") == "keys/"
    assert d.match("a/other/b") == "other/"
    assert d.match("build/out/x") == "/build/out"
    assert d.match("build/outer") is None
    assert d.match("other") is None  # a file named like a directory pattern


def test_a_denylist_of_directories_only_or_anchored_only_matches_them() -> None:
    dirs_only = Denylist(["cache/"])
    assert dirs_only.match("cache/a") == "cache/"
    assert dirs_only.match("a.txt") is None
    anchored = Denylist(["/a/b"])
    assert anchored.match("a/b") == "/a/b"
    assert anchored.match("b") is None
    assert Denylist([]).match("anything") is None


def test_matching_ignores_case() -> None:
    d = Denylist(["Secret[A-C].txt", "/Top/"])
    assert d.match("secretb.TXT") == "Secret[A-C].txt"
    assert d.match("TOP/x") == "/Top/"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", r"^deny pattern must not be empty$"),
        ("   ", r"^deny pattern must not be empty$"),
        ("!keep.txt", r"^deny pattern !keep.txt negates: the denylist can only be added to$"),
        ("/", r"^deny pattern / names the root: a guard that denies every read$"),
        ("[z-a]", r"^deny pattern \[z-a\] is not a valid glob: "),
    ],
)
def test_a_malformed_pattern_is_bad_input(pattern: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        Denylist([pattern])


def test_a_pattern_that_is_not_a_string_is_bad_input() -> None:
    with pytest.raises(BadInput, match=r"^deny pattern must be a string, got int$"):
        Denylist([7])  # type: ignore[list-item]


def test_a_directory_is_denied_by_its_real_place_and_by_the_path_given(tmp_path: Path) -> None:
    real = tmp_path / "real-data"
    real.mkdir()
    link = tmp_path / "data-link"
    link.symlink_to(real, target_is_directory=True)
    d = Denylist([], [(str(link), "the data directory")])
    assert d.directory(str(real / "a")) == "the data directory"
    assert d.directory(str(link / "a")) == "the data directory"
    assert d.directory(str(real)) == "the data directory"
    assert d.directory(str(tmp_path / "real-data-2" / "a")) is None
    assert d.directory(str(tmp_path)) is None
    plain = Denylist([], [(str(real), "the index")])
    assert plain.directory(os.path.join(str(real), "x", "y")) == "the index"
    assert plain.directory(str(link / "x")) is None  # only the real path was given
    assert Denylist([]).directory(str(real)) is None


def test_a_denylist_says_what_it_holds(tmp_path: Path) -> None:
    assert repr(Denylist(["a", "b/"], [(str(tmp_path), "the index")])) == (
        "Denylist(patterns=2, directories=1)"
    )
