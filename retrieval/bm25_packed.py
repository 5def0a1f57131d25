"""A stored segment's postings as :meth:`retrieval.bm25.Segment.to_obj` packs them, and the stored
form's small parts: the half bytes of the frequencies, the fewest bytes that hold a column, the
fields and their CRC-32 (docs/store-format.md). Kept apart from the segment and its ranking."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__: list[str] = []  # the segment's own parts: imported by retrieval.bm25 by name

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class _Packed:
    """A stored segment's postings as :meth:`Segment.to_obj` packed them: for each word its first
    document, then the differences from the one before in 16 bits and the frequencies less one in
    4 (posting 2i in byte i's low half, 2i+1 in its high half), with the positions (ascending) and
    values that did not fit beside them."""

    first: npt.NDArray[Any]
    delta: npt.NDArray[Any]
    delta_at: I64
    delta_exc: npt.NDArray[Any]
    tf: npt.NDArray[Any]
    tf_at: I64
    tf_exc: npt.NDArray[Any]

    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.first, self.delta, self.delta_at, self.delta_exc,
                                           self.tf, self.tf_at, self.tf_exc))  # fmt: skip

    def last_docs(self, offsets: I64) -> I64:
        """Each word's last document, summed exactly (in 64 bits): the differences are never
        negative, so it is the word's largest, and every posting lies below it."""
        starts = offsets[:-1]
        sums = np.add.reduceat(self.delta, starts, dtype=np.int64)
        sums -= self.delta[starts]  # a word's first difference is not added: ``first`` is it
        at = self.delta_at
        if at.size:
            w = np.searchsorted(starts, at, side="right") - 1
            inner = at != starts[w]
            np.add.at(
                sums, w[inner], self.delta_exc[inner].astype(np.int64) - self.delta[at[inner]]
            )
        last: I64 = self.first.astype(np.int64) + sums
        return last

    def word(self, w: int, a: int, b: int) -> tuple[U32, U32]:
        """The documents and frequencies of word w, whose postings are a:b."""
        docs = self.delta[a:b].astype(np.uint32)
        lo, hi = np.searchsorted(self.delta_at, (a, b)).tolist()
        if hi > lo:
            docs[self.delta_at[lo:hi] - a] = self.delta_exc[lo:hi]
        docs[0] = self.first[w]
        np.cumsum(docs, dtype=np.uint32, out=docs)
        return docs, self._tfs(a, b)

    def _tfs(self, a: int, b: int) -> U32:
        tfs = _unnibble(self.tf[a >> 1 : (b + 1) >> 1], a & 1, b - a)
        lo, hi = np.searchsorted(self.tf_at, (a, b)).tolist()
        if hi > lo:
            tfs[self.tf_at[lo:hi] - a] = self.tf_exc[lo:hi]
        return tfs

    def unpack(self, offsets: I64) -> tuple[U32, U32]:
        """Every posting's document and frequency."""
        # In 32 bits with wrap-around: every document number fits (checked when loaded), so the
        # sums taken modulo 2**32 give them exactly, with half the memory of 64-bit temporaries.
        n = int(self.delta.shape[0])
        docs = self.delta.astype(np.uint32)
        docs[self.delta_at] = self.delta_exc
        np.cumsum(docs, dtype=np.uint32, out=docs)
        counts = np.diff(offsets)
        with np.errstate(over="ignore"):
            base = self.first.astype(np.uint32) - (docs[offsets[:-1]] if n else np.uint32(0))
            docs += np.repeat(base, counts)
        tfs = _unnibble(self.tf, 0, n)
        tfs[self.tf_at] = self.tf_exc
        return docs, tfs


_TF_NIBBLE = 16  # the largest frequency stored in a half byte (as 15); past it, an exception


def _nibbles(tfs: npt.NDArray[Any]) -> bytes:
    """Frequencies less one, clipped to 0..15, two a byte (the first in the low half)."""
    t = (np.clip(tfs, 1, _TF_NIBBLE) - 1).astype(np.uint8)
    if t.size % 2:
        t = np.append(t, np.uint8(0))
    return bytes((t[0::2] | (t[1::2] << 4)).astype("<u1").data)


def _width(a: npt.NDArray[Any]) -> str:
    """The fewest bytes (1, 2 or 4) that hold every value of a."""
    top = int(a.max()) if a.size else 0
    return "<u1" if top <= 0xFF else "<u2" if top <= 0xFFFF else "<u4"


def _unnibble(raw: npt.NDArray[Any], skip: int, n: int) -> U32:
    """n frequencies from the half bytes of raw, the first ``skip`` (0 or 1) half bytes left out."""
    out = np.empty(2 * raw.shape[0], dtype=np.uint32)
    out[0::2] = raw & 0x0F
    out[1::2] = raw >> 4
    tfs: U32 = out[skip : skip + n]
    tfs += 1
    return tfs


_ARRAYS = ("vocab", "vocab_len", "counts", "first", "delta", "delta_exc_at", "delta_exc", "tf",
           "tf_exc_at", "tf_exc", "lengths")  # fmt: skip
_FIELDS = ("n_words", *_ARRAYS, "crc")


def _crc(obj: Mapping[str, Any]) -> int:
    crc = zlib.crc32(str(obj["n_words"]).encode())
    for k in _ARRAYS:
        v = obj[k]
        crc = zlib.crc32(v if isinstance(v, bytes) else b"", crc)
    return crc


def _array(raw: bytes, dtype: str) -> npt.NDArray[Any]:
    return np.frombuffer(raw, dtype=dtype)
