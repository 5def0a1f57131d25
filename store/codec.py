"""The frame of every stored file, and bounded decoding.

Every file in the data directory is::

    MAGIC    4 bytes   the file's kind (b"NRCK" a chunk record, b"NRMF" a manifest, ...)
    version  u16 BE    the kind's format version; any other version is rebuilt
    flags    u16 BE    bit 0: the payload is zlib-compressed; bit 1: zstd-compressed (one
                       frame that says its size); at most one of them; every other bit 0
    payload            one msgpack object (after inflating, when bit 0 or 1 is set)

The storage rules (ADR 0050 §4, amendment 2026-10-16) say that what is stored is derived, so a file
that does not decode is rebuilt, never trusted and never a crash; and that decoding bounds every
size by the bytes that hold it. So :func:`decode`:

- gives msgpack's ``unpackb`` the payload's own length as the limit of every string, byte string,
  array and map length: a declared length can never exceed the bytes that would
  hold it, so a header claiming four billion elements is refused before anything is allocated;
- inflates at most :data:`MAX_RATIO` times the compressed bytes (and at most ``max_size``), so a
  zlib or zstd bomb is refused after a bounded allocation (a zstd frame's declared size is
  checked against that bound before anything is allocated); :func:`encode` stores uncompressed
  what it could not read back under that bound, so a file this package writes always decodes;
- requires exactly one object: trailing bytes mean a corrupt file;
- raises :class:`errors.FormatError` ``"<what>: rebuild"`` for every problem, and nothing else.

Integers are not bounded here: what is a quantity of the text (a frequency, a word count) is read
up to 2**31-1 by the caller's own validation (amendment 2026-10-16).
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Literal, NoReturn

import msgpack
import zstandard
from nodwyn_retrieval.errors import FormatError

__all__ = [
    "FLAG_ZLIB",
    "FLAG_ZSTD",
    "HEADER",
    "MAX_INT32",
    "MAX_RATIO",
    "MAX_SIZE",
    "decode",
    "encode",
    "encode_parts",
    "frame",
    "inflate_limit",
]

HEADER = struct.Struct(">4sHH")
FLAG_ZLIB = 0x0001
FLAG_ZSTD = 0x0002
_KNOWN_FLAGS = FLAG_ZLIB | FLAG_ZSTD

MAX_RATIO = 64
"""Inflated bytes allowed per compressed byte. zlib's own limit is about 1,032; our payloads
compress 3 to 10 times."""

MAX_SIZE = 1 << 30
"""The default cap of an inflated payload (1 GiB), whatever the ratio allows."""

_MIN_INFLATE = 4096  # a tiny payload may inflate this much whatever its ratio

MAX_INT32 = 2**31 - 1
"""The largest quantity a caller accepts (amendment 2026-10-16: the width the postings store)."""


def inflate_limit(compressed_len: int, max_size: int = MAX_SIZE) -> int:
    """How many bytes ``compressed_len`` compressed bytes may inflate to."""
    return min(max_size, max(MAX_RATIO * compressed_len, _MIN_INFLATE))


def _magic_ok(magic: bytes) -> None:
    if not isinstance(magic, bytes) or len(magic) != 4:
        raise ValueError(f"a magic is 4 bytes, got {magic!r}")


def _version_ok(version: int) -> None:
    if not 0 <= version <= 0xFFFF:
        raise ValueError(f"a format version is a u16, got {version}")


def encode(
    magic: bytes,
    version: int,
    payload: object,
    *,
    compress: bool = False,
    level: int = 6,
    method: Literal["zlib", "zstd"] = "zlib",
    max_size: int = MAX_SIZE,
) -> bytes:
    """The framed bytes of ``payload`` (msgpack, compressed by ``method`` when ``compress``).

    A compressed payload that :func:`decode` could not inflate under its bound is stored
    uncompressed instead. Raises ``TypeError``/``ValueError`` for a payload msgpack cannot hold
    (a caller's bug, not a store problem).
    """
    raw = msgpack.packb(payload, use_bin_type=True)
    return frame(magic, version, raw, compress=compress, level=level, method=method,
                 max_size=max_size)  # fmt: skip


_BIG = 1 << 16
"""A byte string at least this long is given by :func:`encode_parts` as it is, not copied."""
_BIN32 = struct.Struct(">BI")


def encode_parts(magic: bytes, version: int, payload: object) -> list[bytes]:
    """:func:`encode` uncompressed, as pieces whose join is its bytes: each long byte string of
    the payload (in its maps and lists) is a piece of its own, the very object, so that a large
    payload (a tree's snapshot) is written without being copied into one buffer, then into a
    bytes object, then behind its header. What is not a map, a list or a long byte string is
    packed as :func:`encode` packs it."""
    _magic_ok(magic)
    _version_ok(version)
    parts: list[bytes] = [HEADER.pack(magic, version, 0)]
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)

    def flush() -> None:
        packed = packer.bytes()
        if packed:
            parts.append(packed)
            packer.reset()

    def walk(obj: object) -> None:
        if type(obj) is dict:
            packer.pack_map_header(len(obj))
            for key, value in obj.items():
                walk(key)
                walk(value)
        elif type(obj) is list:
            packer.pack_array_header(len(obj))
            for item in obj:
                walk(item)
        elif type(obj) is bytes and _BIG <= len(obj) <= 0xFFFFFFFF:
            flush()
            parts.append(_BIN32.pack(0xC6, len(obj)))  # msgpack's bin 32: what packb gives it
            parts.append(obj)
        else:
            packer.pack(obj)

    walk(payload)
    flush()
    return parts


def frame(
    magic: bytes,
    version: int,
    raw: bytes,
    *,
    compress: bool = False,
    level: int = 6,
    method: Literal["zlib", "zstd"] = "zlib",
    max_size: int = MAX_SIZE,
) -> bytes:
    """The framed bytes of ``raw``, one msgpack object already packed, as :func:`encode` frames
    it: for a writer that packs many payloads its own way."""
    _magic_ok(magic)
    _version_ok(version)
    if compress:
        if method == "zstd":
            flag, packed = FLAG_ZSTD, _compressor(level).compress(raw)
        elif method == "zlib":
            flag, packed = FLAG_ZLIB, zlib.compress(raw, level)
        else:
            raise ValueError(f"a compression is zlib or zstd, got {method!r}")
        if len(raw) <= inflate_limit(len(packed), max_size):
            return HEADER.pack(magic, version, flag) + packed
    return HEADER.pack(magic, version, 0) + raw


_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    """A zstd compressor of ``level`` for this thread (one may not be used by two at once): a
    new one costs more than compressing a small record. Its frames say their size, which
    :func:`decode` checks against its bound before it allocates."""
    made: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "zstd", None)
    if made is None:
        made = _local.zstd = {}
    got = made.get(level)
    if got is None:
        got = made[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return got


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's zstd decompressor: making one costs about what decompressing a record does."""
    got: zstandard.ZstdDecompressor | None = getattr(_local, "unzstd", None)
    if got is None:
        got = _local.unzstd = zstandard.ZstdDecompressor()
    return got


def _bad(what: str) -> NoReturn:
    raise FormatError(f"{what}: rebuild")


def _inflate(data: memoryview, max_size: int) -> bytes:
    limit = inflate_limit(len(data), max_size)
    inflater = zlib.decompressobj()
    try:
        # One byte more than allowed tells "exactly at the limit" from "past it".
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        _bad(f"corrupt compressed payload ({exc})")
    if len(out) > limit:
        _bad(f"compressed payload inflates past {limit} bytes")
    if not inflater.eof:
        _bad("truncated compressed payload")
    if inflater.unused_data:
        _bad("trailing bytes after the compressed payload")
    return out


def _unzstd(data: memoryview, max_size: int) -> bytes:
    limit = inflate_limit(len(data), max_size)
    try:
        # The frame's declared size first: zstandard allocates it whole, whatever it is told.
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        _bad(f"corrupt compressed payload ({exc})")
    if size < 0:
        _bad("a compressed payload that does not say its size")
    if size > limit:
        _bad(f"compressed payload inflates past {limit} bytes")
    try:
        out: bytes = _decompressor().decompress(
            data, max_output_size=limit, read_across_frames=False, allow_extra_data=False
        )
    except zstandard.ZstdError as exc:
        _bad(f"corrupt compressed payload ({exc})")
    if len(out) != size:  # pragma: no cover - zstd checks the size it was told
        _bad("a compressed payload of another size than it says")
    return out


def _no_ext(code: int, data: bytes) -> object:
    # No file kind uses msgpack extension types: one is a foreign or corrupt file.
    raise ValueError(f"unexpected extension type {code}")


def decode(magic: bytes, version: int, data: bytes, *, max_size: int = MAX_SIZE) -> object:
    """The payload of framed ``data``, which must be of kind ``magic`` and version ``version``.

    Bounded as the module says; raises :class:`errors.FormatError` and only that for data that
    is short, foreign, of another version, with unknown flags, corrupt, truncated or followed by
    trailing bytes. Strings come back as ``str``, byte strings as ``bytes``, arrays as ``list``;
    map keys must be strings or bytes.
    """
    _magic_ok(magic)
    _version_ok(version)
    view = memoryview(data)
    if len(view) < HEADER.size:
        _bad(f"{len(view)}-byte file is shorter than its {HEADER.size}-byte header")
    got_magic, got_version, flags = HEADER.unpack_from(view)
    if got_magic != magic:
        _bad(f"not a {magic.decode('ascii', 'replace')} file (magic {got_magic!r})")
    if got_version != version:
        _bad(f"{magic.decode('ascii', 'replace')} format version {got_version}, not {version}")
    if flags & ~_KNOWN_FLAGS or flags == _KNOWN_FLAGS:
        _bad(f"unknown flags 0x{flags:04x}")
    body = view[HEADER.size :]
    raw: bytes | memoryview = body
    if flags & FLAG_ZLIB:
        raw = _inflate(body, max_size)
    elif flags & FLAG_ZSTD:
        raw = _unzstd(body, max_size)
    n = max(len(raw), 1)
    try:
        # Parsed where it lies (an Unpacker would first copy the whole payload into its buffer).
        obj: object = msgpack.unpackb(
            raw,
            raw=False,
            strict_map_key=True,
            ext_hook=_no_ext,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n,
            max_ext_len=n,
        )
    except msgpack.ExtraData as exc:
        extra: bytes = getattr(exc, "extra", b"")  # the bytes after the object (not in the stubs)
        _bad(f"{len(extra)} trailing bytes after the payload")
    except msgpack.OutOfData:
        _bad("truncated payload")
    except (
        msgpack.UnpackException,
        ValueError,
        TypeError,
        OverflowError,
        RecursionError,
    ) as exc:
        if type(exc) is ValueError and str(exc) == _INCOMPLETE:
            _bad("truncated payload")
        _bad(f"corrupt payload ({type(exc).__name__}: {exc})")
    return obj


# What ``msgpack.unpackb`` says of a payload that ends inside an object.
_INCOMPLETE = "Unpack failed: incomplete input"
