"""The ranking rules of a repository search (docs/quality.md), each pinned on a small real tree.

Each tree is a real git repository made here; the engine indexes it and answers the search as a
person's agent would call it. The fixtures are written so that plain chunk BM25 gets each one
wrong: the file a person means says the query's words less often than the files that use them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from nodwyn_retrieval import entry
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import CheckResult, Verdict
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.kinds import (
    file_kind,
    in_version,
    kinds_of,
    lifted_kinds,
    read_order,
    versions_named,
)
from nodwyn_retrieval.retrieval.tree import Ranking, TreeIndex, TreeSegment
from nodwyn_retrieval.retrieval.words import weighted_query

from tests.support import make_repo


async def search(root: Path, dirs: tuple[Path, Path], query: str, limit: int = 8) -> list[str]:
    """The paths of a search's results, in order, from a new engine on root."""
    async with await Engine.open(root, data_dir=dirs[0], config_dir=dirs[1], workers=1) as e:
        out = await e.index_search(query, "repo", limit=limit)
    return [h["path"] for h in out.hits]


def index_of(files: dict[str, str]) -> TreeIndex:
    """The index of files, built in memory as the indexer builds it."""
    return TreeIndex(
        TreeSegment.build((p, f"k{i}", analyze(t)) for i, (p, t) in enumerate(files.items()))
    )


# -- definitions and names ---------------------------------------------------------------------

PARSER = '''"""Reading the wire format."""

import struct


def parse_frame(data):
    """One frame of the stream: its kind and its payload."""
    kind, size = struct.unpack(">BI", data[:5])
    return kind, data[5 : 5 + size]


def frame_size(data):
    return struct.unpack(">I", data[1:5])[0]
'''

USER = """from wire.parser import parse_frame


def read_all(stream):
    frames = []
    for chunk in stream:
        kind, payload = parse_frame(chunk)
        frames.append(parse_frame(payload))
    return [parse_frame(f) for f in frames]
"""


@pytest.mark.asyncio
async def test_the_chunk_that_defines_a_name_comes_before_the_chunks_that_use_it(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files = {
        "wire/parser.py": PARSER,
        "wire/reader.py": USER,
        "wire/replay.py": USER.replace("read_all", "replay_all"),
    }
    root = make_repo(tmp_path / "r", files)
    got = await search(root, dirs, "parse_frame")
    assert got[0] == "wire/parser.py"
    assert set(got[1:3]) == {"wire/reader.py", "wire/replay.py"}


def test_a_definition_counts_in_the_language_s_own_line_rule() -> None:
    index = index_of(
        {
            "a.go": "package a\n\nfunc (s *Server) ServeConn(c Conn) error {\n\treturn nil\n}\n",
            "b.go": "package b\n\nfunc run() {\n\ts.ServeConn(c)\n\ts.ServeConn(d)\n}\n",
            "c.rs": "pub struct Sleeper {\n    at: u64,\n}\n",
            "d.rs": "fn f() {\n    let s = Sleeper::new();\n    Sleeper::wake(s);\n}\n",
        }
    )
    assert index.rank(weighted_query("ServeConn"), 2)[0].path == "a.go"
    assert index.rank(weighted_query("Sleeper"), 2)[0].path == "c.rs"
    # Without the definition terms the uses win: the rule is what decides.
    plain = Ranking(definition=0.0, name=0.0)
    assert index.rank(weighted_query("ServeConn"), 2, ranking=plain)[0].path == "b.go"


def test_the_file_named_after_a_query_word_comes_before_one_that_uses_it_often() -> None:
    uses = "    session.touch()\n" * 10
    index = index_of(
        {
            "pkg/sessions.py": 'class Store:\n    """Keeps a session between requests."""\n',
            "pkg/app.py": f"def handle(request, session):\n{uses}    return respond(request)\n",
            "pkg/other.py": "def respond(request, user):\n    return user\n",
        }
    )
    assert index.rank(weighted_query("session"), 2)[0].path == "pkg/sessions.py"


def test_the_results_show_the_best_chunks_of_more_files() -> None:
    big = "".join(
        f"def handler_{i}(request):\n    return route(request)\n\n" * 1 for i in range(200)
    )
    files = {"big.py": big, **{f"m{i}.py": "def route(request):\n    pass\n" for i in range(6)}}
    hits = index_of(files).rank(weighted_query("route request"), 8)
    # One chunk a file: seven files in the first seven results, the big file's best among them.
    assert len({h.path for h in hits[:7]}) == 7
    assert sum(1 for h in hits if h.path == "big.py") == 1
    # More chunks of a file when the ranking allows them, the second only near the best.
    two = index_of(files).rank(
        weighted_query("route request"), 8, ranking=Ranking(per_file=2, more=0.5)
    )
    assert sum(1 for h in two if h.path == "big.py") == 2


# -- priors from the path and the file's kind ------------------------------------------------------

CODE = (
    'def drop_first(items):\n    """Drop the oldest entry."""\n    del items[next(iter(items))]\n'
)
USES = (
    '    items = {"oldest": 1, "entry": 2}\n'
    "    drop_first(items)\n"
    '    assert "oldest" not in items\n'
)
TEST = "from store.cache import drop_first\n\n\ndef test_it():\n" + USES * 3
DOC = "# Eviction\n\nThe oldest entry is dropped first: evict removes the oldest entry.\n"
FILLER = {
    f"store/part{i}.py": f"def part_{i}(items):\n    return len(items) + {i}\n" for i in range(8)
}
NO_PRIORS = Ranking(priors={})


def first_file(index: TreeIndex, query: str, ranking: Ranking | None = None) -> str:
    return index.rank(weighted_query(query), 1, ranking=ranking or Ranking())[0].path


def test_code_comes_before_its_test_unless_the_query_names_tests() -> None:
    index = index_of({"store/cache.py": CODE, "tests/test_cache.py": TEST, **FILLER})
    # By its words alone the test matches better: the prior is what puts the code first.
    assert first_file(index, "the oldest entry", NO_PRIORS) == "tests/test_cache.py"
    assert first_file(index, "the oldest entry") == "store/cache.py"
    assert first_file(index, "tests of the oldest entry") == "tests/test_cache.py"


def test_code_comes_before_the_docs_unless_the_query_names_docs() -> None:
    code = CODE.replace("drop_first", "evict")
    index = index_of({"store/cache.py": code, "docs/eviction.md": DOC, **FILLER})
    assert first_file(index, "evict oldest entry", NO_PRIORS) == "docs/eviction.md"
    assert first_file(index, "evict oldest entry") == "store/cache.py"
    assert first_file(index, "docs: evict oldest entry") == "docs/eviction.md"


@pytest.mark.asyncio
async def test_a_search_puts_the_code_before_its_test_and_a_test_query_lifts_the_test(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files = {"store/cache.py": CODE, "tests/test_cache.py": TEST, **FILLER}
    root = make_repo(tmp_path / "r", files)
    assert (await search(root, dirs, "the oldest entry"))[0] == "store/cache.py"
    assert (await search(root, dirs, "tests of the oldest entry"))[0] == "tests/test_cache.py"


def test_a_file_s_kind_is_read_from_its_path() -> None:
    assert file_kind("src/pkg/app.py") == "code"
    assert file_kind("tests/test_app.py") == "test"
    assert file_kind("pkg/server_test.go") == "test"
    assert file_kind("src/button.spec.ts") == "test"
    assert file_kind("src/test/java/org/x/WidgetTest.java") == "test"
    assert file_kind("docs/usage.rst") == "doc"
    assert file_kind("README.md") == "doc"
    assert file_kind("examples/server.py") == "example"
    assert file_kind("CHANGES.rst") == "changelog"
    assert file_kind("docs/releases/2.1.txt") == "changelog"
    assert file_kind(".github/ISSUE_TEMPLATE/bug.md") == "meta"
    assert file_kind("ci/requirements/py311.yml") == "deps"
    assert file_kind("package-lock.json") == "deps"
    assert file_kind("third_party/zlib/inflate.c") == "vendored"
    assert file_kind("gen/api_pb2.py") == "generated"
    # Of sibling versioned directories the highest is the current code.
    kinds = kinds_of(["lib/v1/core.ts", "lib/v2/core.ts", "lib/v3/core.ts", "v1/solo.ts"])
    assert kinds == ["legacy", "legacy", "code", "code"]
    assert lifted_kinds(["testing"]) == {"test"}
    assert lifted_kinds(["auth"]) == set()
    assert versions_named(["v1", "parser", "v2x"]) == {"v1"}
    assert in_version("lib/v1/core.ts", frozenset({"v1"}))
    assert not in_version("lib/v2/core.ts", frozenset({"v1"}))
    # An issue-length query names kinds in passing: it lifts none.
    assert lifted_kinds(["test", *(f"w{i}" for i in range(20))]) == set()


# -- word forms ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_word_finds_its_other_forms_and_a_name_still_matches_whole(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    files = {
        "log/trail.py": "def record(entry):\n    # Keeps audits.\n    return entry\n",
        "env/scrub.py": "class ScrubEnv:\n    pass\n",
        "env/other.py": "def scrub(x):\n    return env(x)\n\n\ndef env(x):\n    return x\n",
    }
    root = make_repo(tmp_path / "r", files)
    assert await search(root, dirs, "auditing") == ["log/trail.py"]
    assert (await search(root, dirs, "ScrubEnv"))[0] == "env/scrub.py"


# -- long queries --------------------------------------------------------------------------------

ISSUE = """Loading a configuration file with a comment fails

When I load my settings the whole program stops. I expected the settings to be read and the
comment to be skipped, as the documentation says, but instead the program prints an error and
exits. This happens every time the file has a comment in it, and the error message does not say
which line is wrong, which makes it hard to find. Reading settings worked in the last release.

Traceback (most recent call last):
  File "app/main.py", line 12, in main
    settings = load_settings(path)
  File "conf/loader.py", line 30, in load_settings
    return parse_pairs(text)
ValueError: not enough values to unpack
"""


@pytest.mark.asyncio
async def test_a_long_issue_text_finds_the_file_its_traceback_names(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    prose = (
        "The settings of the program are read when it starts. A comment in the settings file"
        " is skipped. When the file is wrong the program prints an error and exits, and the"
        " error message says which line is wrong. Every release lists what changed.\n"
    )
    files = {
        "conf/loader.py": "def load_settings(path):\n    text = open(path).read()\n"
        "    return parse_pairs(text)\n\n\ndef parse_pairs(text):\n"
        "    return dict(line.split('=') for line in text.splitlines())\n",
        "app/main.py": "from conf.loader import load_settings\n\n\ndef main(path):\n"
        "    settings = load_settings(path)\n    return settings\n",
        "docs/settings.txt": prose * 3,
        "app/errors.py": "def report(error, line):\n    print('error in line', line, error)\n"
        "    raise SystemExit(1)\n",
    }
    root = make_repo(tmp_path / "r", files)
    got = await search(root, dirs, ISSUE)
    assert got[0] == "conf/loader.py"


def test_the_names_an_issue_writes_as_code_weigh_more_than_its_prose() -> None:
    q = weighted_query(ISSUE)
    assert q["load_settings"] > q["comment"]
    assert q["loader"] > q["file"]
    assert q["parse_pairs"] > q["program"]
    # The whole text is the query: its last words are there too.
    assert "unpack" in q
    # A query without code weighs its words alike.
    assert set(weighted_query("how are settings read").values()) == {1.0}


# -- the first search on a fresh tree -----------------------------------------------------------


def test_the_read_order_puts_matching_source_then_source_then_the_rest() -> None:
    paths = ["README.md", "a/alpha.py", "docs/widget.md", "tests/test_widget.py", "z/widget.py"]
    order = [paths[i] for i in read_order(paths, "widget colour")]
    assert order == [
        "z/widget.py",
        "a/alpha.py",
        "README.md",
        "docs/widget.md",
        "tests/test_widget.py",
    ]
    assert [paths[i] for i in read_order(paths, None)][:2] == ["a/alpha.py", "z/widget.py"]


@pytest.mark.asyncio
async def test_a_fresh_tree_too_big_for_the_bound_finds_its_target_on_the_first_search(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 60 files before the target in path order, each slow to read: the bound allows a few.
    files: dict[str, str | bytes] = {
        f"a{i:03}/notes.md": f"# Notes {i}\n\nNothing about the subject here.\n" for i in range(60)
    }
    files["zz/tokenizer.py"] = "def split_tokens(text):\n    return text.split()\n"
    root = make_repo(tmp_path / "r", files)

    async def slow(path: str, size: int) -> CheckResult:
        await asyncio.sleep(0.3)
        return CheckResult(Verdict.ALLOW)

    monkeypatch.setattr(entry, "SEARCH_SECONDS", 1.0)
    async with await Engine.open(
        root, data_dir=dirs[0], config_dir=dirs[1], workers=1, checkers=[slow]
    ) as engine:
        out = await engine.index_search("tokenizer split", "repo")
    assert out.header["partial"] is True
    assert out.header["not_read"] > 20
    assert out.hits[0]["path"] == "zz/tokenizer.py"
