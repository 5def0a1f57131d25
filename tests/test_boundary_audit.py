"""Bad input at the tools' boundary, beyond paths (test_boundary_paths): the person's recall, a
query of over-long words, Engine.open's own arguments and the command line's empty options. Each is
one clear error that loses nothing, never a raw Python exception. Through the library and the
command line's real process."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval import Engine

from tests.support import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"a.py": "def albatross():\n    return 1\n", "d/b.py": "def bittern():\n    pass\n"},
    )


def _one_line(text: str) -> None:
    assert "\n" not in text
    assert "Traceback" not in text
    assert len(text) < 400, text


# -- a query of words too long to be indexed -----------------------------------------------------


@pytest.mark.asyncio
async def test_a_query_of_only_over_long_words_says_why_it_has_none(
    repo: Path, tmp_path: Path
) -> None:
    # "has no words to search for" of a query holding a word (a hash, a long name) read as
    # though it were only punctuation: it is a word no index keeps, over 64 bytes.
    async with await Engine.open(
        repo, data_dir=tmp_path / "data", config_dir=tmp_path / "cfg"
    ) as engine:
        for query in ("x" * 65, "é" * 33, f"{'a1' * 40} -- {'b' * 70}"):
            out = await engine.call_tool("index-search", {"query": query, "scope": "repo"})
            assert out.is_error
            _one_line(out.text)
            assert "a word over 64 bytes (a hash, a minified line) is never indexed" in out.text
        # A word of 64 bytes is a word; punctuation alone keeps the plain message.
        out = await engine.call_tool("index-search", {"query": "x" * 64, "scope": "repo"})
        assert not out.is_error, out.text
        out = await engine.call_tool("index-search", {"query": "?!.,;", "scope": "repo"})
        assert out.text == "query '?!.,;' has no words to search for: give words or names"
