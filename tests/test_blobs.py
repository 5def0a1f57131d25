"""Blobs are not words: base64 (with + and /, wrapped or not), data: URIs, hex dumps and minified
code are left out of the words of an event and of a file, and the text stays whole."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.blobs import blank_blobs, blob_spans
from nodwyn_retrieval.retrieval.events import event_counts, text_counts
from nodwyn_retrieval.store.mem import mem_path

from tests.support import Log
from tests.test_conversation import recall, search


def random_bytes(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def blobs_of(text: str) -> list[str]:
    data = text.encode()
    return [data[a:b].decode() for a, b in blob_spans(data)]


B64 = base64.b64encode(random_bytes(3000)).decode()


def test_base64_with_plus_and_slash_is_a_blob() -> None:
    assert "+" in B64
    assert "/" in B64
    text = f"before {B64} after"
    assert blobs_of(text) == [B64]
    assert set(text_counts(text)) == {"before", "after"}


@pytest.mark.parametrize("width", [76, 64, 60])
def test_wrapped_base64_is_one_blob(width: int) -> None:
    lines = [B64[i : i + width] for i in range(0, len(B64), width)]
    text = "headers\n" + "\n".join(lines) + "\ntrailer words"
    (blob,) = blobs_of(text)
    assert blob.replace("\n", "").startswith(B64[: width * (len(lines) - 1)])
    assert set(text_counts(text)) <= {"headers", "trailer", "words"} | set(
        text_counts(lines[-1])
    )  # a short last line of a block may stay (it is one word at most)


def test_quoted_and_indented_wrapping_joins_the_block() -> None:
    lines = [B64[i : i + 76] for i in range(0, 76 * 10, 76)]
    text = "> " + "\n> ".join(lines) + "\n"
    assert len(blobs_of(text)) == 1


def test_a_data_uri_payload_is_a_blob_and_its_type_stays_a_word() -> None:
    png = base64.b64encode(random_bytes(60, 1)).decode()
    text = f'<img src="data:image/png;base64,{png}"> and <a href="data:text/plain,hello%20there">'
    assert blobs_of(text) == [png]  # the second payload is too short to matter
    svg = "data:image/svg+xml,%3Csvg%20xmlns%3D%22http%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%3E"
    assert blobs_of(f"url({svg})") == [svg.split(",", 1)[1]]
    assert {"img", "src", "data", "image", "png"} <= set(text_counts(text))


def test_hex_dumps_are_blobs() -> None:
    xxd = (
        "00000000: 8950 4e47 0d0a 1a0a 0000 000d 4948 4452  .PNG........IHDR\n"
        "00000010: 0000 0001 0000 0001 0806 0000 001f 15c4  ................\n"
    )
    hexdump = "00000000  89 50 4e 47 0d 0a 1a 0a  00 00 00 0d 49 48 44 52  |.PNG........IHDR|\n"
    od = "0000000 457f 464c 0102 0001 0000 0000 0000 0000\n"
    for dump in (xxd, hexdump, od):
        text = "the dump:\n" + dump + "end of dump\n"
        assert set(text_counts(text)) == {"the", "dump", "end", "of"}, dump
    long_hex = random_bytes(40, 3).hex()
    assert blobs_of(f"digest {long_hex}") == [long_hex]


def test_minified_code_is_a_blob_and_compact_json_is_not() -> None:
    rnd = random.Random(4)
    parts = []
    while sum(map(len, parts)) < 3000:
        name = "".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(1, 3)))
        parts.append(f"function {name}(e,t){{return e.{name}=t,{name}(e);}}var {name}=1;")
    bundle = "".join(parts)
    assert blobs_of("// header\n" + bundle + "\n") == [bundle]
    compact = json.dumps([{"userName": f"n{i}", "accountState": "open"} for i in range(80)])
    compact = compact.replace(", ", ",").replace(": ", ":")
    assert len(compact) > 1000
    assert blobs_of(compact) == []
    assert {"username", "accountstate", "open"} <= set(text_counts(compact))


@pytest.mark.parametrize(
    "text",
    [
        "def getUTF8StringFromBufferWithLengthAndOffsetInBytesForTheCaller(): pass",
        "see usr/local/lib/python/site/packages/foo/bar/baz/qux/abc/def/ghi/jkl/mno",
        "commit 0123456789abcdef0123456789abcdef01234567 fixes it",
        "sha256 " + "ab" * 32,
        "ordinary prose, with words and punctuation, that goes on for a while " * 40,
        "x = [" + ", ".join(str(i) for i in range(400)) + "]",
    ],
)
def test_what_is_not_a_blob(text: str) -> None:
    assert blobs_of(text) == []


def test_blanking_keeps_every_byte_in_place_and_every_line() -> None:
    data = f"a\n{B64[:100]}\n{B64[100:200]}\nb\n".encode()
    out = blank_blobs(data)
    assert len(out) == len(data)
    assert out.count(b"\n") == data.count(b"\n")
    assert out.split(b"\n")[0] == b"a"
    assert out.split(b"\n")[3] == b"b"


def test_a_files_blobs_give_no_words_and_its_chunks_keep_their_lines() -> None:
    text = (
        "def load_icon():\n    return ICON\n\nICON = '''\n"
        + "\n".join(B64[i : i + 76] for i in range(0, len(B64), 76))
        + "\n'''\n"
    )
    rec = analyze(text)
    assert "load_icon" in rec.vocab
    assert not [w for w in rec.vocab if len(w) > 12]  # no piece of the base64
    assert int(rec.ends[-1]) == text.count("\n")


def test_an_events_words_leave_its_blobs_out() -> None:
    event = {"seq": 1, "kind": "tool.result", "name": "fs-read", "args": {"path": "a.png"},
             "output": f"PNG image\n{B64}\n"}  # fmt: skip
    counts = event_counts(event)
    assert counts is not None
    assert set(counts) == {"png", "image", "fs-read", "fs", "read", "path", "a"}


@pytest.mark.asyncio
async def test_a_2_mb_image_keeps_the_mem_small_and_the_event_whole(tmp_path: Path) -> None:
    image = base64.b64encode(random_bytes(1_500_000, 5)).decode()  # 2 MB of base64
    assert len(image) == 2_000_000
    wrapped = "\n".join(image[i : i + 76] for i in range(0, len(image), 76))
    for name, payload in (("flat", image), ("wrapped", wrapped)):
        lg = Log(tmp_path / f"{name}.jsonl")
        lg.add("person.message", text="show me the screenshot of the login page")
        seq = lg.result(f"screenshot of the login page\n{payload}\n", path="login.png")
        lg.add("llm.resp", text="The login page shows an error banner.", calls=[])
        lg.end_turn()
        found = await search(lg.path, "login screenshot")
        assert seq in [h["seq"] for h in found.hits]
        ratio = mem_path(lg.path).stat().st_size / lg.path.stat().st_size
        assert ratio < 0.05, (name, ratio)  # the image gave no words
        out = await recall(lg.path, seq, start=2, count=1)
        assert payload.split("\n")[0][:1000] in out.text  # the event itself is whole
