"""A log line is decoded by a faster decoder than ``json`` (store.log), and must give exactly
what ``json.loads`` gives: the same values and types, the same lines refused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.store.log import event_of, line_events, read_log

EDGES = [
    b'{"seq": 1, "kind": "x", "n": 123456789012345678901234567890}',  # past 64 bits
    b'{"seq": 1, "kind": "x", "n": -18446744073709551617}',
    b'{"seq": 1, "kind": "x", "n": 18446744073709551615}',
    b'{"seq": 1, "kind": "x", "n": 1e400}',  # past a float: inf
    b'{"seq": 1, "kind": "x", "n": -1e400}',
    b'{"seq": 1, "kind": "x", "n": NaN}',
    b'{"seq": 1, "kind": "x", "n": Infinity}',
    b'{"seq": 1, "kind": "x", "s": "\\ud800"}',  # a lone surrogate
    b'{"seq": 1, "kind": "x", "s": "\xed\xa0\x80"}',  # a surrogate in UTF-8
    b'\xef\xbb\xbf{"seq": 1, "kind": "x"}',  # a byte-order mark
    '{"seq": 1, "kind": "x", "s": "\u00e9"}'.encode("utf-16"),
    b'{"seq": 1, "kind": "x", "a": 1, "a": 2}',  # the last of two equal keys
    b'{"seq": 1, "kind": "x", "f": -0.0, "g": 0.1e1, "h": 5e-324, "i": 1.7976931348623157e308}',
    b'{"seq": 1, "kind": "x", "s": "\\u0000\\n\\t\\"\\\\"}',
    b'{"seq": 1.0, "kind": "x"}',  # a float seq is no seq
    b'{"seq": true, "kind": "x"}',
    b'{"seq": 1, "kind": "x", "s": "\xff"}',  # bad UTF-8
    b'{"seq": 1, "kind": "x"} x',
    b'{"seq": 1, "kind": "x",}',
    b'{"seq": 01, "kind": "x"}',
    b"[1, 2]",
    b"",
    b"[" * 5000 + b"]" * 5000,  # deep nesting
    b'{"seq": 1, "kind": "x", "d": ' + b'{"a": ' * 200 + b"1" + b"}" * 200 + b"}",
]


def _json_event(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    seq, kind = obj.get("seq"), obj.get("kind")
    if type(seq) is not int or seq < 1 or not isinstance(kind, str) or not kind:
        return None
    return obj


def _same(a: object, b: object) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN, -0.0 not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        assert isinstance(b, float)
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    return a == b


def test_edge_lines_decode_as_json_decodes_them() -> None:
    for line in EDGES:
        assert _same(event_of(line), _json_event(line)), line[:80]


def test_the_edges_read_from_a_log_are_jsons(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    body = [e.replace(b'"seq": 1,', f'"seq": {i + 1},'.encode()) for i, e in enumerate(EDGES)]
    # Seqs must rise for read_log: a line its seq could not be put into (UTF-16) is left out.
    body = [b for b in body if b"\n" not in b and b'"seq": ' in b]
    path.write_bytes(b"\n".join(body) + b"\n")
    got = read_log(path)
    want = [e for e in map(_json_event, body) if e is not None]
    assert len(got.events) == len(want)
    assert all(_same(a, b) for a, b in zip(got.events, want, strict=True))


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _values, max_size=5), st.booleans())
def test_any_json_object_decodes_as_json_decodes_it(
    extra: dict[str, Any], ascii_only: bool
) -> None:
    obj = {"seq": 7, "kind": "tool.result", **extra}
    line = json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert _same(event_of(line), _json_event(line))


def _each_line(data: bytes) -> list[dict[str, Any] | None]:
    end = data.rfind(b"\n") + 1
    return [_json_event(line) for line in data[:end].split(b"\n")[:-1]] if end else []


_GOOD = b'{"seq": 1, "kind": "x"}'
BATCHES = [
    b"",
    b"\n",
    _GOOD + b"\n",
    _GOOD + b"\n" + _GOOD,  # a torn last line is not read
    _GOOD + b" " + _GOOD + b"\n\n",  # two values on a line and an empty line: two lines, two values
    _GOOD + b" " + _GOOD + b"\n" + _GOOD + b"\n",
    b'{"seq": 1, "kind": "x", "a": {"b": 1}\n, "c": 2}\n' + _GOOD + b"\n",  # a value over two lines
    b'{"seq": 1, "kind": "x", "a": [1,\n2]}\n',
    b'{"seq": 1, "kind": "x", "s": "a\nb"}\n',  # a raw line break inside a string
    _GOOD + b"\r\n" + _GOOD + b"\r\n",
    b" " + _GOOD + b"\n" + _GOOD + b" \n",
    b"\xef\xbb\xbf" + _GOOD + b"\n" + _GOOD + b"\n",  # a byte-order mark: that line is refused
    _GOOD + b"\n" + b'{"seq": 2, "kind": "x", "n": NaN}\n' + _GOOD + b"\n",
    _GOOD + b"\n" + b'{"seq": 2, "kind": "x", "n": 1e400}\n',  # json reads it as inf
    _GOOD + b"\n" + b'{"seq": 2, "kind": "x", "s": "\xff"}\n' + _GOOD + b"\n",
    _GOOD + b"\n{}\n" + b'{"seq": 0, "kind": "x"}\n' + b'{"seq": 3, "kind": ""}\n',
    b"[1]\n" + _GOOD + b"\n",
    _GOOD + b"\n" + b'{"seq": 2, "kind": "x", "n": 123456789012345678901234567890}\n',
    b"{" * 3000 + b"}" * 3000 + b"\n" + _GOOD + b"\n",
    b'{"seq": 1, "kind": "x"}}\n{"seq": 2, "kind": "x"}\n',
    # As many values as lines, none of them a line: a list over two lines, then an object...
    b'[{"seq": 1, "kind": "x"}\n]{"seq": 3, "kind": "y"}\n',
    # ...and an object, then a list over two lines, each line's last but one byte a "}".
    b'{"seq": 1, "kind": "x"}[\n{"seq": 2, "kind": "y"}]\n',
    # ...and lines that begin with "{" but do not end with "}": two values over two lines.
    b'{"seq": 1, "kind": "x", "a": [\n{"q": 1}]} {"seq": 5, "kind": "z"} \n',
]


def test_a_batch_of_lines_decodes_as_each_line_alone() -> None:
    for data in BATCHES:
        end = data.rfind(b"\n") + 1
        breaks, got = line_events(data, end)
        want = _each_line(data)
        assert breaks == [i for i in range(end) if data[i] == 0x0A], data[:80]
        assert len(got) == len(want), data[:80]
        assert all(_same(a, b) for a, b in zip(got, want, strict=True)), data[:80]


def test_a_log_of_objects_a_line_is_read_in_one_batch_with_each_lines_answer() -> None:
    lines = [
        json.dumps({"seq": i + 1, "kind": "tool.result", "n": i * 2**70, "s": "\u00e9" * i})
        for i in range(50)
    ]
    data = ("\n".join(lines) + "\n").encode()
    breaks, got = line_events(data, len(data))
    assert breaks == [i for i, c in enumerate(data) if c == 0x0A]
    assert len(got) == 50
    assert all(_same(a, b) for a, b in zip(got, _each_line(data), strict=True))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.text(max_size=6), _values, max_size=4)
        | st.sampled_from(["", " ", "[1]", "{", "}", "x", "{} {}", "{}\r", "\ufeff{}"]),
        max_size=6,
    )
)
def test_any_lines_decode_in_a_batch_as_each_alone(items: list[dict[str, Any] | str]) -> None:
    lines = [
        x if isinstance(x, str) else json.dumps({"seq": i + 1, "kind": "k", **x})
        for i, x in enumerate(items)
    ]
    data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    (breaks, got), want = line_events(data, len(data)), _each_line(data)
    assert len(breaks) == len(want)
    assert len(got) == len(want)
    assert all(_same(a, b) for a, b in zip(got, want, strict=True))
