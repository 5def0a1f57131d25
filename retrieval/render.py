"""What a search shows: the lines holding the most matched words, and the text read (§7).

Pure functions: the caller reads the lines (from the file now, or from the log) and passes them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodwyn_retrieval.retrieval.words import words

__all__ = ["LINE_CHARS", "RepoResult", "best_lines", "clip", "plural", "render_repo"]

# A line shown in a result is cut here: a minified line must not fill the window.
LINE_CHARS = 240


def clip(text: str, limit: int = LINE_CHARS) -> str:
    """The text cut to limit characters, marked when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 file', '2 files', '4,298 chunks'."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def best_lines(
    numbered: Iterable[tuple[int, str]], query_words: Sequence[str], n: int = 3
) -> list[tuple[int, str]]:
    """The n lines that hold the most distinct query words, in their order in the text.

    A tie goes to the earlier line. Lines that hold none are not shown.
    """
    wanted = set(query_words)
    # Every ASCII word of a line is a piece of its lowercased text: a line that holds none of the
    # query's words as text cannot hold them as words, and is not split. Not so for every other
    # word: "ΑΣ" alone is "ας", but "ΑΣ.ΒΑ" lowercases to "ασ.βα" (a final sigma).
    ascii = all(w.isascii() for w in wanted)
    scored: list[tuple[int, int, str]] = []
    for num, text in numbered:
        head = text[:4096]
        if ascii and not any(w in head.lower() for w in wanted):
            continue
        hit = len(wanted.intersection(words(head)))
        if hit:
            scored.append((hit, num, text))
    scored.sort(key=lambda t: (-t[0], t[1]))
    chosen = sorted(scored[:n], key=lambda t: t[1])
    return [(num, text) for _, num, text in chosen]


@dataclass(frozen=True, slots=True)
class RepoResult:
    """One repository result as shown."""

    path: str
    """The file, relative to the root."""
    start: int
    """The chunk's first line, 1-based."""
    end: int
    """The chunk's last line, inclusive."""
    first_line: str
    """The chunk's first line as the file holds it now, redacted."""
    lines: tuple[tuple[int, str], ...]
    """The lines holding the most matched words: (number in the file, text), redacted."""
    score: float
    """The BM25 score."""


def render_repo(header: str, results: Sequence[RepoResult]) -> str:
    """The header, then ``path:A-B: first line`` and the best lines of each result (§7)."""
    out = [header]
    for r in results:
        out.append(f"{r.path}:{r.start}-{r.end}: {clip(r.first_line.strip())}")
        out.extend(f"  {num}: {clip(text)}" for num, text in r.lines)
    return "\n".join(out)
