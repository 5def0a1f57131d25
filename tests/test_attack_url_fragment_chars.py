"""A URL's password holding a "?" or a "#" left unencoded, which the redaction cut short.

The drivers' parsers (SQLAlchemy's make_url, libpq's, most connection-string readers) take the
password to the last "@" of the authority, so ``postgres://app:Wq9x#Zr4?Tyv@db/prod`` connects
with ``Wq9x#Zr4?Tyv``; the redaction stopped at the "#" or "?" and, finding no "@" there, left
the whole password. Near misses: a host with a port and a query or a fragment that holds an "@"
(``http://localhost:8080/?next=a@b``, ``http://localhost:3000#/login?email=a@b``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import redact

from tests._hostile import chunk_words
from tests.support import make_repo

URLS = [
    ("postgres://app:Wq9x#Zr4?Tyv@db.internal:5432/prod", "Wq9x#Zr4?Tyv"),
    ("mysql+pymysql://root:Kp7?mVq2Lx@localhost/shop", "Kp7?mVq2Lx"),
    ("redis://:Hx7#qLm2Rvz@cache:6379/0", "Hx7#qLm2Rvz"),
    ("amqp://svc:Zt4#Bn8?Wc@rabbit:5672/", "Zt4#Bn8?Wc"),
]

LEFT = [
    "http://localhost:8080/?next=a@b.com",
    "http://localhost:3000#/login?email=a@b.com",
    "http://host:8080?email=bob@example.com",
    "https://example.com:443#section@top",
    "ssh://git@github.com:22/org/repo.git",
    "postgres://app:${DB_PASSWORD}@db.internal:5432/prod",
]


@pytest.mark.parametrize(("url", "password"), URLS)
def test_a_url_password_holding_a_question_mark_or_a_hash_is_redacted_whole(
    url: str, password: str
) -> None:
    out = redact(f"DATABASE_URL={url}\n")
    assert out.kinds == ("url-password",), out
    for piece in {password, *password.replace("?", "#").split("#")}:
        if len(piece) >= 3:
            assert piece not in out.text, out.text
    scheme, rest = url.split("://", 1)
    assert out.text.startswith(f"DATABASE_URL={scheme}://")
    assert out.text.endswith(rest.rsplit("@", 1)[1] + "\n")  # the host stays
    assert redact(out.text).text == out.text


@pytest.mark.parametrize("url", LEFT)
def test_a_query_or_a_fragment_holding_an_at_sign_is_left(url: str) -> None:
    assert redact(url).count == 0, redact(url)


@pytest.mark.asyncio
async def test_neither_part_of_such_a_password_is_findable(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    text = "".join(f"URL_{i}={url}  # lapwing connection\n" for i, (url, _) in enumerate(URLS))
    repo = make_repo(tmp_path / "repo", {"deploy/urls.env.sample": text})
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        around = await engine.index_search("lapwing connection", "repo")
        for query in ("Zr4 Tyv", "qLm2Rvz", "mVq2Lx", "Bn8"):
            out = await engine.index_search(query, "repo")
            assert out.hits == [], (query, out.text)
    assert around.hits
    words = chunk_words(dirs[0])
    for _, password in URLS:
        assert password not in around.text
        for piece in password.replace("?", "#").split("#"):
            assert piece.lower() not in {w.lower() for w in words}, piece
