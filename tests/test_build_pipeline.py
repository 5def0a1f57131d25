"""A first build's pipeline: postings built as the workers' batches arrive (actors/_batches.py).

A first build through the process pool gets each batch's postings back as flat arrays and joins
them into the segment as they arrive (retrieval/tree.py ``TreeBuilder``); a build in the
session's own process, or a later one, goes through the files' records. Both must give the same
index, file for file and posting for posting.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from nodwyn_retrieval.actors import _batches
from nodwyn_retrieval.actors.indexer import load_snapshot
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.tree import TreeBuilder, TreeIndex, TreeSegment, pairs_of
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.packs import reset_indexes

from tests.support import make_repo

WORDS = ["parse", "token", "buffer", "render", "socket", "Gecko", "walrus_helper", "zeta"]


def _tree_files(n: int, seed: int = 7) -> dict[str, str | bytes]:
    rnd = random.Random(seed)
    files: dict[str, str | bytes] = {}
    for i in range(n):
        body = [f"def f_{i}_{j}({rnd.choice(WORDS)}):\n    return {rnd.choice(WORDS)}_{j}\n"
                for j in range(rnd.randint(1, 60))]  # fmt: skip
        files[f"pkg{i % 4}/mod_{i:03d}.py"] = "".join(body)
    files["pkg0/same_a.py"] = files["pkg1/same_b.py"] = "shared_content = 1\n" * 30
    files["pkg0/empty.py"] = ""
    files["logo.png"] = b"\x89PNG\r\n\x1a\n\x00\x00gecko"
    return files


def test_pieces_in_any_order_make_the_segment_of_the_files_in_order() -> None:
    rnd = random.Random(3)
    texts = [(p, t) for p, t in _tree_files(40).items() if isinstance(t, str)]
    files = [(p, f"k{i}", analyze(t)) for i, (p, t) in enumerate(texts)]
    whole = TreeSegment.build(files)
    order = list(range(len(files)))
    rnd.shuffle(order)
    builder = TreeBuilder()
    for a in range(0, len(order), 7):  # pieces of seven files, each in a shuffled order
        piece = order[a : a + 7]
        builder.add(
            [(i, files[i][0], files[i][1]) for i in piece],
            pairs_of([(files[i][0], files[i][2]) for i in piece]),
        )
    built = builder.finish()
    assert len(builder) == len(files)
    assert built.files == whole.files
    assert built.keys == whole.keys
    assert np.array_equal(built.file_docs, whole.file_docs)
    assert np.array_equal(built.starts, whole.starts)
    assert np.array_equal(built.ends, whole.ends)
    # The stored form sorts the vocabulary: equal bytes are equal postings, word for word.
    assert built.to_obj() == whole.to_obj()
    query = {"parse": 1.0, "walrus": 1.0, "mod": 0.5}
    assert TreeIndex(built).rank(query, 10) == TreeIndex(whole).rank(query, 10)


def test_an_empty_builder_makes_an_empty_segment() -> None:
    seg = TreeBuilder().finish()
    assert seg.files == ()
    assert seg.n_docs == 0
    assert seg.to_obj() == TreeSegment.build(()).to_obj()


def test_pieces_must_name_as_many_files_as_their_postings() -> None:
    pairs = pairs_of([("a.py", analyze("x = 1\n"))])
    with pytest.raises(ValueError, match="2 files for the postings of 1"):
        TreeBuilder().add([(0, "a.py", "k"), (1, "b.py", "k2")], pairs)


def _snapshot(data: Path) -> TreeSegment:
    snaps = list(data.rglob("*.snap"))
    assert len(snaps) == 1, snaps
    seg = load_snapshot(snaps[0])
    assert seg is not None
    return seg


async def _build(repo: Path, data: Path, config: Path, workers: int) -> dict[str, object]:
    async with await Engine.open(repo, data_dir=data, config_dir=config, workers=workers) as e:
        summary = (await e.index_update()).summary
        hits = (await e.index_search("walrus_helper parse", "repo")).hits
    del summary["seconds"]
    return {"summary": summary, "hits": hits}


@pytest.mark.asyncio
async def test_a_first_build_through_the_pool_equals_one_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", _tree_files(60))
    here = await _build(repo, tmp_path / "d1", tmp_path / "c", 2)  # under the pool threshold
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 4096)  # many batches, arriving in any order
    pooled = await _build(repo, tmp_path / "d2", tmp_path / "c", 2)
    assert pooled == here
    assert here["summary"]["files"] == 63  # type: ignore[index]
    seg_here, seg_pool = _snapshot(tmp_path / "d1"), _snapshot(tmp_path / "d2")
    assert seg_pool.files == seg_here.files
    assert seg_pool.keys == seg_here.keys
    assert seg_pool.to_obj() == seg_here.to_obj()
    # The workers stored every record: a new session on the pooled store reads none again.
    for snap in (tmp_path / "d2").rglob("*.snap"):
        snap.unlink()
    async with await Engine.open(repo, data_dir=tmp_path / "d2", config_dir=tmp_path / "c") as e:
        again = (await e.index_update()).summary
        hits = (await e.index_search("walrus_helper parse", "repo")).hits
    assert again["read"] == 0
    assert hits == here["hits"]


@pytest.mark.asyncio
async def test_records_the_store_already_holds_are_read_by_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second tree of the project (or a data directory whose manifests went) finds its
    records in the store: the workers read them, and one damaged meanwhile is made again."""
    repo = make_repo(tmp_path / "repo", _tree_files(30))
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 4096)
    first = await _build(repo, tmp_path / "d", tmp_path / "c", 2)
    before = _snapshot(tmp_path / "d").to_obj()
    for p in (tmp_path / "d").rglob("*"):
        if (p.suffix == ".snap" or "trees" in p.parts) and p.is_file():
            p.unlink()
    packs = sorted((tmp_path / "d").rglob("*.ckp"))
    assert len(packs) > 1
    store = ChunkStore(packs[0].parent.parent)
    stored = {k for k, _, _ in store.iter_entries()}
    packs[0].write_bytes(b"NRCP damaged")
    again = await _build(repo, tmp_path / "d", tmp_path / "c", 2)
    assert again["hits"] == first["hits"]
    assert _snapshot(tmp_path / "d").to_obj() == before
    assert not packs[0].exists()  # deleted, and its records put back in new packs
    reset_indexes()
    store = ChunkStore(store.directory)
    assert {k for k, _, _ in store.iter_entries()} == stored
    assert all(store.get(k) is not None for k in stored)


@pytest.mark.asyncio
async def test_a_batch_the_workers_fail_is_analysed_in_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", _tree_files(20))
    here = await _build(repo, tmp_path / "d1", tmp_path / "c", 2)
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 4096)
    # os.getpid takes no arguments: every batch fails in its worker with a TypeError.
    monkeypatch.setattr(_batches, "analyze_read", os.getpid)
    failed = await _build(repo, tmp_path / "d2", tmp_path / "c", 2)
    assert failed == here
    assert _snapshot(tmp_path / "d2").to_obj() == _snapshot(tmp_path / "d1").to_obj()


@pytest.mark.asyncio
async def test_a_record_the_workers_cannot_write_is_said_and_the_build_answers_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", _tree_files(20))
    monkeypatch.setattr(_batches, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(_batches, "BATCH_BYTES", 4096)
    data = tmp_path / "d"
    async with await Engine.open(repo, data_dir=data, config_dir=tmp_path / "c", workers=2) as e:
        await e.index_search("nothing", "repo")  # makes the data directory
        chunks = next(data.rglob("chunks"))
        for p in chunks.rglob("*"):
            if p.is_file():
                p.unlink()
        for d in sorted(chunks.iterdir(), reverse=True):
            d.rmdir()
        chunks.rmdir()
        chunks.write_bytes(b"")  # a file where the records' directory was: no record can be put
        for snap in data.rglob("*.snap"):
            snap.unlink()
        for m in data.rglob("*.manifest"):
            m.unlink()
    async with await Engine.open(repo, data_dir=data, config_dir=tmp_path / "c", workers=2) as e:
        up = await e.index_update()
        hits = (await e.index_search("walrus_helper parse", "repo")).hits
    assert "the index could not be saved" in up.text
    assert hits


def test_a_finished_builder_hands_its_vocabulary_over_and_takes_no_more() -> None:
    texts = [(p, t) for p, t in _tree_files(12).items() if isinstance(t, str)]
    recs = [(p, analyze(t)) for p, t in texts]
    builder = TreeBuilder()
    builder.add([(i, p, f"k{i}") for i, (p, _) in enumerate(recs)], pairs_of(recs))
    built = builder.finish().segment
    whole = TreeSegment.build([(p, f"k{i}", r) for i, (p, r) in enumerate(recs)]).segment
    # The map the segment was given finds every word where its own list holds it.
    for i, w in enumerate(built.words):
        assert built.word_id(w) == i
        assert np.array_equal(built.postings(w)[0], whole.postings(w)[0])
    assert built.word_id("no_such_word_here") is None
    with pytest.raises(ValueError, match="already finished"):
        builder.finish()
    with pytest.raises(ValueError, match="already finished"):
        builder.add([(0, "a.py", "k")], pairs_of([("a.py", analyze("x = 1\n"))]))
