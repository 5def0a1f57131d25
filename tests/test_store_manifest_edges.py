"""store.manifest at its edges: each stat field compared on its own, the values at the ends of
their ranges kept, and a saved manifest changed in one field refused with its reason (ADR 0050 §4,
§5). Fields are changed in what the manifest itself wrote, decoded and framed again by
store.codec, so these tests follow the manifest's own format."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.codec import decode, encode
from nodwyn_retrieval.store.manifest import (
    MAGIC,
    VERSION,
    Entry,
    Manifest,
    list_manifests,
    load_manifest,
    save_manifest,
)

KEY = "ab" * 32 + "-1001"


def sample() -> Manifest:
    return Manifest(
        root="/srv/tree",
        generation=3,
        entries={
            "a.py": Entry(size=10, mtime_ns=1_700_000_000_000_000_000, inode=42, key=KEY),
            "dir/b.bin": Entry(size=0, mtime_ns=-1, inode=2**64 - 1, key="!binary"),
        },
        cursor="dir/b.bin",
        partial=True,
        updated=12.5,
        extra=["vendor"],
        guard="0f" * 32,
    )


def saved_payload(tmp_path: Path, manifest: Manifest | None = None) -> dict[str, Any]:
    path = tmp_path / "m.manifest"
    save_manifest(path, manifest or sample())
    obj = decode(MAGIC, VERSION, path.read_bytes())
    assert isinstance(obj, dict)
    return obj


def load_changed(tmp_path: Path, **change: Any) -> Manifest | None:
    obj = saved_payload(tmp_path)
    obj.update(change)
    path = tmp_path / "changed.manifest"
    path.write_bytes(encode(MAGIC, VERSION, obj))
    return load_manifest(path)


# -- §5's comparison --------------------------------------------------------------------------


def test_a_change_of_any_one_stat_field_is_a_change(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("one")
    st = os.lstat(f)
    entry = Entry(st.st_size, st.st_mtime_ns, st.st_ino, key=KEY)
    assert entry.matches(st)
    assert not replace(entry, size=st.st_size + 1).matches(st)
    assert not replace(entry, mtime_ns=st.st_mtime_ns - 1).matches(st)
    assert not replace(entry, inode=st.st_ino + 1).matches(st)
    # Only the stat fields are compared: the key names the content the refresher stored.
    assert replace(entry, key="!binary").matches(st)


# -- values at the ends of their ranges ---------------------------------------------------------


def test_values_at_the_ends_of_their_ranges_round_trip(tmp_path: Path) -> None:
    manifest = sample()
    manifest.generation = 2**63 - 1
    manifest.entries["big"] = Entry(size=2**64 - 1, mtime_ns=-(2**63), inode=0, key="!x")
    manifest.entries["c"] = Entry(size=1, mtime_ns=2**63 - 1, inode=1, key="0" * 64 + "-1")
    manifest.entries["d"] = Entry(size=1, mtime_ns=0, inode=1, key="f" * 64 + "-123456789")
    path = tmp_path / "m"
    save_manifest(path, manifest)
    assert load_manifest(path) == manifest


def test_a_saved_manifest_loads_as_it_was_saved(tmp_path: Path) -> None:
    manifest = sample()
    path = tmp_path / "trees" / "m.manifest"
    save_manifest(path, manifest)
    loaded = load_manifest(path)
    assert loaded == manifest
    assert loaded is not None
    assert (loaded.cursor, loaded.partial, loaded.updated) == ("dir/b.bin", True, 12.5)
    assert (loaded.extra, loaded.guard, loaded.generation) == (["vendor"], "0f" * 32, 3)
    assert isinstance(loaded.updated, float)


def test_a_new_manifest_is_whole_and_empty_until_told_otherwise(tmp_path: Path) -> None:
    manifest = Manifest(root="/r", generation=0)
    assert (manifest.partial, manifest.cursor, manifest.extra, manifest.guard) == (
        False,
        None,
        [],
        "",
    )
    assert (manifest.entries, manifest.updated) == ({}, 0.0)
    save_manifest(tmp_path / "m", manifest)
    loaded = load_manifest(tmp_path / "m")
    assert loaded is not None
    assert loaded.partial is False


def test_a_time_saved_as_an_integer_loads_as_seconds(tmp_path: Path) -> None:
    loaded = load_changed(tmp_path, updated=1_700_000_000)
    assert loaded is not None
    assert loaded.updated == 1_700_000_000.0
    assert isinstance(loaded.updated, float)


def test_a_manifest_without_a_guard_fingerprint_or_extra_loads(tmp_path: Path) -> None:
    loaded = load_changed(tmp_path, guard="", extra=[], cursor=None, partial=False)
    assert loaded is not None
    assert (loaded.guard, loaded.extra, loaded.cursor, loaded.partial) == ("", [], None, False)


def test_generation_zero_loads_and_past_the_top_is_refused(tmp_path: Path) -> None:
    loaded = load_changed(tmp_path, generation=0)
    assert loaded is not None
    assert loaded.generation == 0
    with pytest.raises(FormatError, match=rf"^manifest: generation {2**63} is out of range"):
        load_changed(tmp_path, generation=2**63)
    with pytest.raises(FormatError, match=r"^manifest: generation 1\.0 is out of range"):
        load_changed(tmp_path, generation=1.0)


# -- one field off: refused with its reason, never a half-read manifest -------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"root": 3}, r"root is not a path"),
        ({"updated": float("inf")}, r"updated inf is not a time"),
        ({"updated": True}, r"updated True is not a time"),
        ({"guard": "0F" * 32}, r"guard is not a fingerprint"),
        ({"guard": "0f" * 31 + "0"}, r"guard is not a fingerprint"),
        ({"guard": "0f" * 32 + "\n"}, r"guard is not a fingerprint"),
        ({"extra": [3]}, r"extra is a list of directories"),
        ({"paths": "a.py"}, r"paths and keys are lists"),
        ({"keys": "k"}, r"paths and keys are lists"),
        ({"keys": [KEY, "!Binary"]}, r"a key is neither"),
        ({"keys": ["!binary", "ab" * 32 + "-1234567890"]}, r"a key is neither"),
        ({"keys": [KEY, "!"]}, r"a key is neither"),
        ({"keys": [KEY + "\n", "!binary"]}, r"a key is neither"),
        ({"mtime_ns": b"\0" * 24}, r"mtime_ns holds 24 bytes for 2 paths"),
        ({"size": "xx"}, r"size is bytes, got str"),
        ({"cursor": b"dir"}, r"cursor is a path or nil, got bytes"),
        ({"partial": None}, r"partial is a bool, got NoneType"),
    ],
)
def test_a_saved_manifest_with_one_field_off_is_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(FormatError, match=rf"^manifest: {message}.*: rebuild$"):
        load_changed(tmp_path, **change)


def test_a_field_too_many_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(
        FormatError, match=r"^manifest: wrong fields \(missing: none; unexpected: 'more'\)"
    ):
        load_changed(tmp_path, more=1)


def test_a_manifest_that_is_not_a_map_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m"
    path.write_bytes(encode(MAGIC, VERSION, ["root", "generation"]))
    with pytest.raises(FormatError, match=r"^manifest: a manifest is a map, got list: rebuild$"):
        load_manifest(path)


def test_a_manifest_that_is_a_directory_or_a_fifo_is_damage_to_rebuild(tmp_path: Path) -> None:
    """Only the library writes a manifest, and always a file: anything else there is damage
    (a FIFO's open would wait for ever), never an error that fails every search."""
    (tmp_path / "m").mkdir()
    with pytest.raises(FormatError, match=r"manifest .*m is a directory: rebuild"):
        load_manifest(tmp_path / "m")
    os.mkfifo(tmp_path / "f")
    with pytest.raises(FormatError, match=r"manifest .*f is not a regular file: rebuild"):
        load_manifest(tmp_path / "f")


def test_hidden_files_and_other_names_are_not_manifests(tmp_path: Path) -> None:
    for name in ("a.manifest", ".b.manifest", "c.manifest.tmp", "d.lock", ".e.manifest.x.tmp"):
        (tmp_path / name).write_bytes(b"")
    assert list_manifests(tmp_path) == [tmp_path / "a.manifest"]
    assert list_manifests(tmp_path / "a.manifest") == []
