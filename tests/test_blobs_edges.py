"""Blobs at their edges (retrieval/blobs.py, §6): the lengths from which base64, a hex hash, a
``data:`` payload and a minified line are blobs, what reads as random, how wrapped lines join, the
shapes of a hex dump's line, and overlapping blobs reported once."""

from __future__ import annotations

import base64
import itertools
import random

import pytest
from nodwyn_retrieval.retrieval.blobs import blank_blobs, blob_spans


def spans(text: str) -> list[tuple[int, int]]:
    return blob_spans(text.encode())


def random_b64(n: int, seed: int = 1) -> str:
    """n characters of base64 of random bytes, without "+" and "/" (which cut words)."""
    r = random.Random(seed)
    out = ""
    while len(out) < n:
        out += base64.b64encode(r.randbytes(300)).decode().replace("+", "").replace("/", "")
    return out[:n]


def test_the_lengths_of_the_module_doc() -> None:
    from nodwyn_retrieval.retrieval import blobs

    assert (blobs.MIN_RUN, blobs.MIN_BLOCK, blobs.SURE_BLOCK) == (40, 64, 256)
    assert (blobs.MAX_HEX, blobs.MIN_MINIFIED) == (64, 1000)


def test_random_base64_is_a_blob_from_64_characters() -> None:
    assert spans(random_b64(64)) == [(0, 64)]
    assert spans(random_b64(63)) == []
    assert spans("see " + random_b64(100) + " here") == [(4, 104)]


def test_padding_is_part_of_the_blob_but_not_of_its_length() -> None:
    assert spans(random_b64(64) + "==") == [(0, 66)]
    assert spans(random_b64(64) + "=== x") == [(0, 66)]  # at most two
    assert spans(random_b64(62) + "==") == []  # 62 characters and two "=": too short


def test_any_run_of_256_is_a_blob_however_it_reads() -> None:
    assert spans("z" * 256) == [(0, 256)]
    assert spans("z" * 255) == []
    name = "ScrubEnvironmentVariables" * 10  # 250 characters of camel case: a name
    assert spans(name) == []
    assert spans(name + "Extra") == []
    assert spans(name + "Extras") == [(0, 256)]


def test_a_hex_hash_longer_than_a_sha256_is_a_blob() -> None:
    sha256 = "0123456789abcdef" * 4
    assert spans(sha256) == []
    assert spans(sha256 + "0") == [(0, 65)]
    assert spans(sha256.upper() + "A") == [(0, 65)]
    assert spans("0123456789abcdeg" * 5) == []  # a "g": not hex, and not random either


def _block(n: int, changes: int) -> str:
    """n characters holding upper, lower and digits whose class changes `changes` times."""
    classes = itertools.cycle("Aa1")
    out: list[str] = []
    cls = next(classes)
    for i in range(n):
        if 0 < i <= changes:
            cls = next(classes)
        out.append({"A": "Q", "a": "q", "1": "7"}[cls])
    return "".join(out)


def test_a_block_reads_as_random_when_its_class_changes_every_other_character() -> None:
    assert spans(_block(80, 40)) == [(0, 80)]
    assert spans(_block(80, 39)) == []
    assert spans(_block(64, 32)) == [(0, 64)]
    assert spans(_block(64, 31)) == []


def test_a_block_without_one_of_upper_lower_and_digits_is_not_random() -> None:
    assert spans("zY" * 50) == []  # no digit
    assert spans("z1" * 50) == []  # no capital
    assert spans("Z1" * 50) == []  # no lower case
    assert spans("aB1" * 34) == [(0, 102)]


def test_only_the_first_512_characters_are_read_for_randomness() -> None:
    tame = "Q" * 200 + "q" * 200 + "7" * 112  # 512 characters with 2 changes
    assert spans(tame + _block(300, 300)) == [(0, 812)]  # 256 or more: a blob anyway
    # below 256 and random from its start: a blob, whatever follows its 512th character
    assert spans(_block(200, 200)) == [(0, 200)]


def test_wrapped_lines_join_one_block() -> None:
    a, b = random_b64(40, seed=2), random_b64(40, seed=3)
    assert spans(f"{a}\n{b}") == [(0, 81)]
    assert spans(f"{a}\r\n  > {b}") == [(0, 86)]
    assert spans(f"{a}\n\n{b}") == []  # a blank line ends a block: two runs of 40
    assert spans(f"{a} {b}") == []  # a space is no line break
    c = random_b64(40, seed=4)
    assert spans(f"{a}\n{b}\n{c}\nend") == [(0, 122)]


def test_a_run_shorter_than_40_starts_no_block() -> None:
    a, b = random_b64(39, seed=5), random_b64(60, seed=6)
    assert spans(f"{a}\n{b}") == []  # 99 characters, but the first run is too short to start
    assert spans(f"{b}\n{a}") == []  # the second is too short to be a run
    assert spans(f"{random_b64(40, seed=5)}\n{random_b64(40, seed=6)}") == [(0, 81)]


def test_a_data_uri_payload_is_a_blob_from_16_characters() -> None:
    text = "img data:image/png;base64," + "a" * 16 + " end"
    assert spans(text) == [(26, 42)]
    assert spans("img data:image/png;base64," + "a" * 15 + " end of the line") == []
    assert spans("IMG Data:Image/SVG+xml;charset=utf-8," + "%3Csvg%3E" * 2 + " end") == [(37, 55)]
    assert spans("xdata:image/png;base64," + "a" * 16 + " and more words") == []


def test_a_text_shorter_than_any_base64_run_holds_no_blob() -> None:
    at_40 = "data:a/b," + "a" * 31  # 40 bytes
    assert spans(at_40) == [(9, 40)]
    assert spans(at_40[:-1]) == []


@pytest.mark.parametrize(
    "line",
    [
        "00000000: 4865 6c6c 6f20 576f  Hello Wo",
        "0x0010 48 65 6c 6c 6f 20",
        "0000000000000010  48 65 6c 6c 6f 20 57 6f  |Hello Wo|",
        "  > 0040: 4865 6c6c 6f20 576f",
    ],
)
def test_a_hex_dump_line_is_a_blob_whole(line: str) -> None:
    head = "a hex dump of the file follows:\n"
    assert spans(f"{head}{line}\nafter") == [(len(head), len(head) + len(line.encode()))]


@pytest.mark.parametrize(
    "line",
    [
        "000: 4865 6c6c 6f20 576f",  # an offset of 3 digits
        "00000000: 4865 6c6c 6f20",  # three groups
        "00000000: 4865 6c6c 6f20 5",  # a group of one digit
        "00000000:     4865 6c6c 6f20 576f",  # four spaces before a group
        "the dates 2026 1015 0900 0930 are hex",
    ],
)
def test_what_is_not_a_hex_dump_line(line: str) -> None:
    assert spans(f"a hex dump of the file follows:\n{line}\nafter") == []


def _minified(n: int, white: int, code: int) -> str:
    """A line of n characters with `white` spaces and `code` of ;()= and letters otherwise."""
    chars = [" "] * white + ["="] * code + ["x"] * (n - white - code)
    random.Random(n + white + code).shuffle(chars)
    return "".join(chars)


def test_a_minified_line_is_a_blob_from_1000_characters() -> None:
    assert spans(_minified(1000, 0, 50)) == [(0, 1000)]
    assert spans("a\n" + _minified(1000, 0, 50) + "\nb") == [(2, 1002)]
    assert spans(_minified(999, 0, 50)) == []


def test_a_minified_line_has_under_8_percent_white_and_5_percent_code() -> None:
    assert spans(_minified(1000, 79, 50)) == [(0, 1000)]
    assert spans(_minified(1000, 80, 50)) == []  # 8% white: prose or code, not minified
    assert spans(_minified(1000, 0, 49)) == []  # too few ;()= : compact JSON's keys are words
    tabs = _minified(1000, 0, 60).replace("x", "\t", 80)
    assert spans(tabs) == []  # tabs are white space too
    semis = _minified(1000, 0, 0).replace("x", ";", 20).replace("x", "(", 30)
    assert spans(semis) == [(0, 1000)]


def test_blobs_that_overlap_or_touch_are_one() -> None:
    payload = random_b64(300)
    text = f"x data:image/png;base64,{payload} y"
    assert spans(text) == [(24, 324)]  # a base64 run and a data: payload, the same bytes
    hexes = "0123456789abcdef" * 5
    dump = f"00000000: 4865 6c6c 6f20 576f {hexes}"
    assert spans(dump) == [(0, len(dump))]
    two = f"{random_b64(64, seed=7)}\n{_minified(1000, 0, 50)}"
    assert spans(two) == [(0, 64), (65, 1065)]  # a line break between: two blobs


def test_blanking_keeps_the_length_and_the_lines_of_what_it_blanks() -> None:
    data = f"a {random_b64(40, seed=8)}\n{random_b64(40, seed=9)} b".encode()
    out = blank_blobs(data)
    assert out == b"a " + b" " * 40 + b"\n" + b" " * 40 + b" b"
    assert blank_blobs(b"plain words") == b"plain words"


def test_a_dump_in_groups_of_eight_or_split_by_tabs_and_an_upper_case_data_uri_are_blobs() -> None:
    # xxd -g4 prints groups of 8 digits; a dump pasted through a tool may have tabs between groups.
    eight = b"00000010: 7f454c46 02010100 00000000 00000000  .ELF............\n"
    tabs = b"0000020\t6f6c\t6c65\t6874\t7265\t0a65\n"
    upper = b'<img src="DATA:IMAGE/PNG;BASE64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB">\n'
    for line in (eight, tabs):
        text = b"intro words here\n" + line + b"outro words here\n"
        start = text.index(line)
        assert blob_spans(text) == [(start, start + len(line) - 1)], line
    spans = blob_spans(upper)
    assert len(spans) == 1
    a, b = spans[0]
    assert upper[a:b] == b"iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"


# The byte classes at their edges. A block's randomness counts how often the class (upper case,
# lower case, digit, other) changes; "+" and "/" are base64 but of no letter or digit class.
@pytest.mark.parametrize(("edge", "mate"), [("A", "B"), ("Z", "Y"), ("a", "b"), ("z", "y"),
                                            ("0", "1"), ("9", "8")])  # fmt: skip
def test_the_first_and_last_letter_or_digit_are_of_their_class(edge: str, mate: str) -> None:
    others = [c for c in ("Q", "q", "7") if not (c.isupper() == mate.isupper()
                                                 and c.islower() == mate.islower())]  # fmt: skip
    # 32 characters of the other two classes (2 changes), then 32 of one class: 2 changes in 64
    tame = others[0] * 16 + others[1] * 16 + (edge + mate) * 16
    assert len(tame) == 64
    assert spans(tame) == []
    # the same characters by turns with another class: 33 changes, random
    assert spans(others[0] * 16 + others[1] * 16 + (edge + others[0]) * 16) == [(0, 64)]


@pytest.mark.parametrize("sign", ["+", "/"])
@pytest.mark.parametrize("letter", ["Q", "q", "7"])
def test_plus_and_slash_are_of_no_letter_or_digit_class(sign: str, letter: str) -> None:
    # "Q" * 10 ... "7" * 11: all three classes with 2 changes, then a letter and a sign by turns:
    # 31 changes more, 33 or more in 64 characters: random
    block = "Q" * 11 + "q" * 11 + "7" * 10 + (letter + sign) * 16
    assert len(block) == 64
    assert spans(block) == [(0, 64)]
    assert spans(block.replace(sign, letter)) == []  # the same without the sign: 2 or 3 changes


@pytest.mark.parametrize("edge", ["A", "Z", "a", "z", "0", "9", "+", "/"])
def test_every_base64_character_makes_a_run_from_its_alphabets_edges(edge: str) -> None:
    assert spans(edge * 256) == [(0, 256)]
    assert spans("x" * 128 + edge + "x" * 127) == [(0, 256)]


@pytest.mark.parametrize("edge", ["@", "[", "`", "{", ":", "-", ".", "*", ","])
def test_the_characters_beside_the_alphabet_end_a_run(edge: str) -> None:
    assert spans("x" * 128 + edge + "x" * 128) == []  # two runs of 128: neither is a blob


def test_a_minified_line_may_hold_a_tab_or_a_vertical_tab() -> None:
    line = _minified(1000, 0, 50)
    for odd in ("\t", "\x0b", "\r", "\x0c"):
        text = "head\n" + line[:500] + odd + line[501:] + "\ntail"
        assert spans(text) == [(5, 1005)], repr(odd)


def test_a_wrapped_block_is_measured_without_its_line_breaks() -> None:
    assert spans("z" * 128 + "\n" + "z" * 127) == []  # 255 characters of base64 and a newline
    assert spans("z" * 128 + "\n" + "z" * 128) == [(0, 257)]
    assert spans("z" * 200 + "\r\n  > " + "z" * 55) == []
    hexes = "0123456789abcdef" * 5
    assert spans(hexes[:40] + "\n  " + hexes[40:80]) == [(0, 83)]  # 80 hex digits, wrapped
    assert spans(hexes[:40] + "\n\n" + hexes[40:80]) == []  # two hashes of 40


@pytest.mark.parametrize(
    "line",
    [
        "0000 4865 6c6c 6f20 576f 726c 6421  Hello World!",
        "00000000 7f454c46 02010100 00000000 00000000  .ELF............",
    ],
)
def test_a_hex_dump_line_that_opens_the_text_is_a_blob(line: str) -> None:
    assert spans(f"{line}\nafter the dump") == [(0, len(line))]
    assert spans(line) == [(0, len(line))]


def test_two_blobs_that_touch_are_one() -> None:
    # a run's "=" padding ends it; a run straight after it is another run, and one blob with it
    a, b = random_b64(64, seed=10), random_b64(64, seed=11)
    assert spans(f"{a}=={b} end") == [(0, 130)]
    assert spans(f"{a}== {b} end") == [(0, 66), (67, 131)]
