"""A log line is decoded by a faster decoder than ``json`` (store.log), and must give exactly
what ``json.loads`` gives: the same values and types, the same lines refused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.store.log import event_of, read_log

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
