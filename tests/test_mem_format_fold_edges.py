"""A ``.mem`` read whole to be extended (``MemIndex.fold``, what an extension of the ``.mem`` reads)
at its edges: word entries that do not partition the postings, blocks not a whole number of
postings, a posting past the last document and checks that do not match, each refused with its
own error though the sections' CRCs are right; and a good one folded back to what it holds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path, postings_of

from tests.support import Log
from tests.test_mem_format_edges import _forged, good_mem, section, wide_mem, with_section


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return good_mem(tmp_path_factory.mktemp("mem"))


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return wide_mem(tmp_path_factory.mktemp("wide"))


def fold_refused(data: bytes, why: str) -> None:
    with (
        MemIndex.from_bytes(data) as mem,
        pytest.raises(FormatError, match=rf"^\.mem {why}: rebuild$"),
    ):
        mem.fold()


PARTITION = "word entries are not a partition of the postings"


def test_a_good_mem_folds_back_to_what_it_holds(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        fold = mem.fold()
        assert fold.keys.tolist() == sorted(postings_of(mem))
        assert fold.n_docs == mem.n_docs
        assert fold.n_events == mem.n_events
        assert fold.doc_len.tolist() == mem.lengths().tolist()
        assert int(fold.pair_tf.sum()) == int(mem.lengths().sum())


def test_word_entries_not_partitioning_the_postings_are_refused(good: bytes) -> None:
    poff = np.frombuffer(section(good, "poff"), dtype="<u4").copy()
    keys = np.frombuffer(section(good, "keys"), dtype="<u8").copy()
    width = np.frombuffer(section(good, "width"), dtype="<u1").copy()
    bad = poff.copy()
    bad[0] = 3  # not from the start
    fold_refused(with_section(good, "poff", bad.tobytes()), PARTITION)
    bad = poff.copy()
    bad[2] = bad[1]  # an empty block
    fold_refused(with_section(good, "poff", bad.tobytes()), PARTITION)
    bad = poff.copy()
    bad[2] = bad[1] - 1  # one running back
    fold_refused(with_section(good, "poff", bad.tobytes()), PARTITION)
    for value in (0, 3, 8):
        w = width.copy()
        w[1] = value
        fold_refused(with_section(good, "width", w.tobytes()), PARTITION)
    k = keys.copy()
    k[[1, 2]] = k[[2, 1]]  # keys out of order
    fold_refused(with_section(good, "keys", k.tobytes()), PARTITION)
    k = keys.copy()
    k[2] = k[1]  # a key twice
    fold_refused(with_section(good, "keys", k.tobytes()), PARTITION)


def test_a_block_not_a_whole_number_of_postings_is_refused(good: bytes) -> None:
    poff = np.frombuffer(section(good, "poff"), dtype="<u4").copy()
    width = np.frombuffer(section(good, "width"), dtype="<u1")
    with MemIndex.from_bytes(good) as mem:
        dw = mem.doc_width
    i = next(j for j in range(len(width)) if poff[j + 1] - poff[j] > dw + width[j])
    bad = poff.copy()
    bad[i + 1] -= 1  # the block before a byte short, the one after a byte long
    fold_refused(
        with_section(good, "poff", bad.tobytes()),
        "postings block is not a whole number of postings",
    )


def test_a_posting_past_the_last_document_is_refused_by_the_fold(good: bytes, wide: bytes) -> None:
    for data, word in ((good, "beta"), (wide, "all")):
        with MemIndex.from_bytes(data) as mem:
            docs, tfs = (a.tolist() for a in mem.postings(word))
            n_docs = mem.n_docs
        bad = _forged(data, word, [*docs[:-1], n_docs], tfs)
        fold_refused(bad, "posting names a document past the end")
        ok = _forged(data, word, [*docs[:-1], n_docs - 1], tfs)
        with MemIndex.from_bytes(ok) as mem:
            assert mem.fold().n_docs == n_docs
    with MemIndex.from_bytes(wide) as mem:
        docs, tfs = (a.tolist() for a in mem.postings("all"))
    top = max(tfs)
    bad = _forged(wide, "all", docs, [2**31 if t == top else t for t in tfs])
    fold_refused(bad, "posting names a document past the end")


def test_postings_not_matching_their_checks_are_refused_by_the_fold(good: bytes) -> None:
    bcheck = np.frombuffer(section(good, "bcheck"), dtype="<u2").copy()
    for i in (0, len(bcheck) - 1):
        bad = bcheck.copy()
        bad[i] ^= 1
        fold_refused(with_section(good, "bcheck", bad.tobytes()), "postings fail their checks")


def test_a_frequency_of_2_to_the_31_minus_1_is_folded_and_one_more_refused(wide: bytes) -> None:
    with MemIndex.from_bytes(wide) as mem:
        docs, tfs = (a.tolist() for a in mem.postings("all"))
    top = max(tfs)
    at_most = _forged(wide, "all", docs, [2**31 - 1 if t == top else t for t in tfs])
    with MemIndex.from_bytes(at_most) as mem:
        assert int(mem.fold().pair_tf.max()) == 2**31 - 1
    past = _forged(wide, "all", docs, [2**31 if t == top else t for t in tfs])
    fold_refused(past, "posting names a document past the end")


def test_a_mem_matches_the_log_it_was_built_from_and_not_one_rewritten(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="the binding rejects localhost")
    lg.end_turn()
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        with lg.path.open("rb") as f:
            assert mem.matches(f) is True
        lg.path.write_bytes(lg.path.read_bytes().replace(b"localhost", b"remotehst"))
        with lg.path.open("rb") as f:
            assert mem.matches(f) is False
