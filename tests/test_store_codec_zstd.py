"""store.codec's zstd frames (flag bit 1): they round-trip, and a bomb, a lie about the size,
a cut or a trailing byte is refused with a FormatError after a bounded allocation."""

from __future__ import annotations

import random
import struct
import tracemalloc

import msgpack
import pytest
import zstandard
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.codec import (
    FLAG_ZLIB,
    FLAG_ZSTD,
    MAX_RATIO,
    decode,
    encode,
    frame,
)

MAGIC = b"NRXX"
PAYLOAD = {"words": [f"word{i % 300}" for i in range(2000)], "blob": b"\x00\x01" * 50}


def framed(body: bytes, flags: int = FLAG_ZSTD) -> bytes:
    return struct.pack(">4sHH", MAGIC, 1, flags) + body


def flags_of(data: bytes) -> int:
    flags: int = struct.unpack(">H", data[6:8])[0]
    return flags


def zstd(raw: bytes, *, level: int = 3, size: bool = True) -> bytes:
    return zstandard.ZstdCompressor(level=level, write_content_size=size).compress(raw)


@pytest.mark.parametrize("level", [1, 3, 19])
def test_a_zstd_payload_round_trips_flagged_and_smaller(level: int) -> None:
    data = encode(MAGIC, 1, PAYLOAD, compress=True, method="zstd", level=level)
    assert flags_of(data) == FLAG_ZSTD
    assert len(data) < len(encode(MAGIC, 1, PAYLOAD)) // 2
    assert decode(MAGIC, 1, data) == PAYLOAD


def test_zlib_stays_the_default_and_both_frames_are_read() -> None:
    zl = encode(MAGIC, 1, PAYLOAD, compress=True)
    assert flags_of(zl) == FLAG_ZLIB
    assert decode(MAGIC, 1, zl) == decode(MAGIC, 1, encode(MAGIC, 1, PAYLOAD, compress=True,
                                                          method="zstd")) == PAYLOAD  # fmt: skip


def test_frame_frames_packed_bytes_as_encode_does() -> None:
    raw = msgpack.packb(PAYLOAD, use_bin_type=True)
    for method in ("zlib", "zstd"):
        assert frame(MAGIC, 1, raw, compress=True, method=method, level=3) == encode(
            MAGIC, 1, PAYLOAD, compress=True, method=method, level=3
        )
    assert frame(MAGIC, 1, raw) == encode(MAGIC, 1, PAYLOAD)


def test_an_unknown_method_is_a_callers_error() -> None:
    with pytest.raises(ValueError, match=r"^a compression is zlib or zstd, got 'lz4'$"):
        encode(MAGIC, 1, 1, compress=True, method="lz4")  # type: ignore[arg-type]


def test_what_zstd_could_not_inflate_under_the_bound_is_stored_plain() -> None:
    payload = b"\x00" * 1_000_000  # compresses far past 64 times
    data = encode(MAGIC, 1, payload, compress=True, method="zstd")
    assert flags_of(data) == 0
    assert decode(MAGIC, 1, data) == payload


def test_zstd_up_to_exactly_the_cap_decodes_and_one_byte_more_does_not() -> None:
    blob = random.Random(7).randbytes(10_000)  # barely compresses: the cap is what binds
    raw = msgpack.packb(blob)
    body = zstd(raw)
    assert decode(MAGIC, 1, framed(body), max_size=len(raw)) == blob
    with pytest.raises(FormatError, match=rf"^compressed payload inflates past {len(raw) - 1} "):
        decode(MAGIC, 1, framed(body), max_size=len(raw) - 1)


def test_a_zstd_bomb_is_refused_by_its_declared_size_before_allocating() -> None:
    body = zstd(msgpack.packb(b"\x00" * 200_000_000), level=19)
    limit = MAX_RATIO * len(body)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=rf"^compressed payload inflates past {limit} bytes"):
            decode(MAGIC, 1, framed(body))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_zstd_frame_that_does_not_say_its_size_is_refused() -> None:
    body = zstd(msgpack.packb([1] * 100), size=False)
    with pytest.raises(FormatError, match=r"^a compressed payload that does not say its size"):
        decode(MAGIC, 1, framed(body))


def test_a_zstd_frame_that_says_less_than_it_holds_is_refused_within_what_it_says() -> None:
    raw = msgpack.packb(list(range(1000)))
    body = bytearray(zstd(raw))
    # The frame header's single-segment size field (two bytes, less 256, after the magic and
    # the descriptor) made to say 100 bytes fewer.
    assert body[4] & 0xC0 == 0x40
    at = 5 if body[4] & 0x20 else 6
    told = struct.unpack_from("<H", body, at)[0] + 256
    assert told == len(raw)
    struct.pack_into("<H", body, at, told - 100 - 256)
    with pytest.raises(FormatError, match=r"^corrupt compressed payload \(.*\): rebuild$"):
        decode(MAGIC, 1, framed(bytes(body)))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", r"^corrupt compressed payload \(.*\): rebuild$"),
        (b"not zstd at all", r"^corrupt compressed payload \(.*\): rebuild$"),
        (
            zstd(msgpack.packb(list(range(300))))[:-3],
            r"^corrupt compressed payload \(.*\): rebuild$",
        ),
        (
            zstd(msgpack.packb(1)) + b"xx",
            r"^corrupt compressed payload \(.*unused data.*\): rebuild$",
        ),
        (
            zstd(msgpack.packb(1)) + zstd(msgpack.packb(2)),
            r"^corrupt compressed payload \(.*\): rebuild$",
        ),
        (zstd(msgpack.packb([1, 2, 3])[:-1]), r"^truncated payload: rebuild$"),
    ],
    ids=["empty", "not zstd", "cut", "trailing", "two frames", "cut inside"],
)
def test_bad_zstd_bytes_raise_format_error(body: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        decode(MAGIC, 1, framed(body))


def test_both_compression_flags_at_once_are_refused() -> None:
    with pytest.raises(FormatError, match=r"^unknown flags 0x0003: rebuild$"):
        decode(MAGIC, 1, framed(zstd(msgpack.packb(1)), flags=FLAG_ZLIB | FLAG_ZSTD))


def test_a_zlib_stream_under_the_zstd_flag_is_corrupt_and_the_reverse() -> None:
    import zlib

    raw = msgpack.packb(PAYLOAD)
    with pytest.raises(FormatError, match=r"^corrupt compressed payload"):
        decode(MAGIC, 1, framed(zlib.compress(raw), flags=FLAG_ZSTD))
    with pytest.raises(FormatError, match=r"^corrupt compressed payload"):
        decode(MAGIC, 1, framed(zstd(raw), flags=FLAG_ZLIB))


def test_a_thread_has_its_own_compressor() -> None:
    import threading

    out: dict[int, bytes] = {}

    def work(i: int) -> None:
        out[i] = encode(MAGIC, 1, {"i": i, **PAYLOAD}, compress=True, method="zstd")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(decode(MAGIC, 1, out[i]) == {"i": i, **PAYLOAD} for i in range(4))


def test_an_empty_zstd_frame_says_its_size_and_holds_no_object() -> None:
    """A frame of nothing declares 0 bytes: it is read (no object in it), not refused as one
    that does not say its size."""
    body = zstd(b"")
    assert zstandard.frame_content_size(body) == 0
    with pytest.raises(FormatError, match=r"^truncated payload: rebuild$"):
        decode(MAGIC, 1, framed(body))
