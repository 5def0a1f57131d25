"""The fast paths of the splitter give exactly the words and counts of a plain reference of §6.

The word table (retrieval/words.py) takes shortcuts for the runs most text holds: a lowercase
ASCII word, a lowercase snake_case name, an ASCII token, and a memo of runs seen. The reference
here is the module docstring's rule written plainly (a regular expression over str, a loop over
characters for camel case, no bytes, no memo), so that any faster path, in Python or native code,
is held to it over a corpus the test builds: many scripts, camelCase, snake_case, dashes, long
runs, base64-ish lines, words around the 64-byte limit.
"""

from __future__ import annotations

import base64
import importlib
import random
import re
from collections import Counter

import pytest
from nodwyn_retrieval.retrieval import words as W
from nodwyn_retrieval.retrieval.analyze import analyze
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


@pytest.mark.parametrize("seed", range(3))
def test_analyze_counts_equal_the_reference_per_chunk(seed: int) -> None:
    W.clear_memo()
    for text in build_corpus(1000 + seed, 20):
        record = analyze(text)
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
