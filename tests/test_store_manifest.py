"""store.manifest: a working tree's manifest, by columns, validated on load (ADR 0050 §4, §5)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import filelock
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.codec import encode
from nodwyn_retrieval.store.manifest import (
    VERSION,
    Entry,
    Manifest,
    list_manifests,
    load_manifest,
    manifest_lock,
    manifest_path,
    save_manifest,
)


def big_manifest(n: int) -> Manifest:
    return Manifest(
        root="/srv/tree",
        generation=7,
        entries={
            f"src/pkg{i // 100}/module_{i}.py": Entry(
                size=i * 37,
                mtime_ns=1_760_000_000_000_000_000 + i,
                inode=2**63 + i,
                key=hashlib.sha256(str(i).encode()).hexdigest() + "-1001",
            )
            for i in range(n)
        },
        cursor="src/pkg3/module_300.py",
        partial=True,
        updated=1_760_000_000.5,
        extra=["build", "vendor/lib"],
        guard="f" * 64,
    )


def test_a_manifest_of_20000_entries_round_trips(tmp_path: Path) -> None:
    manifest = big_manifest(20_000)
    manifest.entries["négatif.txt"] = Entry(size=0, mtime_ns=-5, inode=0, key="!not_utf8")
    path = tmp_path / "trees" / "x.manifest"
    save_manifest(path, manifest)
    assert path.read_bytes()[:4] == b"NRMF"
    loaded = load_manifest(path)
    assert loaded == manifest
    assert loaded is not None
    assert list(loaded.entries) == list(manifest.entries)


def test_an_empty_manifest_round_trips(tmp_path: Path) -> None:
    manifest = Manifest(root="/r", generation=0)
    save_manifest(tmp_path / "m", manifest)
    assert load_manifest(tmp_path / "m") == manifest


def test_a_missing_manifest_is_none(tmp_path: Path) -> None:
    assert load_manifest(tmp_path / "absent.manifest") is None


def test_an_entry_matches_the_stat_it_was_made_from(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("one")
    st = os.lstat(f)
    entry = Entry(st.st_size, st.st_mtime_ns, st.st_ino, key="k")
    assert entry.matches(st)
    f.write_text("three")
    assert not entry.matches(os.lstat(f))


def payload(**change: object) -> dict[str, object]:
    base: dict[str, object] = {
        "root": "/r",
        "generation": 1,
        "cursor": None,
        "partial": False,
        "updated": 0.0,
        "extra": [],
        "guard": "",
        "paths": ["a", "b"],
        "size": bytes(16),
        "mtime_ns": bytes(16),
        "inode": bytes(16),
        "keys": ["a" * 64 + "-1001", "!binary"],
    }
    base.update(change)
    return {k: v for k, v in base.items() if v is not ...}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"paths": ["a"]}, r"^manifest: 2 keys for 1 paths: rebuild$"),
        ({"size": bytes(8)}, r"^manifest: size holds 8 bytes for 2 paths: rebuild$"),
        ({"inode": [0, 0]}, r"^manifest: inode is bytes, got list: rebuild$"),
        ({"paths": ["a", "a"]}, r"^manifest: a path is listed twice: rebuild$"),
        ({"paths": ["a", ""]}, r"^manifest: a path is empty: rebuild$"),
        ({"paths": ["a", b"b"]}, r"^manifest: a path or a key is not a string: rebuild$"),
        ({"keys": ["k", 3]}, r"^manifest: a path or a key is not a string: rebuild$"),
        (
            {"keys": ["../../escape", "!binary"]},
            r"^manifest: a key is neither a chunk store key nor a marker: rebuild$",
        ),
        ({"generation": -1}, r"^manifest: generation -1 is out of range: rebuild$"),
        ({"generation": True}, r"^manifest: generation True is out of range: rebuild$"),
        ({"cursor": 3}, r"^manifest: cursor is a path or nil, got int: rebuild$"),
        ({"partial": 1}, r"^manifest: partial is a bool, got int: rebuild$"),
        ({"updated": "now"}, r"^manifest: updated 'now' is not a time: rebuild$"),
        ({"updated": float("nan")}, r"^manifest: updated nan is not a time: rebuild$"),
        ({"root": ""}, r"^manifest: root is not a path: rebuild$"),
        ({"extra": "build"}, r"^manifest: extra is a list of directories: rebuild$"),
        ({"extra": ["build", 3]}, r"^manifest: extra is a list of directories: rebuild$"),
        ({"guard": 3}, r"^manifest: guard is not a fingerprint: rebuild$"),
        ({"guard": "ab"}, r"^manifest: guard is not a fingerprint: rebuild$"),
        (
            {"keys": ...},
            r"^manifest: wrong fields \(missing: keys; unexpected: none\): rebuild$",
        ),
    ],
)
def test_a_manifest_that_is_off_raises_format_error(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = tmp_path / "m"
    path.write_bytes(encode(b"NRMF", VERSION, payload(**change)))
    with pytest.raises(FormatError, match=message):
        load_manifest(path)


def test_a_manifest_of_another_version_raises_format_error(tmp_path: Path) -> None:
    path = tmp_path / "m"
    path.write_bytes(encode(b"NRMF", 1, payload()))
    with pytest.raises(FormatError, match=r"^NRMF format version 1, not 3: rebuild$"):
        load_manifest(path)


def test_the_manifest_path_is_named_by_the_trees_real_path(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "link").symlink_to(tree)
    path = manifest_path(tmp_path / "trees", tree)
    digest = hashlib.sha256(os.fsencode(os.path.realpath(tree))).hexdigest()[:16]
    assert path == tmp_path / "trees" / f"{digest}.manifest"
    assert manifest_path(tmp_path / "trees", tmp_path / "link") == path
    assert manifest_path(tmp_path / "trees", tmp_path) != path


def test_the_manifest_lock_excludes_a_second_refresh(tmp_path: Path) -> None:
    trees = tmp_path / "trees"
    with manifest_lock(trees, tmp_path), pytest.raises(filelock.Timeout):
        manifest_lock(trees, tmp_path, timeout=0.05).acquire()
    assert manifest_path(trees, tmp_path).with_suffix(".lock").exists()


def test_list_manifests_names_only_manifests(tmp_path: Path) -> None:
    trees = tmp_path / "trees"
    assert list_manifests(trees) == []
    save_manifest(manifest_path(trees, tmp_path / "a"), Manifest(root="/a", generation=1))
    save_manifest(manifest_path(trees, tmp_path / "b"), Manifest(root="/b", generation=1))
    with manifest_lock(trees, tmp_path / "a"):
        pass
    assert list_manifests(trees) == sorted(
        [manifest_path(trees, tmp_path / "a"), manifest_path(trees, tmp_path / "b")]
    )


VALID = encode(b"NRMF", VERSION, payload(extra=["build"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_manifest_loads_whole_or_raises_format_error(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    buf = bytearray(VALID)
    how = data.draw(st.sampled_from(["flip", "cut", "random"]))
    if how == "flip":
        for bit in data.draw(st.lists(st.integers(0, len(buf) * 8 - 1), min_size=1, max_size=3)):
            buf[bit // 8] ^= 1 << (bit % 8)
        damaged = bytes(buf)
    elif how == "cut":
        damaged = bytes(buf[: data.draw(st.integers(0, len(buf) - 1))])
    else:
        damaged = data.draw(st.binary(max_size=300))
    path = tmp_path_factory.mktemp("fuzz") / "m"
    path.write_bytes(damaged)
    try:
        got = load_manifest(path)
    except FormatError as exc:
        assert str(exc).endswith(": rebuild")  # noqa: PT017  the property: nothing but this
    else:
        assert isinstance(got, Manifest)
