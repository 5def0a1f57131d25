"""The compiled pass's first looks for blobs (``_words_native.blob_hints``, many texts in one
call) agree with retrieval.blobs.may_hold_blobs text by text, and a text they pass over holds no
blob by blob_spans."""

from __future__ import annotations

import base64
import random

import numpy as np
import pytest
from nodwyn_retrieval.retrieval.blobs import MIN_MINIFIED, MIN_RUN, blob_spans, may_hold_blobs

native = pytest.importorskip("nodwyn_retrieval.retrieval._words_native")

PIECES = [
    b"word", b" ", b"\n", b"\t", b"snake_case", b"a/b/c", b"+", b"=", b"A" * 39, b"A" * 40,
    b"Zm9vYmFy" * 5, b"data:", b"DATA:", b"Data:", b"ata:", b"ATA:", b"aTa:", b"at:", b"meta: x",
    b"0000 00 11 22 33", b"00 11 22 3", b"dead beef cafe babe face", b"deadbeef cafebabe",
    b"12345678 9abcdef0", b"0a 0b\t0c 0d", b"GG HH II JJ", b"caf\xc3\xa9", b"\xff\xfe",
    b"x" * 999, b"y" * 1000, b"f();" * 300, b"ab cd ef 0", b"ab cd ef 01", b"abc\tde f0 12 34",
    b"1234 5678 9abc", b"1234 5678 9ab", b"12345678 9abcdef", b"12345678 9abcdef0", b"a  b",
]  # fmt: skip


def hints(texts: list[bytes]) -> list[bool]:
    """The pass's looks at each text, the texts laid end to end as the fold lays them (a space
    after each, which is part of the text's span)."""
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) + 1 for t in texts], out=bounds[1:])
    got = native.blob_hints(b" ".join([*texts, b""]), bounds.tobytes())
    assert len(got) == len(texts)
    return [bool(b) for b in got]


def samples() -> list[bytes]:
    rng = random.Random(11)
    out = [b"", b"a" * (MIN_RUN - 1), b"a" * MIN_RUN, b"x" * (MIN_MINIFIED - 1) + b"\n" + b"x"]
    out.append(b"line\n" + b"z" * MIN_MINIFIED)
    out.append(base64.b64encode(rng.randbytes(600)))
    for _ in range(400):
        out.append(b"".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 12))))
    return out


def test_the_pass_agrees_with_may_hold_blobs_text_by_text() -> None:
    texts = samples()
    got = hints(texts)
    assert got == [may_hold_blobs(t + b" ") for t in texts]
    assert any(got)
    assert not all(got)


def test_a_text_passed_over_holds_no_blob() -> None:
    texts = samples()
    passed = [t for t, h in zip(texts, hints(texts), strict=True) if not h]
    assert passed
    assert all(blob_spans(t) == [] for t in passed)
    found = [t for t in texts if blob_spans(t)]
    assert found
    assert all(hints(found))


def test_texts_are_looked_at_alone() -> None:
    # Two texts that would hold a run of 40 (or a long line) only if they were one.
    half = b"Q" * (MIN_RUN // 2 + 1)
    assert hints([half, half]) == [False, False]
    line = b"-" * (MIN_MINIFIED // 2 + 1)
    assert hints([line, line]) == [False, False]
    assert hints([b"d" + b" " * MIN_RUN, b"ata:" + b" " * MIN_RUN]) == [False, True]


def test_bad_bounds_are_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="text bounds out of order or range"):
        native.blob_hints(b"abc", np.array([0, 4], dtype=np.int64).tobytes())
    with pytest.raises(ValueError, match="text bounds of int64"):
        native.blob_hints(b"abc", b"\0\0")


def test_a_block_reads_as_random_from_half_its_characters_changing_class() -> None:
    # 100 characters of base64's alphabet: 50 changes of class (upper, digit, lower) make it a
    # blob, 49 do not (a block of 64 to 255 is a blob only when it reads as random; "x" and
    # "Z" are not hex digits, so the block is not a hex run either).
    fifty = b"Z1" * 25 + b"x" * 50
    forty_nine = b"Z1" * 24 + b"Z" + b"x" * 51
    assert len(fifty) == len(forty_nine) == 100
    assert blob_spans(b"x " + fifty + b" y") == [(2, 102)]
    assert blob_spans(b"x " + forty_nine + b" y") == []


def test_the_pass_agrees_with_may_hold_blobs_on_texts_of_runs_near_their_lengths() -> None:
    # Texts of a few characters: hex digits, blanks, the rest of base64's alphabet and others,
    # so that runs of the alphabet near 40 and of hex digits and blanks near a dump's hint (11
    # to 17) begin and end at every place, and the pass's skips over short runs are tried.
    rng = random.Random(5)
    alphabets = [b"ab01 ", b"ab01 \t.", b"Zz9+/a", b"Zz9+/ .", b"0f \n:aAtT", b"dead beef\n"]
    texts: list[bytes] = []
    for _ in range(3000):
        chars = rng.choice(alphabets)
        texts.append(bytes(rng.choice(chars) for _ in range(rng.randrange(35, 160))))
    got = hints(texts)
    assert got == [may_hold_blobs(t + b" ") for t in texts]
    assert 0.05 < sum(got) / len(got) < 0.95
    # Each hint alone between two characters that are neither hex digits nor blanks, at the
    # start, in the middle and at the end of a text; one character short, none.
    pad = b"-" * 40
    for hint in (b"00 11 22 33", b"0011 2233 4455", b"00112233 44556677"):
        for short in (hint, hint[1:]):
            for text in (short + b"." + pad, pad + b"." + short + b"." + pad, pad + b"." + short):
                assert hints([text]) == [short == hint] == [may_hold_blobs(text + b" ")]
