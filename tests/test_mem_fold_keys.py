"""The fold's words keyed once for the thread's word table (store.mem_fold._table_keys): logs
folded one after another, sharing the table, get the keys and postings each would get alone, and
a table replaced (retrieval.words.clear_memo) is keyed again."""

from __future__ import annotations

from pathlib import Path

from nodwyn_retrieval.retrieval.words import clear_memo, word_table
from nodwyn_retrieval.store.mem import LogView, postings_of
from nodwyn_retrieval.store.mem_fold import _table_keys, word_keys

from tests.test_earlier import read, write_task
from tests.test_mem import reference


def logs(d: Path) -> list[Path]:
    one = [("person.message", {"text": "Fix the credential binding"}), *read("func Bind(h)")]
    two = [("person.message", {"text": "Rename ScrubEnv_x and reproduce_bug"})]
    two += read("def scrub_env(): pass\nclass ScrubEnv: binding = 2", "env.py")
    three = [("person.message", {"text": "naïve café déjà-vu binding"})]
    return [
        write_task(d, "a", [one], day=1),
        write_task(d, "b", [two, one], day=2),
        write_task(d, "c", [three, two], day=3),
    ]


def folded(path: Path) -> tuple[dict[int, dict[int, int]], list[int]]:
    with LogView.open(path, write=False) as view:
        assert view.mem is not None
        return postings_of(view.mem), view.mem.lengths().tolist()


def test_logs_folded_in_a_row_get_what_each_gets_alone(tmp_path: Path) -> None:
    paths = logs(tmp_path / "tasks")
    clear_memo()
    in_a_row = [folded(p) for p in paths]
    for p, got in zip(paths, in_a_row, strict=True):
        clear_memo()
        assert folded(p) == got
        assert got == reference(p)


def test_a_replaced_table_is_keyed_again(tmp_path: Path) -> None:
    paths = logs(tmp_path / "tasks")
    clear_memo()
    folded(paths[0])
    old = word_table()
    assert _table_keys(old).tolist() == word_keys(old.words).tolist()
    clear_memo()  # a new table: its ids name other words
    folded(paths[2])
    new = word_table()
    assert new is not old
    assert _table_keys(new).tolist() == word_keys(new.words).tolist()
    assert folded(paths[1]) == reference(paths[1])
