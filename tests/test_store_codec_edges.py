"""store.codec at its edges: the inflate bound exactly met or passed by one byte, the versions and
magics a frame can hold, and what a file this package writes always does: decode (ADR 0050 §4,
amendment 2026-10-16)."""

from __future__ import annotations

import random
import struct
import zlib

import msgpack
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.codec import (
    MAX_INT32,
    MAX_RATIO,
    MAX_SIZE,
    decode,
    encode,
    inflate_limit,
)

MAGIC = b"NRXX"


def flags_of(data: bytes) -> int:
    (flags,) = struct.unpack(">H", data[6:8])
    return int(flags)


def test_the_inflate_limit_is_64_times_the_bytes_at_least_4096_at_most_the_cap() -> None:
    assert MAX_RATIO == 64
    assert MAX_SIZE == 1 << 30
    assert MAX_INT32 == 2_147_483_647  # the widest quantity a caller reads (amendment 2026-10-16)
    assert inflate_limit(0) == 4096
    assert inflate_limit(64) == 4096
    assert inflate_limit(65) == 4160
    assert inflate_limit(1000) == 64_000
    assert inflate_limit(1000, max_size=63_999) == 63_999
    assert inflate_limit(1000, max_size=64_000) == 64_000
    assert inflate_limit(20 << 20) == 1 << 30


def framed(body: bytes, flags: int = 1) -> bytes:
    return struct.pack(">4sHH", MAGIC, 1, flags) + body


def test_a_payload_that_inflates_to_exactly_the_cap_decodes_and_one_byte_more_does_not() -> None:
    blob = random.Random(7).randbytes(10_000)  # barely compresses: the cap is what binds
    raw = msgpack.packb(blob)
    body = zlib.compress(raw, 9)
    assert decode(MAGIC, 1, framed(body), max_size=len(raw)) == blob
    with pytest.raises(FormatError, match=rf"^compressed payload inflates past {len(raw) - 1} "):
        decode(MAGIC, 1, framed(body), max_size=len(raw) - 1)


def test_a_tiny_payload_may_inflate_4096_bytes_whatever_its_ratio() -> None:
    raw = msgpack.packb("a" * 4000)
    body = zlib.compress(raw, 9)
    assert len(raw) > MAX_RATIO * len(body)  # past the ratio, under the floor
    assert decode(MAGIC, 1, framed(body)) == "a" * 4000
    raw = msgpack.packb("a" * 5000)
    body = zlib.compress(raw, 9)
    with pytest.raises(FormatError, match=r"^compressed payload inflates past 4096 bytes"):
        decode(MAGIC, 1, framed(body))


def test_encode_compresses_up_to_exactly_what_decode_would_inflate() -> None:
    payload = "b" * 3000
    raw = msgpack.packb(payload)
    at = encode(MAGIC, 1, payload, compress=True, max_size=len(raw))
    assert flags_of(at) == 1
    assert decode(MAGIC, 1, at, max_size=len(raw)) == payload
    under = encode(MAGIC, 1, payload, compress=True, max_size=len(raw) - 1)
    assert flags_of(under) == 0
    assert decode(MAGIC, 1, under, max_size=len(raw) - 1) == payload
    assert flags_of(encode(MAGIC, 1, payload)) == 0


@pytest.mark.parametrize("version", [0, 1, 0xFFFF])
def test_every_u16_version_round_trips_and_only_its_own_decodes(version: int) -> None:
    data = encode(MAGIC, version, [version])
    assert decode(MAGIC, version, data) == [version]
    other = (version + 1) % 0x10000
    with pytest.raises(FormatError, match=rf"^NRXX format version {version}, not {other}: "):
        decode(MAGIC, other, data)


@pytest.mark.parametrize("version", [-1, 0x10000])
def test_a_version_past_a_u16_is_a_callers_error(version: int) -> None:
    with pytest.raises(ValueError, match=rf"^a format version is a u16, got {version}$"):
        encode(MAGIC, version, 1)
    with pytest.raises(ValueError, match=rf"^a format version is a u16, got {version}$"):
        decode(MAGIC, version, encode(MAGIC, 1, 1))


@pytest.mark.parametrize("magic", [b"NRX", b"NRXXX", "NRXX", b""])
def test_a_magic_of_other_than_4_bytes_is_a_callers_error(magic: object) -> None:
    with pytest.raises(ValueError, match=r"^a magic is 4 bytes, got "):
        encode(magic, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^a magic is 4 bytes, got "):
        decode(magic, 1, encode(MAGIC, 1, 1))  # type: ignore[arg-type]


@pytest.mark.parametrize(("flags", "shown"), [(4, "0x0004"), (3, "0x0003"), (0x8000, "0x8000")])
def test_any_flag_but_compression_is_refused(flags: int, shown: str) -> None:
    with pytest.raises(FormatError, match=rf"^unknown flags {shown}: rebuild$"):
        decode(MAGIC, 1, framed(msgpack.packb(1), flags=flags))


@pytest.mark.parametrize("payload", [None, 0, "", b"", [], {}, {"a": [1, b"\x00", None]}])
def test_small_and_empty_payloads_round_trip_plain_and_compressed(payload: object) -> None:
    for compress in (False, True):
        assert decode(MAGIC, 1, encode(MAGIC, 1, payload, compress=compress)) == payload


def test_a_payload_of_exactly_its_bytes_is_one_object() -> None:
    data = encode(MAGIC, 1, [1, 2, 3])
    assert decode(MAGIC, 1, data) == [1, 2, 3]
    with pytest.raises(FormatError, match=r"^2 trailing bytes after the payload: rebuild$"):
        decode(MAGIC, 1, data + msgpack.packb(1) + msgpack.packb(2))
    with pytest.raises(FormatError, match=r"^truncated payload: rebuild$"):
        decode(MAGIC, 1, data[:-1])


def test_a_declared_length_of_exactly_the_bytes_left_decodes() -> None:
    # The limits are the payload's own length: a string that fills it is not refused.
    for value in ("s" * 300, b"b" * 300, list(range(300)), {str(i): i for i in range(50)}):
        assert decode(MAGIC, 1, encode(MAGIC, 1, value)) == value
