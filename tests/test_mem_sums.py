"""The sum of repeated postings a ``.mem`` is encoded from: packed into one sort when the keys and
values fit, sorted by key otherwise, with one result."""

from __future__ import annotations

import numpy as np
import pytest
from nodwyn_retrieval.store.mem_fold import _sum_repeats


def plain(keys: list[int], values: list[int]) -> tuple[list[int], list[int]]:
    out: dict[int, int] = {}
    for k, v in zip(keys, values, strict=True):
        out[k] = out.get(k, 0) + v
    return sorted(out), [out[k] for k in sorted(out)]


@pytest.mark.parametrize(
    ("key_top", "value_top"),
    [
        (50, 9),
        (2**32 - 1, 2**31 - 1),
        (2**32, 5),
        (2**40, 9),
        (7, 2**31),
        (7, 2**33),
        (2**40, 2**33),
    ],
    ids=[
        "small",
        "at the bounds",
        "a key past 32 bits",
        "a key far past 32 bits",
        "a value past 31 bits",
        "a value far past 31 bits",
        "both past",
    ],
)
def test_repeats_add_up_whichever_way_they_are_sorted(key_top: int, value_top: int) -> None:
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 40, 500).astype(np.int64)
    keys[::7] = key_top  # the largest key, repeated
    values = rng.integers(0, 1000, 500).astype(np.int64)
    values[3] = value_top
    got_k, got_v = _sum_repeats(keys, values)
    want_k, want_v = plain(keys.tolist(), values.tolist())
    assert got_k.tolist() == want_k
    assert got_v.tolist() == want_v


def test_no_repeats_to_add() -> None:
    k, v = _sum_repeats(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert (k.size, v.size) == (0, 0)
