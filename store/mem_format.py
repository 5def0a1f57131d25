"""The bytes of a ``.mem``: its layout's constants and checks, and the checked, bounded reading of
a file (:class:`MemIndex`); the layout is described in store.mem, its encoding is
:mod:`store.mem_encode`'s."""

from __future__ import annotations

import bisect
import mmap
import operator
import os
import struct
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.errors import FormatError, RetrievalError
from nodwyn_retrieval.retrieval.bm25 import MAX_QUANTITY, Segment
from nodwyn_retrieval.retrieval.events import (
    EVENTS_VERSION,
    Card,
)
from nodwyn_retrieval.retrieval.words import WORDS_VERSION
from nodwyn_retrieval.store.atomic import open_stored
from nodwyn_retrieval.store.codec import HEADER, decode
from nodwyn_retrieval.store.mem_fold import (
    I64,
    U32,
    U64,
    Fold,
    _spans,
    word_key,
)
from nodwyn_retrieval.store.mem_log import LogCheck

MAGIC = b"NRME"
VERSION = 1
READ_WHOLE = 256 * 1024
"""A ``.mem`` up to this size is read whole; a bigger one is mapped (:meth:`MemIndex.open`)."""

_SECTIONS = (
    "keys",
    "poff",
    "width",
    "bcheck",
    "postings",
    "doc_len",
    "doc_event",
    "ev_seq",
    "ev_off",
    "ev_len",
    "ev_turn",
    "ev_kind",
    "ev_agent",
    "names",
    "cards",
)
_S = {name: i for i, name in enumerate(_SECTIONS)}
_KEYS, _POFF, _WIDTH, _BCHECK, _POSTINGS = (
    _S[n] for n in ("keys", "poff", "width", "bcheck", "postings")
)
_HEAD = struct.Struct(
    "<"
    "Q"  # covered: the log bytes it covers
    "Q"  # first_seq
    "Q"  # last_seq
    "Q"  # events
    "Q"  # docs
    "Q"  # words
    "Q"  # cards
    "Q"  # total_length
    "Q"  # skipped: lines of the log that are not events
    "B7x"  # doc_width: 2 or 4
    "Q"  # log_ino
    "Q"  # log_size
    "q"  # log_mtime_ns
    "q"  # log_ctime_ns
    "q"  # built_ns
    "32s"  # head_sha
    "32s"  # tail_sha
    "I"  # WORDS_VERSION
    "I" + "QQI" * len(_SECTIONS)  # EVENTS_VERSION
)
_CRC = struct.Struct("<I")
_POFF_PAIR = struct.Struct("<II")
_U16 = struct.Struct("<H")
_BASE = HEADER.size + _CRC.size + _HEAD.size
_ALIGN = 8
_TF_DTYPES: dict[int, str] = {1: "<u1", 2: "<u2", 4: "<u4"}
_TF_CODES = {1: "B", 2: "H", 4: "I"}
_SMALL_BLOCK = 48
"""Up to this many postings a block is read and checked with plain integers."""
_SMALL_STRUCTS: dict[tuple[int, int, int], tuple[struct.Struct, struct.Struct]] = {}
"""The structs of a small block (its postings, document and frequency widths): at most 48 x 2 x
3 of them, each made once."""
_MAX_LINE = 1 << 30
_LITTLE = sys.byteorder == "little"
"""Keys are stored little-endian: on such a machine they are searched as native integers."""


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _bad(what: str) -> FormatError:
    return FormatError(f".mem {what}: rebuild")


# -- encoding ------------------------------------------------------------------------------------

# A block's check: sums of its documents and its position-weighted frequencies, with its width and
# size, multiplied by odd constants modulo 2**32 and folded to 16 bits. Computed for every word at
# once with numpy when writing and for the few words a search reads when reading; a changed byte
# changes a sum, so a damaged block is found with a chance of 65,535 in 65,536. (A CRC a word would
# cost a Python call per word when writing.)
_MASK32 = 0xFFFFFFFF
_M_DOC = 0x165667B1
_M_TF = 0xC2B2AE3D
_M_WIDTH = 0x9E3779B1
_M_SIZE = 0x85EBCA77


def _fold16(h: int) -> int:
    return (h ^ (h >> 16)) & 0xFFFF


def _block_check(docs: npt.NDArray[Any], tfs: npt.NDArray[Any], width: int, size: int) -> int:
    """The check of one postings block: :func:`_block_checks` for one word. The sums are taken
    modulo 2**64 as there, and only their low 32 bits are used."""
    n = docs.shape[0]
    sd = (int(docs.sum(dtype=np.uint64)) + n) & _MASK32
    st = int(np.dot(tfs.astype(np.uint64), np.arange(1, n + 1, dtype=np.uint64)))
    st = (st + n * (n + 1) // 2) & _MASK32
    return _fold16((sd * _M_DOC + st * _M_TF + width * _M_WIDTH + size * _M_SIZE) & _MASK32)


def _block_checks(docs: I64, tfs: I64, counts: I64, width: I64, block: I64) -> npt.NDArray[Any]:
    """Every word's block check; postings sorted by word, ``counts`` of them each."""
    v = counts.shape[0]
    if not v:
        return np.zeros(0, dtype=np.uint16)
    m = np.uint64(_MASK32)
    starts = np.cumsum(counts) - counts
    _, place = _spans(counts)
    pos = (place + 1).astype(np.uint64)
    sd: U64 = np.add.reduceat(docs.astype(np.uint64) + np.uint64(1), starts)
    st: U64 = np.add.reduceat((tfs.astype(np.uint64) + np.uint64(1)) * pos, starts)
    h = (sd * np.uint64(_M_DOC) + st * np.uint64(_M_TF)) & m
    h = (h + width.astype(np.uint64) * np.uint64(_M_WIDTH)) & m
    h = (h + block.astype(np.uint64) * np.uint64(_M_SIZE)) & m
    out: npt.NDArray[Any] = ((h ^ (h >> np.uint64(16))) & np.uint64(0xFFFF)).astype(np.uint16)
    return out


def _unframe(data: bytes) -> object:
    """A section written by store.mem_encode's ``_payload``, through store.codec's bounded
    decoding."""
    return decode(MAGIC, VERSION, HEADER.pack(MAGIC, VERSION, 0) + data)


@dataclass(frozen=True, slots=True)
class EventArrays:
    """Every event a ``.mem`` covers: its seq, where its line lies, its turn, kind and agent."""

    seq: U64
    """Seqs, ascending."""
    off: U64
    """Each line's byte offset in the log."""
    length: U32
    """Each line's length without its newline."""
    turn: U32
    """Each event's turn."""
    kind: npt.NDArray[np.uint8]
    """Each event's kind, an index into :attr:`MemIndex.kinds`."""
    agent: npt.NDArray[np.uint16]
    """Each event's agent, an index into :attr:`MemIndex.agents`."""

    def find(self, seq: int) -> int | None:
        """The index of the event with this seq, or None."""
        if seq < 0 or seq >= 2**64:
            return None
        i = int(np.searchsorted(self.seq, np.uint64(seq)))
        if i < self.seq.shape[0] and int(self.seq[i]) == seq:
            return i
        return None


class MemIndex:
    """An open ``.mem``: its fixed head read and checked, its sections located and bounded,
    nothing else read.

    Backed by a read-only memory map of the file (or by bytes): :meth:`close` it, or use it as a
    context manager. Every method raises :class:`errors.FormatError` for anything off about the
    file, and nothing else.
    """

    def __init__(self, buf: mmap.mmap | bytes, *, path: Path | str | None = None) -> None:
        self._buf = buf
        self.path = path
        self._names: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self._cards_raw: list[Any] | None = None
        self._events: EventArrays | None = None
        self._doc_events: U32 | None = None
        self._card_turns: list[int] = []
        try:
            self._parse_head()
        except FormatError:
            self.close()
            raise

    @classmethod
    def open(cls, path: Path | str) -> MemIndex:
        """Read or map the ``.mem`` at path. FileNotFoundError when there is none; FormatError
        when it is empty, unreadable or not one."""
        try:
            fd = open_stored(path, ".mem")
        except FileNotFoundError:
            raise
        except RetrievalError as exc:  # not a file (a FIFO would block the open), unreadable
            raise _bad(f"cannot be read ({exc})") from None
        try:
            size = os.fstat(fd).st_size
            if size < _BASE:
                raise _bad(f"of {size} bytes is shorter than its head")
            # Mapping a file costs more than reading a small one whole (more system calls and
            # page faults against one read); a big one is mapped, and only what a search reads
            # is ever paged in.
            buf: mmap.mmap | bytes
            if size <= READ_WHOLE:
                buf = os.read(fd, size)
                while len(buf) < size:
                    more = os.read(fd, size - len(buf))
                    if not more:
                        raise _bad("was cut while it was read")
                    buf += more
            else:
                buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except FormatError:
            raise
        except (OSError, ValueError) as exc:
            raise _bad(f"cannot be read ({exc})") from None
        finally:
            os.close(fd)
        return cls(buf, path=path)

    @classmethod
    def from_bytes(cls, data: bytes) -> MemIndex:
        return cls(data)

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap) and not self._buf.closed:
            self._buf.close()

    def __enter__(self) -> MemIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<MemIndex {self.path} covers {self.covered:,} bytes: {self.n_events:,} events, "
            f"{self.n_docs:,} ranked, {self.n_words:,} words>"
        )

    # -- the head ---------------------------------------------------------------------------

    def _parse_head(self) -> None:
        buf = self._buf
        size = len(buf)
        if size < _BASE:
            raise _bad(f"of {size} bytes is shorter than its head")
        magic, version, flags = HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise _bad(f"is not a .mem (magic {bytes(magic)!r})")
        if version != VERSION:
            raise _bad(f"format version {version} is not {VERSION}")
        if flags:
            raise _bad(f"has unknown flags 0x{flags:04x}")
        (crc,) = _CRC.unpack_from(buf, HEADER.size)
        head = buf[HEADER.size + _CRC.size : _BASE]
        if zlib.crc32(head) != crc:
            raise _bad("head fails its check")
        f = _HEAD.unpack(head)
        self.covered: int = f[0]
        self.first_seq: int = f[1]
        self.last_seq: int = f[2]
        self.n_events: int = f[3]
        self.n_docs: int = f[4]
        self.n_words: int = f[5]
        self.n_cards: int = f[6]
        self.total_length: int = f[7]
        self.skipped: int = f[8]
        self.doc_width: int = f[9]
        ino, lsize, mtime, ctime, built, head_sha, tail_sha = f[10:17]
        self.check = LogCheck(self.covered, head_sha, tail_sha, ino, lsize, mtime, ctime, built)
        words_version, events_version = f[17:19]
        if (words_version, events_version) != (WORDS_VERSION, EVENTS_VERSION):
            raise _bad(
                f"words and events versions {words_version}, {events_version} are not this "
                f"program's {WORDS_VERSION}, {EVENTS_VERSION}"
            )
        if self.doc_width not in (2, 4) or (self.doc_width == 2 and self.n_docs > 65536):
            raise _bad("document width is not 2 or 4")
        if self.n_docs > self.n_events or self.n_events > size or self.n_words > size:
            raise _bad("counts pass what the file could hold")
        base = _align(_BASE)
        table: tuple[int, ...] = f[19:]
        offs, lens = table[0::3], table[1::3]
        v, d, e = self.n_words, self.n_docs, self.n_events
        want: tuple[int, ...] = (8 * v, 4 * (v + 1), v, 2 * v, lens[4], 4 * d, 4 * d)
        want += (8 * e, 8 * e, 4 * e, 4 * e, e, 2 * e, lens[13], lens[14])
        if lens != want:
            raise _bad("sections are not the lengths their counts say")
        if max(map(operator.add, offs, lens)) + base > size:
            raise _bad("a section lies outside the file")
        self._table = table
        """Each section's offset (from the aligned head's end), length and CRC, three by three."""
        self._at = [base + o for o in offs]
        """Each section's offset in the file, by its index in _SECTIONS."""
        self._postings_len: int = lens[_POSTINGS]
        if self.n_words and self._u32("poff", v) != self._postings_len:
            raise _bad("postings are not the length their offsets say")

    # -- sections ---------------------------------------------------------------------------

    @property
    def _sec(self) -> list[tuple[int, int, int]]:
        """Each section's (offset in the file, length, CRC), by its index in _SECTIONS."""
        t = self._table
        return [(self._at[k], t[3 * k + 1], t[3 * k + 2]) for k in range(len(_SECTIONS))]

    def _section(self, name: str) -> bytes:
        """A section's bytes, checked against its CRC."""
        k = _S[name]
        off, length, crc = self._at[k], self._table[3 * k + 1], self._table[3 * k + 2]
        data = bytes(self._buf[off : off + length])
        if zlib.crc32(data) != crc:
            raise _bad(f"section {name} fails its check")
        return data

    def _u32(self, name: str, i: int) -> int:
        value: int = struct.unpack_from("<I", self._buf, self._at[_S[name]] + 4 * i)[0]
        return value

    def _find(self, key: int) -> int | None:
        """The index of the word with this key, by binary search of the stored keys."""
        v = self.n_words
        if not v:
            return None
        off = self._at[_KEYS]
        view = memoryview(self._buf)[off : off + 8 * v]
        try:
            if _LITTLE:
                keys = view.cast("Q")
                i = bisect.bisect_left(keys, key)
                hit = i < v and keys[i] == key
                keys.release()
            else:
                arr = np.frombuffer(view, dtype="<u8")
                i = int(np.searchsorted(arr, np.uint64(key)))
                hit = i < v and int(arr[i]) == key
                del arr
        finally:
            view.release()  # the map cannot close while a view of it is held
        return i if hit else None

    def find_keys(self, keys: U64) -> I64:
        """Where each of the word keys (:func:`word_key`) is in this ``.mem``, -1 for a word it
        does not hold: one search of the stored keys for all of them. An index is for
        :meth:`postings_at`."""
        v = self.n_words
        if not v or not keys.size:
            return np.full(keys.shape[0], -1, dtype=np.int64)
        arr = np.frombuffer(self._buf, dtype="<u8", count=v, offset=self._at[_KEYS])
        try:
            at: I64 = arr.searchsorted(keys).astype(np.int64, copy=False)
            np.minimum(at, v - 1, out=at)
            at[arr.take(at) != keys] = -1
        finally:
            del arr  # the map cannot close while an array over it is held
        return at

    def found_keys(self, keys: U64) -> tuple[list[int], list[int]]:
        """:meth:`find_keys` as two lists: the positions in ``keys`` of the words this ``.mem``
        holds, and each one's index here (fewer calls for a search of many logs)."""
        v = self.n_words
        if not v or not keys.size:
            return [], []
        arr = np.frombuffer(self._buf, dtype="<u8", count=v, offset=self._at[_KEYS])
        try:
            at = arr.searchsorted(keys)
            np.minimum(at, v - 1, out=at)
            hit = np.flatnonzero(arr.take(at) == keys)
        finally:
            del arr  # the map cannot close while an array over it is held
        return hit.tolist(), at.take(hit).tolist()

    def holds(self, keys: U64) -> npt.NDArray[np.bool_]:
        """Which of the word keys this ``.mem`` holds (:meth:`find_keys`)."""
        found: npt.NDArray[np.bool_] = self.find_keys(keys) >= 0
        return found

    def postings(self, word: str, key: int | None = None) -> tuple[U32, U32]:
        """The documents holding word (ascending) and its weighted frequency in each, checked.
        ``key`` is the word's :func:`word_key`, when the caller has it already."""
        i = self._find(word_key(word) if key is None else key)
        if i is None:
            empty = np.zeros(0, dtype=np.uint32)
            return empty, empty
        return self.postings_at(i)

    def _entry(self, i: int) -> tuple[int, int, int, int, int]:
        """Word i's block: ``(first byte in the file, size, postings, width, check)``, bounded."""
        if not 0 <= i < self.n_words:
            raise _bad(f"has no word {i}")
        buf = self._buf
        at = self._at
        pa, pb = _POFF_PAIR.unpack_from(buf, at[_POFF] + 4 * i)
        width = buf[at[_WIDTH] + i]
        (check,) = _U16.unpack_from(buf, at[_BCHECK] + 2 * i)
        if width not in _TF_DTYPES or not pa < pb <= self._postings_len:
            raise _bad(f"entry of word {i} is out of bounds")
        n, rest = divmod(pb - pa, self.doc_width + width)
        if rest:
            raise _bad("postings block is not a whole number of postings")
        return at[_POSTINGS] + pa, pb - pa, n, width, check

    def _small(
        self, i: int, entry: tuple[int, int, int, int, int]
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """A block of a few postings (:meth:`_entry`) read and checked with plain integers
        (numpy's calls cost more than the work for them)."""
        p0, size, n, width, check = entry
        dw = self.doc_width
        got = _SMALL_STRUCTS.get((n, dw, width))
        if got is None:
            got = _SMALL_STRUCTS[(n, dw, width)] = (
                struct.Struct(f"<{n}{'H' if dw == 2 else 'I'}"),
                struct.Struct(f"<{n}{_TF_CODES[width]}"),
            )
        buf = self._buf
        dl = got[0].unpack_from(buf, p0)
        tl = got[1].unpack_from(buf, p0 + n * dw)
        sd = sum(dl) + n
        st = sum(map(operator.mul, tl, range(1, n + 1))) + n * (n + 1) // 2
        h = (sd * _M_DOC + st * _M_TF + width * _M_WIDTH + size * _M_SIZE) & _MASK32
        if (h ^ (h >> 16)) & 0xFFFF != check:
            raise _bad(f"postings of word {i} fail their check")
        if max(dl) >= self.n_docs or max(tl) > MAX_QUANTITY:
            raise _bad("posting is out of range")
        return dl, tl

    def postings_many(
        self, wanted: Sequence[tuple[int, list[int], list[int]]], base: int
    ) -> list[int]:
        """For each ``(index, docs, tfs)``, add the postings of the word at that index to
        ``docs`` (each plus ``base``) and ``tfs``, checked, when its block is small (up to
        :data:`_SMALL_BLOCK` postings): one call for all the words a search asks of this
        ``.mem``, without an array a word. Returns the indices whose blocks are not small
        (nothing added for them: :meth:`postings_at` reads them)."""
        buf = self._buf
        at = self._at
        poff, wat, bat, post = at[_POFF], at[_WIDTH], at[_BCHECK], at[_POSTINGS]
        dw, v, n_docs, plen = self.doc_width, self.n_words, self.n_docs, self._postings_len
        pair, u16, structs, mul = (
            _POFF_PAIR.unpack_from,
            _U16.unpack_from,
            _SMALL_STRUCTS,
            operator.mul,
        )
        big: list[int] = []
        for i, docs, tfs in wanted:
            if not 0 <= i < v:
                raise _bad(f"has no word {i}")
            pa, pb = pair(buf, poff + 4 * i)
            width = buf[wat + i]
            if width not in _TF_CODES or not pa < pb <= plen:
                raise _bad(f"entry of word {i} is out of bounds")
            size = pb - pa
            n, rest = divmod(size, dw + width)
            if rest:
                raise _bad("postings block is not a whole number of postings")
            if n > _SMALL_BLOCK:
                big.append(i)
                continue
            got = structs.get((n, dw, width))
            if got is None:
                got = structs[(n, dw, width)] = (
                    struct.Struct(f"<{n}{'H' if dw == 2 else 'I'}"),
                    struct.Struct(f"<{n}{_TF_CODES[width]}"),
                )
            dl = got[0].unpack_from(buf, post + pa)
            tl = got[1].unpack_from(buf, post + pa + n * dw)
            sd = sum(dl) + n
            st = sum(map(mul, tl, range(1, n + 1))) + n * (n + 1) // 2
            h = (sd * _M_DOC + st * _M_TF + width * _M_WIDTH + size * _M_SIZE) & _MASK32
            if (h ^ (h >> 16)) & 0xFFFF != u16(buf, bat + 2 * i)[0]:
                raise _bad(f"postings of word {i} fail their check")
            if max(dl) >= n_docs or max(tl) > MAX_QUANTITY:
                raise _bad("posting is out of range")
            docs.extend([d + base for d in dl] if base else dl)
            tfs.extend(tl)
        return big

    def postings_at(self, i: int) -> tuple[U32, U32]:
        """:meth:`postings` of the word at index i (:meth:`find_keys`), checked."""
        entry = self._entry(i)
        p0, size, n, width, check = entry
        if n <= _SMALL_BLOCK:
            dl, tl = self._small(i, entry)
            return np.array(dl, dtype=np.uint32), np.array(tl, dtype=np.uint32)
        buf = self._buf
        dw = self.doc_width
        dtype = _TF_DTYPES[width]
        block = bytes(buf[p0 : p0 + size])
        docs = np.frombuffer(block, dtype="<u2" if dw == 2 else "<u4", count=n).astype(np.uint32)
        tfs = np.frombuffer(block, dtype=dtype, count=n, offset=n * dw).astype(np.uint32)
        if _block_check(docs, tfs, width, size) != check:
            raise _bad(f"postings of word {i} fail their check")
        if int(docs.max()) >= self.n_docs or (width == 4 and int(tfs.max()) > MAX_QUANTITY):
            raise _bad("posting is out of range")
        return docs, tfs

    def lengths(self) -> U32:
        """Each document's weighted length."""
        arr = np.frombuffer(self._section("doc_len"), dtype="<u4").astype(np.uint32, copy=False)
        if arr.size and int(arr.max()) > MAX_QUANTITY:
            raise _bad("document length past 2**31-1")
        return arr

    def doc_events(self) -> U32:
        """Each document's event, an index into :meth:`events` (checked once)."""
        if self._doc_events is None:
            arr = np.frombuffer(self._section("doc_event"), dtype="<u4").astype(np.uint32)
            if arr.size and (int(arr.max()) >= self.n_events or bool(np.any(arr[1:] <= arr[:-1]))):
                raise _bad("documents do not name events in order")
            self._doc_events = arr
        return self._doc_events

    def segment(self, words: Iterable[str], keys: Mapping[str, int] | None = None) -> Segment:
        """A segment holding only ``words``' postings and every document's length: what
        :func:`retrieval.bm25.search_all` needs to score them exactly as the whole index would.
        ``keys`` maps the words to their keys, computed once for a search of many logs."""
        found: list[str] = []
        d_parts: list[U32] = []
        t_parts: list[U32] = []
        for w in dict.fromkeys(words):
            docs, tfs = self.postings(w, keys.get(w) if keys is not None else None)
            if docs.size:
                found.append(w)
                d_parts.append(docs)
                t_parts.append(tfs)
        offsets = np.zeros(len(found) + 1, dtype=np.int64)
        np.cumsum([d.size for d in d_parts], out=offsets[1:])
        z = np.zeros(0, dtype=np.uint32)
        return Segment(
            found,
            offsets,
            np.concatenate(d_parts) if d_parts else z,
            np.concatenate(t_parts) if t_parts else z,
            self.lengths(),
        )

    def _names_of(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if self._names is None:
            obj = _unframe(self._section("names"))
            if not isinstance(obj, dict):
                raise _bad("names are not a map")
            kinds, agents = obj.get("kinds"), obj.get("agents")
            if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
                raise _bad("kinds are not names")
            if not isinstance(agents, list) or not all(isinstance(a, str) for a in agents):
                raise _bad("agents are not names")
            self._names = (tuple(kinds), tuple(agents))
        return self._names

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds the event arrays name."""
        return self._names_of()[0]

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents the event arrays name."""
        return self._names_of()[1]

    def events(self) -> EventArrays:
        """Every covered event's seq, line, turn, kind and agent, checked (once: a search asks
        for them for its candidates, its results and their cards)."""
        if self._events is None:
            self._events = self._read_events()
        return self._events

    def _read_events(self) -> EventArrays:
        ev = EventArrays(
            seq=np.frombuffer(self._section("ev_seq"), dtype="<u8").astype(np.uint64),
            off=np.frombuffer(self._section("ev_off"), dtype="<u8").astype(np.uint64),
            length=np.frombuffer(self._section("ev_len"), dtype="<u4").astype(np.uint32),
            turn=np.frombuffer(self._section("ev_turn"), dtype="<u4").astype(np.uint32),
            kind=np.frombuffer(self._section("ev_kind"), dtype="<u1").astype(np.uint8),
            agent=np.frombuffer(self._section("ev_agent"), dtype="<u2").astype(np.uint16),
        )
        if self.n_events:
            if (
                bool(np.any(ev.seq[1:] <= ev.seq[:-1]))
                or int(ev.seq[0]) != self.first_seq
                or int(ev.seq[-1]) != self.last_seq
            ):
                raise _bad("event seqs are not ascending")
            if int(ev.length.max()) > _MAX_LINE or int(ev.off.max()) >= self.covered:
                raise _bad("event line lies past what it covers")
            ends = ev.off + ev.length.astype(np.uint64)
            if int(ends.max()) >= self.covered:
                raise _bad("event line lies past what it covers")
            if int(ev.kind.max()) >= max(len(self.kinds), 1):
                raise _bad("event kind is not named")
            if int(ev.agent.max()) >= max(len(self.agents), 1):
                raise _bad("event agent is not named")
        return ev

    def _raw_cards(self) -> list[Any]:
        if self._cards_raw is None:
            obj = _unframe(self._section("cards"))
            if not isinstance(obj, list) or len(obj) != self.n_cards:
                raise _bad("cards are not a list of the head's length")
            turns = [c[0] if isinstance(c, list) and c and type(c[0]) is int else -1 for c in obj]
            if any(t < 0 for t in turns) or any(a >= b for a, b in pairwise(turns)):
                raise _bad("cards are not in turn order")
            self._cards_raw = obj
            self._card_turns = turns
        return self._cards_raw

    def cards(self) -> list[Card]:
        """The turns' cards, in turn order."""
        try:
            return [Card.from_obj(c) for c in self._raw_cards()]
        except ValueError as exc:
            raise _bad(f"card is not one ({exc})") from None

    def card(self, turn: int) -> Card | None:
        """The card of one turn, or None when this ``.mem`` holds none for it."""
        raw = self._raw_cards()
        i = bisect.bisect_left(self._card_turns, turn)
        if i == len(raw) or self._card_turns[i] != turn:
            return None
        try:
            return Card.from_obj(raw[i])
        except ValueError as exc:
            raise _bad(f"card is not one ({exc})") from None

    def fold(self) -> Fold:
        """Everything this ``.mem`` holds, as a fold to extend: each section checked."""
        keys = np.frombuffer(self._section("keys"), dtype="<u8").astype(np.uint64)
        poff = np.frombuffer(self._section("poff"), dtype="<u4").astype(np.int64)
        width = np.frombuffer(self._section("width"), dtype="<u1").astype(np.int64)
        bcheck = np.frombuffer(self._section("bcheck"), dtype="<u2").astype(np.int64)
        post = np.frombuffer(self._section("postings"), dtype=np.uint8)
        v = self.n_words
        block = np.diff(poff)
        if v and (
            int(poff[0]) != 0
            or int(poff[-1]) != post.size
            or bool(np.any(block <= 0))
            or not bool(np.all(np.isin(width, (1, 2, 4))))
            or bool(np.any(keys[1:] <= keys[:-1]))
        ):
            raise _bad("word entries are not a partition of the postings")
        dw = self.doc_width
        counts, rest = np.divmod(block, dw + width)
        if bool(np.any(rest != 0)):
            raise _bad("postings block is not a whole number of postings")
        wid, rel = _spans(counts)
        pos = poff[:-1][wid] + rel * dw
        docs = np.zeros(wid.shape[0], dtype=np.int64)
        for k in range(dw):
            docs |= post[pos + k].astype(np.int64) << (8 * k)
        tw = width[wid]
        pos = poff[:-1][wid] + counts[wid] * dw + rel * tw
        tfs = np.zeros(wid.shape[0], dtype=np.int64)
        for k in range(4):
            m = tw > k
            tfs[m] |= post[pos[m] + k].astype(np.int64) << (8 * k)
        if docs.size and (int(docs.max()) >= self.n_docs or int(tfs.max()) > MAX_QUANTITY):
            raise _bad("posting names a document past the end")
        if not np.array_equal(_block_checks(docs, tfs, counts, width, block), bcheck):
            raise _bad("postings fail their checks")
        return fold_of(self, keys, docs, wid, tfs)

    def matches(self, f: Any) -> bool:
        """Whether the open log f still holds what this was built from (:class:`LogCheck`)."""
        return self.check.holds(f)


def fold_of(mem: Any, keys: Any, docs: Any, words: Any, tfs: Any) -> Fold:
    """The fold a ``.mem`` (a :class:`MemIndex`, or a task the join holds) is: its postings
    (document, word, frequency), its lengths, events, names and cards."""
    ev = mem.events()
    return Fold(
        keys=keys,
        pair_doc=docs,
        pair_word=words,
        pair_tf=tfs,
        doc_len=mem.lengths().astype(np.int64),
        doc_event=mem.doc_events().astype(np.int64),
        ev={
            "ev_seq": ev.seq,
            "ev_off": ev.off,
            "ev_len": ev.length,
            "ev_turn": ev.turn,
            "ev_kind": ev.kind,
            "ev_agent": ev.agent,
        },
        kinds=list(mem.kinds),
        agents=list(mem.agents),
        cards=mem.cards(),
    )


def postings_of(mem: MemIndex) -> dict[int, dict[int, int]]:
    """Every word's postings as ``{key: {doc: frequency}}``: for tests and inspection."""
    fold = mem.fold()
    out: dict[int, dict[int, int]] = {}
    pairs = zip(fold.pair_word.tolist(), fold.pair_doc.tolist(), fold.pair_tf.tolist(), strict=True)
    for w, d, t in pairs:
        out.setdefault(int(fold.keys[w]), {})[d] = t
    return out


def read_fields(mem: MemIndex) -> Mapping[str, int]:
    """The head's counts, for status and tests."""
    return {
        "covered": mem.covered,
        "events": mem.n_events,
        "docs": mem.n_docs,
        "words": mem.n_words,
        "cards": mem.n_cards,
        "total_length": mem.total_length,
    }
