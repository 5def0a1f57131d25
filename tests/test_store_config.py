"""store.config: the person's switches and settings (ADR 0050 §9, §10)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store.config import (
    Config,
    earlier_tasks,
    load_config,
    set_earlier_tasks,
    workspaces_error,
)

KEY = "my.repo-0123456789ab"


def test_earlier_tasks_are_off_without_a_file_or_an_entry(tmp_path: Path) -> None:
    assert earlier_tasks(tmp_path, KEY) is False
    assert workspaces_error(tmp_path, KEY) is None
    (tmp_path / "workspaces.toml").write_text('[projects."other-1"]\nearlier_tasks = true\n')
    assert earlier_tasks(tmp_path, KEY) is False
    assert earlier_tasks(tmp_path, "other-1") is True


def test_set_earlier_tasks_keeps_comments_layout_and_another_project(tmp_path: Path) -> None:
    original = (
        "# Which folders may search their earlier tasks.\n"
        "\n"
        '[projects."other-123"]   # the other checkout\n'
        "earlier_tasks = true\n"
        'root = "/home/me/other"  # keep this\n'
        "name = 'Other'\n"
        "\n"
        "# the end\n"
    )
    path = tmp_path / "workspaces.toml"
    path.write_text(original)
    set_earlier_tasks(tmp_path, KEY, True, root="/home/me/repo")
    text = path.read_text()
    assert text.startswith(original)
    assert f'[projects."{KEY}"]' in text
    assert earlier_tasks(tmp_path, KEY) is True
    assert earlier_tasks(tmp_path, "other-123") is True
    assert tomllib.loads(text)["projects"][KEY] == {
        "earlier_tasks": True,
        "root": "/home/me/repo",
    }

    set_earlier_tasks(tmp_path, KEY, False)
    assert earlier_tasks(tmp_path, KEY) is False
    assert tomllib.loads(path.read_text())["projects"][KEY]["root"] == "/home/me/repo"
    assert path.read_text().startswith(original)
    assert not list(tmp_path.glob(".*.tmp"))


def test_set_earlier_tasks_turns_off_an_entry_and_keeps_its_other_settings(tmp_path: Path) -> None:
    path = tmp_path / "workspaces.toml"
    path.write_text(f'[projects."{KEY}"]\nearlier_tasks = true # on\nmounts = ["a"]\n')
    set_earlier_tasks(tmp_path, KEY, False)
    assert path.read_text() == f'[projects."{KEY}"]\nearlier_tasks = false # on\nmounts = ["a"]\n'


def test_set_earlier_tasks_creates_the_file_and_its_directory(tmp_path: Path) -> None:
    config = tmp_path / "config"
    set_earlier_tasks(config, KEY, True)
    assert (config / "workspaces.toml").read_text() == (
        f'[projects."{KEY}"]\nearlier_tasks = true\n'
    )
    assert earlier_tasks(config, KEY) is True


def test_set_earlier_tasks_writes_into_an_inline_projects_table(tmp_path: Path) -> None:
    path = tmp_path / "workspaces.toml"
    path.write_text('projects = { "other-1" = { earlier_tasks = true } }\n')
    set_earlier_tasks(tmp_path, KEY, True)
    assert earlier_tasks(tmp_path, KEY) is True
    assert earlier_tasks(tmp_path, "other-1") is True


def test_a_malformed_workspaces_file_turns_earlier_tasks_off_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "workspaces.toml"
    path.write_text(f'[projects."{KEY}"]\nearlier_tasks = true\nbroken =\n')
    assert earlier_tasks(tmp_path, KEY) is False
    error = workspaces_error(tmp_path)
    assert error is not None
    assert error.startswith("workspaces.toml: ")
    assert "line 3" in error
    with pytest.raises(BadInput, match=r"workspaces.toml: .*; fix it or remove it$"):
        set_earlier_tasks(tmp_path, KEY, False)
    assert path.read_text().endswith("broken =\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("projects = 3\n", r"^workspaces.toml: projects must be a table, got 3$"),
        (
            f'[projects]\n"{KEY}" = "yes"\n',
            rf'^workspaces.toml: \[projects."{KEY}"\] must be a table$',
        ),
        (
            f'[projects."{KEY}"]\nearlier_tasks = "yes"\n',
            rf"^workspaces.toml: \[projects.\"{KEY}\"\] earlier_tasks must be true or false,"
            r" got 'yes'$",
        ),
    ],
)
def test_a_workspaces_entry_of_the_wrong_shape_is_off_and_explained(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "workspaces.toml").write_text(text)
    assert earlier_tasks(tmp_path, KEY) is False
    error = workspaces_error(tmp_path, KEY)
    assert error is not None
    assert re.match(message, error), error


def test_a_workspaces_file_that_is_not_utf8_is_off(tmp_path: Path) -> None:
    (tmp_path / "workspaces.toml").write_bytes(b"\xff\xfe")
    assert earlier_tasks(tmp_path, KEY) is False
    assert workspaces_error(tmp_path) == "workspaces.toml: not UTF-8 text"


def test_config_defaults_without_a_file_or_a_table(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()
    (tmp_path / "config.toml").write_text("[other]\nx = 1\n")
    config = load_config(tmp_path)
    assert config == Config(embed_server=None, embed_model=None, result_cap=16000, deny=())
    assert not config.embeddings


def test_config_reads_the_index_table(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "# mine\n"
        "[index]\n"
        'embed_server = "http://127.0.0.1:11434"\n'
        'embed_model = "qwen3-embedding:0.6b"\n'
        "result_cap = 24000\n"
        'deny = ["secrets/**", "*.pem"]\n'
    )
    config = load_config(tmp_path)
    assert config == Config(
        embed_server="http://127.0.0.1:11434",
        embed_model="qwen3-embedding:0.6b",
        result_cap=24000,
        deny=("secrets/**", "*.pem"),
    )
    assert config.embeddings


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'result_cap = "x"',
            r"^config\.toml: \[index\] result_cap must be an integer, got 'x'$",
        ),
        (
            "result_cap = true",
            r"^config\.toml: \[index\] result_cap must be an integer, got true$",
        ),
        (
            "result_cap = 1.5",
            r"^config\.toml: \[index\] result_cap must be an integer, got 1\.5$",
        ),
        (
            "result_cap = 10",
            r"^config\.toml: \[index\] result_cap must be between 1000 and 1000000, got 10$",
        ),
        (
            'deny = "secrets"',
            r"^config\.toml: \[index\] deny must be a list of strings, got 'secrets'$",
        ),
        (
            'deny = ["a", 3]',
            r"^config\.toml: \[index\] deny\[1\] must be a non-empty string, got 3$",
        ),
        (
            "embed_server = 3",
            r"^config\.toml: \[index\] embed_server must be a string, got 3$",
        ),
        (
            'embed_server = "http://x"',
            r"^config\.toml: \[index\] embed_model must be set with embed_server"
            r" \(§10: both, or neither\)$",
        ),
        (
            'embed_model = "m"',
            r"^config\.toml: \[index\] embed_server must be set with embed_model"
            r" \(§10: both, or neither\)$",
        ),
        (
            "result_caps = 3",
            r"^config\.toml: \[index\] has no setting 'result_caps'"
            r" \(known: deny, embed_model, embed_server, result_cap\)$",
        ),
    ],
)
def test_a_wrong_setting_is_named_exactly(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "config.toml").write_text(f"[index]\n{body}\n")
    with pytest.raises(BadInput, match=message):
        load_config(tmp_path)


def test_a_config_that_does_not_parse_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[index\n")
    with pytest.raises(BadInput, match=r"^config\.toml: .*line 1.*$"):
        load_config(tmp_path)
    (tmp_path / "config.toml").write_text("index = 3\n")
    with pytest.raises(BadInput, match=r"^config\.toml: index must be a table, got 3$"):
        load_config(tmp_path)
