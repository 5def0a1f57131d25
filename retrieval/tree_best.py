"""Which files a search that shows a few must score by their kind and name (retrieval/tree.py).

A file's final score is its chunks' score times its kind's prior and times a factor for the query
words its name holds; both cost microseconds a file to compute, for each of the thousands of files
a query's words match. A search shows a few: :func:`best_files` scores files in order of their
chunks' score until no file left could reach the ones it shows, and gives the same first files,
in the same order, as scoring every file.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = ["best_files", "most_factor"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_FIRST_FILES = 64
"""A search that shows few files scores this many of the best by their chunks first (at least
twice the files it shows), then twice as many at each step, until no file left can reach them."""
_MARGIN = 1e-9
"""How far below the scores it is compared with a file left unscored must be bound, relative to
them: room for the rounding of a product taken in another order; it only widens what is scored."""


def most_factor(prior: F64, name: float) -> float:
    """The most a file's score from its chunks is multiplied by: its kind's prior (or 1.0, an
    older copy a query names) times ``1 + name * sqrt(share)`` with share in [0, 1], at the
    largest corner of those ranges (at least 1.0, so a file's bound falls with its chunks')."""
    kinds = (min(float(prior.min()), 1.0), max(float(prior.max()), 1.0))
    return max(k * n for k in kinds for n in (1.0, 1.0 + name))


def best_files(
    total: F64,
    limit: int,
    scored: Callable[[I64], F64],
    most: float,
) -> tuple[I64, F64]:
    """Positions of files, and their final scores, that hold the ``limit`` best files by final
    score, ties included: the files in order of their chunks' score (``total``), scored a part at
    a time until the next file's score times the largest factor is below the ``limit``-th best
    final score found. Every file left out scores below ``limit`` files scored, so the first
    ``limit`` files in final order are those of all the files. (A file's kind and name words are
    computed for the files scored only: a few dozen of the thousands a query's words match.)"""
    n = total.shape[0]
    by_chunks = np.argsort(-total, kind="stable")
    if n <= _FIRST_FILES:
        return by_chunks, scored(by_chunks)
    done = 0
    step = max(_FIRST_FILES, 2 * limit)
    parts: list[F64] = []
    while done < n:
        part = by_chunks[done : done + step]
        parts.append(scored(part))
        done += part.shape[0]
        if done >= n:
            break
        found = np.concatenate(parts)
        if found.shape[0] >= limit:
            kth = float(np.partition(found, found.shape[0] - limit)[found.shape[0] - limit])
            if float(total[by_chunks[done]]) * most < kth - _MARGIN * abs(kth):
                break
        step *= 2
    return by_chunks[:done], np.concatenate(parts)
