"""What a repository result shows (§7, retrieval/render.py): a long line cut and marked, counts
with their plurals, the lines holding the most of the query's words, in the file's order, and the
result's text."""

from __future__ import annotations

from nodwyn_retrieval.retrieval.render import (
    LINE_CHARS,
    RepoResult,
    best_lines,
    clip,
    plural,
    render_repo,
)


def test_a_line_is_cut_at_240_characters_and_marked_as_cut() -> None:
    assert LINE_CHARS == 240
    assert clip("x" * 240) == "x" * 240  # at the limit: shown whole, no mark
    cut = clip("x" * 239 + "yz")
    assert cut == "x" * 239 + "…"  # one past it: as long as the limit, the mark last
    assert len(cut) == 240
    assert clip("short") == "short"


def test_a_cut_is_never_longer_than_its_limit() -> None:
    assert clip("abcdef", 4) == "abc…"
    assert clip("abcdef", 1) == "…"
    assert clip("abcdef", 0) == "…"  # nothing left of the text but the mark
    assert clip("", 0) == ""
    assert clip("ab", 2) == "ab"


def test_counts_read_with_their_plural() -> None:
    assert plural(1, "file") == "1 file"
    assert plural(0, "file") == "0 files"
    assert plural(2, "file") == "2 files"
    assert plural(4298, "chunk") == "4,298 chunks"
    assert plural(1, "match", "matches") == "1 match"
    assert plural(3, "match", "matches") == "3 matches"


def numbered(*lines: str) -> list[tuple[int, str]]:
    return list(enumerate(lines, start=1))


def test_the_lines_with_the_most_distinct_query_words_are_shown_in_the_files_order() -> None:
    lines = numbered(
        "alpha only",  # 1 word
        "nothing here",
        "beta gamma together",  # 2
        "alpha beta gamma all three",  # 3
        "gamma gamma gamma gamma",  # 1 distinct word, however often
        "beta alone",  # 1
    )
    got = best_lines(lines, ["alpha", "beta", "gamma"], n=2)
    assert got == [(3, "beta gamma together"), (4, "alpha beta gamma all three")]


def test_three_lines_are_shown_unless_told_and_a_tie_goes_to_the_earlier_line() -> None:
    lines = numbered("one a", "two a", "three a", "four a", "five a b")
    # "five" holds both words and is first; the four that hold one tie, and the earlier win
    assert best_lines(lines, ["a", "b"]) == [(1, "one a"), (2, "two a"), (5, "five a b")]
    assert best_lines(lines, ["a", "b"], n=1) == [(5, "five a b")]
    assert best_lines(lines, ["a", "b"], n=0) == []


def test_a_line_holding_none_of_the_words_as_words_is_not_shown() -> None:
    # "parse" is inside "parser" and "sparse" as text, never as a word of those lines
    lines = numbered("the parser runs", "sparse matrix", "we parse it", "PARSE loudly")
    assert best_lines(lines, ["parse"]) == [(3, "we parse it"), (4, "PARSE loudly")]
    assert best_lines(lines, ["absent"]) == []
    assert best_lines([], ["parse"]) == []


def test_a_name_s_parts_are_its_words_when_a_line_is_chosen() -> None:
    lines = numbered("def load_config(path):", "config = {}", "unrelated = 1")
    assert best_lines(lines, ["load", "config"], n=1) == [(1, "def load_config(path):")]


def test_a_line_is_matched_on_its_first_4096_characters() -> None:
    pad = "z" * 4090 + " "  # 4,091 characters of one long word and a space
    ends_at_the_bound = pad + "needl" + " tail"  # "needl" ends at character 4,096
    begins_at_the_bound = pad + "abcd" + " q tail"  # "q" begins at character 4,096
    lines = numbered(ends_at_the_bound, begins_at_the_bound)
    assert best_lines(lines, ["needl"]) == [(1, ends_at_the_bound)]
    assert best_lines(lines, ["q"]) == []
    # the line itself is kept whole: the result cuts it where it shows it
    assert best_lines(lines, ["needl", "q"])[0][1] == ends_at_the_bound


def test_a_result_shows_its_place_its_first_line_and_its_best_lines() -> None:
    results = [
        RepoResult(
            path="src/app.py",
            start=10,
            end=29,
            first_line="    def load_config(path):   ",
            lines=((12, "    config = read(path)"), (20, "x" * 300)),
            score=4.5,
        ),
        RepoResult(path="README.md", start=1, end=5, first_line="y" * 300, lines=(), score=1.0),
    ]
    got = render_repo("2 results", results).split("\n")
    assert got == [
        "2 results",
        "src/app.py:10-29: def load_config(path):",
        "  12:     config = read(path)",
        "  20: " + "x" * 239 + "…",
        "README.md:1-5: " + "y" * 239 + "…",
    ]
    assert render_repo("no results", []) == "no results"
