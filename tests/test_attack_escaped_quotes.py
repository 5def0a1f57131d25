"""Credentials whose quotes are escaped, because the text holding them is itself inside a string.

A notebook's cell is a JSON list of strings (``"db_password = \\"...\\"\\n"``), a package.json
script a JSON string, and a session log records each call's arguments as JSON: a shell command
``export DB_PASSWORD="..."`` is logged as ``"export DB_PASSWORD=\\"...\\""``. The assignment rule
read a value starting with a backslash as code and left it, and the commands' rules (a registry
login's ``-p``, mysql's glued ``-p``, sshpass, SQL's ``PASSWORD '...'``) stopped at the
backslash; a ``printf`` writing a netrc, escaped once more, and a Dockerfile's ``ENV`` line in a
JSON string were missed too. Each is checked on ``redact()``, in a notebook indexed and searched
through the Engine, and in a session log searched and recalled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import redact
from nodwyn_retrieval.store.mem import mem_path

from tests._hostile import chunk_words
from tests.support import Log, make_repo
from tests.test_conversation import recall, search

# (a command or a line of code, the credential in it, its kind)
COMMANDS = [
    ('export DB_PASSWORD="Qm4tRz8Wvk"', "Qm4tRz8Wvk", "password"),
    ("API_TOKEN='Jx5pLc7Nbq2Hs9Df' ./deploy.sh", "Jx5pLc7Nbq2Hs9Df", "token"),
    ('mysql -u root -p"Vb6nKq3Zxw" shop', "Vb6nKq3Zxw", "password"),
    ('docker login -u ci -p "Tg2hWm9Rjc" registry.example.com', "Tg2hWm9Rjc", "password"),
    ('sshpass -p "Lp8dXs4Fqn" ssh deploy@host', "Lp8dXs4Fqn", "password"),
    ("psql -c \"ALTER ROLE app PASSWORD 'Hy3kNv7Bmt'\"", "Hy3kNv7Bmt", "password"),
    ('deploy --password "Wr5cJt2Gzp" --env prod', "Wr5cJt2Gzp", "password"),
    ('{"client_secret": "Ke9sPb4Xdq6Nm2Vh"}', "Ke9sPb4Xdq6Nm2Vh", "secret"),
    ('printf "machine h\\nlogin ci\\npassword Zs7gQw3Ncr\\n" > ~/.netrc', "Zs7gQw3Ncr", "password"),
    ("ENV DB_PASSWORD Fd4mYx8Tkb\nRUN make", "Fd4mYx8Tkb", "password"),
]


def escaped(text: str) -> str:
    """text as a JSON string holds it: its quotes escaped, its lines as "\\n"."""
    return json.dumps(text)


@pytest.mark.parametrize(("line", "secret", "kind"), COMMANDS)
def test_a_credential_is_redacted_with_its_quotes_escaped(
    line: str, secret: str, kind: str
) -> None:
    assert secret not in redact(line).text  # as it was: unescaped
    for text in (escaped(line), json.dumps({"cmd": line}), json.dumps([line + "\n"], indent=1)):
        out = redact(text)
        assert secret not in out.text, out.text
        assert kind in out.kinds, out
        assert out.text.count("\n") == text.count("\n")
        assert redact(out.text).text == out.text  # idempotent
        json.loads(out.text)  # the JSON stays JSON


@pytest.mark.parametrize(
    "line",
    [
        'print("password: " + pw)',
        'token = "token"',
        '{"token": "${TOKEN}"}',
        'echo "$DB_PASSWORD"',
        'export DB_PASSWORD=""',
        'mysql -u root -p"$MYSQL_PWD" shop',
        'docker login -u ci -p "$REGISTRY_PASSWORD" registry.example.com',
        'raise ValueError("password is required")',
        'msg = "password=\\"" + pw + "\\""',
        'log.info("token %s", "refreshed")',
    ],
)
def test_what_is_no_credential_is_left_with_its_quotes_escaped(line: str) -> None:
    for text in (line, escaped(line), json.dumps({"cmd": line})):
        assert redact(text).count == 0, (text, redact(text))


def _notebook(lines: list[str]) -> str:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": lines}
    return json.dumps({"cells": [cell], "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


@pytest.mark.asyncio
async def test_a_notebook_s_credentials_are_neither_indexed_nor_shown(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    source = [
        "import psycopg\n",
        "# ocelot warehouse connection\n",
        'db_password = "Qm4tRz8Wvk"\n',
        "conn = psycopg.connect(host='db', password=db_password)\n",
        '!mysql -u root -p"Vb6nKq3Zxw" -e "select 1"\n',
    ]
    package = json.dumps(
        {"name": "shop", "scripts": {"seed": 'API_TOKEN="Jx5pLc7Nbq2Hs9Df" node seed.js'}}
    )
    files = {"notebooks/warehouse.ipynb": _notebook(source), "package.json": package + "\n"}
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        around = await engine.index_search("ocelot warehouse connection psycopg", "repo")
        seed = await engine.index_search("scripts seed node", "repo")
        for query in ("Qm4tRz8Wvk", "Vb6nKq3Zxw", "Jx5pLc7Nbq2Hs9Df"):
            out = await engine.index_search(query, "repo")
            assert out.hits == [], (query, out.text)
    assert "notebooks/warehouse.ipynb" in {h["path"] for h in around.hits}
    assert "package.json" in {h["path"] for h in seed.hits}
    words = chunk_words(dirs[0])
    for secret in ("Qm4tRz8Wvk", "Vb6nKq3Zxw", "Jx5pLc7Nbq2Hs9Df"):
        assert secret not in around.text + seed.text
        assert not any(secret.lower() in w.lower() for w in words), secret


@pytest.mark.asyncio
async def test_a_logged_command_s_credentials_reach_no_result_recall_or_mem(
    tmp_path: Path,
) -> None:
    log = Log(tmp_path / "task.jsonl")
    log.add("person.message", text="Deploy the heron release")
    seqs = []
    for line, _, _ in COMMANDS:
        reply, result = log.call("shell", "done", cmd=f"{line}  # heron release step")
        seqs += [reply, result]
    log.end_turn()
    out = await search(log.path, "heron release step")
    assert out.hits
    shown = out.text + json.dumps(out.hits)
    for seq in seqs:
        shown += (await recall(log.path, seq)).text
    assert "[REDACTED:password]" in shown
    mem = mem_path(log.path).read_bytes()
    for _, secret, _ in COMMANDS:
        assert secret not in shown, secret
        assert secret.encode() not in mem, secret
        assert (await search(log.path, secret)).hits == [], secret
