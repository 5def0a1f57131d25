"""store.config at its edges: the result cap's bounds, empty settings, what a message shows, and
the refusals of a workspaces file that cannot take an entry (ADR 0050 §9, §10)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput, StoreError
from nodwyn_retrieval.store.config import (
    Config,
    earlier_tasks,
    load_config,
    set_earlier_tasks,
    workspaces_error,
)

KEY = "my.repo-0123456789ab"


def write(tmp_path: Path, body: str) -> None:
    (tmp_path / "config.toml").write_text(f"[index]\n{body}\n")


@pytest.mark.parametrize("cap", [1_000, 1_001, 999_999, 1_000_000])
def test_a_result_cap_at_either_bound_is_taken(tmp_path: Path, cap: int) -> None:
    write(tmp_path, f"result_cap = {cap}")
    assert load_config(tmp_path).result_cap == cap


@pytest.mark.parametrize("cap", [999, 1_000_001, 0, -16_000])
def test_a_result_cap_past_either_bound_is_refused(tmp_path: Path, cap: int) -> None:
    write(tmp_path, f"result_cap = {cap}")
    with pytest.raises(
        BadInput,
        match=rf"^config\.toml: \[index\] result_cap must be between 1000 and 1000000, got {cap}$",
    ):
        load_config(tmp_path)


def test_the_default_result_cap_is_16000(tmp_path: Path) -> None:
    write(tmp_path, 'deny = ["*.key"]')
    config = load_config(tmp_path)
    assert config.result_cap == 16_000
    assert config.deny == ("*.key",)


def test_empty_embedding_settings_are_off_not_half_set(tmp_path: Path) -> None:
    write(tmp_path, 'embed_server = ""\nembed_model = ""')
    config = load_config(tmp_path)
    assert (config.embed_server, config.embed_model) == (None, None)
    assert not config.embeddings
    write(tmp_path, 'embed_server = ""\nembed_model = "m"')
    with pytest.raises(BadInput, match=r"embed_server must be set with embed_model"):
        load_config(tmp_path)


def test_only_both_embedding_settings_turn_embeddings_on() -> None:
    config = Config(embed_server="http://x", embed_model="m")
    assert config.embeddings
    with pytest.raises(AttributeError):
        config.result_cap = 5  # type: ignore[misc]  settings are read, not changed
    assert not Config(embed_server="http://x").embeddings
    assert not Config(embed_model="m").embeddings


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('deny = [""]', r"^config\.toml: \[index\] deny\[0\] must be a non-empty string, got ''$"),
        (
            'deny = ["a", "b", false]',
            r"^config\.toml: \[index\] deny\[2\] must be a non-empty string, got false$",
        ),
        (
            "deny = { a = 1 }",
            r"^config\.toml: \[index\] deny must be a list of strings, got a table$",
        ),
        ("embed_model = true", r"^config\.toml: \[index\] embed_model must be a string, got true$"),
        (
            "result_cap = false",
            r"^config\.toml: \[index\] result_cap must be an integer, got false$",
        ),
        (
            "zeta = 1\nalpha = 2",
            r"^config\.toml: \[index\] has no setting 'alpha' \(known: .*\)$",
        ),
    ],
)
def test_a_wrong_setting_is_shown_as_the_person_wrote_it(
    tmp_path: Path, body: str, message: str
) -> None:
    write(tmp_path, body)
    with pytest.raises(BadInput, match=message):
        load_config(tmp_path)


def test_an_index_that_is_not_a_table_is_shown_as_written(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("index = true\n")
    with pytest.raises(BadInput, match=r"^config\.toml: index must be a table, got true$"):
        load_config(tmp_path)
    (tmp_path / "config.toml").write_bytes(b"[index]\nx = '\xff'\n")
    with pytest.raises(BadInput, match=r"^config\.toml: not UTF-8 text$"):
        load_config(tmp_path)


def test_a_config_that_is_a_directory_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(StoreError, match=r"^it is a directory reading .*config\.toml$"):
        load_config(tmp_path)


def test_a_workspaces_file_that_is_a_directory_is_off_and_said(tmp_path: Path) -> None:
    (tmp_path / "workspaces.toml").mkdir()
    assert earlier_tasks(tmp_path, KEY) is False
    error = workspaces_error(tmp_path, KEY)
    assert error is not None
    assert "workspaces.toml" in error


def test_an_entry_switched_on_is_on_for_that_key_only(tmp_path: Path) -> None:
    (tmp_path / "workspaces.toml").write_text(
        f'[projects."{KEY}"]\nearlier_tasks = true\n[projects."b"]\nearlier_tasks = false\n'
    )
    assert earlier_tasks(tmp_path, KEY) is True
    assert earlier_tasks(tmp_path, "b") is False
    assert workspaces_error(tmp_path, KEY) is None
    assert workspaces_error(tmp_path, "b") is None
    assert workspaces_error(tmp_path) is None
    (tmp_path / "workspaces.toml").write_text("projects = { }\n")
    assert earlier_tasks(tmp_path, KEY) is False


def test_a_workspaces_entry_of_a_table_shape_problem_is_said_only_for_its_key(
    tmp_path: Path,
) -> None:
    (tmp_path / "workspaces.toml").write_text('[projects]\n"b" = 3\n')
    assert workspaces_error(tmp_path, "b") == """workspaces.toml: [projects."b"] must be a table"""
    assert workspaces_error(tmp_path, KEY) is None
    assert workspaces_error(tmp_path) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("projects = 3\n", r"projects must be a table, got 3$"),
        ('projects = "x"\n', r"projects must be a table, got 'x'$"),
        (f'[projects]\n"{KEY}" = 1\n', rf'\[projects\."{KEY}"\] must be a table$'),
    ],
)
def test_setting_earlier_tasks_in_a_file_of_the_wrong_shape_is_refused_and_kept(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "workspaces.toml"
    path.write_text(text)
    with pytest.raises(BadInput, match=message):
        set_earlier_tasks(tmp_path, KEY, True)
    assert path.read_text() == text


def test_setting_earlier_tasks_in_a_file_that_is_not_utf8_is_refused_and_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "workspaces.toml"
    path.write_bytes(b"# \xff\n")
    with pytest.raises(BadInput, match=r"workspaces\.toml: not UTF-8 text; fix it or remove it$"):
        set_earlier_tasks(tmp_path, KEY, True)
    assert path.read_bytes() == b"# \xff\n"


def test_setting_earlier_tasks_without_a_root_adds_none(tmp_path: Path) -> None:
    set_earlier_tasks(tmp_path, KEY, True)
    set_earlier_tasks(tmp_path, KEY, True)
    text = (tmp_path / "workspaces.toml").read_text()
    assert "root" not in text
    assert text.count("earlier_tasks") == 1
