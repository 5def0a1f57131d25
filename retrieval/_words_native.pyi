"""The compiled pass of retrieval.analyze (retrieval/_words_native.c)."""

from typing import overload

from nodwyn_retrieval.retrieval.words import WordTable

class Memo:
    """The codes of the runs a word table gave, keyed by the runs' bytes."""

    def __init__(self) -> None: ...
    def count_texts(
        self, table: WordTable, tdata: bytes, bounds: bytes, /
    ) -> tuple[bytes, bytes, bytes, bytes]:
        """Many texts' (distinct table ids, offsets, word, count), each as native int64."""
    def definition_terms(
        self, table: WordTable, names: list[bytes], prefix: str, /
    ) -> tuple[bytes, bytes]:
        """The names' definition terms (table ids) one name after another, and how many each
        has, each as native int64."""
    @overload
    def record(
        self,
        table: WordTable,
        data: bytes,
        blanked: None,
        def_at: bytes,
        def_counts: bytes,
        def_word: bytes,
        /,
    ) -> tuple[tuple[str, ...], bytes, bytes, bytes, bytes, bytes, bytes] | int:
        """A file's (vocab, starts, ends, offsets, word, body, first), the arrays as native
        uint32; when the file may hold a blob, the bits of the blobs' looks that found something
        (retrieval.blobs.LOOK_*), for the caller to blank it with those shapes first."""
    @overload
    def record(
        self,
        table: WordTable,
        data: bytes,
        blanked: bytes,
        def_at: bytes,
        def_counts: bytes,
        def_word: bytes,
        /,
    ) -> tuple[tuple[str, ...], bytes, bytes, bytes, bytes, bytes, bytes]:
        """The same, its runs cut from blanked (data with its blobs blanked)."""
    def size(self) -> int:
        """How many runs the memo holds."""

def blob_hints(data: bytes, bounds: bytes, /) -> bytes:
    """One byte a text: 1 where it may hold a blob (retrieval.blobs.may_hold_blobs)."""

def blob_looks(data: bytes, /) -> int:
    """The bits (retrieval.blobs.LOOK_*) of the blobs' shapes whose first look finds something."""

def postings_bytes(docs: bytes, tfs: bytes, counts: bytes, width: bytes, dw: int, /) -> bytes:
    """A .mem's postings section (store.mem_encode), from its sorted postings."""

def definition_lines(
    data: bytes, first_words: tuple[bytes, ...], not_words: tuple[bytes, ...] = (), /
) -> bytes:
    """The starts of the lines that may define a name, as native int64 (retrieval.chunks)."""

def definition_heads(data: bytes, lines: bytes, /) -> bytes:
    """For each line start (native int64), where the name a "def" or "class" line defines begins
    and ends, else -1, -1: two native int64 a line (retrieval.chunks)."""

def cut_runs(data: bytes, raw: bool, /) -> bytes:
    """(start, length) of each run the compiled pass cuts from data, as native int64: at the
    bytes Memo.record cuts untranslated bytes at (raw), else at bytes.split()'s (for the tests)."""

def chunk_bounds(data: bytes, /) -> tuple[bytes, bytes, bytes, bytes]:
    """A file's chunks' (starts, ends, bounds, first_ends) as Memo.record finds them, each as
    native int64 (for the tests)."""
