"""store.codec: a framed file decodes whole or raises FormatError, bounded (ADR 0050 §4,
amendment 2026-10-16)."""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.codec import MAX_RATIO, decode, encode, encode_parts

MAGIC = b"NRXX"
PAYLOAD = {"paths": ["a.py", "b/c.py"], "n": [1, 2**31 - 1], "blob": b"\x00\x01" * 50}


def header(flags: int = 0, version: int = 1, magic: bytes = MAGIC) -> bytes:
    return struct.pack(">4sHH", magic, version, flags)


@pytest.mark.parametrize("compress", [False, True])
def test_a_payload_round_trips(compress: bool) -> None:
    data = encode(MAGIC, 1, PAYLOAD, compress=compress)
    assert data[:4] == MAGIC
    assert decode(MAGIC, 1, data) == PAYLOAD


def test_compression_is_flagged_and_shrinks_a_repetitive_payload() -> None:
    payload = {"words": [f"word{i % 300}" for i in range(2000)]}
    plain = encode(MAGIC, 1, payload)
    packed = encode(MAGIC, 1, payload, compress=True)
    assert struct.unpack(">H", packed[6:8]) == (1,)
    assert len(packed) < len(plain) // 2
    assert decode(MAGIC, 1, packed) == payload


def test_what_could_not_be_inflated_under_the_bound_is_stored_plain() -> None:
    payload = b"\x00" * 1_000_000  # compresses about 1,000 times
    data = encode(MAGIC, 1, payload, compress=True)
    assert struct.unpack(">H", data[6:8]) == (0,)
    assert decode(MAGIC, 1, data) == payload


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", r"^0-byte file is shorter than its 8-byte header: rebuild$"),
        (b"NRXX\x00", r"^5-byte file is shorter than its 8-byte header: rebuild$"),
        (header(magic=b"NRCK") + msgpack.packb(1), r"^not a NRXX file \(magic b'NRCK'\): rebuild$"),
        (header(version=2) + msgpack.packb(1), r"^NRXX format version 2, not 1: rebuild$"),
        (header(flags=4) + msgpack.packb(1), r"^unknown flags 0x0004: rebuild$"),
        (header(), r"^truncated payload: rebuild$"),
        (header() + msgpack.packb([1, 2, 3])[:-1], r"^truncated payload: rebuild$"),
        (header() + msgpack.packb(1) + b"\x00", r"^1 trailing bytes after the payload: rebuild$"),
        (header() + b"\xc1", r"^corrupt payload \(.*\): rebuild$"),
        (header() + b"\xa2\xff\xfe", r"^corrupt payload \(UnicodeDecodeError: .*\): rebuild$"),
        (header() + b"\xd4\x05\x00", r"^corrupt payload \(ValueError: .*\): rebuild$"),
        (header(flags=1) + b"not zlib", r"^corrupt compressed payload \(.*\): rebuild$"),
        (
            header(flags=1) + zlib.compress(msgpack.packb([1] * 100))[:-3],
            r"^truncated compressed payload: rebuild$",
        ),
        (
            header(flags=1) + zlib.compress(msgpack.packb(1)) + b"xx",
            r"^trailing bytes after the compressed payload: rebuild$",
        ),
    ],
    ids=[
        "empty",
        "short header",
        "foreign magic",
        "future version",
        "unknown flag",
        "no payload",
        "truncated payload",
        "trailing bytes",
        "reserved byte",
        "bad utf-8",
        "extension type",
        "not zlib",
        "truncated zlib",
        "trailing after zlib",
    ],
)
def test_bad_bytes_raise_format_error(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        decode(MAGIC, 1, data)


@pytest.mark.parametrize(
    "declared",
    [
        b"\xdd\xff\xff\xff\xff",  # array32 of 4 billion elements
        b"\xdf\xff\xff\xff\xff",  # map32
        b"\xdb\xff\xff\xff\xff",  # str32 of 4 GiB
        b"\xc6\xff\xff\xff\xff",  # bin32
        b"\xc9\xff\xff\xff\xff\x01",  # ext32
        b"\x91" * 100 + b"\xdd\x00\x10\x00\x00",  # nested, then a million elements
    ],
    ids=["array", "map", "str", "bin", "ext", "nested array"],
)
def test_a_huge_declared_length_is_refused_before_allocating(declared: bytes) -> None:
    with pytest.raises(FormatError, match=r"^(corrupt|truncated) payload.*: rebuild$"):
        decode(MAGIC, 1, header() + declared)


def test_refusing_a_huge_declared_length_allocates_almost_nothing() -> None:
    data = header() + b"\x92" + b"\xc6\xff\xff\xff\xf0" + b"\xdd\xff\xff\xff\xf0"
    tracemalloc.start()
    try:
        with pytest.raises(FormatError):
            decode(MAGIC, 1, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_zlib_bomb_is_refused_after_a_bounded_inflate() -> None:
    body = zlib.compress(msgpack.packb(b"\x00" * 50_000_000), 9)
    limit = MAX_RATIO * len(body)
    with pytest.raises(FormatError, match=rf"^compressed payload inflates past {limit} bytes"):
        decode(MAGIC, 1, header(flags=1) + body)


def test_a_fixed_cap_bounds_the_inflate_whatever_the_ratio() -> None:
    data = encode(MAGIC, 1, list(range(20_000)), compress=True)
    with pytest.raises(FormatError, match=r"^compressed payload inflates past 5000 bytes"):
        decode(MAGIC, 1, data, max_size=5000)


def test_deep_nesting_is_a_format_error() -> None:
    with pytest.raises(FormatError, match=r"^corrupt payload"):
        decode(MAGIC, 1, header() + b"\x91" * 100_000 + b"\x00")


def test_map_keys_must_be_strings() -> None:
    with pytest.raises(FormatError, match=r"^corrupt payload"):
        decode(MAGIC, 1, header() + msgpack.packb({1: 2}))


VALID = [
    encode(MAGIC, 1, PAYLOAD),
    encode(MAGIC, 1, PAYLOAD, compress=True),
    encode(MAGIC, 1, {"x": list(range(300)), "s": "é" * 40}, compress=True),
]


def _decode_or_format_error(data: bytes) -> None:
    message = ""
    try:
        decode(MAGIC, 1, data)
    except FormatError as exc:
        message = str(exc)
    assert message == "" or message.endswith(": rebuild")


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_decode_or_raise_format_error(data: bytes) -> None:
    _decode_or_format_error(data)


@FUZZ
@given(st.sampled_from([0, 1]), st.binary(max_size=512))
def test_random_payloads_behind_a_valid_header_decode_or_raise_format_error(
    flags: int, body: bytes
) -> None:
    _decode_or_format_error(header(flags=flags) + body)


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_truncations_of_valid_files_raise_format_error(data: bytes, draw: st.DataObject) -> None:
    cut = draw.draw(st.integers(min_value=0, max_value=len(data) - 1))
    with pytest.raises(FormatError):
        decode(MAGIC, 1, data[:cut])


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_bit_flips_in_valid_files_decode_or_raise_format_error(
    data: bytes, draw: st.DataObject
) -> None:
    flips = draw.draw(
        st.lists(st.integers(min_value=0, max_value=len(data) * 8 - 1), min_size=1, max_size=4)
    )
    buf = bytearray(data)
    for bit in flips:
        buf[bit // 8] ^= 1 << (bit % 8)
    _decode_or_format_error(bytes(buf))


BIG = 1 << 16  # store.codec._BIG: a byte string this long is a piece of its own


@pytest.mark.parametrize(
    "payload",
    [
        {},
        PAYLOAD,
        {"a": b"x" * BIG, "b": b"y" * (BIG - 1), "c": [b"z" * (BIG + 7), 3, None]},
        {"segment": {"vocab": bytes(range(256)) * 1000, "n": 2**40, "f": 0.5}, "k": "ü"},
        [b"\0" * BIG, {"nested": [[b"q" * BIG]]}, True, -1, ("a", b"t" * BIG)],
        b"w" * (3 * BIG),
    ],
)
def test_the_pieces_of_a_payload_join_into_its_encoding(payload: object) -> None:
    parts = encode_parts(MAGIC, 7, payload)
    assert b"".join(parts) == encode(MAGIC, 7, payload)
    assert decode(MAGIC, 7, b"".join(parts)) == msgpack.unpackb(
        msgpack.packb(payload, use_bin_type=True), raw=False
    )


def test_a_long_byte_string_is_a_piece_of_its_own_not_a_copy() -> None:
    blob = b"a" * (BIG + 1)
    parts = encode_parts(MAGIC, 1, {"blob": blob, "n": 1})
    assert any(p is blob for p in parts)
    small = b"b" * (BIG - 1)
    assert not any(p is small for p in encode_parts(MAGIC, 1, {"blob": small}))


def test_pieces_refuse_what_msgpack_cannot_hold_and_a_bad_frame() -> None:
    with pytest.raises(TypeError):
        encode_parts(MAGIC, 1, {"x": object()})
    with pytest.raises(ValueError, match="magic"):
        encode_parts(b"XX", 1, {})
    with pytest.raises(ValueError, match="u16"):
        encode_parts(MAGIC, 70000, {})


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.text(max_size=5)
        | st.binary(max_size=8)
        | st.just(b"L" * BIG),
        lambda kids: (
            st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=3), kids, max_size=4)
        ),
        max_leaves=12,
    )
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_payload_gives_the_same_bytes_in_pieces(payload: object) -> None:
    assert b"".join(encode_parts(MAGIC, 2, payload)) == encode(MAGIC, 2, payload)
