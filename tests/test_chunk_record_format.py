"""The chunk store's version 4 records: what a batch's records become in bytes (store/chunkstore.py
``records_bytes``) reads back equal, record by record, whatever the records beside it; the words
are joined, the word ids stored as differences, each array as narrow as its own record allows;
and a version 3 pack is refused and deleted when listed."""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.analyze import FileRecord, analyze
from nodwyn_retrieval.store.chunkstore import (
    MAGIC,
    VERSION,
    ChunkStore,
    read_record,
    record_bytes,
    record_payload,
    records_bytes,
)
from nodwyn_retrieval.store.codec import decode, encode
from nodwyn_retrieval.store.packs import PACKS, pack_bytes, reset_indexes

ROOT = Path(__file__).resolve().parent.parent


def key_of(t: str) -> str:
    return ChunkStore.key(hashlib.sha256(t.encode()).hexdigest())


def u32(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.uint32)


def record(
    vocab: list[str], chunks: list[dict[int, tuple[int, int]]], lines: int = 3
) -> FileRecord:
    """A record of len(chunks) chunks of ``lines`` lines, chunk i's pairs given as
    word id -> (count, first-line count), in the order given (not necessarily ascending)."""
    starts = [1 + i * lines for i in range(len(chunks))]
    offsets, word, body, first = [0], [], [], []
    for pairs in chunks:
        for w, (b, f) in pairs.items():
            word.append(w)
            body.append(b)
            first.append(f)
        offsets.append(len(word))
    return FileRecord(
        tuple(vocab), u32(starts), u32([s + lines - 1 for s in starts]), u32(offsets),
        u32(word), u32(body), u32(first),
    )  # fmt: skip


def sources() -> list[tuple[str, str]]:
    files = sorted((ROOT / "store").glob("*.py")) + sorted((ROOT / "retrieval").glob("*.py"))
    return [(p.name, p.read_text(encoding="utf-8")) for p in files]


def test_a_batch_of_real_records_reads_back_equal_record_by_record() -> None:
    texts = [t for _, t in sources()]
    items = [(key_of(t), analyze(t)) for t in texts]
    blobs = records_bytes(items)
    assert len(blobs) == len(items)
    for (key, rec), blob in zip(items, blobs, strict=True):
        assert read_record(blob, key) == rec
        # A record's bytes do not depend on the batch it was written in.
        assert blob == record_bytes(key, rec)


def test_the_store_puts_and_gets_a_batch_with_odd_records_beside_real_ones(tmp_path: Path) -> None:
    big = analyze((ROOT / "store" / "chunkstore.py").read_text(encoding="utf-8"))
    odd = [
        record([], []),  # no chunk
        record([], [{}, {}]),  # chunks and no word
        record(["a"], [{}, {0: (1, 1)}, {}]),  # empty chunks around one pair
        record(["x", "y", "z"], [{2: (1, 0), 0: (3, 1)}, {1: (2, 2)}]),  # ids going down: invalid
        record(["a\nb", "c"], [{0: (1, 0), 1: (1, 1)}]),  # a word with a newline: invalid
        record([""], [{}]),  # an empty word: invalid
        record(["é", "変数", "a"], [{0: (70_000, 0), 1: (2**31 - 1, 5), 2: (1, 1)}]),
    ]
    items = [(key_of(f"odd {i}"), r) for i, r in enumerate(odd)] + [(key_of("big"), big)]
    store = ChunkStore(tmp_path)
    store.put_many(items)
    reset_indexes()
    again = ChunkStore(tmp_path)
    for key, rec in items:
        blob = again.read_raw(again.path(key), [key])[0][1]
        obj = decode(MAGIC, VERSION, blob)
        assert isinstance(obj, dict)
        if rec.vocab and (any("\n" in w for w in rec.vocab) or rec.vocab == ("",)):
            assert obj["record"]["vocab"] == list(rec.vocab)  # kept as a list
        else:
            assert obj["record"]["vocab"] == "\n".join(rec.vocab)
    for key, rec in items[:3] + items[4:5] + items[-2:]:
        assert again.get(key) == rec  # the valid ones, read back whole
    for key, _ in (items[3], items[5]):
        with pytest.raises(FormatError):
            read_record(again.read_raw(again.path(key), [key])[0][1], key)
    # What an invalid record holds still comes back as it was given, before its checks.
    from nodwyn_retrieval.store import chunkstore

    for key, rec in items[3:6]:
        blob = again.read_raw(again.path(key), [key])[0][1]
        obj = decode(MAGIC, VERSION, blob)
        assert isinstance(obj, dict)
        back = chunkstore._decoded(obj["record"], obj["widths"])
        assert isinstance(back, dict)
        assert back == rec.to_obj()


def test_word_ids_are_stored_as_differences_within_each_chunk() -> None:
    rec = record([f"w{i}" for i in range(1000)],
                 [{10: (1, 0), 11: (1, 0), 15: (2, 1)}, {900: (1, 1), 999: (1, 0)}, {},
                  {500: (1, 0)}])  # fmt: skip
    obj = record_payload(key_of("d"), rec)
    names = ("starts", "ends", "offsets", "word", "body", "first")
    widths = dict(zip(names, obj["widths"], strict=True))
    assert widths["word"] == 2  # 900 and 999 do not fit a byte
    stored = np.frombuffer(obj["record"]["word"], dtype="<u2").tolist()
    assert stored == [10, 1, 4, 900, 99, 500]
    assert read_record(encode(MAGIC, VERSION, obj, compress=True), key_of("d")) == rec


def test_each_record_is_as_narrow_as_its_own_values_whatever_the_batch() -> None:
    small = record(["a", "b"], [{0: (1, 1), 1: (2, 0)}])
    large = record([f"w{i}" for i in range(70_000)], [{0: (1, 0), 69_999: (300, 300)}],
                   lines=70_000)  # fmt: skip
    for items in ([small, large], [large, small]):
        payloads = [record_payload(key_of(str(i)), r) for i, r in enumerate(items)]
        blobs = records_bytes([(key_of(str(i)), r) for i, r in enumerate(items)])
        for r, payload, blob in zip(items, payloads, blobs, strict=True):
            obj = decode(MAGIC, VERSION, blob)
            assert isinstance(obj, dict)
            assert obj == payload
            if r is small:
                assert obj["widths"] == b"\x01" * 6
            else:
                # starts 1, ends 70,000, offsets 2, word 69,999 as a difference, counts 300.
                assert obj["widths"] == bytes([1, 4, 1, 4, 2, 2])
            assert read_record(blob, obj["key"]) == r


def test_a_word_difference_past_two_to_the_32_wraps_and_comes_back() -> None:
    rec = record(["a", "b"], [{1: (1, 0), 0: (1, 0)}])  # going down: 0 - 1 wraps
    obj = record_payload(key_of("w"), rec)
    assert obj["widths"][3] == 4
    assert np.frombuffer(obj["record"]["word"], dtype="<u4").tolist() == [1, 2**32 - 1]
    from nodwyn_retrieval.store import chunkstore

    back = chunkstore._decoded(obj["record"], obj["widths"])
    assert isinstance(back, dict)
    assert back["word"] == rec.to_obj()["word"]


@pytest.mark.parametrize(
    "offsets",
    [[1, 2], [0, 3], [0, 2, 1, 2], [0, 1, 0, 2]],
    ids=["not from 0", "past the pairs", "going back", "going back to 0"],
)
def test_offsets_that_do_not_hold_leave_the_differences_for_the_record_check(
    offsets: list[int],
) -> None:
    rec = record(["a", "b"], [{0: (1, 0), 1: (1, 0)}])
    obj = record_payload(key_of("o"), rec)
    obj["record"]["offsets"] = bytes(offsets)
    obj["record"]["starts"] = bytes(len(offsets) - 1)
    obj["record"]["ends"] = bytes(len(offsets) - 1)
    from nodwyn_retrieval.store import chunkstore

    back = chunkstore._decoded(obj["record"], obj["widths"])
    assert isinstance(back, dict)
    assert np.frombuffer(back["word"], dtype="<u4").tolist() == [0, 1]  # as stored
    with pytest.raises(FormatError, match=r"^file record: .*: rebuild$"):
        read_record(encode(MAGIC, VERSION, obj), key_of("o"))


def test_widths_that_are_off_are_a_rebuild() -> None:
    obj = record_payload(key_of("x"), analyze("def f(x):\n    return x\n"))
    for widths, message in (
        (b"\x01" * 5, "widths are 6 bytes"),
        ("\x01" * 6, "widths are 6 bytes"),
        (b"\x01\x01\x01\x03\x01\x01", "word is 3 bytes a value"),
    ):
        bad = {**obj, "widths": widths}
        with pytest.raises(FormatError, match=message):
            read_record(encode(MAGIC, VERSION, bad), key_of("x"))
    bad = {**obj, "widths": b"\x01\x01\x01\x02\x01\x01"}
    word = obj["record"]["word"]
    bad["record"] = {**obj["record"], "word": word + b"\x00" * (1 + len(word) % 2)}
    with pytest.raises(FormatError, match="word is not whole"):
        read_record(encode(MAGIC, VERSION, bad), key_of("x"))


def test_a_vocabulary_that_is_not_text_or_a_list_is_refused() -> None:
    obj = record_payload(key_of("v"), analyze("alpha beta\n"))
    for vocab in (b"alpha\nbeta", 3, None):
        bad = {**obj, "record": {**obj["record"], "vocab": vocab}}
        with pytest.raises(FormatError, match=r"^file record: vocab is a list"):
            read_record(encode(MAGIC, VERSION, bad), key_of("v"))
    bad = {**obj, "record": {**obj["record"], "vocab": "alpha\nbeta\nalpha"}}
    with pytest.raises(FormatError, match="vocab holds a word twice"):
        read_record(encode(MAGIC, VERSION, bad), key_of("v"))
    bad = {**obj, "record": {**obj["record"], "vocab": "alpha\n\nbeta"}}
    with pytest.raises(FormatError, match="not a word"):
        read_record(encode(MAGIC, VERSION, bad), key_of("v"))


def test_a_version_3_pack_is_refused_and_deleted_when_listed(tmp_path: Path) -> None:
    key = key_of("old")
    blob = encode(MAGIC, 3, {"key": key, "record": analyze("old\n").to_obj()}, compress=True)
    data = bytearray(pack_bytes([(key, blob)]))
    struct.pack_into(">H", data, 4, 3)
    struct.pack_into(">I", data, 12 + 48, zlib.crc32(bytes(data[: 12 + 48])))
    (tmp_path / PACKS).mkdir()
    old = tmp_path / PACKS / "0000000000000001-000000000001.ckp"
    old.write_bytes(bytes(data))
    reset_indexes()
    store = ChunkStore(tmp_path)
    assert store.get(key) is None
    assert store.stats.rebuilt == 1
    assert not old.exists()


def test_the_records_are_smaller_than_version_3s_zlib_records() -> None:
    from nodwyn_retrieval.store.chunkstore import _ARRAYS

    total_new = total_old = 0
    for _, t in sources():
        rec = analyze(t)
        key = key_of(t)
        total_new += len(record_bytes(key, rec))
        # Version 3: the words a list, the ids as they are, zlib level 1.
        obj = rec.to_obj()
        for name in _ARRAYS:
            a = np.frombuffer(obj[name], dtype="<u4")  # type: ignore[arg-type]
            top = int(a.max()) if a.size else 0
            obj[name] = a.astype("<u1" if top < 256 else "<u2" if top < 65536 else "<u4").tobytes()
        total_old += len(encode(MAGIC, 3, {"key": key, "record": obj, "widths": b"\x01" * 6},
                                compress=True, level=1))  # fmt: skip
    assert total_new < 0.9 * total_old


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40),  # words
            st.lists(st.lists(st.integers(0, 2**32 - 1), max_size=6), max_size=5),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_any_arrays_come_back_as_given(batch: list[tuple[int, list[list[int]]]]) -> None:
    """Whatever ids a record's chunks hold (ascending or not, past its words), its arrays read
    back exactly, before the record's own checks."""
    from nodwyn_retrieval.store import chunkstore

    items = []
    for i, (n_words, chunks) in enumerate(batch):
        rec = record([f"w{j}" for j in range(n_words)],
                     [{w: (1 + j, j) for j, w in enumerate(c)} for c in chunks])  # fmt: skip
        items.append((key_of(str(i)), rec))
    for (key, rec), blob in zip(items, records_bytes(items), strict=True):
        obj = decode(MAGIC, VERSION, blob)
        assert isinstance(obj, dict)
        assert obj["key"] == key
        assert chunkstore._decoded(obj["record"], obj["widths"]) == rec.to_obj()


@pytest.mark.parametrize(
    "vocab",
    [["a", ["b"]], ["a", {"b": 1}], ["a", b"b"], ["a", None], ["", "a"], ["a", 1.5]],
    ids=["a list", "a map", "bytes", "nil", "empty first", "a float"],
)
def test_a_vocabulary_holding_what_is_not_a_word_is_refused_as_such(vocab: list[object]) -> None:
    obj = analyze("a b\n").to_obj()
    obj["vocab"] = vocab
    with pytest.raises(
        FormatError, match=r"^file record: vocab holds something that is not a word"
    ):
        FileRecord.from_obj(obj)


def test_a_str_subclass_is_not_a_word_and_a_word_twice_is_named() -> None:
    class Word(str):
        pass

    obj = analyze("a b\n").to_obj()
    obj["vocab"] = ["a", Word("b")]
    with pytest.raises(FormatError, match="not a word"):
        FileRecord.from_obj(obj)
    obj["vocab"] = ["a", "a"]
    with pytest.raises(FormatError, match="a word twice"):
        FileRecord.from_obj(obj)
    obj["vocab"] = ["b", "a"]
    assert FileRecord.from_obj(obj).vocab == ("b", "a")


def test_a_threads_decompressor_reads_on_after_a_corrupt_frame() -> None:
    good = record_bytes(key_of("g"), analyze("alpha beta\ngamma\n"))
    for cut in (len(good) - 1, len(good) // 2, 12):
        with pytest.raises(FormatError):
            read_record(good[:cut], key_of("g"))
        assert read_record(good, key_of("g")) == analyze("alpha beta\ngamma\n")


@pytest.mark.parametrize("name", ["starts", "ends", "offsets", "word", "body", "first"])
@pytest.mark.parametrize("bad", [None, 7, "abcd", [1, 2]], ids=["nil", "int", "str", "list"])
def test_any_array_that_is_not_bytes_is_named_and_rebuilt(
    name: str, bad: object, tmp_path: Path
) -> None:
    key = key_of("alpha beta\ngamma\n")
    obj = record_payload(key, analyze("alpha beta\ngamma\n"))
    obj["record"] = {**obj["record"], name: bad}
    data = encode(MAGIC, VERSION, obj, compress=True, method="zstd")
    with pytest.raises(FormatError, match=rf"^file record: {name} is bytes, got "):
        read_record(data, key)
    store = ChunkStore(tmp_path)
    store.write_raw([(key, data)])
    assert store.get(key) is None
    assert store.stats.rebuilt == 1
