"""The compiled pass's cut of runs, 64 bytes at a time (retrieval/_words_native.c, keep_mask64):
the runs it cuts are the runs bytes.split() cuts, of data translated (Memo.record's cut, of
untranslated bytes) and of data as it is (count_texts' cut), for every byte value in every
position of a block, across the blocks' edges and at the text's end."""

from __future__ import annotations

import random

import numpy as np
import pytest
from nodwyn_retrieval.retrieval.analyze import NATIVE
from nodwyn_retrieval.retrieval.words import translate

pytestmark = pytest.mark.skipif(not NATIVE, reason="the compiled pass is not installed")

if NATIVE:
    from nodwyn_retrieval.retrieval import _words_native as native


def _split_runs(data: bytes) -> list[tuple[int, int]]:
    """(start, length) of each piece of data.split(), found by its own walk."""
    out: list[tuple[int, int]] = []
    pos = 0
    for piece in data.split():
        at = data.index(piece, pos)
        out.append((at, len(piece)))
        pos = at + len(piece)
    return out


def _cut(data: bytes, *, raw: bool) -> list[tuple[int, int]]:
    flat = np.frombuffer(native.cut_runs(data, raw), dtype=np.int64).tolist()
    return list(zip(flat[::2], flat[1::2], strict=True))


def _check(data: bytes) -> None:
    assert _cut(data, raw=True) == _split_runs(translate(data))
    assert _cut(data, raw=False) == _split_runs(data)


def test_every_byte_in_every_position_of_a_block() -> None:
    for c in range(256):
        for k in (0, 1, 15, 16, 17, 31, 32, 47, 48, 62, 63, 64, 65, 127, 128):
            for fill in (b"a", b" ", b"\xc3"):
                data = bytearray(fill * 192)
                data[k] = c
                _check(bytes(data))


@pytest.mark.parametrize("seed", range(6))
def test_random_texts_of_every_length(seed: int) -> None:
    rng = random.Random(seed)
    alphabets = (bytes(range(256)), b"aZ9_- \n\t\x0b\x0c\r.\x80\xff", b"ab \n", b"a-_")
    for _ in range(400):
        alphabet = rng.choice(alphabets)
        n = rng.choice((0, 1, 63, 64, 65, 127, 128, 129, rng.randrange(1, 700)))
        _check(bytes(rng.choice(alphabet) for _ in range(n)))


def test_a_run_that_spans_blocks_and_ends_the_text() -> None:
    for n in (64, 65, 128, 200):
        _check(b"x" * n)
        _check(b" " + b"x" * n)
        _check(b"x" * n + b" ")
