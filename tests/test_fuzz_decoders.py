"""Bounded decoding, fuzzed: every stored file's decoder under random, cut, flipped, re-framed and
re-encoded input (ADR 0050 §4, the storage rules, the amendment of 2026-10-16).

For each kind of file (a chunk record, a manifest, a tree snapshot, a ``.mem``) and each way of
damaging it, the decoder either answers something usable or refuses it as a
:class:`errors.FormatError` (the chunk store and the snapshot loader answer None instead), and:

- nothing else is ever raised, and what decodes can be used (ranked, searched, folded);
- the peak of memory it allocates (tracemalloc) stays within a small multiple of the file: a
  declared length is never believed beyond the bytes that hold it;
- no example runs past a generous deadline: nothing loops on a declared count.

The valid samples are made by the program's own writers. The damages that reach past the frame's
checks re-encode a mutated payload with the codec (and recompute a segment's or a ``.mem``'s CRC),
so the validators behind the checksums are exercised, not only the checksums.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.actors.indexer import SNAPSHOT_MAGIC, SNAPSHOT_VERSION, load_snapshot
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval import bm25
from nodwyn_retrieval.retrieval.analyze import FileRecord, analyze
from nodwyn_retrieval.retrieval.tree import TreeIndex, TreeSegment
from nodwyn_retrieval.store import mem_format as memfmt
from nodwyn_retrieval.store.chunkstore import MAGIC as CK_MAGIC
from nodwyn_retrieval.store.chunkstore import VERSION as CK_VERSION
from nodwyn_retrieval.store.chunkstore import ChunkStore, record_bytes
from nodwyn_retrieval.store.codec import FLAG_ZLIB, FLAG_ZSTD, HEADER, MAX_RATIO, decode, encode
from nodwyn_retrieval.store.manifest import MAGIC as MF_MAGIC
from nodwyn_retrieval.store.manifest import VERSION as MF_VERSION
from nodwyn_retrieval.store.manifest import Entry, Manifest, load_manifest, save_manifest
from nodwyn_retrieval.store.mem import LogView, MemIndex, mem_path

EXAMPLES = int(os.environ.get("NODWYN_FUZZ_EXAMPLES", "150"))
"""Examples per kind and property (raise it to look harder)."""

FUZZ = settings(
    max_examples=EXAMPLES,
    # Generous: a decode of these few-kilobyte files takes milliseconds, even traced. Only a
    # decoder that loops on a declared count or size would come near it.
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SLACK = 256 << 10
"""Allocation allowed whatever the file's size: the decoder's own objects, numpy's small arrays."""


# -- valid samples, made by the program's writers -------------------------------------------------


def source_text(n: int = 60) -> str:
    parts = ['"""Credential bindings and the hosts a key may be sent to."""\n']
    for i in range(n):
        parts.append(
            f"def check_binding_{i}(binding, host):\n"
            f"    # ScrubEnv keeps API_KEY_{i} away from host_{i % 7}\n"
            f"    return binding.host == host and {i} < len(host)\n\n"
        )
        if i % 9 == 0:
            parts.append(f"class Binding{i}:\n    method = 'post'\n    port = {8000 + i}\n\n")
    return "".join(parts)


TEXTS = [source_text(60), "# Manual\n\nHow the server listens on a port.\n", source_text(5)]
PATHS = ["keychain/bind.py", "docs/manual.md", "server/http.py"]
QUERY = ["binding", "host", "scrubenv", "manual", "port", "absent"]


def sample_chunk() -> tuple[str, bytes]:
    rec = analyze(TEXTS[0])
    key = ChunkStore.key("ab" * 32)
    return key, record_bytes(key, rec)


def sample_manifest(tmp: Path) -> bytes:
    entries = {
        f"src/pkg_{i // 10}/mod_{i}.py": Entry(100 + i, 1_700_000_000_000_000_000 + i, 4000 + i, k)
        for i, k in enumerate(ChunkStore.key(f"{i:064x}") for i in range(40))
    }
    entries["bin/tool"] = Entry(5, 6, 7, "!binary")
    m = Manifest(str(tmp), 7, entries, cursor="src/pkg_2", partial=True, extra=["vendor"])
    path = tmp / "sample.manifest"
    save_manifest(path, m)
    return path.read_bytes()


def sample_segment() -> TreeSegment:
    return TreeSegment.build(
        (p, ChunkStore.key(f"{i:064x}"), analyze(t))
        for i, (p, t) in enumerate(zip(PATHS, TEXTS, strict=True))
    )


def sample_snapshot() -> bytes:
    return encode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, sample_segment().to_obj())


def sample_mem(tmp: Path) -> bytes:
    log = tmp / "fuzz.jsonl"
    seq = 0

    def add(kind: str, turn: int, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        event = {"seq": seq, "ts": "2026-10-15T09:00:00Z", "kind": kind, "turn": turn}
        event.update(agent="main", **fields)
        with log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")

    for turn, (message, output) in enumerate(
        [
            ("Why does the credential binding reject localhost?", "func Bind(host string)"),
            ("Rename ScrubEnv", "func ScrubEnv(env []string) []string\nused twice"),
            ("port of the server", TEXTS[1]),
        ],
        start=1,
    ):
        add("person.message", turn, text=message)
        call = {"id": f"c{turn}", "name": "fs-read", "args": {"path": f"f{turn}.go"}}
        add("llm.resp", turn, text="Let me look.", calls=[call])
        add("tool.result", turn, call_id=f"c{turn}", name="fs-read", output=output)
        add("turn.end", turn)
    LogView.open(log).close()
    return mem_path(log).read_bytes()


_SAMPLES: dict[str, bytes] = {}


def sample(kind: str, tmp_factory: pytest.TempPathFactory) -> bytes:
    if kind not in _SAMPLES:
        tmp = tmp_factory.mktemp(f"sample-{kind}")
        if kind == "chunk":
            _SAMPLES[kind] = sample_chunk()[1]
        elif kind == "manifest":
            _SAMPLES[kind] = sample_manifest(tmp)
        elif kind == "snapshot":
            _SAMPLES[kind] = sample_snapshot()
        else:
            _SAMPLES[kind] = sample_mem(tmp)
    return _SAMPLES[kind]


# -- the decoders, as the program calls them, and using what they answer ------------------------


class Decoders:
    """Each kind's decoder, reading a file as the program reads it, then using what decoded."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store = ChunkStore(tmp / "chunks")
        self.key = sample_chunk()[0]

    def chunk(self, data: bytes) -> bool:
        for old in self.store.packs_dir.glob("*"):
            old.unlink()
        self.store.write_raw([(self.key, data)])  # the record alone in a pack whose entry checks
        path = self.store.path(self.key)
        rec = self.store.get(self.key)  # None, and the pack deleted, when it does not decode
        if rec is None:
            assert not path.exists()
            return False
        use_record(rec)
        return True

    def manifest(self, data: bytes) -> bool:
        path = self.tmp / "t.manifest"
        path.write_bytes(data)
        try:
            m = load_manifest(path)
        except FormatError:
            return False
        assert m is not None
        for p, e in m.entries.items():
            assert isinstance(p, str)
            assert p
            assert isinstance(e.key, str)
            e.matches(os.stat(self.tmp))
        return True

    def snapshot(self, data: bytes) -> bool:
        path = self.tmp / "t.snap"
        path.write_bytes(data)
        seg = load_snapshot(path)  # None, and the file deleted, when it does not decode
        if seg is None:
            assert not path.exists()
            return False
        use_segment(seg)
        return True

    def mem(self, data: bytes) -> bool:
        """A .mem may refuse at the open or at any use (its sections are read lazily): False then;
        True when every use succeeded."""
        try:
            index = MemIndex.from_bytes(data)
        except FormatError:
            return False
        try:
            index.segment(QUERY)
            index.events()
            index.cards()
            index.card(1)
            _ = index.kinds
            index.lengths()
            index.doc_events()
            index.fold()
        except FormatError:
            return False
        finally:
            index.close()
        return True


def use_record(rec: FileRecord) -> None:
    for i in range(min(rec.n_chunks, 50)):
        rec.chunk_words(i)
    use_segment(TreeSegment.build([("f.py", "k", rec)]))


def use_segment(seg: TreeSegment) -> None:
    index = TreeIndex(seg)
    index.search(QUERY, 5)
    if seg.files:
        index.search(QUERY, 5, seg.files[0])
        index.apply({seg.files[0]: None})
        index.search(QUERY, 5)
        index.snapshot()


def bound(kind: str, size: int) -> int:
    """The most a decoder may allocate for a file of size bytes."""
    # A compressed payload inflates at most MAX_RATIO times (store.codec), then is parsed.
    factor = 3 * MAX_RATIO if kind == "chunk" else 16
    return factor * size + SLACK


@contextlib.contextmanager
def traced(kind: str, data: bytes) -> Iterator[None]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - base <= bound(kind, len(data)), (
        f"{kind}: {peak - base:,} bytes allocated decoding {len(data):,} bytes"
    )


def run(decoders: Decoders, kind: str, data: bytes) -> bool:
    """Decode data as kind: only a refusal or a usable answer, within the memory bound; whether
    it was used."""
    fn: Callable[[bytes], bool] = getattr(decoders, kind)
    with traced(kind, data):
        return fn(data)


KINDS = ["chunk", "manifest", "snapshot", "mem"]
FRAMES = {
    "chunk": (CK_MAGIC, CK_VERSION),
    "manifest": (MF_MAGIC, MF_VERSION),
    "snapshot": (SNAPSHOT_MAGIC, SNAPSHOT_VERSION),
    "mem": (memfmt.MAGIC, memfmt.VERSION),
}


@pytest.fixture(scope="module")
def decoders(tmp_path_factory: pytest.TempPathFactory) -> Decoders:
    return Decoders(tmp_path_factory.mktemp("decode"))


@pytest.mark.parametrize("kind", KINDS)
def test_the_valid_samples_decode_and_are_used(
    kind: str, decoders: Decoders, tmp_path_factory: pytest.TempPathFactory
) -> None:
    good = sample(kind, tmp_path_factory)
    assert run(decoders, kind, good)
    if kind == "chunk":
        assert decoders.store.get(decoders.key) == analyze(TEXTS[0])
    elif kind == "snapshot":
        path = decoders.tmp / "ok.snap"
        path.write_bytes(good)
        seg = load_snapshot(path)
        assert seg is not None
        assert seg.files == tuple(PATHS)
    elif kind == "mem":
        with MemIndex.from_bytes(good) as index:
            assert index.segment(QUERY).n_docs > 0
    else:
        path = decoders.tmp / "ok.manifest"
        path.write_bytes(good)
        m = load_manifest(path)
        assert m is not None
        assert m.entries


# -- damage: random, cut, flipped, re-framed, huge lengths, future versions -----------------------

HUGE = [
    b"\xdd\xff\xff\xff\xf0",  # array32 of 4 billion
    b"\xdf\xff\xff\xff\xf0",  # map32
    b"\xdb\xff\xff\xff\xf0",  # str32 of 4 GiB
    b"\xc6\xff\xff\xff\xf0",  # bin32
    b"\xc9\xff\xff\xff\xf0\x01",  # ext32
    b"\xdc\xff\xff",  # array16
    b"\xc5\xff\xff",  # bin16
]


@st.composite
def damaged(draw: st.DrawFn, good: bytes, kind: str) -> bytes:
    how = draw(
        st.sampled_from(["random", "framed", "cut", "flip", "huge", "version", "flags", "append"])
    )
    magic, version = FRAMES[kind]
    if how == "random":
        return draw(st.binary(max_size=2048))
    if how == "framed":
        flags = draw(st.sampled_from([0, FLAG_ZLIB, FLAG_ZSTD]))
        return HEADER.pack(magic, version, flags) + draw(st.binary(max_size=2048))
    if how == "cut":
        return good[: draw(st.integers(0, len(good) - 1))]
    if how == "flip":
        out = bytearray(good)
        for bit in draw(st.lists(st.integers(0, len(good) * 8 - 1), min_size=1, max_size=8)):
            out[bit // 8] ^= 1 << (bit % 8)
        return bytes(out)
    if how == "huge":
        prefix = draw(st.sampled_from(HUGE))
        at = draw(st.integers(HEADER.size, max(HEADER.size, len(good) - 1)))
        tail = good[at + len(prefix) :] if draw(st.booleans()) else b""
        return good[:at] + prefix + tail
    if how == "version":
        other = draw(st.integers(0, 0xFFFF).filter(lambda v: v != version))
        return HEADER.pack(magic, other, 0) + good[HEADER.size :]
    if how == "flags":
        flags = draw(st.integers(0, 0xFFFF).filter(lambda f: f not in (0, FLAG_ZLIB, FLAG_ZSTD)))
        return HEADER.pack(magic, version, flags) + good[HEADER.size :]
    return good + draw(st.binary(min_size=1, max_size=64))


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(data=st.data())
def test_damaged_bytes_are_refused_or_used_within_bounds(
    kind: str,
    decoders: Decoders,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:
    good = sample(kind, tmp_path_factory)
    run(decoders, kind, data.draw(damaged(good, kind)))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prefix", HUGE, ids=lambda b: b[:1].hex())
def test_a_huge_declared_length_at_the_payload_allocates_almost_nothing(
    kind: str, prefix: bytes, decoders: Decoders
) -> None:
    magic, version = FRAMES[kind]
    for flags in (0, FLAG_ZLIB, FLAG_ZSTD):
        body = (
            prefix if not flags else zlib.compress(prefix) if flags == FLAG_ZLIB
            else zstandard.ZstdCompressor().compress(prefix)
        )  # fmt: skip
        data = HEADER.pack(magic, version, flags) + body
        with traced(kind, b""):  # the bound of an empty file: the slack alone
            used = getattr(decoders, kind)(data)
        assert not used  # nothing of four billion elements is believed


# -- damage behind the frame: a payload mutated and re-encoded ------------------------------------

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=64),
    st.text(max_size=16),
    st.lists(st.integers(-3, 2**32), max_size=4),
    st.lists(st.text(max_size=4), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)


def containers(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a decoded payload that holds a value (dict keys and list items)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*path, k)
            yield from containers(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):
            yield (*path, i)
            yield from containers(v, (*path, i))


def get_in(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def resized(old: Any, n: int) -> Any:
    """A byte string or a list cut to n items, or grown to n by repeating its first."""
    return (old + old[:1] * 16)[:n]


@st.composite
def mutated_payload(draw: st.DrawFn, good: bytes, kind: str) -> bytes:
    magic, version = FRAMES[kind]
    flags = HEADER.unpack_from(good)[2]
    obj = decode(magic, version, good)
    places = list(containers(obj))
    for _ in range(draw(st.integers(1, 3))):
        if not places:
            break
        place = draw(st.sampled_from(places))
        parent = get_in(obj, place[:-1])
        old = parent[place[-1]]
        how = draw(st.sampled_from(["replace", "resize", "drop", "add"]))
        if how == "resize" and isinstance(old, bytes | list):
            parent[place[-1]] = resized(old, draw(st.integers(0, len(old) + 16)))
        elif how == "resize" and isinstance(old, str):
            parent[place[-1]] = old[: draw(st.integers(0, len(old)))]
        elif how == "drop" and isinstance(parent, dict):
            parent.pop(place[-1], None)
        elif how == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(VALUES)
        elif how == "add" and isinstance(parent, list):
            parent.append(draw(VALUES))
        else:
            parent[place[-1]] = draw(VALUES)
        places = list(containers(obj))
    if kind == "snapshot" and isinstance(obj, dict) and draw(st.booleans()):
        # Make the segment's checksum agree, so the checks behind it are reached.
        seg = obj.get("segment")
        if isinstance(seg, dict):
            with contextlib.suppress(Exception):
                seg["crc"] = bm25._crc(seg)
    try:
        method = "zstd" if flags & FLAG_ZSTD else "zlib"
        return encode(magic, version, obj, compress=bool(flags), method=method)
    except (TypeError, ValueError, OverflowError):
        return encode(magic, version, None)


@pytest.mark.parametrize("kind", ["chunk", "manifest", "snapshot"])
@FUZZ
@given(data=st.data())
def test_a_mutated_payload_is_refused_or_used_within_bounds(
    kind: str,
    decoders: Decoders,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:
    good = sample(kind, tmp_path_factory)
    run(decoders, kind, data.draw(mutated_payload(good, kind)))


# -- the .mem behind its checksums: head fields and sections changed, CRCs made to agree ----------

_MEM_BASE = HEADER.size + 4  # the frame, then the head's CRC-32


def mem_fields(good: bytes) -> list[Any]:
    return list(memfmt._HEAD.unpack_from(good, _MEM_BASE))


def mem_with(good: bytes, fields: list[Any], sections: dict[int, bytes] | None = None) -> bytes:
    """good with its head's fields replaced, sections' bytes replaced (their CRCs recomputed),
    and the head's CRC recomputed."""
    out = bytearray(good)
    n_sections = len(memfmt._SECTIONS)
    table = len(fields) - 3 * n_sections
    base = (memfmt._BASE + 7) // 8 * 8
    for i, data in (sections or {}).items():
        off, length = fields[table + 3 * i], fields[table + 3 * i + 1]
        start = base + off
        if start + length <= len(out) and len(data) == length:
            out[start : start + length] = data
            fields[table + 3 * i + 2] = zlib.crc32(data)
    head = memfmt._HEAD.pack(*fields)
    out[_MEM_BASE : _MEM_BASE + len(head)] = head
    struct.pack_into("<I", out, HEADER.size, zlib.crc32(head))
    return bytes(out)


U64 = st.one_of(
    st.integers(0, 2**64 - 1),
    st.sampled_from([0, 1, 2, 3, 4, 7, 8, 65535, 65536, 65537, 2**31, 2**32, 2**60, 2**64 - 1]),
)


@st.composite
def mem_damaged(draw: st.DrawFn, good: bytes) -> bytes:
    fields = mem_fields(good)
    n_sections = len(memfmt._SECTIONS)
    table = len(fields) - 3 * n_sections
    how = draw(st.sampled_from(["count", "table", "section"]))
    if how == "count":
        # covered, seqs, events, docs, words, cards, total length, skipped, doc width
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, 9))
            fields[i] = draw(U64) if i != 9 else draw(st.integers(0, 255))
        return mem_with(good, fields)
    if how == "table":
        for _ in range(draw(st.integers(1, 3))):
            i = table + draw(st.integers(0, 3 * n_sections - 1))
            fields[i] = draw(U64) if (i - table) % 3 != 2 else draw(st.integers(0, 2**32 - 1))
        return mem_with(good, fields)
    i = draw(st.integers(0, n_sections - 1))
    length = fields[table + 3 * i + 1]
    if not length:
        return mem_with(good, fields)
    base = (memfmt._BASE + 7) // 8 * 8
    start = base + fields[table + 3 * i]
    section = bytearray(good[start : start + length])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, length - 1))
        section[at] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, draw(st.integers(0, 255))]))
    return mem_with(good, fields, {i: bytes(section)})


@FUZZ
@given(data=st.data())
def test_a_mem_whose_checksums_agree_with_its_damage_is_refused_or_used_within_bounds(
    decoders: Decoders, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    good = sample("mem", tmp_path_factory)
    run(decoders, "mem", data.draw(mem_damaged(good)))


def test_the_mem_damage_helper_rewrites_a_valid_file_as_valid(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    good = sample("mem", tmp_path_factory)
    assert mem_with(good, mem_fields(good)) == good
    with MemIndex.from_bytes(good) as index:
        assert index.segment(QUERY).n_docs > 0


@pytest.mark.parametrize("key", ['ab"cd', "0" * 64, "../../../etc/passwd", ""])
def test_a_manifest_naming_what_is_not_a_chunk_store_key_is_refused(
    tmp_path: Path, key: str
) -> None:
    path = tmp_path / "t.manifest"
    save_manifest(path, Manifest(str(tmp_path), 1, {"a.py": Entry(1, 2, 3, key)}))
    with pytest.raises(FormatError, match=r"rebuild$"):
        load_manifest(path)
