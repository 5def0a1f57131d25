"""A YAML credential whose value is on the lines below its name, which the redaction left whole.

``password: |`` (or ``>``, ``|-``, ``>+``, ``|2``...) then the value on an indented line, as a
Helm values file or an Ansible variable holds a key or a token; and a plain value alone on the
next line, more indented (``password:`` then ``  value``). Each with its near misses: a mapping
or a list under the name, a passphrase or a document in the block, code (``if token:`` then
``continue``), references and placeholders. On ``redact()`` and through the Engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import redact

from tests._hostile import chunk_words
from tests.support import make_repo

# (a YAML document, the credential's characters that must go, its kind)
BLOCKS = [
    ("password: |\n  Wq9xZr4Tyv\n", "Wq9xZr4Tyv", "password"),
    ("db:\n  password: >-\n    Pk3mVz8Qtr\n  user: app\n", "Pk3mVz8Qtr", "password"),
    ("- name: smtp\n  password: |\n    Hs6dNw2Ybc\n", "Hs6dNw2Ybc", "password"),
    ("api_token: |+\n  Lr5tYv9BxcQa7Mn2\n  Gd4kWp8Zs\n\nnext: 1\n", "Lr5tYv9BxcQa7Mn2", "token"),
    ("api_token: |+\n  Lr5tYv9BxcQa7Mn2\n  Gd4kWp8Zs\n\nnext: 1\n", "Gd4kWp8Zs", "token"),
    ("secret: |2  # the signing secret\n    Jb7cXq3Rmw\n", "Jb7cXq3Rmw", "secret"),
    ("password:\n  Tn8wKc4Vzq\n", "Tn8wKc4Vzq", "password"),
    ("auth:\n  token:\n      Fv2hQm9Lxd6Ws3Ra\nnext: 1\n", "Fv2hQm9Lxd6Ws3Ra", "token"),
    ("password: |\r\n  Cy5pRt7Nwb\r\n", "Cy5pRt7Nwb", "password"),
]

LEFT = [
    "password:\n  min_length: 8\n  require_digit: true\n",
    "secrets:\n  - name: db\n",
    "password: |\n  correct horse battery staple\n",
    "credentials: |\n  [default]\n  region = eu-west-1\n",
    "password:\nnext: 1\n",
    "token: >\n  a folded description\n  over two lines\n",
    "password: |\n  {{ .Values.password }}\n",
    "password: |\n  changeme\n",
    "private_key: |\n  -----BEGIN PUBLIC KEY-----\n  MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIB\n"
    "  -----END PUBLIC KEY-----\n",
    "token:\n  # set by CI\n  value_from: env\n",
    "auth:\n  type: basic\n",
    "password:\n  Wq9xZr4Tyv\n  more\n",
    "if token:\n    continue\n",
    "if password:\n    break\n",
    "if not secret:\n    return None\n",
    "while token:\n    token = lexer.next()\n",
]


@pytest.mark.parametrize(("text", "secret", "kind"), BLOCKS)
def test_a_value_below_its_credential_s_name_is_redacted(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert secret not in out.text, out.text
    assert kind in out.kinds, out
    assert out.text.count("\n") == text.count("\n")
    assert redact(out.text).text == out.text  # idempotent
    assert out.text.partition("\n")[0] == text.partition("\n")[0]  # the name's line stays


@pytest.mark.parametrize("text", LEFT)
def test_what_is_below_a_name_and_no_credential_is_left(text: str) -> None:
    assert redact(text).count == 0, redact(text)


@pytest.mark.asyncio
async def test_a_block_scalar_s_credential_is_neither_indexed_nor_shown(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    values = (
        "# puffin service settings\nreplicas: 2\nsmtp:\n  host: mail.internal\n"
        "  password: |\n    Wq9xZr4Tyv\n  api_token: >-\n    Lr5tYv9BxcQa7Mn2\n"
        "ingress:\n  secret:\n    Jb7cXq3Rmw\n  host: puffin.example.com\n"
    )
    repo = make_repo(tmp_path / "repo", {"chart/values.yaml": values})
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        around = await engine.index_search("puffin service settings smtp ingress", "repo")
        for secret in ("Wq9xZr4Tyv", "Lr5tYv9BxcQa7Mn2", "Jb7cXq3Rmw"):
            out = await engine.index_search(secret, "repo")
            assert out.hits == [], (secret, out.text)
    assert {h["path"] for h in around.hits} == {"chart/values.yaml"}
    shown = around.text + json.dumps(around.to_json())
    words = chunk_words(dirs[0])
    for secret in ("Wq9xZr4Tyv", "Lr5tYv9BxcQa7Mn2", "Jb7cXq3Rmw"):
        assert secret not in shown
        assert not any(secret.lower() in w.lower() for w in words), secret
