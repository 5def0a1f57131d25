"""Credentials in shapes the redaction left whole or in part, each then findable by its words.

- a URL whose password (or user) holds an `@` left unencoded: URL parsers take the host after
  the last `@` of the authority, so `postgres://app:Kx7@Vq9zLm@db/prod` connects with the
  password `Kx7@Vq9zLm`; the redaction took the password to the first `@` and left `Vq9zLm`
  (or, with an email address as the user, the whole password);
- the AWS secret access key given after its name by blanks alone, as `aws configure set`, a
  Dockerfile's `ENV`, csh's `setenv` and fish's `set -x` write it;
- any credential's name set by those three commands, name and value as two words
  (`ENV DB_PASSWORD value`, the Dockerfile's older form, still taken by docker build).

Each is checked on `redact()` and through the Engine: indexed, searched by the secret's own
words (no hit, no chunk record holding them) and by the words around it (the line shown
redacted).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import redact

from tests._hostile import chunk_words
from tests.support import make_repo

AWS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ4vKm8Tq2"

# (a line holding a credential, the credential's characters that must not be left)
URL_PASSWORDS = [
    ("postgres://app:Kx7@Vq9zLmRw@db.internal:5432/prod", "Kx7@Vq9zLmRw"),
    ("DATABASE_URL=mysql://root:My@Secr3tMarmot@localhost:3306/app", "My@Secr3tMarmot"),
    ("amqp://guest:gu@st99Xylophone@rabbit:5672/", "gu@st99Xylophone"),
    ("mongodb://user:P@ss:w0rdPelican@host/db", "P@ss:w0rdPelican"),
    ("smtp://me@mail.example.com:Tq8wZr3Heron@smtp.example.com:587", "Tq8wZr3Heron"),
]
AWS_LINES = [
    f"aws configure set aws_secret_access_key {AWS_KEY}",
    f"ENV AWS_SECRET_ACCESS_KEY {AWS_KEY}",
    f"setenv AWS_SECRET_ACCESS_KEY {AWS_KEY}",
    f"set -gx AWS_SECRET_ACCESS_KEY\t{AWS_KEY}",
]


SET_LINES = [
    ("ENV DB_PASSWORD Tr0ub4dorOsprey9", "Tr0ub4dorOsprey9", "password"),
    ("ENV MYSQL_ROOT_PASSWORD 'Gr8bustardQ2'", "Gr8bustardQ2", "password"),
    (
        "setenv API_TOKEN 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "token",
    ),
    ('set -gx SMTP_PASSWORD "Cormorant7Zq"', "Cormorant7Zq", "password"),
]


@pytest.mark.parametrize(("line", "password"), URL_PASSWORDS)
def test_a_url_password_holding_an_at_sign_is_redacted_whole(line: str, password: str) -> None:
    out = redact(line)
    assert out.kinds == ("url-password",), out
    for piece in {password, *password.split("@")} - {""}:
        if len(piece) >= 3:
            assert piece not in out.text, out.text
    # The scheme, the user and the host stay.
    scheme, rest = line.split("://", 1)
    assert out.text.startswith(scheme + "://")
    assert out.text.endswith(rest.rsplit("@", 1)[1])
    assert redact(out.text).text == out.text  # idempotent


@pytest.mark.parametrize(
    "line",
    [
        "ssh://git@github.com:22/org/repo.git",
        "https://user@host.example:8080/path@v1",
        "see https://example.com/a@b and mailto:someone@example.com",
        "git+https://github.com/org/repo@v1.2.3#egg=x",
    ],
)
def test_a_url_with_an_at_sign_and_no_password_is_left(line: str) -> None:
    assert redact(line).count == 0


@pytest.mark.parametrize("line", AWS_LINES)
def test_an_aws_secret_key_given_after_blanks_is_redacted(line: str) -> None:
    out = redact(line)
    assert out.kinds == ("aws-secret-key",), out
    assert AWS_KEY not in out.text
    assert out.text.rsplit(maxsplit=1)[0] == line.rsplit(maxsplit=1)[0]  # the name stays


@pytest.mark.parametrize(("line", "value", "kind"), SET_LINES)
def test_a_credential_set_by_env_setenv_or_set_x_is_redacted(
    line: str, value: str, kind: str
) -> None:
    out = redact(line)
    assert out.kinds == (kind,), out
    assert value not in out.text
    assert out.text.split()[:2] == line.split()[:2]  # the command and the name stay


@pytest.mark.parametrize(
    "line",
    [
        "ENV DB_PASSWORD $DB_PASSWORD",
        "ENV API_TOKEN ${API_TOKEN}",
        "ENV DB_PASSWORD changeme",
        "ENV PASSWORD_FILE /run/secrets/db",
        "ENV DB_PASSWORD a pass phrase with blanks",
        "setenv TOKEN_URL https://auth.example.com/token",
        "# set the token value here",
        "set token abc123def",
    ],
)
def test_what_env_setenv_or_set_x_give_that_is_no_credential_is_left(line: str) -> None:
    assert redact(line).count == 0, redact(line)


def test_the_aws_name_followed_by_words_or_filler_is_left() -> None:
    for line in (
        "the secret access key documentation says where it lives",
        "aws_secret_access_key " + "x" * 40,
        "SecretAccessKey describes the key",
    ):
        assert redact(line).count == 0, line


@pytest.mark.asyncio
async def test_neither_is_findable_by_its_words_through_the_engine(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    # Each credential's line holds a word of its own to search it by: its line is then shown.
    env = "".join(f"{line}  # albatross setting\n" for line, _ in URL_PASSWORDS)
    docker = "".join(f"{line}  # kingfisher credentials\n" for line in AWS_LINES)
    docker += "".join(f"{line}\n# kingfisher credentials\n" for line, _, _ in SET_LINES)
    files = {"deploy/settings.env.sample": env, "deploy/Dockerfile": "FROM python:3.12\n" + docker}
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        around = await engine.index_search("albatross setting kingfisher credentials", "repo")
        shown = around.text
        for query in ("Vq9zLmRw", "Secr3tMarmot", "st99Xylophone", "w0rdPelican", "Tq8wZr3Heron"):
            out = await engine.index_search(query, "repo")
            assert out.hits == [], (query, out.text)
        out = await engine.index_search("wJalrXUtnFEMI K7MDENG bPxRfiCYzQ4vKm8Tq2", "repo")
        assert out.hits == [], out.text
        for _, value, _ in SET_LINES:
            out = await engine.index_search(value, "repo")
            assert out.hits == [], (value, out.text)
    assert {h["path"] for h in around.hits} == set(files)
    assert "[REDACTED:url-password]" in shown
    assert "[REDACTED:aws-secret-key]" in shown
    words = chunk_words(dirs[0])
    for piece in ("vq9zlmrw", "secr3tmarmot", "st99xylophone", "w0rdpelican", "tq8wzr3heron"):
        assert not any(piece in w.lower() for w in words), piece
    assert not any("bpxrficyzq4vkm8tq2" in w.lower() for w in words)
    for _, password in URL_PASSWORDS:
        assert password not in shown
    assert AWS_KEY not in shown
    for _, value, _ in SET_LINES:
        assert value not in shown
        assert not any(value.lower() in w.lower() for w in words), value
