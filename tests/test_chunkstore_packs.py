"""store.packs and the chunk store's version 3: a batch of records a pack, found by key from any
process, written by several at once, a writer killed at any point (ADR 0050 §4)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodwyn_retrieval.actors._work import analyze_batch, analyze_packed
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.store.atomic import TEMP_SUFFIX
from nodwyn_retrieval.store.chunkstore import SUFFIX, ChunkStore, read_pack
from nodwyn_retrieval.store.packs import (
    PACK_VERSION,
    PACKS,
    PackIndex,
    pack_bytes,
    pack_index,
    parse_entries,
    reset_indexes,
)

ROOT = Path(__file__).resolve().parent.parent


def text(i: int) -> str:
    return f"def handler_{i}(request):\n    return request.body + {i}\n"


def key_of(t: str) -> str:
    return ChunkStore.key(hashlib.sha256(t.encode()).hexdigest())


def packs_in(d: Path) -> list[Path]:
    return sorted((d / PACKS).glob(f"*{SUFFIX}"))


_WRITER = """
import sys
from pathlib import Path
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.store.chunkstore import ChunkStore
import hashlib

def text(i):
    return f"def handler_{i}(request):\\n    return request.body + {i}\\n"

d, start, count, per, loops = sys.argv[1], *map(int, sys.argv[2:6])
store = ChunkStore(Path(d))
recs = [(ChunkStore.key(hashlib.sha256(text(i).encode()).hexdigest()), analyze(text(i)))
        for i in range(start, start + count)]
print("ready", flush=True)
for n in range(loops):
    for i in range(0, count, per):
        store.put_many(recs[i : i + per])
"""


def writer(d: Path, start: int, count: int, per: int, loops: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(d), str(start), str(count), str(per), str(loops)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT.parent)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_processes_writing_one_store_at_once_lose_nothing_and_a_new_one_finds_all(
    tmp_path: Path,
) -> None:
    """Four processes store overlapping records in packs of ten at once (two trees of one
    project building): every record is then found by a process that never saw them written."""
    procs = [writer(tmp_path, start, 60, 10) for start in (0, 30, 60, 90)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    reset_indexes()
    store = ChunkStore(tmp_path)
    for i in range(150):
        assert store.get(key_of(text(i))) == analyze(text(i)), i
    assert store.stats.rebuilt == 0
    assert len(packs_in(tmp_path)) == 24
    assert [n for n in os.listdir(tmp_path / PACKS) if n.endswith(TEMP_SUFFIX)] == []
    for p in packs_in(tmp_path):
        assert read_pack(p.read_bytes())  # every pack whole


@pytest.mark.parametrize("after", [0.3, 0.6, 1.0])
def test_a_writer_killed_at_any_point_leaves_whole_packs_and_a_store_that_works(
    tmp_path: Path, after: float
) -> None:
    p = writer(tmp_path, 0, 40, 5, loops=1000)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    time.sleep(after)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    reset_indexes()
    store = ChunkStore(tmp_path)
    for path in packs_in(tmp_path):
        assert read_pack(path.read_bytes())  # written by a rename: whole, or not there
    found = [i for i in range(40) if store.get(key_of(text(i))) is not None]
    assert store.stats.rebuilt == 0
    store.put_many([(key_of(text(i)), analyze(text(i))) for i in range(40) if i not in found])
    reset_indexes()
    again = ChunkStore(tmp_path)
    assert all(again.get(key_of(text(i))) == analyze(text(i)) for i in range(40))
    # What the killed writer left half written is a temporary file, swept once it is old.
    for name in os.listdir(tmp_path / PACKS):
        if name.endswith(TEMP_SUFFIX):
            old = time.time() - 7200
            os.utime(tmp_path / PACKS / name, (old, old))
    store.remove_stale_temp()
    assert [n for n in os.listdir(tmp_path / PACKS) if n.startswith(".")] == []


def test_another_process_finds_a_pack_written_after_it_listed_the_store(tmp_path: Path) -> None:
    """Two lookups of one directory, as two processes hold them: the second sees the first's
    new pack at its next miss, by the directory's change, without being told."""
    mine = ChunkStore(tmp_path)
    theirs = PackIndex(tmp_path)
    mine.put(key_of(text(0)), analyze(text(0)))
    assert theirs.find(key_of(text(0))) is not None
    assert theirs.find(key_of(text(1))) is None
    mine.put(key_of(text(1)), analyze(text(1)))
    got = theirs.find(key_of(text(1)))
    assert got is not None
    assert got[0].name == mine.path(key_of(text(1))).name


def test_a_pack_added_in_the_directory_times_same_tick_is_found_all_the_same(
    tmp_path: Path,
) -> None:
    """A directory's mtime ticks coarsely: a pack renamed in during the tick of the last
    listing leaves the same mtime. Within a second of it a miss lists the directory again."""
    mine = ChunkStore(tmp_path)
    theirs = PackIndex(tmp_path)
    mine.put(key_of(text(0)), analyze(text(0)))
    st = os.stat(tmp_path / PACKS)
    assert theirs.find(key_of(text(1))) is None  # listed now
    mine.put(key_of(text(1)), analyze(text(1)))
    os.utime(tmp_path / PACKS, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same tick
    time.sleep(0.06)
    assert theirs.find(key_of(text(1))) is not None


def test_a_pack_gone_under_a_reader_is_forgotten_and_the_key_found_in_its_new_pack(
    tmp_path: Path,
) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(text(0))
    store.put_many([(key, analyze(text(0))), (key_of(text(1)), analyze(text(1)))])
    reader = PackIndex(tmp_path)
    assert reader.find(key) is not None
    old = store.path(key)
    store.remove(key_of(text(1)))  # the pack written again without it, as a collection does
    assert not old.exists()
    other = ChunkStore(tmp_path)
    other._index = reader  # a process that knew the old pack
    assert other.get(key) == analyze(text(0))
    assert other.stats.misses == 0
    assert not other.exists(key_of(text(1)))


def test_a_pack_of_entries_out_of_order_or_past_its_end_is_damaged() -> None:
    from nodwyn_retrieval.errors import FormatError

    good = pack_bytes([(key_of("a"), b"x" * 10), (key_of("b"), b"y" * 20)])
    entries = parse_entries(good, len(good))
    assert not isinstance(entries, int)
    want = sorted([(key_of("a"), 10), (key_of("b"), 20)])
    assert [(e[0], e[2]) for e in entries] == want  # sorted by key, each its length
    assert parse_entries(good[:20], len(good)) == 12 + 2 * 48 + 4  # the bytes that hold them
    with pytest.raises(FormatError, match="cut short"):
        parse_entries(good[:40], 40)
    with pytest.raises(FormatError, match="outside its records"):
        parse_entries(good, len(good) - 1)
    with pytest.raises(FormatError, match="CRC"):
        parse_entries(good[:20] + b"\0" + good[21:], len(good))
    with pytest.raises(FormatError, match="not a chunk pack"):
        parse_entries(b"NRCK" + good[4:], len(good))
    with pytest.raises(FormatError, match="unknown flags"):
        parse_entries(good[:6] + b"\0\1" + good[8:], len(good))


# -- a worker's batch ----------------------------------------------------------------------------


def test_a_workers_batch_stores_its_new_records_in_one_pack(tmp_path: Path) -> None:
    items = [(f"m{i}.py", text(i).encode()) for i in range(12)]
    items.append(("same.py", text(3).encode()))  # a content twice in a batch: one record
    out = analyze_batch(items, str(tmp_path))
    assert all(a.stored and a.store_error is None for a in out)
    [pack] = packs_in(tmp_path)
    assert len(read_pack(pack.read_bytes())) == 12
    # The next batch of the same files finds them all: nothing written.
    again = analyze_batch(items, str(tmp_path))
    assert [a.record for a in again] == [None] * 13
    assert packs_in(tmp_path) == [pack]


def test_a_packed_batch_reads_what_is_stored_and_packs_what_is_new(tmp_path: Path) -> None:
    old = [(f"m{i}.py", text(i).encode()) for i in range(5)]
    analyze_batch(old, str(tmp_path))
    items = [*old, *((f"n{i}.py", text(100 + i).encode()) for i in range(4))]
    out, pairs = analyze_packed(items, str(tmp_path))
    assert [a.packed for a in out] == [True] * 9
    assert all(a.stored for a in out)
    assert len(packs_in(tmp_path)) == 2
    assert pairs is not None
    reset_indexes()
    store = ChunkStore(tmp_path)
    assert all(store.get(key_of(text(100 + i))) == analyze(text(100 + i)) for i in range(4))


def test_a_batch_whose_pack_cannot_be_written_says_why_and_keeps_its_records(
    tmp_path: Path,
) -> None:
    (tmp_path / PACKS).write_text("a file where the packs should be\n")
    items = [(f"m{i}.py", text(i).encode()) for i in range(3)]
    out = analyze_batch(items, str(tmp_path))
    assert [a.record for a in out] == [analyze(text(i)) for i in range(3)]
    assert all(not a.stored for a in out)
    errors = {a.store_error for a in out}
    assert len(errors) == 1
    [error] = errors
    assert error is not None
    assert f"writing {tmp_path / PACKS}/" in error


def test_a_batch_past_a_packs_bounds_is_written_as_several_packs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodwyn_retrieval.store import chunkstore
    from nodwyn_retrieval.store.packs import MAX_RECORDS

    store = ChunkStore(tmp_path / "many")
    keys = [ChunkStore.key(f"{i:064x}") for i in range(MAX_RECORDS + 1)]
    store.write_raw([(k, b"r") for k in keys])
    counts = sorted(len(read_pack_entries(p)) for p in packs_in(tmp_path / "many"))
    assert counts == [1, MAX_RECORDS]
    # A pack is closed once its records reach MAX_PACK_BYTES (the record that reaches it in).
    monkeypatch.setattr(chunkstore, "MAX_PACK_BYTES", 100)
    store = ChunkStore(tmp_path / "big")
    store.write_raw([(k, b"x" * 50) for k in keys[:5]])
    counts = sorted(len(read_pack_entries(p)) for p in packs_in(tmp_path / "big"))
    assert counts == [1, 2, 2]
    assert store.stats.packs_written == 3
    store.write_raw([(keys[9], b"y" * 300), (keys[10], b"z")])  # one past the bound alone
    counts = sorted(len(read_pack_entries(p)) for p in packs_in(tmp_path / "big"))
    assert counts == [1, 1, 1, 2, 2]


def read_pack_entries(path: Path) -> list[tuple[str, int, int, int]]:
    data = path.read_bytes()
    got = parse_entries(data, len(data))
    assert not isinstance(got, int)
    return got


def test_a_pack_naming_one_key_twice_is_damaged() -> None:
    import struct
    import zlib

    from nodwyn_retrieval.errors import FormatError

    key = key_of("a")
    sha = bytes.fromhex(key.split("-")[0])
    version = int(key.split("-")[1])
    end = 12 + 2 * 48 + 4
    head = bytearray(struct.pack(">4sHHI", b"NRCP", PACK_VERSION, 0, 2))
    for offset in (end, end + 1):
        head += struct.pack(">32sIIII", sha, version, offset, 1, zlib.crc32(b"x"))
    head += struct.pack(">I", zlib.crc32(head))
    data = bytes(head) + b"xx"
    with pytest.raises(FormatError, match="outside its records"):
        parse_entries(data, len(data))


def test_files_in_the_packs_directory_that_are_not_packs_are_left_alone(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    store.put(key_of(text(0)), analyze(text(0)))
    strays = [tmp_path / PACKS / "notes.txt", tmp_path / PACKS / f".hidden{SUFFIX}"]
    for p in strays:
        p.write_bytes(b"not a pack")
    reset_indexes()
    again = ChunkStore(tmp_path)
    assert again.get(key_of(text(0))) == analyze(text(0))
    assert again.stats.rebuilt == 0
    assert all(p.exists() for p in strays)


def test_forgetting_a_second_copy_keeps_the_first(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path)
    key = key_of(text(0))
    store.put(key, analyze(text(0)))
    first = store.path(key)
    store.put(key, analyze(text(0)))  # a second tree's copy
    [second] = [p for p in packs_in(tmp_path) if p != first]
    second.unlink()
    store.forget(second)
    assert store.exists(key)
    assert store.path(key) == first
    assert store.get(key) == analyze(text(0))


def _quiet_store(tmp_path: Path) -> tuple[ChunkStore, Path, int]:
    """A store of one record whose packs directory was last changed ten seconds ago, opened by
    a process with no lookup yet: (the store, its packs directory, that time in ns)."""
    store = ChunkStore(tmp_path)
    store.put(key_of(text(0)), analyze(text(0)))
    packs = tmp_path / PACKS
    old = time.time_ns() - 10_000_000_000
    os.utime(packs, ns=(old, old))
    reset_indexes()
    return ChunkStore(tmp_path), packs, old


def test_a_collections_listing_sees_a_pack_the_lookup_would_not_yet(tmp_path: Path) -> None:
    """A miss trusts the directory's mtime once it is a second old; the collection's listing
    (list_packs) reads the directory whatever it says."""
    from nodwyn_retrieval.store.packs import write_pack

    store, packs, old = _quiet_store(tmp_path)
    assert not store.exists(key_of(text(1)))  # listed: the directory is ten seconds old
    write_pack(packs, [(key_of(text(1)), b"x")])  # another process's pack, in the same tick
    os.utime(packs, ns=(old, old))
    assert not store.exists(key_of(text(1)))
    assert key_of(text(1)) in {k for info in store.list_packs() for k in info.keys}
    assert store.exists(key_of(text(1)))


def test_misses_in_a_quiet_directory_do_not_list_it_again(tmp_path: Path) -> None:
    store, _, _ = _quiet_store(tmp_path)
    assert not store.exists(key_of(text(1)))
    index = pack_index(tmp_path)
    listed = index.listings
    for i in range(3):
        time.sleep(0.06)  # past the racy window's own pace
        assert not store.exists(key_of(text(2 + i)))
    assert index.listings == listed


def test_a_batchs_store_looks_for_missing_keys_once(tmp_path: Path) -> None:
    """A batch's store (one_look) lists the directory at its first miss and not at the next,
    however the directory changes meanwhile (a pack another process writes is then missed, and
    its record made twice); a store made later, and every get, look again."""
    from nodwyn_retrieval.store.packs import write_pack

    store = ChunkStore(tmp_path)
    store.put(key_of(text(0)), analyze(text(0)))
    reset_indexes()  # a new process: nothing known yet
    batch = ChunkStore(tmp_path, one_look=True)
    index = pack_index(tmp_path)
    assert batch.exists(key_of(text(0)))  # the first look lists
    listed = index.listings
    other = ChunkStore.key(hashlib.sha256(b"elsewhere").hexdigest())
    write_pack(tmp_path / PACKS, [(other, b"x")])  # another process's pack, after the look
    time.sleep(0.06)  # past the racy window's own pace: a plain store would list again
    assert not batch.exists(key_of(text(1)))
    assert not batch.exists(other)
    assert index.listings == listed
    assert ChunkStore(tmp_path, one_look=True).exists(other)  # the next batch's store
    assert index.listings == listed + 1


def test_a_batchs_store_still_reads_a_record_written_after_its_look(tmp_path: Path) -> None:
    """one_look bounds exists() alone: get() and path() look again, so a record another
    process stored since is read, not taken as gone."""
    batch = ChunkStore(tmp_path, one_look=True)
    assert not batch.exists(key_of(text(0)))  # the look: nothing there
    proc = writer(tmp_path, 0, 1, 1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert batch.get(key_of(text(0))) == analyze(text(0))
    assert batch.path(key_of(text(0))).parent == tmp_path / PACKS
