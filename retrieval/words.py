"""Words as code names them (ADR 0050 §6 and its amendment of 2026-10-16).

A *token* is a run of word characters (unicode ``\\w``) in which a single ``-`` may join two
runs; leading and trailing ``_`` and ``-`` are not part of it, and everything else (dots, slashes,
pluses, ``@``, a double dash, punctuation, spaces) separates tokens, so ``models.list`` is two
tokens and ``a--b`` (a dash in prose, an option) is two. A token gives, lowercased, without
repeats, in this order:

1. itself whole (``index-grep``, ``max_result_tokens``);
2. its parts, split on ``_`` and ``-`` (``index``, ``grep``), when there are two or more;
3. after each part, its camel-case pieces when there are two or more (``ScrubEnv`` → ``scrub``,
   ``env``; ``getHTTPServer`` → ``get``, ``http``, ``server``), the part itself joined
   (``scrubenv``) being the word of step 2, or of step 1 for a token of one part.

Each word a token gives counts once per occurrence of the token: ``ScrubEnv`` twice counts
``scrub`` twice, and ``foo_foo`` gives ``foo_foo`` and ``foo`` once each, so that a count is the
number of names that hold the word.

Camel case. A piece begins at an uppercase letter that follows a character that is not uppercase
(``scrubEnv``, ``base64Encode``), and at the last capital of a run of capitals followed by a
lowercase letter (``HTTPServer``, ``IOError``), unless that lowercase letter is a lone plural
``s`` (``getURLs`` → ``get``, ``urls``, not ``ur``, ``ls``). Digits never begin a piece, so they
stay attached to the letters before them (``sha256``, ``utf8``, ``v2``, ``x86``); a digit followed
by a lowercase letter is no boundary either, so a lowercase hex string stays whole. Casing is
unicode's (``ÜberCafé`` → ``über``, ``café``); a script without case (``変数名``) is one piece.

Long words (amendment 2026-10-16). A word over :data:`MAX_WORD_BYTES` bytes of UTF-8 is dropped,
and so are the camel-case pieces of a part that long: a minified bundle, a hash or a base64 line
held whole is a word no query is, and it made the index as large as the text. A base64 line with
slashes or pluses is cut at them into tokens of about 30 characters, which are kept and
camel-split like any other.

Single characters and numbers are words (``x``, the ``t`` of ``int32_t``, ``0``, ``404``): a query
goes through the same function, so a one-letter name, a language called ``C`` or a status code
can still be found; BM25's inverse document frequency weighs the common ones down, and there are
few distinct ones to store.

No normalisation beyond ``str.lower()``: not case folding (the ADR says lowercased, and ``größe``
stays ``größe``), and not NFC (a decomposed accent is not a word character and splits the token,
as it splits the name for any tool that reads the text).

Speed is the point: the first build of a repository is bound by this module and
:mod:`retrieval.analyze`. The tokens of a text are cut from its UTF-8 bytes by one
``bytes.translate`` and one ``bytes.split``, in C; each distinct *run* (a piece of the split) is
expanded once, through a bounded memo (:class:`WordTable`, one a thread), to ids in a table of
words shared by every text, so that counting and indexing are C-level maps and numpy operations
over ids rather than a Python loop over words. :func:`retrieval.analyze.analyze` does the split,
the lookups and the counting of a file in one compiled pass where the package was built with it
(``retrieval/_words_native.c``), which also expands an ASCII run seen for the first time by this
rule, written again in C and held to this module's (tests/test_words_native_rule.py); a run
that is not ASCII is expanded here, and every run on the pure-Python path.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import chain
from typing import TYPE_CHECKING

import Stemmer

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from nodwyn_retrieval.retrieval._words_native import Memo

    I64 = npt.NDArray[np.int64]

__all__ = [
    "IDENTIFIER_WEIGHT",
    "MAX_WORD_BYTES",
    "NO_WORDS",
    "QUERY_STOP_WORDS",
    "WORDS_VERSION",
    "WordTable",
    "clear_memo",
    "encode",
    "form_prefix",
    "query_words",
    "ranking_words",
    "run_counts",
    "runs",
    "stem",
    "translate",
    "weighted_query",
    "word_counts",
    "word_forms",
    "word_table",
    "words",
]

WORDS_VERSION: int = 1
"""Bumped whenever :func:`words` changes what it returns: it is part of the chunk store's key."""

MAX_WORD_BYTES = 64
"""Amendment 2026-10-16: a longer word (UTF-8 bytes) is dropped, and the pieces of a longer part."""

# Runs of word characters joined by single dashes. "_" is a word character, so a snake_case name
# is one match; leading or trailing "_" (and a "-" after one, as in "_-x") are stripped in _expand.
_TOKEN = re.compile(r"\w+(?:-\w+)*")
_find_tokens = _TOKEN.findall

# Tokens are found in the UTF-8 bytes of the text: one bytes.translate turns every ASCII byte that
# cannot be in a token into a space, and bytes.split() cuts at spaces and newlines, both in C (a
# regular expression over str is several times slower). An ASCII \w is exactly [A-Za-z0-9_], so a
# run of only those bytes is one token as _TOKEN finds it. A run holding a "-" or a byte of a
# non-ASCII character (\w or not: "é", "“", a no-break space) goes through _TOKEN once, decoded,
# when it is first expanded; a run never splits a character, whose bytes are all 0x80 or above.
# "\n" is kept, so that the lines of the translated bytes are the lines of the text.
_TOKEN_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-\n")
_TRANSLATE = bytes(b if b in _TOKEN_BYTES or b >= 0x80 else 0x20 for b in range(256))

# A token's parts hold no "_" or "-": split on both at once.
_PARTS = re.compile(r"[-_]+")

# The camel-case pieces of the module docstring in an ASCII part (letters and digits only), found
# rather than split at (a split at lookarounds tries every position and is several times slower):
# capitals that end before a capital and a lowercase letter that is not a lone plural "s"; else
# capitals, if any, then lowercase letters and digits; else capitals. The tests hold it to the
# unicode rule of _unicode_camel on random ASCII parts.
_ASCII_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])(?![A-Z]s(?![a-z]))|[A-Z]*[a-z0-9]+|[A-Z]+")
_ascii_camel = _ASCII_CAMEL.findall

_MEMO_LIMIT = 200_000
"""Past this many runs, words or lists of words, a thread's next call starts a new table: a bound
on memory (tens of megabytes), not a size that matters for speed (sympy's 32 MB of text holds
129,000 distinct runs)."""
_MEMO_MAX_RUN = 128
"""Longer runs (a minified line, base64) are rare and expanded each time they occur, not kept."""


def _fits(word: str) -> bool:
    """Whether word is at most MAX_WORD_BYTES bytes of UTF-8, without encoding a short word."""
    n = len(word)
    if n <= MAX_WORD_BYTES // 4:
        return True
    if n > MAX_WORD_BYTES:
        return False
    return word.isascii() or len(word.encode("utf-8", "surrogatepass")) <= MAX_WORD_BYTES


def _unicode_camel(part: str) -> list[str]:
    """The camel-case pieces of a part that is not ASCII, by the rule of the module docstring."""
    pieces: list[str] = []
    begin = 0
    n = len(part)
    for i in range(1, n):
        if not part[i].isupper():
            continue
        if not part[i - 1].isupper() or (
            i + 1 < n
            and part[i + 1].islower()
            and not (part[i + 1] == "s" and (i + 2 == n or not part[i + 2].islower()))
        ):
            pieces.append(part[begin:i])
            begin = i
    pieces.append(part[begin:])
    return pieces


def _expand(token: str) -> tuple[str, ...]:
    """The distinct words one token gives, in order: whole, then each part and its pieces."""
    token = token.strip("-_")
    if not token:
        return ()
    if token.isascii():
        return _expand_ascii(token)
    whole = token.lower()
    out: dict[str, None] = {whole: None} if _fits(whole) else {}
    parts = _PARTS.split(token) if ("_" in token or "-" in token) else (token,)
    for part in parts:
        lowered = part.lower()
        if not _fits(lowered):
            continue  # the amendment: a part that long gives no pieces either
        out[lowered] = None
        pieces = _unicode_camel(part)
        if len(pieces) > 1:
            for piece in pieces:
                out[piece.lower()] = None
    return tuple(out)


def _expand_ascii(token: str) -> tuple[str, ...]:
    """_expand of an ASCII token without "_" or "-" at either end, with str methods for speed.

    In ASCII a character is a byte and lowercasing keeps every position, so the parts of the
    lowercased token are the lowercased parts, and a part with no capital is one piece.
    """
    whole = token.lower()
    if "_" not in token and "-" not in token:
        if len(token) > MAX_WORD_BYTES:
            return ()
        if token == whole:
            return (whole,)
        return tuple(dict.fromkeys([whole, *map(str.lower, _ascii_camel(token))]))
    out: dict[str, None] = {whole: None} if len(whole) <= MAX_WORD_BYTES else {}
    for part, lowered in zip(
        token.replace("-", "_").split("_"), whole.replace("-", "_").split("_"), strict=True
    ):
        if not part or len(part) > MAX_WORD_BYTES:
            continue  # between two joiners; or, the amendment, a part too long for its pieces
        out[lowered] = None
        if part != lowered:
            pieces = _ascii_camel(part)
            if len(pieces) > 1:
                for piece in pieces:
                    out[piece.lower()] = None
    return tuple(out)


def _expand_run(run: bytes) -> tuple[str, ...]:
    """The words of one run of translated bytes, in order, one token's words after another's."""
    # run.find, not "in": bytes.__contains__ tries its argument as an int first and formats the
    # TypeError it then drops, which was a tenth of the cost of a new run.
    if run.isascii() and run.find(b"-") < 0:
        # At most one token, whose "_" are at the run's ends or join parts (\w includes "_").
        token = run.decode("ascii").strip("_")
        return _expand_ascii(token) if token else ()
    found: list[str] = []
    for token in _find_tokens(run.decode("utf-8", "surrogatepass")):
        found.extend(_expand(token))
    return tuple(found)


NO_WORDS = -1
"""The code of a run that gives no word (``__``, a long hash)."""


def _room(array: I64, size: int) -> I64:
    """array, or a copy twice as long or more, with room for size entries."""
    if len(array) >= size:
        return array
    import numpy as np  # noqa: PLC0415  (the query side imports this module without numpy)

    grown = np.zeros(max(size, 2 * len(array), 1024), dtype=np.int64)
    grown[: len(array)] = array
    return grown


class WordTable(dict[bytes, int]):
    """The memo: each run seen → its *code*, with the words the codes refer to.

    A code is a word id (an index into :attr:`words`) for a run that gives one word, which is most
    runs; :data:`NO_WORDS` for a run that gives none; and ``-2 - k`` for a run whose words' ids
    are ``multi[k]``. A lookup of a run seen before is a dict lookup in C (``map(table.__getitem__,
    runs)``); a run not seen before is expanded by ``__missing__`` and kept, unless it is long.

    Each thread has its own table (:func:`word_table`), so the ids need no lock, and a table is
    replaced, not changed, when it passes its bound, so ids stay valid for the call that got them.
    """

    __slots__ = (
        "_flat",
        "_flat_count",
        "defined",
        "multi",
        "native",
        "word_id",
        "words",
    )

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        """Id → word."""
        self.word_id: dict[str, int] = {}
        """Word → id."""
        self.multi: list[tuple[int, ...]] = []
        """The word ids of the runs that give two or more words."""
        self.defined: dict[bytes, tuple[int, ...]] = {}
        """A defined name → the ids of its words' definition terms (retrieval.analyze)."""
        self.native: Memo | None = None
        """The compiled pass's own memo of this table's runs (retrieval.analyze), made at its first
        use, and dropped with it. It holds what this dict answered, and the runs the compiled
        pass's word rule expanded itself, which this dict does not hold (a lookup here expands
        such a run again, to the same word ids: the words and their numbering are this
        table's)."""
        self._flat: tuple[I64, I64, I64] | None = None
        """multi as arrays (start, size, flat), with room to grow: see multi_arrays()."""
        self._flat_count = 0

    def __missing__(self, run: bytes) -> int:
        words = self.words
        word_id = self.word_id
        if run.isalnum() and (run.islower() or run.isdigit()) and len(run) <= MAX_WORD_BYTES:
            # One lowercase ASCII word, most new runs: _expand_run's result, inline.
            word = run.decode("ascii")
            code = word_id.get(word, -1)
            if code < 0:
                code = word_id[word] = len(words)
                words.append(word)
        else:
            found: Iterable[str]
            if run.isascii() and run.islower() and run.find(b"-") < 0:
                # snake_case without a capital, the next most common: _expand_ascii's words,
                # whole then parts, with no camel-case pieces to find.
                token = run.decode("ascii").strip("_")
                found = dict.fromkeys((token, *token.split("_")))
                found.pop("", None)
                if len(token) > MAX_WORD_BYTES:  # then a part may be too long as well
                    found = [w for w in found if len(w) <= MAX_WORD_BYTES]
            else:
                found = _expand_run(run)
            ids: list[int] = []
            for word in found:
                i = word_id.get(word, -1)
                if i < 0:
                    i = word_id[word] = len(words)
                    words.append(word)
                ids.append(i)
            if len(ids) == 1:
                code = ids[0]
            elif not ids:
                code = NO_WORDS
            else:
                code = -2 - len(self.multi)
                self.multi.append(tuple(ids))
        if len(run) <= _MEMO_MAX_RUN:
            self[run] = code
        return code

    def multi_arrays(self) -> tuple[I64, I64, I64]:
        """:attr:`multi` as arrays ``(start, size, flat)``: ``multi[k]`` is
        ``flat[start[k] : start[k] + size[k]]``. Extended with what was added since the last call
        (tuples are only ever appended), so that analyze() reads several-word runs by indexing."""
        import numpy as np  # noqa: PLC0415  (the query side imports this module without numpy)

        if self._flat is None:
            none = np.zeros(0, dtype=np.int64)
            self._flat = (none, none, none)
        start, size, flat = self._flat
        done, total = self._flat_count, len(self.multi)
        if done < total:
            new = self.multi[done:]
            sizes = np.fromiter(map(len, new), dtype=np.int64, count=len(new))
            ids = np.fromiter(chain.from_iterable(new), dtype=np.int64, count=int(sizes.sum()))
            used = int(start[done - 1] + size[done - 1]) if done else 0
            # Room doubles as it runs out, so that a build's calls copy each tuple O(1) times.
            start, size = _room(start, total), _room(size, total)
            flat = _room(flat, used + len(ids))
            start[done:total] = np.cumsum(sizes) - sizes + used
            size[done:total] = sizes
            flat[used : used + len(ids)] = ids
            self._flat = (start, size, flat)
            self._flat_count = total
        return start[:total], size[:total], flat

    def ids(self, code: int) -> tuple[int, ...]:
        """The word ids of a code."""
        if code >= 0:
            return (code,)
        return () if code == NO_WORDS else self.multi[-2 - code]

    @property
    def full(self) -> bool:
        """Whether the table has passed its bound and the next call should start a new one.

        The runs the compiled pass expanded are kept in its memo (:attr:`native`) rather than in
        this dict as well, so both are counted."""
        runs = len(self) if self.native is None else max(len(self), self.native.size())
        return max(runs, len(self.words), len(self.multi), len(self.defined)) > _MEMO_LIMIT


_local = threading.local()


def word_table() -> WordTable:
    """This thread's table, a new one if it had none or it has passed its bound.

    Call it once at the start of a call and use what it returns for the whole call.
    """
    table: WordTable | None = getattr(_local, "table", None)
    if table is None or table.full:
        table = _local.table = WordTable()
    return table


def clear_memo() -> None:
    """Forget this thread's memo, so that a benchmark measures a first build."""
    _local.table = WordTable()


def encode(text: str) -> bytes:
    """text as UTF-8; a lone surrogate (a decoded file never holds one) is kept, not an error."""
    return text.encode("utf-8", "surrogatepass")


def translate(data: bytes) -> bytes:
    """data with every ASCII byte that cannot be in a token made a space; lines stay lines."""
    return data.translate(_TRANSLATE)


def runs(text: str) -> list[bytes]:
    """The runs of text, in order: each holds one token, or a few (``a--b``), or none (``__``)."""
    return encode(text).translate(_TRANSLATE).split()


def words(text: str) -> list[str]:
    """Every word of text in order, with repeats, lowercased (§6)."""
    table = word_table()
    ids: list[int] = []
    for code in map(table.__getitem__, runs(text)):
        ids.extend(table.ids(code))
    return list(map(table.words.__getitem__, ids))


def word_counts(text: str) -> dict[str, int]:
    """Each distinct word of text and how many times it occurs: ``Counter(words(text))``, faster."""
    return run_counts(runs(text))


def run_counts(text_runs: list[bytes]) -> dict[str, int]:
    """Each distinct word of the runs (:func:`runs`) and how many times it occurs."""
    table = word_table()
    counted = Counter(text_runs)
    counts: dict[int, int] = {}
    get = counts.get
    for code, n in zip(map(table.__getitem__, counted), counted.values(), strict=True):
        if code >= 0:
            counts[code] = get(code, 0) + n
        else:
            for i in table.ids(code):
                counts[i] = get(i, 0) + n
    return dict(zip(map(table.words.__getitem__, counts), counts.values(), strict=True))


def query_words(text: str) -> list[str]:
    """The distinct words of a query, in order of first appearance."""
    return list(dict.fromkeys(words(text)))


QUERY_STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "in", "into", "is", "it", "its", "of", "on", "or", "the", "their", "them", "there", "these",
    "this", "to", "what", "when", "where", "which", "who", "why", "with",
))  # fmt: skip
"""English words a query asked in prose ("how are the routes registered") carries and a chunk of
code matches by chance. Dropped from a repository query only (the index keeps every word): on the
development set this moved file NDCG@10 from 0.791 to 0.811 and issue hit@10 from 7 to 8 of 9
(docs/quality.md)."""


def ranking_words(text: str) -> list[str]:
    """The words a repository search ranks by: the query's, less English stop words, unless the
    query is nothing but those."""
    found = query_words(text)
    kept = [w for w in found if w not in QUERY_STOP_WORDS]
    return kept or found


# -- word forms (light English stemming) ------------------------------------------------------

_stemmer = Stemmer.Stemmer("english")
_stem_memo: dict[str, str] = {}
_STEM_MIN = 4
"""Words shorter than this are their own stem (``env``, ``id``, ``os``)."""


def stem(word: str) -> str:
    """The English (Porter 2, Snowball's) stem of a lowercase word of letters, else the word.

    A name with digits, ``_`` or ``-`` (``sha256``, ``max_result_tokens``) and a short word are
    kept as they are: stemming is for the English words of prose and of names' parts.
    """
    got = _stem_memo.get(word)
    if got is not None:
        return got
    got = word if len(word) < _STEM_MIN or not word.isalpha() else _stemmer.stemWord(word)
    if len(_stem_memo) > _MEMO_LIMIT:
        _stem_memo.clear()
    _stem_memo[word] = got
    return got


# The endings a word's other forms may have after its stem: plurals, verb forms, common
# derivations. A candidate counts only when it has the same stem and the index holds it, so a
# long list costs lookups, never a wrong match.
_ENDINGS = (
    "", "s", "es", "e", "ed", "d", "ing", "er", "ers", "or", "ors", "ion", "ions", "ation",
    "ations", "ly", "al", "ment", "ments", "ness", "able", "ity", "ive", "ize", "izes", "ized",
    "izing", "ise", "ises", "ised", "ising", "ure", "ures",
)  # fmt: skip
_Y_ENDINGS = ("y", "ies", "ied", "ier", "iers")


def form_prefix(word: str) -> str:
    """What every form of word that has its stem begins with (the stem, less a final ``i`` that a
    ``y`` may stand for: ``librari`` for library, libraries)."""
    s = stem(word)
    return s[:-1] if s.endswith("i") else s


def word_forms(
    word: str,
    exists: Callable[[str], bool],
    known: Iterable[str] | None = None,
) -> list[str]:
    """The other forms of word that the index holds: those with its stem (``auditing`` ->
    ``audit``, ``audits``, ``audited``), not the word itself.

    The candidates are the usual English endings on the stem (a doubled last consonant too:
    ``run`` -> ``running``), kept when the index holds them: ``exists`` is asked of each, or,
    given ``known``, the index's words that begin with :func:`form_prefix` (a sorted vocabulary
    lists them in one search), they are looked up there.
    """
    s = stem(word)
    if s == word and (len(word) < _STEM_MIN or not word.isalpha()):
        return []
    if known is not None:
        exists = set(known).__contains__
    bases = [s]
    if s.endswith("i"):
        bases.append(s[:-1])
    cands: dict[str, None] = {}
    for b in bases:
        ends = _Y_ENDINGS if b is not s else _ENDINGS
        for e in ends:
            cands[b + e] = None
    if s and s[-1] not in "aeiouy":
        for e in ("ing", "ed", "er", "ers"):
            cands[s + s[-1] + e] = None
    cands.pop(word, None)
    return [c for c in cands if exists(c) and stem(c) == s]


# -- queries ------------------------------------------------------------------------------------

IDENTIFIER_WEIGHT = 3.0
"""How much more a word of a name the query writes as code counts than a word of its prose."""

# What a text writes as code: a name with "_" or an inner capital (ScrubEnv, getURL, not a
# capitalised first word), a dotted name or a path (models.list, src/app.py: each part begins with
# a letter or "_"), a name called (load_config()), anything between backticks, and the file and
# function of a traceback frame (File "x.py", line 3, in f).
_BACKTICKS = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_][\w-]*(?:[./][A-Za-z_][\w-]*)+")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")
_FRAME = re.compile(r"File \"([^\"\n]+)\", line \d+, in (\w+)")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_INNER = re.compile(r"[a-z0-9][A-Z]")


def identifiers(text: str) -> list[str]:
    """The pieces of text written as code (the rule above), in order of first appearance."""
    found: list[str] = []
    found += _BACKTICKS.findall(text)
    for path, func in _FRAME.findall(text):
        found += [path, func]
    found += [d for d in _DOTTED.findall(text) if max(map(len, re.split(r"[./]", d))) > 1]
    found += _CALLED.findall(text)
    for name in _NAME.findall(text):
        if "_" in name.strip("_") or _INNER.search(name):
            found.append(name)
    return list(dict.fromkeys(found))


def weighted_query(text: str, identifier_weight: float = IDENTIFIER_WEIGHT) -> dict[str, float]:
    """The words a repository search ranks by, each with its weight.

    The words are :func:`ranking_words`'s, the whole query's (never cut at a length). A word that
    the query writes as part of code (:func:`identifiers`) weighs ``identifier_weight``; a word of
    its prose alone weighs 1. A query that is all code or all prose weighs its words equally.
    """
    found = ranking_words(text)
    code = set(ranking_words(" ".join(identifiers(text)))) if identifier_weight != 1 else set()
    return {w: (identifier_weight if w in code else 1.0) for w in found}
