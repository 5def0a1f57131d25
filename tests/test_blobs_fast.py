"""The blob scans' fast paths (retrieval/blobs.py) held to the rules they stand for.

Wrapped base64 blocks read in one match: the block scan gives the spans of the rule as the module
doc states it, run by run: every run of at least 40 characters of the
alphabet (and up to two "="), each joined to the next when a line break and indentation or
quoting alone lie between them. The reference below is that rule written one run at a time (as
the module did before it read a block's wrapped runs in one expression); random texts built of
runs, padding and separators of every kind hold the two to each other. ``data:`` URIs looked for
where the lowered text holds ``data:``: the payloads of the expression's finditer."""

from __future__ import annotations

import base64
import random
import re

import pytest
from nodwyn_retrieval.retrieval import blobs
from nodwyn_retrieval.retrieval.blobs import blob_spans

_ALPHABET = re.compile(rb"[A-Za-z0-9+/]+")
_WRAP = re.compile(rb"\r?\n[ \t>]*")


def reference_runs(data: bytes) -> list[tuple[int, int]]:
    """Every whole run of at least MIN_RUN characters of the alphabet, with up to two "=" after
    it; the next run is looked for after that padding."""
    out: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = _ALPHABET.search(data, pos)
        if m is None:
            return out
        start, end = m.span()
        if end - start < blobs.MIN_RUN:
            pos = end
            continue
        k = 0
        while k < 2 and end < len(data) and data[end] == 0x3D:
            end += 1
            k += 1
        out.append((start, end))
        pos = end


def reference_spans(data: bytes) -> list[tuple[int, int]]:
    """The base64 blobs of data, a run at a time."""
    runs = reference_runs(data)
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        j = i + 1
        while j < len(runs) and _WRAP.fullmatch(data, end, runs[j][0]) is not None:
            end = runs[j][1]
            j += 1
        block = _WRAP.sub(b"", data[start:end])
        n = len(block.rstrip(b"="))
        hexes = n > blobs.MAX_HEX and re.fullmatch(rb"[0-9a-fA-F]+", block.rstrip(b"=")) is not None
        if n >= blobs.SURE_BLOCK or (
            n >= blobs.MIN_BLOCK and (blobs._reads_as_random(block) or hexes)
        ):
            out.append((start, end))
        i = j
    return out


_SEPARATORS = (
    b"\n", b"\r\n", b"\n  ", b"\n\t", b"\n> ", b"\n>>", b"\n\n", b"\r", b"\r\r\n", b" ", b"\t",
    b"-", b".", b"\n-", b"\n  x\n", b"", b"\xc3\xa9", b",",
)  # fmt: skip


def _run(r: random.Random) -> bytes:
    n = r.choice((5, 30, 39, 40, 41, 63, 64, 65, 76, 100, 255, 256, 300))
    shape = r.randrange(4)
    if shape == 0:  # random base64, "+" and "/" in it
        text = base64.b64encode(r.randbytes(n)).decode().rstrip("=")
    elif shape == 1:  # camel case: a long name, not random
        text = "ScrubEnvironmentVariables" * (n // 25 + 1)
    elif shape == 2:  # hex
        text = r.randbytes(n).hex()
    else:
        text = "z" * n
    return text[:n].encode() + b"=" * r.choice((0, 0, 1, 2, 3))


def _text(r: random.Random) -> bytes:
    parts: list[bytes] = []
    for _ in range(r.randrange(1, 12)):
        parts.append(r.choice(_SEPARATORS))
        parts.append(_run(r))
    parts.append(r.choice(_SEPARATORS))
    return b"".join(parts)


@pytest.mark.parametrize("seed", range(8))
def test_the_block_scan_is_the_rule_run_by_run(seed: int) -> None:
    r = random.Random(seed)
    for _ in range(400):
        data = _text(r)
        assert blobs._base64_spans(data) == reference_spans(data), data


def test_wrapped_runs_join_across_every_kind_of_line_break() -> None:
    line = base64.b64encode(random.Random(3).randbytes(57)).decode()  # 76 characters
    for sep in ("\n", "\r\n", "\n    ", "\n> ", "\n\t>"):
        text = ("see " + sep.join([line] * 4) + "\nend").encode()
        assert blob_spans(text) == [(4, 4 + 76 * 4 + len(sep) * 3)], sep
    # A blank line, a lone carriage return or a word between runs ends the block: each run of 76
    # characters is then a block of its own, and a blob.
    for sep in ("\n\n", "\r", "\n x\n"):
        text = sep.join([line] * 2).encode()
        assert blob_spans(text) == [(0, 76), (76 + len(sep), 152 + len(sep))], sep


def test_a_short_last_line_is_not_part_of_the_block() -> None:
    """The last line of a wrapped block, shorter than MIN_RUN, is not a run, so not the block's."""
    lines = [base64.b64encode(random.Random(4).randbytes(57)).decode() for _ in range(3)]
    text = "\n".join([*lines, "QUJD=="]).encode()
    assert blob_spans(text) == [(0, 76 * 3 + 2)]


def test_padding_between_wrapped_lines() -> None:
    a, b = (base64.b64encode(random.Random(s).randbytes(57)).decode() for s in (5, 6))
    assert blob_spans(f"{a}==\n{b}".encode()) == [(0, 76 + 3 + 76)]
    # A third "=" is not padding: the runs do not join (each is a blob of its own).
    assert blob_spans(f"{a}===\n{b}".encode()) == [(0, 78), (80, 156)]


def test_an_image_wrapped_at_76_columns_is_one_blob() -> None:
    image = base64.b64encode(random.Random(7).randbytes(300_000)).decode()
    wrapped = "\n".join(image[i : i + 76] for i in range(0, len(image), 76))
    text = f"image/png base64\n{wrapped}\n".encode()
    # 400,000 characters: 5,263 lines of 76 and a last of 12, which is no run and stays words.
    assert blob_spans(text) == [(17, 17 + 5263 * 77 - 1)]
    assert blob_spans(text) == reference_spans(text)
    flat = f"image/png base64\n{image}\n".encode()
    assert blob_spans(flat) == [(17, 17 + len(image))] == reference_spans(flat)


_URI_PIECES = (
    "data:", "DATA:", "Data:", "dAtA:", "xdata:", "_data:", "-data:", "data:image/png;base64,",
    "DATA:text/plain,", "data:application/json;charset=utf-8,", "data:image/svg+xml,",
    "data: bytes", "(data:", '"', " ", "\n", "%3Csvg%20", "iVBORw0KGgoAAAANSUhEUg", "ata:", "ATA:",
    "é", "<", "data:a/b,", "0123456789abcdef",
)  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_data_payloads_are_the_expression_finditer(seed: int) -> None:
    r = random.Random(seed)
    for _ in range(500):
        data = "".join(r.choice(_URI_PIECES) for _ in range(r.randrange(1, 16))).encode()
        want = [m.span(1) for m in blobs._DATA_URI.finditer(data)]
        assert blobs._data_payloads(data) == want, data


def test_a_data_uri_in_any_case_and_one_inside_a_payload() -> None:
    payload = "iVBORw0KGgoAAAANSUhEUgdata:image/png,AAAAAAAAAAAAAAAAAAAAAAA"
    text = f"x dAtA:image/png;base64,{payload} y".encode()
    assert blobs._data_payloads(text) == [(24, 24 + len(payload))]
    assert blobs._data_payloads(b"metadata:image/png,AAAAAAAAAAAAAAAAAAAA") == []  # inside a word
    uri = b"data:image/png,AAAAAAAAAAAAAAAAAAAA"
    assert blobs._data_payloads(b"(" + uri + b")" + uri) == [(16, 36), (52, 72)]
