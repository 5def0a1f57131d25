"""A tree's index: a base and a delta of changed files rank exactly as one index built afresh."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.analyze import analyze
from nodwyn_retrieval.retrieval.chunks import DEFINED
from nodwyn_retrieval.retrieval.tree import RANKING, Ranking, TreeIndex, TreeSegment
from nodwyn_retrieval.retrieval.words import stem

FILES = {
    "keychain/bind.go": "func Bind(host string) error {\n\treturn checkHost(host)\n}\n",
    "keychain/scrub.go": "func ScrubEnv(env []string) []string {\n\treturn env\n}\n",
    "docs/manual.md": (
        "# Keys\n\nA key is bound to a host.\n\n# Env\n\nThe environment is scrubbed.\n"
    ),
    "server/http.go": "func Serve(port int) {\n\tlisten(port)\n}\n",
}


def triples(files: dict[str, str]) -> list[tuple[str, str, object]]:
    return [(p, f"k-{p}-{hash(t)}", analyze(t)) for p, t in files.items()]


def ranked(
    index: TreeIndex, q: list[str], prefix: str | None = None
) -> list[tuple[str, int, float]]:
    return [(h.path, h.start, h.score) for h in index.search(q, 20, prefix)]


def fresh(files: dict[str, str]) -> TreeIndex:
    return TreeIndex(TreeSegment.build(triples(files)))  # type: ignore[arg-type]


QUERIES = [["host"], ["scrub", "env"], ["key", "bound", "host"], ["listen", "port"], ["nothing"]]


@pytest.mark.parametrize("q", QUERIES, ids="-".join)
def test_a_delta_of_changed_files_ranks_as_a_fresh_build(q: list[str]) -> None:
    index = fresh(FILES)
    changed = dict(FILES)
    changed["server/http.go"] = "func Serve(port int, host string) {\n\tlisten(host, port)\n}\n"
    changed["new/env.go"] = "func Env() map[string]string {\n\treturn scrub(os.Environ())\n}\n"
    del changed["docs/manual.md"]
    index.apply(
        {
            "server/http.go": ("k2", analyze(changed["server/http.go"])),
            "new/env.go": ("k3", analyze(changed["new/env.go"])),
            "docs/manual.md": None,
        }
    )
    assert index.dirty
    # Order of files differs (changed files sit in the delta); scores must not.
    assert sorted(ranked(index, q)) == sorted(ranked(fresh(changed), q))
    index.compact()
    assert not index.dirty
    assert sorted(ranked(index, q)) == sorted(ranked(fresh(changed), q))


def test_a_file_changed_twice_keeps_only_its_last_content() -> None:
    index = fresh(FILES)
    index.apply({"keychain/bind.go": ("a", analyze("func Bind() {\n\tzebra()\n}\n"))})
    index.apply({"keychain/bind.go": ("b", analyze("func Bind() {\n\tyak()\n}\n"))})
    assert ranked(index, ["zebra"]) == []
    assert [p for p, _, _ in ranked(index, ["yak"])] == ["keychain/bind.go"]
    assert index.files["keychain/bind.go"] == "b"


def test_a_removed_file_never_ranks_and_a_readded_one_does() -> None:
    index = fresh(FILES)
    index.apply({"server/http.go": None})
    assert ranked(index, ["listen"]) == []
    index.apply({"server/http.go": ("k", analyze(FILES["server/http.go"]))})
    assert [p for p, _, _ in ranked(index, ["listen"])] == ["server/http.go"]


def test_a_prefix_narrows_to_a_directory_or_a_file() -> None:
    index = fresh(FILES)
    assert {p for p, _, _ in ranked(index, ["host"], "keychain")} == {"keychain/bind.go"}
    assert {p for p, _, _ in ranked(index, ["host"], "docs/manual.md")} == {"docs/manual.md"}
    assert ranked(index, ["host"], "keychain/bi") == []


def test_the_path_and_first_line_weigh_three_times() -> None:
    # scrub in one file's name (3 in its chunk), in another's first line (3) and in a third's
    # second line (1): the first two tie, the third scores less. All three chunks have length
    # 3 (the first line's word) + 1 + 9 (the path's three words, three times each).
    index = fresh(
        {
            "a/other.txt": "x\nscrub\n",
            "a/scrub.txt": "x\ny\n",
            "a/first.txt": "scrub\ny\n",
        }
    )
    got = {p: s for p, _, s in ranked(index, ["scrub"])}
    assert got["a/scrub.txt"] == pytest.approx(got["a/first.txt"], rel=1e-12)
    # tf 3 against tf 1 at the average length (norm 1.2): 3 * 2.2 / 4.2 against 2.2 / 2.2.
    assert got["a/first.txt"] / got["a/other.txt"] == pytest.approx(6.6 / 4.2, rel=1e-12)


def test_a_tree_segment_round_trips_and_rejects_damage() -> None:
    seg = TreeSegment.build(triples(FILES))  # type: ignore[arg-type]
    back = TreeSegment.from_obj(seg.to_obj())
    assert back.files == seg.files
    assert back.keys == seg.keys
    assert np.array_equal(back.starts, seg.starts)
    assert ranked(TreeIndex(back), ["host"]) == ranked(TreeIndex(seg), ["host"])
    obj = seg.to_obj()
    obj["n_files"] = 99
    with pytest.raises(FormatError, match=r"^tree segment file table does not match: rebuild$"):
        TreeSegment.from_obj(obj)
    obj = seg.to_obj()
    obj["starts"] = obj["starts"][:-4]
    with pytest.raises(FormatError, match=r"^tree segment line table does not match: rebuild$"):
        TreeSegment.from_obj(obj)


def test_many_changes_are_merged_into_the_base() -> None:
    files = {f"f{i}.py": f"def f{i}():\n    return {i}\n" for i in range(50)}
    index = fresh(files)
    index.COMPACT_DOCS = 10  # type: ignore[misc]
    index.apply({f"f{i}.py": (f"n{i}", analyze(f"def g{i}():\n    pass\n")) for i in range(20)})
    assert not index.dirty
    assert len(index.base.files) == 50
    assert ranked(index, ["g3"])[0][0] == "f3.py"


def test_a_delta_kept_unmerged_ranks_as_a_merged_one() -> None:
    files = {f"f{i}.py": f"def f{i}():\n    return {i}\n" for i in range(50)}
    merged, kept = fresh(files), fresh(files)
    merged.COMPACT_DOCS = kept.COMPACT_DOCS = 10  # type: ignore[misc]
    changes = {f"f{i}.py": (f"n{i}", analyze(f"def g{i}():\n    pass\n")) for i in range(20)}
    merged.apply(changes)
    asked: list[int] = []
    kept.apply(changes, merge=lambda t: asked.append(t.delta.n_docs) is not None)
    assert asked == [20]
    assert not merged.dirty
    assert kept.dirty
    assert sorted(ranked(kept, ["g3", "f30"])) == sorted(ranked(merged, ["g3", "f30"]))


def test_a_copy_is_left_as_it_is_by_later_changes_to_the_index() -> None:
    # A merge is made on a copy in a thread while the index goes on changing: the copy must
    # rank as the index did when it was taken, before and after it is merged.
    index = fresh(FILES)
    index.apply({"server/http.go": ("k2", analyze("func Serve() {\n\tlisten(gopher)\n}\n"))})
    then = dict(FILES)
    then["server/http.go"] = "func Serve() {\n\tlisten(gopher)\n}\n"
    taken = copy.copy(index)
    index.apply(
        {
            "keychain/bind.go": None,
            "server/http.go": ("k3", analyze("func Serve() {\n\tlisten(marmot)\n}\n")),
            "new/env.go": ("k4", analyze("func Env() {\n\tscrub(host)\n}\n")),
        }
    )
    assert taken.files == fresh(FILES).files | {"server/http.go": "k2"}
    for q in [["host"], ["gopher"], ["marmot"], ["scrub", "env"]]:
        assert sorted(ranked(taken, q)) == sorted(ranked(fresh(then), q))
    assert taken.n_docs == fresh(then).n_docs
    taken.compact()
    assert not taken.dirty
    assert sorted(taken.base.files) == sorted(then)
    assert index.dirty  # merging the copy merged nothing of the index
    now = dict(FILES)
    del now["keychain/bind.go"]
    now["server/http.go"] = "func Serve() {\n\tlisten(marmot)\n}\n"
    now["new/env.go"] = "func Env() {\n\tscrub(host)\n}\n"
    for q in [["host"], ["gopher"], ["marmot"], ["scrub", "env"]]:
        assert sorted(ranked(index, q)) == sorted(ranked(fresh(now), q))
        assert sorted(ranked(taken, q)) == sorted(ranked(fresh(then), q))


def test_a_warmed_index_ranks_as_one_that_was_not() -> None:
    cold, warmed = fresh(FILES), fresh(FILES)
    warmed.warm()
    for q in QUERIES:
        assert ranked(warmed, q) == ranked(cold, q)
        assert [(h.path, h.start) for h in warmed.rank(dict.fromkeys(q, 1.0), 8)] == [
            (h.path, h.start) for h in cold.rank(dict.fromkeys(q, 1.0), 8)
        ]


def test_a_files_name_is_its_words_without_the_extension_and_a_dot_file_keeps_them_all() -> None:
    seg = fresh(
        {
            "app/sessions.py": "x = 1\n",
            "app/py_tools.txt": "y = 2\n",
            "conf/.env.local": "z = 3\n",
            "conf/README": "w = 4\n",
        }
    ).base

    def named(word: str) -> list[str]:
        return sorted(seg.files[int(i)] for i in seg.files_named(stem(word)))

    assert named("session") == ["app/sessions.py"]
    assert named("py") == ["app/py_tools.txt"]  # an extension is no word of the name
    assert named("txt") == []
    assert named("env") == named("local") == ["conf/.env.local"]
    assert named("readme") == ["conf/README"]
    assert named("nothing") == []


def test_the_ranking_a_search_uses_cannot_be_changed_by_a_caller() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RANKING.forms = 1.0  # type: ignore[misc]
    assert RANKING.forms == 0.5


def test_the_other_forms_of_a_word_with_a_short_stem_are_found_in_base_and_delta() -> None:
    # "tries" and "tried" stem to "tri", whose prefix ("tr", the "i" a "y" may stand for) is too
    # short to list the vocabulary by: each likely form is asked of both segments.
    index = fresh({"a.py": "x = tried\n", "c.py": "z = 1\n"})
    index.apply({"b.py": ("k2", analyze("y = tries\n"))})
    assert index.forms("tries") == ["tried"]  # the base holds it
    assert index.forms("tried") == ["tries"]  # the delta does
    assert sorted(index.forms("triing")) == ["tried", "tries"]
    assert {h.path for h in index.rank({"tries": 1.0}, 8)} == {"a.py", "b.py"}


def _function(name: str, returns: str) -> str:
    """A function long enough to be a chunk of its own."""
    body = "".join(f"    v{j} = {j}\n" for j in range(22))
    return f"def {name}():\n{body}    return {returns}\n\n\n"


def test_a_files_later_chunks_count_six_tenths_of_the_one_before() -> None:
    # a.py: two chunks holding otter once each; b.py: one chunk holding it 3 or 4 times. With the
    # second chunk weighing 0.6, a.py totals 1.6 times its chunk's score: between b.py's two.
    two = _function("alpha", "otter") + _function("beta", "otter")
    filler = {f"f{i}.py": _function("delta", "1") for i in range(6)}
    order = {}
    for k in (3, 4):
        one = _function("gamma", " + ".join(["otter"] * k))
        index = fresh({"a.py": two, "b.py": one, **filler})
        every = Ranking(per_file=10, more=0.0)
        hits = index.rank({"otter": 1.0}, 10, ranking=every)
        score = {(h.path, h.start): h.score for h in hits}
        assert score[("a.py", 1)] == pytest.approx(score[("a.py", 27)])
        order[k] = [p for p in index.rank_files({"otter": 1.0}, 10)[1] if p in ("a.py", "b.py")]
        total_a = score[("a.py", 1)] * 1.6
        assert (total_a > score[("b.py", 1)]) == (k == 3)
    assert order == {3: ["a.py", "b.py"], 4: ["b.py", "a.py"]}
    # More than one chunk a file shown, never past the limit.
    assert len(index.rank({"otter": 1.0}, 2, ranking=every)) == 2
    assert [h.path for h in index.rank({"otter": 1.0}, 1, ranking=every)] == ["b.py"]


@pytest.mark.parametrize("changed", [False, True], ids=["in-the-base", "in-the-delta"])
def test_a_query_naming_an_older_version_lifts_its_copy_to_the_codes_prior(changed: bool) -> None:
    handler = "def handle(request):\n    return route(request)\n"
    test = "def test_handle():\n    assert handle(request)\n"
    index = fresh(
        {
            "api/v1/handler.py": handler,  # legacy: v1 beside v2
            "api/v2/handler.py": handler,
            "api/v1/test_handler.py": test,  # a test, in v1 too: not lifted
            "api/v2/test_handler.py": test,
        }
    )
    if changed:
        index.apply({"api/v1/handler.py": ("k2", analyze(handler))})
    assert index.rank_files({"handle": 1.0}, 10)[1][0] == "api/v2/handler.py"
    # "v1" weighs little by its words; naming it lifts the older copy's prior from 0.5 to 1.
    assert index.rank_files({"v1": 0.05, "handle": 1.0}, 10)[1] == [
        "api/v1/handler.py",
        "api/v2/handler.py",
        "api/v1/test_handler.py",
        "api/v2/test_handler.py",
    ]


@pytest.mark.parametrize("changed", [False, True], ids=["in-the-base", "in-the-delta"])
def test_a_file_named_by_the_query_comes_first_wherever_it_is_held(changed: bool) -> None:
    # Both paths hold "sessions" (its words weigh three times in each); only one file's name
    # does, and that lifts it over the file whose text says it more often.
    named = "class Store:\n    keep(sessions)\n"
    other = "def respond(user):\n    return user\n"
    index = fresh(
        {
            "lib/sessions.py": named,
            "sessions/app.py": "def handle(request):\n" + "    sessions.touch()\n" * 5,
            "pkg/other.py": other,
        }
    )
    if changed:  # the named file second of the delta's
        index.apply(
            {"pkg/other.py": ("k2", analyze(other)), "lib/sessions.py": ("k3", analyze(named))}
        )
    assert index.rank_files({"sessions": 1.0}, 10)[1] == ["lib/sessions.py", "sessions/app.py"]
    # One result shown, and every matching file still listed in its rank order.
    hits, paths = index.rank_files({"sessions": 1.0}, 1)
    assert [h.path for h in hits] == ["lib/sessions.py"]
    assert paths == ["lib/sessions.py", "sessions/app.py"]
    assert [h.path for h in index.rank({"sessions": 1.0}, 1)] == ["lib/sessions.py"]
    plain = Ranking(name=0.0)
    assert index.rank_files({"sessions": 1.0}, 10, ranking=plain)[1][0] == "sessions/app.py"


def test_a_query_ranks_by_its_words_their_definitions_and_their_other_forms() -> None:
    # The weights docs/quality.md gives: a definition at 0.75 of its word, another form at 0.5.
    index = fresh({"a.py": "def parse():\n    return parsed + parses\n"})
    terms = index.expand({"parse": 2.0})
    d = DEFINED
    assert terms == {
        "parse": 2.0,
        d + "parse": 1.5,
        "parsed": 1.0,
        d + "parsed": 0.75,
        "parses": 1.0,
        d + "parses": 0.75,
    }
    assert index.expand({"parse": 2.0}, Ranking(definition=0.0, forms=0.0)) == {"parse": 2.0}
    # A term reached twice keeps its highest weight.
    assert index.expand({"parse": 1.0, "parsed": 4.0})["parsed"] == 4.0
    assert index.expand({"parse": 4.0, "parsed": 1.0})["parsed"] == 2.0
