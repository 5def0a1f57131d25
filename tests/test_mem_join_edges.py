"""The joined words' reader refuses every file that is not one it wrote whole, each with one clear
``JoinDamaged`` (store.mem_join): forged heads and sections, each with a CRC that holds."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.store import mem_join as mj
from nodwyn_retrieval.store import mem_log
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path, word_keys
from nodwyn_retrieval.store.mem_join import Join, JoinDamaged, JoinedMem, encode_join, join_path

from tests.test_earlier import read, write_task
from tests.test_mem_join import folds_equal, search


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    d = tmp_path_factory.mktemp("edges") / "tasks"
    parts = []
    for i, words in enumerate(("alpha beta", "beta gamma delta", "gamma epsilon")):
        tid = f"t{i}"
        write_task(d, tid, [[("person.message", {"text": words}), *read(words)]], day=1 + i)
        with LogView.open(d / f"{tid}.jsonl"):
            pass
        parts.append((tid, mem_path(d / f"{tid}.jsonl").read_bytes()))
    return encode_join(parts)


def head(data: bytes) -> list[object]:
    return list(mj._HEAD.unpack_from(data, mj.HEADER.size + mj._CRC.size))


def with_head(data: bytes, fields: list[object]) -> bytes:
    h = mj._HEAD.pack(*fields)
    return data[: mj.HEADER.size] + mj._CRC.pack(zlib.crc32(h)) + h + data[mj._BASE :]


def section(data: bytes, name: str) -> tuple[int, int]:
    """(offset in the file, length) of a section."""
    f = head(data)
    k = mj._S[name]
    off, length = int(f[9 + 3 * k]), int(f[10 + 3 * k])  # type: ignore[call-overload]
    return mj._align(mj._BASE) + off, length


def with_section(data: bytes, name: str, new: bytes) -> bytes:
    """The file with a section's bytes replaced (the same length) and its CRC made to hold."""
    at, length = section(data, name)
    assert len(new) == length
    out = data[:at] + new + data[at + length :]
    f = head(out)
    f[11 + 3 * mj._S[name]] = zlib.crc32(new)
    return with_head(out, f)


def refused(tmp_path: Path, data: bytes, match: str) -> None:
    path = join_path(tmp_path)
    path.write_bytes(data)
    with pytest.raises(JoinDamaged, match=rf"^earlier\.join {match}: rebuild$"):
        Join.open(tmp_path)


def test_the_good_file_reads(tmp_path: Path, good: bytes) -> None:
    join_path(tmp_path).write_bytes(good)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        assert list(j.entries) == ["t0", "t1", "t2"]
        assert [e.base for e in j.entries.values()] == [0, 3, 6]
        assert j.n_docs == 9


def test_no_file_is_none_and_a_directory_is_refused(tmp_path: Path) -> None:
    assert Join.open(tmp_path) is None
    join_path(tmp_path).mkdir()
    with pytest.raises(JoinDamaged, match=r"^earlier\.join cannot be read"):
        Join.open(tmp_path)


@pytest.mark.parametrize(
    ("forge", "match"),
    [
        (lambda b: b[:20], "of 20 bytes is shorter than its head"),
        (lambda b: b"NRME" + b[4:], r"is not a join \(magic b'NRME'\)"),
        (lambda b: b[:4] + struct.pack(">HH", 2, 0) + b[8:], "format version 2, flags 0x0000 are "
            "not 1, 0"),
        (lambda b: b[:4] + struct.pack(">HH", 1, 1) + b[8:], "format version 1, flags 0x0001 are "
            "not 1, 0"),
        (lambda b: b[:8] + bytes([b[8] ^ 1]) + b[9:], "head fails its check"),
    ],
)  # fmt: skip
def test_a_foreign_or_cut_head_is_refused(
    tmp_path: Path, good: bytes, forge: Callable[[bytes], bytes], match: str
) -> None:
    refused(tmp_path, forge(good), match)


@pytest.mark.parametrize(
    ("at", "value", "match"),
    [
        (6, 0, r"words, events or \.mem versions are not this program's"),
        (7, 0, r"words, events or \.mem versions are not this program's"),
        (8, 2, r"words, events or \.mem versions are not this program's"),
        (4, 3, "widths are not 2 or 4 and 1, 2 or 4"),
        (5, 3, "widths are not 2 or 4 and 1, 2 or 4"),
        (3, 70_000, "widths are not 2 or 4 and 1, 2 or 4"),  # 2-byte documents past 65,536
        (2, None, "sections are not the lengths their counts say"),  # one more posting
        (0, None, "sections are not the lengths their counts say"),  # one more task
    ],
)
def test_a_head_whose_counts_do_not_hold_is_refused(
    tmp_path: Path, good: bytes, at: int, value: int | None, match: str
) -> None:
    f = head(good)
    f[at] = int(f[at]) + 1 if value is None else value  # type: ignore[call-overload]
    refused(tmp_path, with_head(good, f), match)


def test_a_section_outside_the_file_is_refused(tmp_path: Path, good: bytes) -> None:
    f = head(good)
    k = mj._S["rest"]
    f[9 + 3 * k] = int(f[9 + 3 * k]) + 8  # type: ignore[call-overload]
    refused(tmp_path, with_head(good, f), "a section lies outside the file")
    # The last byte of the file is the last section's: one byte less is outside.
    refused(tmp_path, good[:-1], "a section lies outside the file")


def test_a_section_that_fails_its_crc_is_refused(tmp_path: Path, good: bytes) -> None:
    for name in ("ids", "tasks", "doc_len"):
        at, _ = section(good, name)
        bad = good[:at] + bytes([good[at] ^ 1]) + good[at + 1 :]
        refused(tmp_path, bad, f"section {name} fails its check")


def test_ids_that_are_not_the_tasks_are_refused(tmp_path: Path, good: bytes) -> None:
    at, length = section(good, "ids")
    ids = good[at : at + length]
    assert ids == b"t0\nt1\nt2\n"
    cases = [
        (b"t0\nt1xt2\n", "task ids are not the head's count"),
        (b"t0\nt1\nt2x", "task ids are not the head's count"),
        (b"t0\nt0\nt2\n", "tasks are not distinct, or their counts are off"),
        (b"\nt0\nt1x2\n", "tasks are not distinct, or their counts are off"),
        (b"t0\nt1\nt\xff\n", "task ids are not UTF-8"),
    ]
    for new, match in cases:
        refused(tmp_path, with_section(good, "ids", new), match)


def test_tasks_whose_documents_are_not_the_heads_are_refused(tmp_path: Path, good: bytes) -> None:
    at, length = section(good, "tasks")
    rows = [list(r) for r in mj._TASK.iter_unpack(good[at : at + length])]
    docs = 9  # the row's documents, then its events
    for change, match in [
        ({docs: rows[0][docs] + 1}, "tasks' documents are not the head's count"),
        ({docs: rows[0][docs + 1] + 1}, "tasks are not distinct, or their counts are off"),
    ]:
        forged = [list(r) for r in rows]
        for i, v in change.items():
            forged[0][i] = v
        new = b"".join(mj._TASK.pack(*r) for r in forged)
        refused(tmp_path, with_section(good, "tasks", new), match)


def test_a_document_length_past_the_bound_is_refused(tmp_path: Path, good: bytes) -> None:
    at, length = section(good, "doc_len")
    new = struct.pack("<I", 2**31) + good[at + 4 : at + length]
    refused(tmp_path, with_section(good, "doc_len", new), r"document length past 2\*\*31-1")


def test_offsets_that_are_not_the_postings_are_refused(tmp_path: Path, good: bytes) -> None:
    at, length = section(good, "poff")
    last = at + length - 4
    (p,) = struct.unpack_from("<I", good, last)
    bad = good[:last] + struct.pack("<I", p - 1) + good[last + 4 :]
    refused(tmp_path, bad, "postings are not the length their offsets say")
    bad = good[:at] + struct.pack("<I", 1) + good[at + 4 :]
    refused(tmp_path, bad, "postings are not the length their offsets say")


def words_of(tmp_path: Path, data: bytes) -> None:
    """Every word's postings in every task, and every kept section, read."""
    join_path(tmp_path).write_bytes(data)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        for e in j.entries.values():
            for g in range(j.n_words):
                j.postings(e, g, 0)
            for name in mj._REST:
                j.kept(e, name)


def test_a_word_entry_out_of_bounds_is_refused(tmp_path: Path, good: bytes) -> None:
    at, _ = section(good, "poff")
    bad = good[: at + 4] + struct.pack("<I", 0) + good[at + 8 :]  # word 0 empty
    with pytest.raises(JoinDamaged, match=r"^earlier\.join entry of word 0 is out of bounds"):
        words_of(tmp_path, bad)


def test_a_kept_section_out_of_place_is_refused(tmp_path: Path, good: bytes) -> None:
    at, length = section(good, "tasks")
    rows = [list(r) for r in mj._TASK.iter_unpack(good[at : at + length])]
    rows[2][16] = 10**9  # the first kept section's offset in rest
    new = b"".join(mj._TASK.pack(*r) for r in rows)
    with pytest.raises(JoinDamaged, match=r"^earlier\.join section doc_event of task t2 lies"):
        words_of(tmp_path, with_section(good, "tasks", new))
    rest, _ = section(good, "rest")
    bad = good[:rest] + bytes([good[rest] ^ 1]) + good[rest + 1 :]
    with pytest.raises(JoinDamaged, match=r"^earlier\.join section doc_event of task t0 fails"):
        words_of(tmp_path, bad)
    words_of(tmp_path, good)


def test_an_id_that_cannot_be_joined_is_refused(good: bytes, tmp_path: Path) -> None:
    join_path(tmp_path).write_bytes(good)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        data = j.kept(j.entries["t0"], "names")  # any bytes: the id is refused first
        for tid in ("", "a\nb"):
            with pytest.raises(ValueError, match=r"^task id .* cannot be joined$"):
                encode_join([(tid, data)], j)
    with pytest.raises(ValueError, match=r"^task t0 is to be taken from a join that does not"):
        encode_join([("t0", None)])
    join_path(tmp_path).write_bytes(good)
    with (
        Join.open(tmp_path) as j,  # type: ignore[union-attr]
        pytest.raises(ValueError, match=r"^task t9 is to be taken from a join that does"),
    ):
        encode_join([("t9", None)], j)


def test_a_join_written_from_files_alone_holds_their_words_only(
    tmp_path: Path, good: bytes
) -> None:
    d = tmp_path / "tasks"
    write_task(d, "t7", [[("person.message", {"text": "zeta eta"})]], day=9)
    with LogView.open(d / "t7.jsonl") as view:
        assert view.mem is not None
        words = view.mem.n_words
    data = mem_path(d / "t7.jsonl").read_bytes()
    join_path(tmp_path).write_bytes(good)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        alone = encode_join([("t7", data)], j)  # nothing taken from the old join
    join_path(tmp_path).write_bytes(alone)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        assert list(j.entries) == ["t7"]
        assert j.n_words == words


def test_a_join_written_again_in_another_order_holds_each_tasks_fold(
    tmp_path: Path, good: bytes
) -> None:
    join_path(tmp_path).write_bytes(good)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        before = {tid: JoinedMem(j, e).fold() for tid, e in j.entries.items()}
        again = encode_join([("t2", None), ("t0", None), ("t1", None)], j)
    join_path(tmp_path).write_bytes(again)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        assert list(j.entries) == ["t2", "t0", "t1"]
        for tid, e in j.entries.items():
            folds_equal(JoinedMem(j, e).fold(), before[tid])
    words_of(tmp_path, again)  # every word's documents ascending again


def test_a_join_of_two_postings_in_the_wrong_order_is_sorted(tmp_path: Path) -> None:
    d = tmp_path / "tasks"
    parts = []
    for tid, word in (("t0", "zz"), ("t1", "aa")):
        write_task(d, tid, [[("person.message", {"text": word})]], day=1)
        with LogView.open(d / f"{tid}.jsonl"):
            pass
        parts.append((tid, mem_path(d / f"{tid}.jsonl").read_bytes()))
    keys = [MemIndex.from_bytes(p).fold().keys for _, p in parts]
    order = parts if int(keys[0][0]) > int(keys[1][0]) else parts[::-1]
    join_path(d).write_bytes(encode_join(order))
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert j.n_postings == 2
        for tid, data in order:
            folds_equal(JoinedMem(j, j.entries[tid]).fold(), MemIndex.from_bytes(data).fold())


def test_a_joined_mem_finds_and_reads_words_as_its_own_mem(tmp_path: Path) -> None:
    d = tmp_path / "tasks"
    parts = []
    texts = ("alpha beta beta", "beta gamma", "gamma alpha delta")
    for i, text in enumerate(texts):
        write_task(d, f"t{i}", [[("person.message", {"text": text}), *read(text)]], day=1 + i)
        with LogView.open(d / f"t{i}.jsonl"):
            pass
        parts.append((f"t{i}", mem_path(d / f"t{i}.jsonl").read_bytes()))
    join_path(d).write_bytes(encode_join(parts))
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    keys = word_keys(words)
    with Join.open(d) as j:  # type: ignore[union-attr]
        for tid, data in parts:
            own, joined = MemIndex.from_bytes(data), JoinedMem(j, j.entries[tid])
            at = joined.find_keys(keys)
            assert [int(i) >= 0 for i in at] == [int(i) >= 0 for i in own.find_keys(keys)]
            for w, i in zip(words, at.tolist(), strict=True):
                want = own.postings(w)
                for got in (joined.postings(w), joined.postings_at(i) if i >= 0 else want):
                    assert [a.tolist() for a in got] == [a.tolist() for a in want], (tid, w)
            assert joined.lengths().tolist() == own.lengths().tolist()
            assert (joined.kinds, joined.agents, joined.cards()) == (
                own.kinds,
                own.agents,
                own.cards(),
            )
            assert joined.card(1) == own.card(1)
            assert joined.doc_events().tolist() == own.doc_events().tolist()
            assert repr(joined) == f"<JoinedMem {tid}: {own.n_docs:,} documents>"


@pytest.mark.parametrize("n", [255, 256, 65_536, 65_537])
def test_a_frequency_at_a_widths_edge_is_kept_whole(tmp_path: Path, n: int) -> None:
    d = tmp_path / "tasks"
    parts = []
    for tid, text in (("t0", "zz " * n), ("t1", "yy zz")):
        write_task(d, tid, [[("person.message", {"text": text})]], day=1)
        with LogView.open(d / f"{tid}.jsonl"):
            pass
        parts.append((tid, mem_path(d / f"{tid}.jsonl").read_bytes()))
    assert int(MemIndex.from_bytes(parts[0][1]).fold().pair_tf.max()) == n
    join_path(d).write_bytes(encode_join(parts))
    with Join.open(d) as j:  # type: ignore[union-attr]
        for tid, data in parts:
            folds_equal(JoinedMem(j, j.entries[tid]).fold(), MemIndex.from_bytes(data).fold())
            own = MemIndex.from_bytes(data)
            assert JoinedMem(j, j.entries[tid]).postings("zz")[1].tolist() == (
                own.postings("zz")[1].tolist()
            )


def every_word(tmp_path: Path, data: bytes) -> None:
    join_path(tmp_path).write_bytes(data)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        j.all_words()


def test_every_word_read_at_once_is_refused_when_off(tmp_path: Path, good: bytes) -> None:
    every_word(tmp_path, good)
    at, _ = section(good, "poff")
    empty = good[: at + 4] + struct.pack("<I", 0) + good[at + 8 :]  # word 0 holds nothing
    with pytest.raises(JoinDamaged, match=r"word entries are not a partition of the postings"):
        every_word(tmp_path, empty)
    keys, _ = section(good, "keys")
    swapped = good[:keys] + good[keys + 8 : keys + 16] + good[keys : keys + 8] + good[keys + 16 :]
    with pytest.raises(JoinDamaged, match=r"keys are not ascending"):
        every_word(tmp_path, swapped)
    docs, _ = section(good, "docs")
    far = good[:docs] + struct.pack("<H", 9) + good[docs + 2 :]  # the file holds 9 documents
    with pytest.raises(JoinDamaged, match=r"posting is out of range"):
        every_word(tmp_path, far)
    tfs, _ = section(good, "tfs")
    flipped = good[:tfs] + bytes([good[tfs] ^ 3]) + good[tfs + 1 :]
    with pytest.raises(JoinDamaged, match=r"postings fail their checks"):
        every_word(tmp_path, flipped)


def test_the_largest_document_length_reads(tmp_path: Path, good: bytes) -> None:
    at, length = section(good, "doc_len")
    new = struct.pack("<I", 2**31 - 1) + good[at + 4 : at + length]
    join_path(tmp_path).write_bytes(with_section(good, "doc_len", new))
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        assert int(j.lengths(j.entries["t0"])[0]) == 2**31 - 1


def test_a_word_past_every_key_or_an_index_past_every_word(tmp_path: Path, good: bytes) -> None:
    join_path(tmp_path).write_bytes(good)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        mem = JoinedMem(j, j.entries["t1"])
        for key in (0, 2**64 - 1):
            assert [a.tolist() for a in mem.postings("", key)] == [[], []]
        with pytest.raises(JoinDamaged, match=rf"^earlier\.join has no word {j.n_words}: rebuild$"):
            mem.postings_at(j.n_words)
        with pytest.raises(JoinDamaged, match=r"^earlier\.join has no word -1: rebuild$"):
            mem.postings_at(-1)


@pytest.mark.asyncio
async def test_a_join_of_tasks_without_words_finds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mem_log, "RACY_NS", 0)
    d = tmp_path / "tasks"
    for tid in ("t0", "t1"):
        write_task(d, tid, [[("person.message", {"text": ""})]], day=1)
    for _ in range(3):
        out = await search(d, "anything at all")
        assert out.hits == []
    with Join.open(d) as j:  # type: ignore[union-attr]
        assert (j.n_words, len(j.entries)) == (0, 2)
        for e in j.entries.values():
            assert j.found(e, word_keys(["anything"])) == ([], [])


def forged_block(good: bytes, docs: list[int]) -> bytes:
    """The file with word 0's documents replaced and its check made to hold."""
    poff, _ = section(good, "poff")
    a, b = struct.unpack_from("<II", good, poff)
    assert b - a == len(docs)
    at, _ = section(good, "docs")
    data = good[: at + 2 * a] + struct.pack(f"<{len(docs)}H", *docs) + good[at + 2 * b :]
    tfs_at, _ = section(good, "tfs")
    tfs = np.frombuffer(data, dtype="<u1", count=b - a, offset=tfs_at + a).astype(np.int64)
    keys_at, _ = section(good, "keys")
    (key,) = struct.unpack_from("<Q", data, keys_at)
    check = mj._block_check(np.array(docs), tfs, 1, len(docs) * 3) ^ mj._key_fold(key)
    bc, _ = section(good, "bcheck")
    return data[:bc] + struct.pack("<H", check) + data[bc + 2 :]


def test_a_block_whose_check_holds_but_whose_documents_do_not_is_refused(
    tmp_path: Path, good: bytes
) -> None:
    poff, _ = section(good, "poff")
    a, b = struct.unpack_from("<II", good, poff)
    n = b - a
    assert n >= 2
    join_path(tmp_path).write_bytes(good)
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        last = j.n_docs - 1
    for docs, match in [
        ([*range(n - 1), last + 1], "posting is out of range"),
        ([0, *([last] * (n - 1))], "postings are not in document order"),
        ([*range(1, n), 0], "postings are not in document order"),
    ]:
        join_path(tmp_path).write_bytes(forged_block(good, docs))
        with (
            Join.open(tmp_path) as j,  # type: ignore[union-attr]
            pytest.raises(JoinDamaged, match=match),
        ):
            j.postings(j.entries["t0"], 0, 0)
    join_path(tmp_path).write_bytes(forged_block(good, [*range(n - 1), last]))
    with Join.open(tmp_path) as j:  # type: ignore[union-attr]
        assert j.postings(j.entries["t2"], 0, 0)[0][-1:] == [last - j.entries["t2"].base]
