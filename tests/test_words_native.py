"""The fast paths of the splitter give exactly the words and counts of a plain reference of §6.

The word table (retrieval/words.py) takes shortcuts for the runs most text holds: a lowercase
ASCII word, a lowercase snake_case name, an ASCII token, and a memo of runs seen. The reference
here is the module docstring's rule written plainly (a regular expression over str, a loop over
characters for camel case, no bytes, no memo), so that any faster path, in Python or native code,
is held to it over a corpus the test builds: many scripts, camelCase, snake_case, dashes, long
runs, base64-ish lines, words around the 64-byte limit.

analyze() has two paths, the compiled pass (retrieval/_words_native.c, built at install where a
compiler is found) and the Python one it falls back to: each is held to the reference, and the
two to each other record by record, byte for byte as the chunk store encodes them.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import random
import re
import sys
from collections import Counter

import msgpack
import numpy as np
import pytest
from nodwyn_retrieval.retrieval import analyze as A
from nodwyn_retrieval.retrieval import words as W
from nodwyn_retrieval.retrieval.chunks import DEFINED, chunk_spans, split_lines

_TOKEN = re.compile(r"\w+(?:-\w+)*")

try:  # where blobs (base64, hex dumps, minified code) give analyze no words, the reference too
    _blank = importlib.import_module("nodwyn_retrieval.retrieval.blobs").blank_blobs
except ImportError:
    _blank = None


def _analyzed(text: str) -> str:
    """text as analyze counts its words: with its blobs blanked where the project blanks them."""
    if _blank is None:
        return text
    return _blank(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace")


def _camel(part: str) -> list[str]:
    pieces: list[str] = []
    begin = 0
    n = len(part)
    for i in range(1, n):
        c = part[i]
        if not c.isupper():
            continue
        prev_upper = part[i - 1].isupper()
        nxt = part[i + 1] if i + 1 < n else ""
        lone_s = nxt == "s" and (i + 2 == n or not part[i + 2].islower())
        if not prev_upper or (nxt.islower() and not lone_s):
            pieces.append(part[begin:i])
            begin = i
    pieces.append(part[begin:])
    return pieces


def _fits(word: str) -> bool:
    return len(word.encode("utf-8", "surrogatepass")) <= W.MAX_WORD_BYTES


def reference_words(text: str) -> list[str]:
    """§6 as the module docstring states it, one token at a time."""
    out: list[str] = []
    for raw in _TOKEN.findall(text):
        token = raw.strip("-_")
        if not token:
            continue
        found: dict[str, None] = {}
        if _fits(token.lower()):
            found[token.lower()] = None
        for part in re.split(r"[-_]+", token):
            if not part or not _fits(part.lower()):
                continue
            found[part.lower()] = None
            pieces = _camel(part)
            if len(pieces) > 1:
                for piece in pieces:
                    found[piece.lower()] = None
        out.extend(found)
    return out


_SCRIPTS = [
    "变量名称",
    "変数名",
    "переменная",
    "Größe",
    "ÜberCafé",
    "mañana",
    "αβγΔέλτα",
    "שלום",
    "مرحبا",
    "नमस्ते",
    "ﬁle",
    "İstanbul",
    "ǅungla",
    "e\u0301t\u00e9",
    "naïveResult",
    "ÆsirÖl",
]
_ASCII = [
    "getHTTPServer",
    "getURLs",
    "IOError",
    "scrubEnv",
    "base64Encode",
    "sha256",
    "int32_t",
    "max_result_tokens",
    "__init__",
    "_private",
    "CONSTANT_VALUE",
    "index-grep",
    "a--b",
    "x86_64",
    "v2",
    "HTTPSConnectionPool",
    "parseXMLDoc",
    "deadbeefcafebabe",
    "0x1F",
    "_-x",
    "foo_foo",
    "ABCs",
    "a",
    "404",
    "models.list",
    "snake_case_name_with_many_parts",
]
_PUNCT = [
    " ",
    "  ",
    ".",
    "/",
    "+",
    "@",
    "(",
    ")",
    ",",
    ";",
    "\t",
    "\n",
    " -- ",
    "::",
    "->",
    "“",
    "\u00a0",
]


def _long(rng: random.Random) -> str:
    n = rng.choice([15, 16, 17, 31, 32, 33, 63, 64, 65, 66, 100, 129, 300])
    kind = rng.randrange(4)
    if kind == 0:
        return "".join(rng.choice("abcdefghij") for _ in range(n))
    if kind == 1:
        return "é" * (n // 2)  # two bytes each: around the limit in bytes, not characters
    if kind == 2:
        return "_".join(
            "".join(rng.choice("abcXYZ") for _ in range(rng.randint(1, 40))) for _ in range(3)
        )
    return "Camel" * (n // 5) + "Tail"


def build_corpus(seed: int, n_texts: int = 60) -> list[str]:
    """Texts mixing every kind of token the splitter treats apart."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(n_texts):
        lines: list[str] = []
        for _ in range(rng.randint(1, 40)):
            kind = rng.randrange(10)
            if kind == 0:
                raw = rng.randbytes(rng.randint(20, 200))
                line = base64.b64encode(raw).decode()
            elif kind == 1:
                line = (
                    base64.b64encode(rng.randbytes(90)).decode().replace("/", "").replace("+", "")
                )
            elif kind == 2:
                line = "def " + rng.choice(_ASCII) + "(self, " + rng.choice(_SCRIPTS) + "):"
            else:
                parts = []
                for _ in range(rng.randint(1, 12)):
                    pick = rng.randrange(10)
                    if pick < 4:
                        parts.append(rng.choice(_ASCII))
                    elif pick < 6:
                        parts.append(rng.choice(_SCRIPTS))
                    elif pick < 7:
                        parts.append(_long(rng))
                    elif pick < 8:
                        parts.append(
                            rng.choice(_ASCII) + rng.choice(["_", "-", ""]) + rng.choice(_SCRIPTS)
                        )
                    else:
                        parts.append(
                            "".join(rng.choice("aZ_-9é") for _ in range(rng.randint(1, 8)))
                        )
                    parts.append(rng.choice(_PUNCT))
                line = "".join(parts)
            lines.append(line)
        texts.append("\n".join(lines) + rng.choice(["", "\n"]))
    return texts


@pytest.mark.parametrize("seed", range(6))
def test_words_and_counts_equal_the_reference(seed: int) -> None:
    W.clear_memo()
    corpus = build_corpus(seed)
    for _ in range(2):  # the first pass fills the memo, the second reads it
        for text in corpus:
            expected = reference_words(text)
            assert W.words(text) == expected
            assert W.word_counts(text) == dict(Counter(expected))


def test_each_run_the_table_expands_gives_the_reference_words() -> None:
    W.clear_memo()
    table = W.word_table()
    runs = {run for text in build_corpus(99, 40) for run in W.runs(text)}
    for run in sorted(runs):
        got = [table.words[i] for i in table.ids(table[run])]
        assert got == reference_words(run.decode("utf-8", "surrogatepass")), run


PATHS = [
    pytest.param(False, id="python"),
    pytest.param(
        True,
        id="native",
        marks=pytest.mark.skipif(not A.NATIVE, reason="the compiled pass was not built"),
    ),
]


@pytest.mark.parametrize("native", PATHS)
@pytest.mark.parametrize("seed", range(3))
def test_analyze_counts_equal_the_reference_per_chunk(seed: int, native: bool) -> None:
    W.clear_memo()
    for text in build_corpus(1000 + seed, 20):
        record = A._analyze(text, native=native)
        spans = chunk_spans(split_lines(text))
        lines = split_lines(_analyzed(text))
        assert record.n_chunks == len(spans)
        for i, (lo, hi) in enumerate(spans):
            body = Counter(reference_words("\n".join(lines[lo:hi])))
            first = Counter(reference_words(lines[lo]))
            want = {w: (n, first.get(w, 0)) for w, n in body.items()}
            # a chunk's definition terms (DEFINED + a word of a name it defines) are the ranking's
            # own, held by tests/test_ranking.py; the words are the splitter's
            got = {w: c for w, c in record.chunk_words(i).items() if not w.startswith(DEFINED)}
            assert got == want


def _encoded(record: A.FileRecord) -> bytes:
    return msgpack.packb(record.to_obj())


native_only = pytest.mark.skipif(not A.NATIVE, reason="the compiled pass was not built")


@native_only
@pytest.mark.parametrize("seed", range(4))
def test_both_paths_give_the_same_records(seed: int) -> None:
    corpus = build_corpus(2000 + seed, 30)
    # Each path with a memo of its own, cold then warm, and both sharing one table in turns.
    W.clear_memo()
    native = [_encoded(A._analyze(t, native=True)) for t in corpus * 2]
    W.clear_memo()
    python = [_encoded(A._analyze(t, native=False)) for t in corpus * 2]
    assert native == python
    W.clear_memo()
    for i, text in enumerate(corpus):
        first, second = (True, False) if i % 2 else (False, True)
        assert _encoded(A._analyze(text, native=first)) == _encoded(A._analyze(text, native=second))


@native_only
def test_both_paths_agree_on_edge_texts() -> None:
    texts = [
        "",
        "\n",
        "\n\n\n",
        "x",
        "__ -- __\n",
        "no newline at the end",
        "a" * 129 + " " + "a" * 129 + "\n" + "b" * 64 + " " + "b" * 65,  # runs the memo keeps not
        "\t\r\x0b\x0c word\x0bnext\rline\n",
        "def f():\n    return g\n" * 200,  # many chunks, definitions in several
        "é" * 40 + "-x " + "\u00a0".join(["Größe"] * 50),
        "\n".join(f"class Name{i}Thing(Base{i % 7}):" for i in range(400)),
        "word " * 10_000,
    ]
    W.clear_memo()
    for text in texts * 2:
        assert _encoded(A._analyze(text, native=True)) == _encoded(A._analyze(text, native=False))
        assert A._analyze(text, native=True) == A._analyze(text, native=False)


@native_only
def test_the_memo_goes_with_its_table() -> None:
    W.clear_memo()
    table = W.word_table()
    assert table.native is None
    A.analyze("alpha beta_gamma DeltaEpsilon " + "z" * 200)
    memo = table.native
    assert memo is not None
    assert memo.size() == 3  # the run of 200 bytes is expanded each time, not kept
    A.analyze("alpha omega")
    assert memo.size() == 4
    W.clear_memo()
    assert W.word_table().native is None
    record = A.analyze("alpha omega")
    assert record.vocab == ("alpha", "omega")


def test_analyze_falls_back_to_python_without_the_compiled_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the extension absent (an install where nothing compiled it), the module imports,
    says so, and gives the same records."""
    name = "nodwyn_retrieval.retrieval._words_native"
    corpus = build_corpus(3000, 10)
    W.clear_memo()
    want = [_encoded(A.analyze(t)) for t in corpus]
    monkeypatch.setitem(sys.modules, name, None)  # an import of it now raises ImportError
    monkeypatch.delattr(sys.modules["nodwyn_retrieval.retrieval"], "_words_native", raising=False)
    spec = importlib.util.find_spec("nodwyn_retrieval.retrieval.analyze")
    assert spec is not None
    assert spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    assert fresh.NATIVE is False
    W.clear_memo()
    assert [_encoded(fresh.analyze(t)) for t in corpus] == want


@native_only
def test_the_compiled_line_filter_picks_the_lines_the_expression_finds() -> None:
    """The definitions' lines picked in C are the expression's (_DEFINITION_LINE), and with the
    refused first words every line a definition is on, so the rule finds the same ones."""
    from nodwyn_retrieval.retrieval import _words_native
    from nodwyn_retrieval.retrieval import chunks as C

    from tests.test_chunks import _line_of_pieces

    rng = random.Random(16)
    lines = [_line_of_pieces(rng) for _ in range(20_000)]
    lines += [line for text in build_corpus(4000, 30) for line in text.split("\n")]
    lines += ["", "\t", "f(", "f()", "f() ", "x(a) {", "a b(;)", "$(x) {", "9f()", "a(b) throws"]
    lines += ["a$ b(c)", "$a b(c)", " f(x)", "f$(x)", "f (x) {", "f$ (x) {", "a.b (c) {", "a*(b)",
              "a b(c) ;", "a b(;c) throws", "a b(c throws", "a b(c) \t", "a\tb(c),", "(x) {",
              "f() throws;", "a<b> c(d)\r", "a b(\u00e9)", "\u00e9 b(c)",
              "a b(c)\u00e9"]  # fmt: skip
    rng.shuffle(lines)
    kept = 0
    for start in range(0, len(lines), 400):
        for end in ("", "\n"):
            data = ("\n".join(lines[start : start + 400]) + end).encode()
            picked = (
                memoryview(_words_native.definition_lines(data, C._FIRST_WORDS_UTF8))
                .cast("q")
                .tolist()
            )
            want = [m.start() for m in C._DEFINITION_LINE.finditer(b"\n" + data)]
            assert picked == want
            # With the refused first words, fewer lines, still every line a definition is on.
            defined = {m.start() for m in C._DEFINITION.finditer(data)}
            got = C._definition_lines(data, native=True)
            assert defined <= set(got) <= set(want)
            assert C._definition_lines(data, native=False) == want  # the Python path's, whole
            assert C._definitions_utf8(data, native=True) == C._definitions_utf8(data, native=False)
            kept += len(want)
    assert kept > 5_000
    with pytest.raises(TypeError, match="non-empty bytes"):
        _words_native.definition_lines(b"x", (b"",))
    with pytest.raises(TypeError, match="not words are non-empty bytes"):
        _words_native.definition_lines(b"x", (b"def",), (b"if", b""))


@native_only
def test_a_line_whose_first_word_is_refused_is_not_a_definitions_line() -> None:
    """A line that begins (after its blanks) with a statement's word, as ``return f(x)`` or
    ``if (a) {``, is left out by the compiled filter; the same word inside a longer one, or
    after the first, is not refused, and what the lines define is the Python path's."""
    from nodwyn_retrieval.retrieval import _words_native
    from nodwyn_retrieval.retrieval import chunks as C

    def lines_of(data: bytes) -> list[int]:
        got = _words_native.definition_lines(data, C._FIRST_WORDS_UTF8, C._NOT_WORDS_UTF8)
        return memoryview(got).cast("q").tolist()

    for word in C._NOT_WORDS:
        refused = [f"{word} f(x)", f"  {word}(x) {{", f"\t{word} int g(a),", f"{word}$ h(y)"]
        kept = [f"{word}_x(y)", f"{word}9 k(y)", f"int {word}x(a)", f"  var_{word} m(b) {{"]
        data = "\n".join(refused + kept).encode() + b"\n"
        starts = [0]
        for line in refused + kept:
            starts.append(starts[-1] + len(line) + 1)
        assert lines_of(data) == starts[len(refused) : -1], word
        assert C._definitions_utf8(data, native=True) == C._definitions_utf8(data, native=False)
    # Without the third argument nothing is refused (the filter as it was).
    assert memoryview(_words_native.definition_lines(b"return f(x)\n", (b"def",))).cast(
        "q"
    ).tolist() == [0]


@pytest.mark.parametrize(("value", "native"), [("1", False), ("0", A.NATIVE), ("", A.NATIVE)])
def test_the_environment_can_turn_the_compiled_pass_off(value: str, native: bool) -> None:
    import os
    import subprocess

    code = (
        "from nodwyn_retrieval.retrieval import analyze as A, chunks as C;"
        "print(A.NATIVE, C._native_lines is not None)"
    )
    env = {**os.environ, "NODWYN_RETRIEVAL_PURE_PYTHON": value}
    got = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert got.stdout.split() == [str(native), str(native)]


def _runs_of_one_slot(count: int, slots: int = 1 << 16) -> list[str]:
    """Eight-letter runs whose hash in the compiled memo falls in one slot of its first table.

    The hash is written out again here (retrieval/_words_native.c, ``hash_bytes`` for a run of
    exactly 8 bytes), as the author of a hostile file can write it: if it no longer matches the C
    one, the runs scatter, every one is kept and the test below fails on the memo's size."""
    u = np.uint64
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    rng = np.random.default_rng(7)
    found: list[str] = []
    target = None
    with np.errstate(over="ignore"):
        while len(found) < count:
            runs = letters[rng.integers(0, 26, size=(1 << 20, 8))]
            h = u(0x9E3779B97F4A7C15) ^ (u(8) * u(0xC2B2AE3D27D4EB4F))
            h = (h ^ runs.view("<u8").reshape(-1)) * u(0xFF51AFD7ED558CCD)
            h ^= h >> u(32)
            h = h * u(0xC4CEB9FE1A85EC53)
            h ^= h >> u(29)
            h = h * u(0x9E3779B97F4A7C15)
            h ^= h >> u(32)
            slot = h & u(slots - 1)
            if target is None:
                target = slot[0]
            found += [bytes(r).decode() for r in runs[slot == target]]
    return sorted(set(found))[:count]


@native_only
def test_runs_made_to_share_a_slot_are_kept_near_it_only_and_give_the_same_words() -> None:
    """A file of many runs whose hash falls in one slot (the memo's hash is not keyed): the memo
    keeps the 32 it finds room for near that slot and looks for no run further, so a lookup never
    walks a long chain; the others are found in the word table, with the same words."""
    runs = _runs_of_one_slot(48)
    assert len(runs) == 48
    text = " ".join(runs) + "\n" + " ".join(reversed(runs)) + "\n"
    W.clear_memo()
    table = W.word_table()
    native = [_encoded(A._analyze(text, native=True)) for _ in range(2)]
    assert table.native is not None
    assert table.native.size() == 32
    W.clear_memo()
    python = [_encoded(A._analyze(text, native=False)) for _ in range(2)]
    assert native == python
    assert sorted(A._analyze(text, native=False).vocab) == runs
