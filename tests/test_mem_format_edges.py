"""A ``.mem``'s bytes at their edges (store/mem.py's layout): each thing off about a file refused
with its own one-line error even when its checksums are right (a head, a section rewritten with
a fresh CRC, as a writer with a bug or a crafted file would leave them), and what a search reads
from a good one (its words found by key at both ends of the sorted keys, its cards by turn, its
counts) read as the log says, whether the file is read whole or mapped.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store import mem_format
from nodwyn_retrieval.store.codec import HEADER, encode
from nodwyn_retrieval.store.mem import (
    MAGIC,
    VERSION,
    LogView,
    MemIndex,
    mem_path,
    postings_of,
    word_key,
    word_keys,
)
from nodwyn_retrieval.store.mem_format import read_fields

from tests.support import Log
from tests.test_mem_edges import _rewritten as _encoded

# The fixed head of the layout (store/mem.py): its fields by place, and the section table.
HEAD = struct.Struct("<QQQQQQQQQB7xQQqqq32s32sII" + "QQI" * 15)
AT = HEADER.size + 4  # the frame, then the head's CRC, then the head
BASE = -(-(AT + HEAD.size) // 8) * 8
COVERED, FIRST, LAST, EVENTS, DOCS, WORDS, CARDS, TOTAL, SKIPPED, DOC_WIDTH = range(10)
WORDS_VERSION, EVENTS_VERSION, TABLE = 17, 18, 19
SECTIONS = ["keys", "poff", "width", "bcheck", "postings", "doc_len", "doc_event"]
SECTIONS += ["ev_seq", "ev_off", "ev_len", "ev_turn", "ev_kind", "ev_agent", "names", "cards"]


def head_of(data: bytes) -> list[Any]:
    return list(HEAD.unpack_from(data, AT))


def with_head(data: bytes, **fields: Any) -> bytes:
    """data with head fields changed (by name: ``COVERED=...``, ``f19=...``), its CRC made good."""
    f = head_of(data)
    for name, value in fields.items():
        f[int(name[1:]) if name.startswith("f") else globals()[name]] = value
    head = HEAD.pack(*f)
    return data[: AT - 4] + struct.pack("<I", zlib.crc32(head)) + head + data[AT + HEAD.size :]


def section(data: bytes, name: str) -> bytes:
    i = SECTIONS.index(name)
    off, n = head_of(data)[TABLE + 3 * i : TABLE + 3 * i + 2]
    return data[BASE + off : BASE + off + n]


def with_section(data: bytes, name: str, new: bytes) -> bytes:
    """data with one section's bytes replaced by ``new`` of the same length, its CRC made good."""
    i = SECTIONS.index(name)
    off, n = head_of(data)[TABLE + 3 * i : TABLE + 3 * i + 2]
    assert len(new) == n
    out = data[: BASE + off] + new + data[BASE + off + n :]
    return with_head(out, **{f"f{TABLE + 3 * i + 2}": zlib.crc32(new)})


def payload(obj: object) -> bytes:
    """obj as a ``.mem``'s names and cards sections hold it."""
    return encode(MAGIC, VERSION, obj)[HEADER.size :]


def _use(data: bytes) -> None:
    with MemIndex.from_bytes(data) as mem:
        mem.events()
        mem.cards()
        mem.fold()


def refused(data: bytes, why: str) -> None:
    """data refused with exactly the error ``.mem <why>: rebuild``, at the open or at a use."""
    with pytest.raises(FormatError) as info:  # at the open or at any use
        _use(data)
    assert str(info.value) == f".mem {why}: rebuild"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return good_mem(tmp_path_factory.mktemp("mem"))


def good_mem(directory: Path) -> bytes:
    """A small .mem: two turns, 8 events, 6 ranked, a word said 300 times."""
    lg = Log(directory / "t.jsonl")
    lg.add("person.message", text="alpha question")
    lg.result("alpha " * 300 + "beta gamma", path="a.py")
    lg.result("beta delta", path="b.py")
    lg.end_turn()
    lg.add("person.message", text="second turn beta", agent="sub")
    lg.end_turn()
    LogView.open(lg.path).close()
    return mem_path(lg.path).read_bytes()


def test_the_helpers_rewrite_nothing_when_nothing_changes(good: bytes) -> None:
    assert with_head(good) == good
    for name in SECTIONS:
        assert with_section(good, name, section(good, name)) == good
    with MemIndex.from_bytes(good) as mem:
        assert mem.n_events == 8
        assert mem.fold().n_docs == mem.n_docs == 6


# -- the head ------------------------------------------------------------------------------------


def test_a_file_shorter_than_a_head_is_refused_saying_its_size(tmp_path: Path, good: bytes) -> None:
    for n in (0, 11, BASE - 1):
        path = tmp_path / f"s{n}.mem"
        path.write_bytes(good[:n])
        with pytest.raises(FormatError, match=rf"^\.mem of {n} bytes is shorter than its head"):
            MemIndex.open(path)
        refused(good[:n], f"of {n} bytes is shorter than its head")
    # A head and nothing after it: long enough to be read, too short for its sections.
    refused(good[: AT + HEAD.size], "a section lies outside the file")
    path = tmp_path / "head.mem"
    path.write_bytes(good[: AT + HEAD.size])
    with pytest.raises(FormatError, match=r"^\.mem a section lies outside the file: rebuild$"):
        MemIndex.open(path)


def test_a_directory_or_a_missing_file_is_no_mem(tmp_path: Path) -> None:
    (tmp_path / "d.mem").mkdir()
    with pytest.raises(FormatError, match=r"^\.mem cannot be read \(.*\): rebuild$"):
        MemIndex.open(tmp_path / "d.mem")
    with pytest.raises(FileNotFoundError):
        MemIndex.open(tmp_path / "none.mem")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: b"NRMX" + d[4:], "is not a .mem (magic b'NRMX')"),
        (lambda d: d[:4] + struct.pack(">H", VERSION + 1) + d[6:], "format version 2 is not 1"),
        (lambda d: d[:6] + struct.pack(">H", 1) + d[8:], "has unknown flags 0x0001"),
        (lambda d: d[:6] + struct.pack(">H", 0x8000) + d[8:], "has unknown flags 0x8000"),
        (lambda d: d[:8] + bytes([d[8] ^ 1]) + d[9:], "head fails its check"),
    ],
)
def test_a_frame_or_head_off_is_refused_with_its_error(good: bytes, change: Any, why: str) -> None:
    refused(change(good), why)


def test_a_head_of_other_words_or_events_versions_is_refused(good: bytes) -> None:
    f = head_of(good)
    w, e = f[WORDS_VERSION], f[EVENTS_VERSION]
    refused(
        with_head(good, WORDS_VERSION=w + 1),
        f"words and events versions {w + 1}, {e} are not this program's {w}, {e}",
    )
    refused(
        with_head(good, EVENTS_VERSION=e - 1),
        f"words and events versions {w}, {e - 1} are not this program's {w}, {e}",
    )


@pytest.mark.parametrize("width", [0, 1, 3, 8])
def test_a_document_width_other_than_2_or_4_is_refused(good: bytes, width: int) -> None:
    refused(with_head(good, DOC_WIDTH=width), "document width is not 2 or 4")


def test_a_width_of_2_for_more_than_65536_documents_is_refused(good: bytes) -> None:
    # (The counts then pass what the file could hold too, but the width is said first.)
    refused(with_head(good, DOCS=65_537, EVENTS=70_000), "document width is not 2 or 4")


def test_counts_past_what_the_file_could_hold_are_refused(good: bytes) -> None:
    f = head_of(good)
    size = len(good)
    refused(with_head(good, DOCS=f[EVENTS] + 1), "counts pass what the file could hold")
    refused(with_head(good, EVENTS=size + 1, DOCS=1), "counts pass what the file could hold")
    refused(with_head(good, WORDS=size + 1), "counts pass what the file could hold")
    # As many documents as events, and counts up to the file's size, are only checked further.
    refused(with_head(good, DOCS=f[EVENTS]), "sections are not the lengths their counts say")
    refused(with_head(good, WORDS=size), "sections are not the lengths their counts say")
    refused(with_head(good, EVENTS=size, DOCS=1), "sections are not the lengths their counts say")


@pytest.mark.parametrize("name", [s for s in SECTIONS if s not in ("postings", "names", "cards")])
def test_a_section_of_a_length_its_counts_do_not_say_is_refused(good: bytes, name: str) -> None:
    i = TABLE + 3 * SECTIONS.index(name) + 1
    n = head_of(good)[i]
    refused(with_head(good, **{f"f{i}": n + 1}), "sections are not the lengths their counts say")
    if n:
        refused(
            with_head(good, **{f"f{i}": n - 1}), "sections are not the lengths their counts say"
        )


def test_a_section_lying_past_the_files_end_is_refused(good: bytes) -> None:
    last = TABLE + 3 * (len(SECTIONS) - 1)
    f = head_of(good)
    end = len(good) - BASE  # the cards may end exactly here: the file's last byte
    assert f[last] + f[last + 1] <= end
    refused(
        with_head(good, **{f"f{last}": end - f[last + 1] + 1}), "a section lies outside the file"
    )
    with MemIndex.from_bytes(with_head(good, **{f"f{last}": end - f[last + 1]})) as mem:
        assert mem.n_events == 8


def test_postings_of_another_length_than_their_offsets_say_are_refused(good: bytes) -> None:
    poff = np.frombuffer(section(good, "poff"), dtype="<u4").copy()
    poff[-1] += 1
    refused(
        with_section(good, "poff", poff.tobytes()), "postings are not the length their offsets say"
    )


# -- sections rewritten with their CRCs right -----------------------------------------------------


def test_document_lengths_past_2_to_the_31_are_refused(good: bytes) -> None:
    lengths = np.frombuffer(section(good, "doc_len"), dtype="<u4").copy()
    lengths[0] = 2**31 - 1
    with MemIndex.from_bytes(with_section(good, "doc_len", lengths.tobytes())) as mem:
        assert int(mem.lengths()[0]) == 2**31 - 1
    lengths[0] = 2**31
    with (
        MemIndex.from_bytes(with_section(good, "doc_len", lengths.tobytes())) as mem,
        pytest.raises(FormatError, match=r"^\.mem document length past 2\*\*31-1: rebuild$"),
    ):
        mem.lengths()


def test_documents_naming_events_out_of_order_or_past_the_last_are_refused(good: bytes) -> None:
    docs = np.frombuffer(section(good, "doc_event"), dtype="<u4").copy()
    for i, value in ((0, docs[1]), (1, docs[2]), (-1, 8), (-1, 2**32 - 1)):
        bad = docs.copy()
        bad[i] = value
        refused(
            with_section(good, "doc_event", bad.tobytes()), "documents do not name events in order"
        )
    last = docs.copy()
    last[-1] = 7  # the last event: allowed
    with MemIndex.from_bytes(with_section(good, "doc_event", last.tobytes())) as mem:
        assert mem.doc_events().tolist()[-1] == 7


def test_event_seqs_not_ascending_or_not_the_heads_are_refused(good: bytes) -> None:
    seqs = np.frombuffer(section(good, "ev_seq"), dtype="<u8").copy()
    assert seqs.tolist() == list(range(1, 9))
    for i, value in ((0, 0), (0, 2), (5, 5), (-1, 7), (-1, 9)):
        bad = seqs.copy()
        bad[i] = value
        refused(with_section(good, "ev_seq", bad.tobytes()), "event seqs are not ascending")
    refused(with_head(good, FIRST=2), "event seqs are not ascending")
    refused(with_head(good, LAST=9), "event seqs are not ascending")


def test_an_event_line_past_what_is_covered_is_refused(good: bytes) -> None:
    covered = head_of(good)[COVERED]
    offs = np.frombuffer(section(good, "ev_off"), dtype="<u8").copy()
    lens = np.frombuffer(section(good, "ev_len"), dtype="<u4").copy()
    for i in (0, -1):
        bad = offs.copy()
        bad[i] = covered
        refused(with_section(good, "ev_off", bad.tobytes()), "event line lies past what it covers")
    bad = lens.copy()
    bad[0] = 2**30 + 1
    refused(with_section(good, "ev_len", bad.tobytes()), "event line lies past what it covers")
    # A line whose newline is the last byte covered is the last one there may be.
    assert int(offs[-1]) + int(lens[-1]) == covered - 1


def test_an_event_of_a_kind_or_agent_not_named_is_refused(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        n_kinds, n_agents = len(mem.kinds), len(mem.agents)
        assert mem.agents == ("main", "sub")
    kinds = np.frombuffer(section(good, "ev_kind"), dtype="<u1").copy()
    kinds[3] = n_kinds
    refused(with_section(good, "ev_kind", kinds.tobytes()), "event kind is not named")
    kinds[3] = n_kinds - 1
    with MemIndex.from_bytes(with_section(good, "ev_kind", kinds.tobytes())) as mem:
        assert int(mem.events().kind[3]) == n_kinds - 1
    agents = np.frombuffer(section(good, "ev_agent"), dtype="<u2").copy()
    agents[-1] = n_agents
    refused(with_section(good, "ev_agent", agents.tobytes()), "event agent is not named")


def _names(good: bytes, obj: object) -> bytes:
    """good with its names section holding obj (a section's length may change: the table and the
    file's end move with it)."""
    new = payload(obj)
    i = SECTIONS.index("names")
    f = head_of(good)
    off = f[TABLE + 3 * i]
    cards_off, cards_n = f[TABLE + 3 * i + 3], f[TABLE + 3 * i + 4]
    cards = good[BASE + cards_off : BASE + cards_off + cards_n]
    out = good[: BASE + off] + new + cards
    return with_head(
        out,
        **{
            f"f{TABLE + 3 * i + 1}": len(new),
            f"f{TABLE + 3 * i + 2}": zlib.crc32(new),
            f"f{TABLE + 3 * i + 3}": off + len(new),
        },
    )


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (["person.message"], "names are not a map"),
        ({"kinds": "person.message", "agents": ["main"]}, "kinds are not names"),
        ({"kinds": ["person.message", 3], "agents": ["main"]}, "kinds are not names"),
        ({"agents": ["main"]}, "kinds are not names"),
        ({"kinds": ["a", "b", "c", "d", "e", "f"], "agents": "main"}, "agents are not names"),
        (
            {"kinds": ["a", "b", "c", "d", "e", "f"], "agents": ["main", None]},
            "agents are not names",
        ),
        ({"kinds": ["a", "b", "c", "d", "e", "f"]}, "agents are not names"),
    ],
)
def test_names_that_are_not_names_are_refused(good: bytes, obj: object, why: str) -> None:
    refused(_names(good, obj), why)


def test_names_rewritten_as_names_are_read(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        kinds = list(mem.kinds)
        assert mem.agents == ("main", "sub")
    data = _names(good, {"kinds": [k.upper() for k in kinds], "agents": ["x", "y"]})
    with MemIndex.from_bytes(data) as mem:
        assert mem.kinds == tuple(k.upper() for k in kinds)
        assert mem.agents == ("x", "y")


def _cards(good: bytes, obj: object, count: int | None = None) -> bytes:
    new = payload(obj)
    i = SECTIONS.index("cards")
    f = head_of(good)
    off = f[TABLE + 3 * i]
    out = good[: BASE + off] + new + b"\0" * (-len(new) % 8)
    fields = {f"f{TABLE + 3 * i + 1}": len(new), f"f{TABLE + 3 * i + 2}": zlib.crc32(new)}
    if count is not None:
        fields["CARDS"] = count
    return with_head(out, **fields)


def _card_objs(good: bytes) -> list[Any]:
    with MemIndex.from_bytes(good) as mem:
        return [c.to_obj() for c in mem.cards()]


def test_cards_not_a_list_of_the_heads_length_or_not_in_turn_order_are_refused(good: bytes) -> None:
    cards = _card_objs(good)
    assert [c[0] for c in cards] == [1, 2]
    refused(_cards(good, {"cards": cards}), "cards are not a list of the head's length")
    refused(_cards(good, cards[:1]), "cards are not a list of the head's length")
    refused(_cards(good, cards, count=3), "cards are not a list of the head's length")
    refused(_cards(good, cards[::-1]), "cards are not in turn order")
    refused(_cards(good, [cards[0], cards[0]]), "cards are not in turn order")
    refused(_cards(good, [["1", *cards[0][1:]], cards[1]]), "cards are not in turn order")
    refused(_cards(good, [[True, *cards[0][1:]], cards[1]]), "cards are not in turn order")
    refused(_cards(good, [[], cards[1]]), "cards are not in turn order")
    refused(_cards(good, [cards[0], [-1, *cards[1][1:]]]), "cards are not in turn order")
    # One card, the head saying one: read.
    with MemIndex.from_bytes(_cards(good, cards[1:], count=1)) as mem:
        assert [c.turn for c in mem.cards()] == [2]
        assert mem.card(1) is None
        two = mem.card(2)
        assert two is not None
        assert two.to_obj() == cards[1]


def test_a_card_that_is_not_one_is_refused_where_it_is_read(good: bytes) -> None:
    cards = _card_objs(good)
    data = _cards(good, [cards[0], [*cards[1], "more"]])
    with MemIndex.from_bytes(data) as mem:
        one = mem.card(1)
        assert one is not None
        assert one.to_obj() == cards[0]
        for read in (mem.cards, lambda: mem.card(2)):
            with pytest.raises(
                FormatError, match=r"^\.mem card is not one \(a card is a list of 8 "
            ):
                read()


def test_cards_are_found_by_turn_and_no_other(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        assert [c.turn for c in mem.cards()] == [1, 2]
        for turn in (1, 2):
            card = mem.card(turn)
            assert card is not None
            assert card.turn == turn
        for turn in (0, 3, -5, 2**40):
            assert mem.card(turn) is None


# -- what a search reads from a good one ---------------------------------------------------------


def test_words_are_found_by_key_at_both_ends_of_the_sorted_keys(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        keys = np.frombuffer(section(good, "keys"), dtype="<u8")
        stored = sorted(int(k) for k in keys)
        assert stored == sorted(postings_of(mem))
        lo, hi = stored[0], stored[-1]
        probe = np.array([hi, lo, 0, 2**64 - 1, lo + 1, stored[1]], dtype=np.uint64)
        assert mem.find_keys(probe).tolist() == [len(stored) - 1, 0, -1, -1, -1, 1]
        assert mem.holds(probe).tolist() == [True, True, False, False, False, True]
        assert mem.find_keys(np.zeros(0, dtype=np.uint64)).tolist() == []
        for word in ("alpha", "beta", "gamma", "delta", "second"):
            i = int(mem.find_keys(word_keys([word]))[0])
            assert i >= 0
            by_index = mem.postings_at(i)
            by_word = mem.postings(word)
            by_key = mem.postings(word, word_key(word))
            assert by_index[0].tolist() == by_word[0].tolist() == by_key[0].tolist()
            assert by_index[1].tolist() == by_word[1].tolist() == by_key[1].tolist()
        assert mem.postings("alpha")[1].tolist() == [1, 300]
        assert mem.postings("absent")[0].tolist() == []
        for i in (-1, mem.n_words, 2**40):
            with pytest.raises(FormatError, match=rf"^\.mem has no word {i}: rebuild$"):
                mem.postings_at(i)
            with pytest.raises(FormatError, match=rf"^\.mem has no word {i}: rebuild$"):
                mem.postings_many([(0, [], []), (i, [], [])], 0)


@pytest.mark.parametrize("little", [True, False], ids=["little-endian", "big-endian"])
def test_a_word_is_found_by_its_key_at_both_ends_on_either_byte_order(
    good: bytes, little: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The keys are stored little-endian: searched as native integers on such a machine, through
    # numpy on the other; this runs both on this one.
    monkeypatch.setattr(mem_format, "_LITTLE", little)
    with MemIndex.from_bytes(good) as mem:
        stored = sorted(postings_of(mem))
        want = postings_of(mem)
        for key in stored:
            docs, tfs = mem.postings("", key)
            assert dict(zip(docs.tolist(), tfs.tolist(), strict=True)) == want[key]
        for key in (0, stored[0] - 1, stored[0] + 1, stored[-1] + 1, 2**64 - 1):
            assert key not in want
            assert mem.postings("", key)[0].size == 0, key
        assert mem.postings("beta")[0].tolist() == [2, 4, 5]


def test_a_word_entry_out_of_bounds_is_refused_when_its_postings_are_read(good: bytes) -> None:
    def entry_refused(data: bytes, i: int, why: str) -> None:
        with MemIndex.from_bytes(data) as mem:
            with pytest.raises(FormatError, match=rf"^\.mem {why}: rebuild$"):
                mem.postings_at(i)
            with pytest.raises(FormatError, match=rf"^\.mem {why}: rebuild$"):
                mem.postings_many([(i, [], [])], 0)
            with pytest.raises(FormatError):
                mem.fold()

    width = np.frombuffer(section(good, "width"), dtype="<u1").copy()
    poff = np.frombuffer(section(good, "poff"), dtype="<u4").copy()
    last = len(width) - 1
    for value in (0, 3, 8):
        bad = width.copy()
        bad[0] = value
        entry_refused(
            with_section(good, "width", bad.tobytes()), 0, "entry of word 0 is out of bounds"
        )
    # An empty block, one running back, one past the postings.
    cases = ((1, poff[2], 1), (1, poff[2] + 1, 1), (1, 10**6, 0), (last, 0, last - 1))
    for i, value, word in cases:
        bad = poff.copy()
        bad[i] = value
        data = with_section(good, "poff", bad.tobytes())
        entry_refused(data, word, f"entry of word {word} is out of bounds")
    assert last > 2


def test_a_mem_without_words_finds_none(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("plan", text="")
    lg.end_turn()
    with LogView.open(lg.path) as view:
        mem = view.mem
        assert mem is not None
        assert mem.n_words == 0
        assert mem.find_keys(word_keys(["a", "b"])).tolist() == [-1, -1]
        assert mem.holds(word_keys(["a"])).tolist() == [False]
        assert mem.postings("a")[0].size == 0
        assert mem.found_keys(word_keys(["a", "b"])) == ([], [])
        assert mem.postings_many([], 0) == []


def test_a_segment_of_words_holds_each_once_with_every_documents_length(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        keys = {"beta": word_key("beta"), "alpha": word_key("alpha")}
        seg = mem.segment(["beta", "absent", "alpha", "beta"], keys)
        assert seg.n_docs == mem.n_docs == len(mem.lengths())
        assert seg.n_postings == len(mem.postings("beta")[0]) + len(mem.postings("alpha")[0])
        assert seg.n_postings == mem.segment(["beta", "alpha"]).n_postings


def test_the_heads_counts_and_its_description(good: bytes) -> None:
    with MemIndex.from_bytes(good) as mem:
        fields = dict(read_fields(mem))
        assert fields == {
            "covered": head_of(good)[COVERED],
            "events": 8,
            "docs": 6,
            "words": mem.n_words,
            "cards": 2,
            "total_length": int(mem.lengths().sum()),
        }
        assert fields["words"] == len(postings_of(mem))
        assert mem.skipped == 0
        assert repr(mem) == (
            f"<MemIndex None covers {fields['covered']:,} bytes: 8 events, 6 ranked, "
            f"{fields['words']:,} words>"
        )


def test_a_big_mem_mapped_reads_as_the_same_bytes_read_whole(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    for t in range(40):
        lg.add("person.message", text=f"turn{t} question")
        lg.result(" ".join(f"w{t}x{i}" for i in range(600)), path=f"f{t}.py")
        lg.end_turn()
    LogView.open(lg.path).close()
    mp = mem_path(lg.path)
    assert mp.stat().st_size > 256 * 1024
    with MemIndex.open(mp) as mapped, MemIndex.from_bytes(mp.read_bytes()) as whole:
        assert read_fields(mapped) == read_fields(whole)
        assert postings_of(mapped) == postings_of(whole)
        assert [c.to_obj() for c in mapped.cards()] == [c.to_obj() for c in whole.cards()]
        assert mapped.postings("w7x5")[0].tolist() == [23]
    maps = Path("/proc/self/maps")
    with MemIndex.open(mp) as mapped:
        assert mapped.n_words > 0
        if maps.exists():
            assert str(mp) in maps.read_text()  # mapped, not read
    if maps.exists():
        assert str(mp) not in maps.read_text()  # closed: the map is gone
    mapped.close()  # closed twice: nothing more


def test_the_lines_that_are_no_events_are_counted_across_extensions(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="first")
    with lg.path.open("a") as f:
        f.write("not an event\n")
    lg.end_turn()
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        assert mem.skipped == 1
    for text in ("second", "third"):
        lg.add("person.message", text=text)
        with lg.path.open("a") as f:
            f.write("[1, 2]\n{}\n")
        lg.end_turn()
        with LogView.open(lg.path) as view:
            assert (view.rebuilt, view.wrote) == (None, True)
    with MemIndex.open(mem_path(lg.path)) as mem:
        assert mem.skipped == 5
        assert mem.n_events == 6
    mem_path(lg.path).unlink()
    LogView.open(lg.path).close()
    with MemIndex.open(mem_path(lg.path)) as mem:
        assert mem.skipped == 5


def test_events_are_found_by_any_seq_a_log_may_number_them_with(tmp_path: Path) -> None:
    # Gaps are allowed: seqs past 128, past 2**32 and the largest that 64 bits hold.
    seqs = [1, 129, 300, 2**32 + 7, 2**64 - 2, 2**64 - 1]
    path = tmp_path / "t.jsonl"
    kinds = ["person.message"] * (len(seqs) - 1) + ["turn.end"]
    path.write_text(
        "".join(
            f'{{"seq":{s},"kind":"{k}","turn":1,"agent":"main","text":"at {s}"}}\n'
            for s, k in zip(seqs, kinds, strict=True)
        )
    )
    LogView.open(path).close()
    with MemIndex.open(mem_path(path)) as mem:
        assert (mem.first_seq, mem.last_seq) == (1, 2**64 - 1)
        ev = mem.events()
        assert [ev.find(s) for s in seqs] == list(range(len(seqs)))
        for s in (0, 2, 128, 130, 2**32, 2**64, 2**70, -1):
            assert ev.find(s) is None, s


# -- the encoder, given a fold a .mem's reading or an extension made ------------------------------


def _read(data: bytes) -> list[Any]:
    with MemIndex.from_bytes(data) as mem:
        return [
            read_fields(mem),
            postings_of(mem),
            mem.lengths().tolist(),
            [c.to_obj() for c in mem.cards()],
            [mem.postings(w)[1].tolist() for w in ("alpha", "beta", "gamma", "delta", "turn")],
        ]


def test_a_word_without_postings_in_a_fold_leaves_the_vocabulary(good: bytes) -> None:
    want = _read(good)
    assert _read(_encoded(good, lambda fold: None)) == want

    def unused(at: int) -> Any:
        def change(fold: Any) -> None:
            keys = fold.keys.tolist()
            lo, hi = (keys[at - 1] if at else 0), keys[at] if at < len(keys) else 2**64 - 1
            fold.keys = np.array([*keys[:at], (lo + hi) // 2, *keys[at:]], dtype=np.uint64)
            fold.pair_word = np.where(fold.pair_word >= at, fold.pair_word + 1, fold.pair_word)

        return change

    with MemIndex.from_bytes(good) as mem:
        n = mem.n_words
    for at in (0, n // 2, n):
        assert _read(_encoded(good, unused(at))) == want, at


@pytest.mark.parametrize("n", [65_536, 65_537])
def test_documents_past_65536_are_stored_four_bytes_wide_and_read_back(
    tmp_path: Path, n: int
) -> None:
    # Document numbers fit two bytes up to 65,536 documents (0 to 65,535); one more takes four.
    path = tmp_path / "t.jsonl"
    event = '{{"seq":{},"kind":"person.message","turn":1,"agent":"main","text":"w{} all"}}\n'
    lines = [event.format(i + 1, i % 7) for i in range(n)]
    lines.append(f'{{"seq":{n + 1},"kind":"turn.end","turn":1,"agent":"main"}}\n')
    path.write_text("".join(lines))
    LogView.open(path).close()
    with MemIndex.open(mem_path(path)) as mem:
        assert (mem.n_docs, mem.doc_width) == (n, 2 if n == 65_536 else 4)
        docs, tfs = mem.postings("all")
        assert docs.tolist() == list(range(n))
        assert set(tfs.tolist()) == {1}
        assert mem.postings("w3")[0].tolist() == list(range(3, n, 7))


def _forged(data: bytes, word: str, docs: list[int], tfs: list[int]) -> bytes:
    """data with ``word``'s block holding other documents and frequencies of the same widths, and
    its check made right for them (the module's own check), as a crafted file would have them."""
    with MemIndex.from_bytes(data) as mem:
        i = int(mem.find_keys(word_keys([word]))[0])
        dw = mem.doc_width
    poff = np.frombuffer(section(data, "poff"), dtype="<u4")
    width = int(section(data, "width")[i])
    pa, pb = int(poff[i]), int(poff[i + 1])
    assert (pb - pa) == len(docs) * (dw + width)
    block = np.asarray(docs, dtype=f"<u{dw}").tobytes() + np.asarray(tfs, f"<u{width}").tobytes()
    post = bytearray(section(data, "postings"))
    post[pa:pb] = block
    check = mem_format._block_check(np.asarray(docs), np.asarray(tfs), width, pb - pa)
    bcheck = np.frombuffer(section(data, "bcheck"), dtype="<u2").copy()
    bcheck[i] = check
    out = with_section(data, "postings", bytes(post))
    return with_section(out, "bcheck", bcheck.tobytes())


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return wide_mem(tmp_path_factory.mktemp("wide"))


def wide_mem(directory: Path) -> bytes:
    """A .mem with a word in 60 events ("all"), said 70,000 times in one (four-byte frequencies),
    and a word in 3 ("few")."""
    lg = Log(directory / "t.jsonl")
    lg.add("person.message", text="all few " + "all " * 70_000)
    for i in range(59):
        lg.add("person.message", text="all" + (" few" if i < 2 else ""))
    lg.end_turn()
    LogView.open(lg.path).close()
    return mem_path(lg.path).read_bytes()


def test_a_posting_out_of_range_with_its_check_right_is_refused(good: bytes, wide: bytes) -> None:
    def out_of_range(data: bytes, word: str) -> None:
        with MemIndex.from_bytes(data) as mem:
            with pytest.raises(FormatError, match=r"^\.mem posting is out of range: rebuild$"):
                mem.postings(word)
            i = int(mem.find_keys(word_keys([word]))[0])
            if word != "all":  # "beta" and "few" have small blocks, "all" one of 60 postings
                with pytest.raises(FormatError, match=r"^\.mem posting is out of range: rebuild$"):
                    mem.postings_many([(i, [], [])], 0)
            else:  # a big block: left to postings_at, nothing added
                got: tuple[list[int], list[int]] = ([], [])
                assert mem.postings_many([(i, *got)], 0) == [i]
                assert got == ([], [])
            with pytest.raises(FormatError):
                mem.fold()

    def read(data: bytes, word: str) -> tuple[list[int], list[int]]:
        with MemIndex.from_bytes(data) as mem:
            docs, tfs = mem.postings(word)
            i = int(mem.find_keys(word_keys([word]))[0])
            d: list[int] = []
            t: list[int] = []
            if not mem.postings_many([(i, d, t)], 0):  # a small block, read as integers too
                assert (d, t) == (docs.tolist(), tfs.tolist())
            return docs.tolist(), tfs.tolist()

    for data, word in ((good, "beta"), (wide, "few"), (wide, "all")):
        docs, tfs = read(data, word)
        with MemIndex.from_bytes(data) as mem:
            n_docs = mem.n_docs
        assert len(docs) in (3, 60)  # a block read as integers, and one read with numpy
        # The same block forged again reads the same; its last document the last there is, too.
        assert read(_forged(data, word, docs, tfs), word) == (docs, tfs)
        last = [*docs[:-1], n_docs - 1]
        assert read(_forged(data, word, last, tfs), word) == (last, tfs)
        # One past the last document, or far past it: refused.
        for doc in (n_docs, 2**16 - 1):
            out_of_range(_forged(data, word, [*docs[:-1], doc], tfs), word)
    # A four-byte frequency past 2**31-1, in a block read with numpy.
    docs, tfs = read(wide, "all")
    top = max(tfs)
    assert top > 65_535  # four bytes wide
    big = [2**31 - 1 if t == top else t for t in tfs]
    assert read(_forged(wide, "all", docs, big), "all") == (docs, big)
    out_of_range(_forged(wide, "all", docs, [2**31 if t == top else t for t in tfs]), "all")


def test_a_four_byte_frequency_of_a_small_block_is_bounded_as_a_big_ones(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t.jsonl")
    lg.add("person.message", text="rare " * 70_000)
    lg.add("person.message", text="rare once")
    lg.end_turn()
    LogView.open(lg.path).close()
    data = mem_path(lg.path).read_bytes()
    with MemIndex.from_bytes(data) as mem:
        docs, tfs = (a.tolist() for a in mem.postings("rare"))
    assert len(docs) == 2  # a small block
    assert max(tfs) > 65_535  # four bytes wide
    top = [2**31 - 1 if t == max(tfs) else t for t in tfs]
    with MemIndex.from_bytes(_forged(data, "rare", docs, top)) as mem:
        assert mem.postings("rare")[1].tolist() == top
        i = int(mem.find_keys(word_keys(["rare"]))[0])
        d: list[int] = []
        t: list[int] = []
        assert mem.postings_many([(i, d, t)], 0) == []
        assert (d, t) == (docs, top)
    past = [2**31 if t == max(tfs) else t for t in tfs]
    with MemIndex.from_bytes(_forged(data, "rare", docs, past)) as mem:
        with pytest.raises(FormatError, match=r"^\.mem posting is out of range: rebuild$"):
            mem.postings("rare")
        with pytest.raises(FormatError, match=r"^\.mem posting is out of range: rebuild$"):
            mem.postings_many([(i, [], [])], 0)
