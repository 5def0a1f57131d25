"""A first build's postings, compiled (retrieval/_tree_native.c)."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

def map_words(ids: dict[str, int], words: list[str], /) -> bytes:
    """Each word's number in ids (a new word given len(ids)), as native uint32 bytes."""

def sort_postings(
    word: npt.NDArray[np.uint32],
    doc: npt.NDArray[np.uint32],
    tf: npt.NDArray[np.uint32],
    n_words: int,
    n_docs: int,
    renumber: npt.NDArray[np.uint32] | None = None,
    /,
) -> tuple[bytes, bytes, bytes, bytes]:
    """The pairs by word then document (a document d read as renumber[d]), repeated ones
    summed and capped: (counts as int64, docs, tfs and lengths as uint32), native bytes."""

def pack_segment(
    words: Sequence[str],
    offsets: npt.NDArray[np.int64],
    docs: npt.NDArray[np.uint32],
    tfs: npt.NDArray[np.uint32],
    order: VocabOrder | None = None,
    /,
) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes] | None:
    """Segment.to_obj's stored arrays, little-endian, or None when a word has no posting; the
    vocabulary in order's order when order is vocab_order's of this very tuple of words, else
    sorted here."""

class VocabOrder:
    """A vocabulary's stored order, of one tuple of words (vocab_order)."""

    @property
    def words(self) -> tuple[str, ...]:
        """The tuple of words this order is of."""
    def indices(self) -> bytes:
        """The words' indices in their stored order, as native int64 bytes."""

def vocab_order(words: Sequence[str], /) -> VocabOrder:
    """The stored order of the tuple of words (words itself when a tuple), sorted by UTF-8
    bytes without the GIL: beside another thread's work."""

def pairs_arrays(
    records: list[object], path_counts: list[dict[str, int]], first_weight: int, path_weight: int, /
) -> tuple[list[str], bytes, bytes, bytes]:
    """A batch's vocabulary and its pairs (doc, word, tf) as native uint32 bytes."""
