"""The blobs' first looks one by one (``_words_native.blob_looks``, which Memo.record hands back
for a file that may hold a blob): each bit is its shape's own Python look, and the spans of the
shapes whose bit is set are every shape's spans, so that analyze() blanks what it blanked."""

from __future__ import annotations

import base64
import random

import pytest
from nodwyn_retrieval.retrieval import blobs as B
from nodwyn_retrieval.retrieval.blobs import ALL_LOOKS, blank_blobs, blob_spans, may_hold_blobs

native = pytest.importorskip("nodwyn_retrieval.retrieval._words_native")

from tests.test_blobs_native import PIECES, samples  # noqa: E402


def python_looks(data: bytes) -> int:
    """Each shape's first look, as blobs.py makes it, as a bit."""
    if len(data) < B.MIN_RUN:
        return 0
    looks = 0
    if data.translate(B._ALPHA_TABLE).find(B._RUN_HINT) >= 0:
        looks |= B.LOOK_BASE64
    if b"ata:" in data or b"ATA:" in data:
        looks |= B.LOOK_DATA
    hexes = data.translate(B._HEX_TABLE)
    if any(hexes.find(hint) >= 0 for hint in B._DUMP_HINTS):
        looks |= B.LOOK_DUMP
    if data.translate(B._LINE_TABLE).find(B._LINE_HINT) >= 0:
        looks |= B.LOOK_LINE
    return looks


def texts() -> list[bytes]:
    rng = random.Random(5)
    out = samples()
    # Each shape's hint alone, and two at once, in a longer text.
    shapes = [
        base64.b64encode(rng.randbytes(300)),
        b"src='data:image/png;base64," + base64.b64encode(rng.randbytes(40)) + b"'",
        b"00000010: 0a0b 0c0d 0e0f 1011  ........",
        b"var a=1;" * 200,
        b"0123456789abcdef" * 6,
    ]
    for shape in shapes:
        for other in ("", *shapes):
            out.append(b"x = 1\n" + shape + b"\nword\n" + (other or b""))
    for _ in range(300):
        out.append(b"".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 20))))
    return out


def test_each_bit_is_its_shapes_look() -> None:
    seen = 0
    for data in texts():
        got = native.blob_looks(data)
        assert got == python_looks(data), data[:80]
        assert bool(got) == may_hold_blobs(data)
        seen |= got
    assert seen == ALL_LOOKS  # every look was found somewhere


def test_the_looked_shapes_find_every_blob() -> None:
    found = 0
    for data in texts():
        looks = native.blob_looks(data)
        assert blob_spans(data, looks) == blob_spans(data)
        assert blank_blobs(data, looks) == blank_blobs(data)
        found += bool(blob_spans(data))
    assert found > 10


def test_a_shape_left_out_is_not_looked_for() -> None:
    # The bits do leave shapes out: a base64 blob is not found when its bit is clear.
    data = b"x = '" + base64.b64encode(random.Random(1).randbytes(300)) + b"'\n"
    assert blob_spans(data)
    assert blob_spans(data, ALL_LOOKS & ~B.LOOK_BASE64) == []
