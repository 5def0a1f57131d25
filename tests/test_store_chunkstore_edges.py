"""store.chunkstore at its edges: the counts a status shows, what sits where a record should, what
a listing and a sweep leave alone (ADR 0050 §4)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput, FormatError
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.store.chunkstore import (
    MAGIC,
    SUFFIX,
    VERSION,
    ChunkStore,
    read_record,
    record_payload,
)
from nodwyn_retrieval.store.codec import encode
from nodwyn_retrieval.store.packs import PACKS, reset_indexes

TEXT = "def bind(host):\n    return host != 'localhost'\n"


def key_of(text: str) -> str:
    return ChunkStore.key(hashlib.sha256(text.encode()).hexdigest())


def stored_bytes(store: ChunkStore, key: str, data: bytes) -> ChunkStore:
    """The store holding data as key's record alone, in a pack whose entry checks."""
    for p in (store.directory / PACKS).glob(f"*{SUFFIX}"):
        p.unlink()
    reset_indexes()
    out = ChunkStore(store.directory)
    out.write_raw([(key, data)])
    return out


def raw(store: ChunkStore, key: str) -> bytes:
    """key's record as its pack holds it."""
    return store.read_raw(store.path(key), [key])[0][1]


def test_hits_misses_and_writes_are_counted_one_by_one(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    assert store.get(key) is None
    assert store.get(key) is None
    n = store.put(key, analyze(TEXT))
    store.put(key_of("x\n"), analyze("x\n"))
    assert store.get(key) == analyze(TEXT)
    s = store.stats
    assert (s.hits, s.misses, s.rebuilt, s.written) == (1, 2, 0, 2)
    assert s.bytes_written == n + store.path(key_of("x\n")).stat().st_size
    assert "hits=1" in repr(store)


def test_a_directory_where_a_pack_should_be_is_no_pack(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    (tmp_path / PACKS / f"0-0{SUFFIX}").mkdir(parents=True)
    assert store.get(key) is None
    assert store.stats.misses == 1
    assert not store.exists(key)
    store.put(key, analyze(TEXT))
    assert store.get(key) == analyze(TEXT)


def test_a_record_of_a_key_of_up_to_nine_digits_of_version_is_a_key(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    digest = "ab" * 32
    for version in ("1", "123456789"):
        key = f"{digest}-{version}"
        store.put(key, analyze(TEXT))
        assert store.get(key) == analyze(TEXT)
    with pytest.raises(BadInput, match=r"is not a chunk store key$"):
        store.path(f"{digest}-1234567890")
    with pytest.raises(BadInput, match=r"is not a chunk store key$"):
        store.path(f"{digest}-1\n")


def test_a_listing_skips_what_is_not_a_record_in_its_bucket(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    other = key_of("x\n")
    bucket = store.path(key).parent
    (bucket / f"{other}.ck").write_bytes(b"in the wrong bucket")
    (bucket / f"{key}.txt").write_bytes(b"")
    (bucket / f"{key[:-1]}x.ck").write_bytes(b"")
    (tmp_path / "abc").mkdir()
    (tmp_path / "abc" / f"{key}.ck").write_bytes(b"")  # not a two-letter bucket
    (tmp_path / "cd").write_bytes(b"")  # a file, not a bucket
    (tmp_path / "ef").symlink_to(bucket)  # a link, not a bucket
    assert [k for k, _, _ in store.iter_entries()] == [key]


def test_a_sweep_leaves_records_and_names_that_are_not_temporary_files(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    bucket = store.path(key).parent
    pack = store.path(key).name
    long_ago = time.time() - 7200
    names = [f"{key}.ckp.tmp", f".{key}.ckp", f".{key}.ckp.1.tmp"]
    for name in names[:2]:
        (bucket / name).write_bytes(b"x")
    (bucket / names[2]).write_bytes(b"x")
    (tmp_path / "loose.tmp").write_bytes(b"x")  # not in a bucket
    for p in [*(bucket / n for n in names), store.path(key), tmp_path / "loose.tmp"]:
        os.utime(p, (long_ago, long_ago))
    assert store.remove_stale_temp(older_than=3600) == 1
    assert sorted(os.listdir(bucket)) == sorted([pack, *names[:2]])
    assert store.get(key) == analyze(TEXT)
    assert store.remove_stale_temp(older_than=3600) == 0


def test_a_sweep_keeps_a_temporary_file_younger_than_its_age(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    tmp = store.path(key).parent / f".{key}.ckp.2.tmp"
    tmp.write_bytes(b"x")
    ten_minutes_ago = time.time() - 600
    os.utime(tmp, (ten_minutes_ago, ten_minutes_ago))
    assert store.remove_stale_temp() == 0  # the default age is an hour
    assert store.remove_stale_temp(older_than=300) == 1
    assert not tmp.exists()


def test_a_record_written_again_reads_the_same(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    first = store.put(key, analyze(TEXT))
    assert store.put(key, analyze(TEXT)) == first
    assert store.get(key) == analyze(TEXT)
    assert [k for k, _, _ in store.iter_entries()] == [key, key]  # two copies until collected
    reset_indexes()
    assert ChunkStore(tmp_path).get(key) == analyze(TEXT)


def test_a_record_is_stored_compressed(tmp_path: Path) -> None:
    text = "".join(f"def handler_{i % 7}(request):\n    return request.body\n" for i in range(400))
    store = ChunkStore(tmp_path)
    written = store.put(key_of(text), analyze(text))
    assert written < len(text.encode()) // 4
    assert store.get(key_of(text)) == analyze(text)


def test_a_sweep_never_follows_a_link_out_of_the_store(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    theirs = elsewhere / ".theirs.ck.1.tmp"
    theirs.write_bytes(b"someone else's")
    long_ago = time.time() - 7200
    os.utime(theirs, (long_ago, long_ago))
    store = ChunkStore(tmp_path / "chunks")
    store.put(key_of(TEXT), analyze(TEXT))
    (tmp_path / "chunks" / "zz").symlink_to(elsewhere)
    assert store.remove_stale_temp(older_than=3600) == 0
    assert theirs.exists()


def test_a_dangling_link_named_as_a_pack_holds_nothing(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    (tmp_path / PACKS).mkdir()
    (tmp_path / PACKS / f"0-0{SUFFIX}").symlink_to(tmp_path / "nowhere")
    assert list(store.iter_entries()) == []
    assert store.get(key) is None


def test_a_packs_directory_that_is_a_link_out_of_the_store_is_not_listed(
    tmp_path: Path,
) -> None:
    # Listed records are what a collection removes: never one outside the store.
    key = key_of(TEXT)
    elsewhere = tmp_path / "elsewhere"
    ChunkStore(elsewhere).put(key, analyze(TEXT))
    store = ChunkStore(tmp_path / "chunks")
    store.directory.mkdir()
    (store.directory / PACKS).symlink_to(elsewhere / PACKS)
    assert list(store.iter_entries()) == []
    assert store.get(key) is None


def test_a_record_with_a_field_more_is_rebuilt(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    payload = record_payload(key, analyze(TEXT))
    store = stored_bytes(store, key, encode(MAGIC, VERSION, {**payload, "x": 1}))
    assert store.get(key) is None
    assert store.stats.rebuilt == 1
    store = stored_bytes(store, key, encode(MAGIC, VERSION, payload))
    assert store.get(key) == analyze(TEXT)  # the same record without it is read
    no_widths = {k: v for k, v in payload.items() if k != "widths"}
    store = stored_bytes(store, key, encode(MAGIC, VERSION, no_widths))
    assert store.get(key) is None  # version 4's widths are not optional
    assert store.stats.rebuilt == 1


def test_a_temporary_file_that_is_a_dangling_link_is_swept_by_its_own_age(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    stray = store.path(key).parent / f".{key}.ckp.3.tmp"
    stray.symlink_to(tmp_path / "gone")
    long_ago = time.time() - 7200
    os.utime(stray, (long_ago, long_ago), follow_symlinks=False)
    assert store.remove_stale_temp(older_than=3600) == 1
    assert not stray.is_symlink()
    assert store.get(key) == analyze(TEXT)


def _stored(store: ChunkStore, key: str, record: object, widths: bytes) -> ChunkStore:
    obj = {"key": key, "record": record, "widths": widths}
    return stored_bytes(store, key, encode(MAGIC, VERSION, obj))


def test_a_narrow_record_with_an_array_that_is_not_bytes_is_rebuilt(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    for bad in (None, 7, "abcd"):
        record = analyze(TEXT).to_obj()
        record["starts"] = bad
        store = _stored(store, key, record, b"\x01" * 6)
        with pytest.raises(FormatError, match=r"^file record: starts is bytes, got "):
            read_record(raw(store, key), key)
        assert store.get(key) is None
        assert store.stats.rebuilt == 1
    assert not store.exists(key)


def test_a_narrow_record_that_is_not_a_map_says_what_it_is(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    for bad, name in (([1, 2], "list"), ("text", "str"), (3, "int")):
        store = _stored(store, key, bad, b"\x01" * 6)
        with pytest.raises(FormatError, match=rf"a file record is a map, got {name}\b"):
            read_record(raw(store, key), key)
        assert store.get(key) is None
        assert store.stats.rebuilt == 1


def test_a_stored_record_is_framed_compressed(tmp_path: Path) -> None:
    from nodwyn_retrieval.store.codec import FLAG_ZSTD, HEADER

    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    magic, version, flags = HEADER.unpack_from(raw(store, key))
    assert (magic, version, flags) == (MAGIC, VERSION, FLAG_ZSTD)


def test_each_damaged_pack_a_listing_meets_counts_once(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    store.put(key_of(TEXT), analyze(TEXT))
    (tmp_path / PACKS / f"0-a{SUFFIX}").write_bytes(b"NRCP garbage")
    reset_indexes()
    store = ChunkStore(tmp_path)
    assert store.get(key_of("x\n")) is None
    assert store.stats.rebuilt == 1
    (tmp_path / PACKS / f"0-b{SUFFIX}").write_bytes(b"NRCP more garbage")
    assert store.get(key_of("y\n")) is None  # the directory changed: listed again
    assert store.stats.rebuilt == 2
    assert sorted(p.name for p in (tmp_path / PACKS).iterdir()) == [store.path(key_of(TEXT)).name]


def test_a_record_changed_where_its_decoding_cannot_tell_is_caught_by_its_crc(
    tmp_path: Path,
) -> None:
    """A record stored uncompressed (what encode does when it could not read one back under
    its bound) decodes whatever its bytes became: another valid record of the same length in
    its place is refused by its entry's CRC alone."""
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    mine = encode(MAGIC, VERSION, record_payload(key, analyze(TEXT)))
    other_text = TEXT.replace("host", "hose")
    other = encode(MAGIC, VERSION, record_payload(key, analyze(other_text)))
    assert len(other) == len(mine)
    assert read_record(other, key) == analyze(other_text)
    store.write_raw([(key, mine)])
    path = store.path(key)
    data = path.read_bytes()
    path.write_bytes(data[: -len(mine)] + other)
    assert store.get(key) is None
    assert store.stats.rebuilt == 1


def test_version_2_files_are_listed_from_two_letter_directories_alone(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    bucket = tmp_path / key[:2]
    bucket.mkdir()
    old = bucket / f"{key}.ck"
    old.write_bytes(b"a version 2 record")
    (bucket / "notes.txt").write_bytes(b"not a record")
    (bucket / f".{key}.ck").write_bytes(b"hidden")
    (tmp_path / "abc").mkdir()
    (tmp_path / "abc" / f"{key}.ck").write_bytes(b"not in a bucket")
    (tmp_path / "cd.ck").write_bytes(b"")  # a file named like a bucket's record
    (tmp_path / "ef").write_bytes(b"")  # a file, not a bucket
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{key}.ck").write_bytes(b"someone else's")
    (tmp_path / "gh").symlink_to(elsewhere)  # a link, not a bucket
    assert list(store.legacy_files()) == [old]


def test_a_sweep_looks_in_the_packs_and_two_letter_directories_alone(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    long_ago = time.time() - 7200
    where = [tmp_path / PACKS, tmp_path / "ab", tmp_path / "abc"]
    for d in where:
        d.mkdir()
        (d / ".x.ckp.1.tmp").write_bytes(b"half")
        os.utime(d / ".x.ckp.1.tmp", (long_ago, long_ago))
    assert store.remove_stale_temp(older_than=3600) == 2
    assert [(d / ".x.ckp.1.tmp").exists() for d in where] == [False, False, True]
