"""store.chunkstore: records stored once per content, and a bad record rebuilt (ADR 0050 §4)."""

from __future__ import annotations

import hashlib
import os
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.retrieval.analyze import ANALYZE_VERSION, analyze
from nodwyn_retrieval.store.chunkstore import (
    SUFFIX,
    VERSION,
    ChunkStore,
    read_record,
    record_payload,
)
from nodwyn_retrieval.store.codec import encode
from nodwyn_retrieval.store.packs import PACKS, pack_index, reset_indexes

TEXT = (
    "def scrub_env(env):\n"
    '    """Drop credentials from ScrubEnv."""\n'
    "    return {k: v for k, v in env.items() if k != 'API_KEY'}\n"
    "\n"
    "class CredentialBinding:\n"
    "    host = 'localhost'\n"
)


def key_of(text: str) -> str:
    return ChunkStore.key(hashlib.sha256(text.encode()).hexdigest())


def test_a_key_is_the_content_hash_and_the_analyze_version() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert ChunkStore.key(digest) == f"{digest}-{ANALYZE_VERSION}"


@pytest.mark.parametrize("bad", ["", "ABC", "0" * 63, "g" * 64, "0" * 64 + "\n"])
def test_a_content_hash_must_be_64_lowercase_hex_digits(bad: str) -> None:
    with pytest.raises(BadInput, match=r"^a content hash is 64 lowercase hex digits, got .*$"):
        ChunkStore.key(bad)


@pytest.mark.parametrize("bad", ["../x", "0" * 64, "0" * 64 + "-x", "x/" + "0" * 62 + "-1"])
def test_a_key_the_store_would_not_make_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(BadInput, match=r"^.* is not a chunk store key$"):
        ChunkStore(tmp_path).get(bad)


def fresh(store: ChunkStore) -> ChunkStore:
    """The same store as a new process sees it: its packs listed and read again."""
    reset_indexes()
    return ChunkStore(store.directory)


def packs_in(directory: Path) -> list[Path]:
    return sorted((directory / PACKS).glob(f"*{SUFFIX}"))


def with_record_bytes(store: ChunkStore, key: str, data: bytes) -> ChunkStore:
    """The store with key's record replaced by data, in a pack whose entry checks (its CRC is
    data's): what the record's own checks must catch."""
    for p in packs_in(store.directory):
        p.unlink()
    reset_indexes()
    out = ChunkStore(store.directory)
    out.write_raw([(key, data)])
    return out


def test_a_record_round_trips_through_the_store(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path / "chunks")
    record = analyze(TEXT)
    key = key_of(TEXT)
    assert store.get(key) is None
    assert not store.exists(key)
    written = store.put(key, record)
    assert store.exists(key)
    [path] = packs_in(tmp_path / "chunks")
    assert store.path(key) == path
    assert path.stat().st_size == written
    assert path.read_bytes()[:4] == b"NRCP"
    again = fresh(store).get(key)
    assert again == record
    assert again is not None
    assert again.chunk_words(0) == record.chunk_words(0)
    assert store.stats.misses == 1
    assert store.stats.written == 1


def test_a_record_holds_no_text(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    stored = store.path(key).read_bytes()
    assert b"'API_KEY'" not in stored
    assert b"localhost'" not in stored


def test_a_batch_of_records_is_one_pack_and_each_is_found_by_its_key(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    texts = [f"def f{i}():\n    return {i}\n" for i in range(40)]
    items = [(key_of(t), analyze(t)) for t in texts]
    written = store.put_many([*items, items[3]])  # a content given twice is stored once
    [path] = packs_in(tmp_path)
    assert path.stat().st_size == written
    assert (store.stats.written, store.stats.packs_written) == (40, 1)
    other = fresh(store)
    for key, rec in reversed(items):
        assert other.get(key) == rec
    assert sorted(k for k, _, _ in other.iter_entries()) == sorted(k for k, _ in items)
    assert store.put_many([]) == 0
    assert len(packs_in(tmp_path)) == 1


def test_a_missing_pack_directory_is_a_miss_and_a_path_of_a_missing_key_says_so(
    tmp_path: Path,
) -> None:
    store = ChunkStore(tmp_path / "nowhere")
    assert store.get(key_of(TEXT)) is None
    with pytest.raises(FileNotFoundError, match="no chunk record of"):
        store.path(key_of(TEXT))


def _corruptions(good: bytes, key: str, other_key: str) -> dict[str, bytes]:
    rec = analyze(TEXT).to_obj()
    narrow = {**rec, "starts": b"\x01"}  # one value in one byte, as "widths" would say
    return {
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "garbage": os.urandom(200),
        "foreign magic": b"NRMF" + good[4:],
        "future version": good[:4] + struct.pack(">H", VERSION + 1) + good[6:],
        # Version 1 held the same map with every array 4 bytes a value: rebuilt, not read.
        "older version": encode(b"NRCK", 1, {"key": key, "record": rec}, compress=True),
        "another key": encode(b"NRCK", VERSION, {"key": other_key, "record": {}}, compress=True),
        "not a record": encode(b"NRCK", VERSION, {"key": key, "record": {"vocab": 1}}),
        "not a map": encode(b"NRCK", VERSION, [key]),
        "widths too short": encode(b"NRCK", VERSION, {"key": key, "record": rec, "widths": b"\4"}),
        "widths not bytes": encode(b"NRCK", VERSION, {"key": key, "record": rec, "widths": 4}),
        "a width of 3": encode(
            b"NRCK", VERSION, {"key": key, "record": rec, "widths": bytes([3, 4, 4, 4, 4, 4])}
        ),
        "an array not whole": encode(
            b"NRCK",
            VERSION,
            {
                "key": key,
                "record": {**rec, "starts": b"\1\0\0"},
                "widths": bytes([2, 4, 4, 4, 4, 4]),
            },
        ),
        "widths that do not fit": encode(
            b"NRCK", VERSION, {"key": key, "record": narrow, "widths": bytes([4, 4, 4, 4, 4, 4])}
        ),
        "an unknown field": encode(
            b"NRCK", VERSION, {"key": key, "record": rec, "widths": b"\4" * 6, "more": 1}
        ),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "truncated",
        "empty",
        "garbage",
        "foreign magic",
        "future version",
        "another key",
        "not a record",
        "not a map",
        "older version",
        "widths too short",
        "widths not bytes",
        "a width of 3",
        "an array not whole",
        "widths that do not fit",
        "an unknown field",
    ],
)
def test_a_bad_record_is_dropped_counted_and_rebuilt(tmp_path: Path, kind: str) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    good = store.read_raw(store.path(key), [key])[0][1]
    store = with_record_bytes(store, key, _corruptions(good, key, key_of("other"))[kind])
    assert store.exists(key)
    assert store.get(key) is None
    assert store.stats.rebuilt == 1
    assert packs_in(tmp_path) == []  # the pack deleted
    assert not store.exists(key)
    store.put(key, analyze(TEXT))
    assert fresh(store).get(key) == analyze(TEXT)
    assert store.stats.rebuilt == 1


@pytest.mark.parametrize(
    "how", ["truncated", "empty", "garbage", "future version", "entries flipped", "cut in a record"]
)
def test_a_damaged_pack_is_deleted_and_its_records_rebuilt_without_a_crash(
    tmp_path: Path, how: str
) -> None:
    store = ChunkStore(tmp_path)
    texts = [f"def g{i}():\n    return {i}\n" for i in range(5)]
    keys = [key_of(t) for t in texts]
    store.put_many([(k, analyze(t)) for k, t in zip(keys, texts, strict=True)])
    [path] = packs_in(tmp_path)
    good = path.read_bytes()
    damaged = {
        "truncated": good[:20],
        "empty": b"",
        "garbage": os.urandom(len(good)),
        "future version": good[:4] + struct.pack(">H", VERSION + 1) + good[6:],
        "entries flipped": good[:30] + bytes([good[30] ^ 0x10]) + good[31:],
        "cut in a record": good[:-7],
    }[how]
    path.write_bytes(damaged)
    other = fresh(store)
    got = [other.get(k) for k in keys]
    assert got == [None] * 5
    assert not path.exists()
    other.put_many([(k, analyze(t)) for k, t in zip(keys, texts, strict=True)])
    assert [fresh(store).get(k) for k in keys] == [analyze(t) for t in texts]


def test_a_process_that_knows_a_pack_finds_a_record_damaged_in_it(tmp_path: Path) -> None:
    """A pack's entries, once read, are not read again; a record's own CRC catches its bytes
    changed since, and the next copy (another tree's) is taken."""
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    path = store.path(key)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    store.put(key, analyze(TEXT))  # a second copy, as a second tree would store it
    assert store.get(key) == analyze(TEXT)
    assert store.stats.rebuilt == 1
    assert not path.exists()
    assert len(packs_in(tmp_path)) == 1


def test_a_version_2_record_file_is_not_read(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    old = tmp_path / key[:2] / f"{key}.ck"
    old.parent.mkdir()
    old.write_bytes(encode(b"NRCK", 2, record_payload(key, analyze(TEXT))))
    assert store.get(key) is None
    assert not store.exists(key)
    assert store.stats.rebuilt == 0
    assert list(store.legacy_files()) == [old]
    assert list(store.iter_entries()) == []


def test_a_miss_lists_the_directory_again_only_when_it_changed(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    store.put(key_of(TEXT), analyze(TEXT))
    index = pack_index(tmp_path)
    time.sleep(1.1)  # past the second in which the directory changed
    before = index.listings
    for i in range(50):
        assert not store.exists(key_of(f"missing {i}"))
    assert index.listings - before <= 1
    ChunkStore(tmp_path).put(key_of("new\n"), analyze("new\n"))
    reset_indexes()
    other = ChunkStore(tmp_path)
    assert other.exists(key_of("new\n"))


def test_a_record_of_an_older_analyze_version_is_never_read(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    digest = hashlib.sha256(TEXT.encode()).hexdigest()
    old = f"{digest}-{ANALYZE_VERSION - 1}"
    store.put(old, analyze(TEXT))
    assert store.get(ChunkStore.key(digest)) is None
    assert store.stats.rebuilt == 0


def test_entries_list_records_with_mtime_and_size_and_touch_renews_them(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    keys = {key_of(t): store.put(key_of(t), analyze(t)) for t in ("a\n", "b\n", TEXT)}
    (tmp_path / PACKS / "stray.txt").write_text("x")
    (tmp_path / PACKS / f".x{SUFFIX}").write_text("x")
    (tmp_path / "README").write_text("x")
    listed = {k: (m, s) for k, m, s in store.iter_entries()}
    # A pack of one: its 12-byte header, one 48-byte entry, their 4-byte CRC, the record.
    assert {k: s + 16 + 48 for k, (_, s) in listed.items()} == keys
    first = next(iter(keys))
    long_ago = time.time() - 30 * 86400
    os.utime(store.path(first), (long_ago, long_ago))
    assert {k: m for k, m, _ in store.iter_entries()}[first] == pytest.approx(long_ago)
    store.touch(first)
    assert {k: m for k, m, _ in store.iter_entries()}[first] > long_ago + 86400
    store.touch(key_of("never stored"))
    assert not store.exists(key_of("never stored"))


def test_remove_deletes_a_record_and_ignores_a_missing_one(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put_many([(key, analyze(TEXT)), (key_of("kept\n"), analyze("kept\n"))])
    store.remove(key)
    store.remove(key)
    assert not store.exists(key)
    assert not fresh(store).exists(key)
    assert [k for k, _, _ in store.iter_entries()] == [key_of("kept\n")]
    assert store.get(key_of("kept\n")) == analyze("kept\n")
    store.remove(key_of("kept\n"))
    assert list(store.iter_entries()) == []
    assert packs_in(tmp_path) == []


def test_an_empty_or_missing_store_lists_nothing(tmp_path: Path) -> None:
    assert list(ChunkStore(tmp_path / "nowhere").iter_entries()) == []


def test_old_temporary_files_are_swept_and_young_ones_kept(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    bucket = store.path(key).parent
    old = bucket / f".{key}.ckp.abc.tmp"
    young = bucket / f".{key}.ckp.def.tmp"
    old.write_bytes(b"x")
    young.write_bytes(b"x")
    long_ago = time.time() - 7200
    os.utime(old, (long_ago, long_ago))
    assert store.remove_stale_temp(older_than=3600) == 1
    assert not old.exists()
    assert young.exists()
    assert store.exists(key)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_pack_is_read_whole_or_dropped(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    store = ChunkStore(tmp_path_factory.mktemp("fuzz"))
    key = key_of(TEXT)
    store.put(key, analyze(TEXT))
    path = store.path(key)
    good = bytearray(path.read_bytes())
    how = data.draw(st.sampled_from(["flip", "cut", "random"]))
    if how == "flip":
        for bit in data.draw(st.lists(st.integers(0, len(good) * 8 - 1), min_size=1, max_size=3)):
            good[bit // 8] ^= 1 << (bit % 8)
        damaged = bytes(good)
    elif how == "cut":
        damaged = bytes(good[: data.draw(st.integers(0, len(good) - 1))])
    else:
        damaged = data.draw(st.binary(max_size=400))
    path.write_bytes(damaged)
    for reader in (store, fresh(store)):  # one that knows the pack, one that lists it anew
        got = reader.get(key)
        assert got is None or got == analyze(TEXT)
        assert (got is None) == (not path.exists())


@pytest.mark.parametrize("top", [0, 255, 256, 65535, 65536, 2**31 - 1])
def test_arrays_are_stored_in_the_fewest_bytes_that_hold_them_and_read_back(
    tmp_path: Path, top: int
) -> None:
    """Each array's width follows its largest value (1, 2 or 4 bytes), and reads back exactly."""
    import numpy as np
    from nodwyn_retrieval.retrieval.analyze import FileRecord
    from nodwyn_retrieval.store.codec import decode

    base = analyze(TEXT)
    body = base.body.astype(np.int64).copy()
    body[0] = max(top, 1)
    first = np.minimum(base.first, body).astype(np.uint32)
    rec = FileRecord(
        base.vocab, base.starts, base.ends, base.offsets, base.word, body.astype(np.uint32), first
    )
    store = ChunkStore(tmp_path)
    key = key_of(TEXT)
    store.put(key, rec)
    data = store.read_raw(store.path(key), [key])[0][1]
    assert read_record(data, key) == rec
    assert store.get(key) == rec
    obj = decode(b"NRCK", VERSION, data)
    assert isinstance(obj, dict)
    widths = dict(
        zip(("starts", "ends", "offsets", "word", "body", "first"), obj["widths"], strict=True)
    )
    want = 1 if max(top, 1) < 256 else 2 if top < 65536 else 4
    assert widths["body"] == want
    assert len(obj["record"]["body"]) == want * len(rec.body)
    assert widths["starts"] == 1  # a short file's lines


def test_a_record_stored_under_another_key_is_refused_by_read_record() -> None:
    from nodwyn_retrieval.errors import FormatError

    data = encode(b"NRCK", VERSION, record_payload(key_of("x"), analyze(TEXT)))
    assert read_record(data) == analyze(TEXT)
    with pytest.raises(FormatError, match="stored as"):
        read_record(data, key_of(TEXT))
