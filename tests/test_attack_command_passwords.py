"""Passwords given on a command line by a tool's own syntax, which the redaction left whole.

OpenSSL's ``-passout pass:X`` (and ``-passin``, ``-pass``, ``-password``, ``enc -k X``), keytool's
and jarsigner's ``-storepass X -keypass Y``, ``redis-cli -a X``, Oracle's ``user/password@`` of a
``jdbc:oracle:thin:`` URL and of ``sqlplus``, ``htpasswd -b``'s last argument and Windows' ``net
use \\\\server\\share PASSWORD``. Each with its near misses (where the tool is told where the
password is, or asks for it; the same words in prose), on ``redact()`` and through the Engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import redact

from tests._hostile import chunk_words
from tests.support import make_repo

# (a command line, its password)
COMMANDS = [
    ("openssl pkcs12 -export -in c.pem -out a.p12 -passout pass:Tq7wZr3Hkn", "Tq7wZr3Hkn"),
    ("openssl rsa -in enc.key -passin pass:Gm4xLp8Vdc -out plain.key", "Gm4xLp8Vdc"),
    ("openssl enc -aes-256-cbc -in f -out f.enc -pass 'pass:Wb2nRs6Jqt'", "Wb2nRs6Jqt"),
    ('openssl pkcs12 -in a.p12 -nodes -password pass:"Yh5kCv9Mzf"', "Yh5kCv9Mzf"),
    ("openssl enc -d -aes-256-cbc -k Pd3sXg7Nwq -in f.enc", "Pd3sXg7Nwq"),
    ("keytool -genkeypair -keystore a.jks -storepass Rc8vTm2Lxb -keypass Fz6qHw4Ksn", "Rc8vTm2Lxb"),
    ("keytool -genkeypair -keystore a.jks -storepass Rc8vTm2Lxb -keypass Fz6qHw4Ksn", "Fz6qHw4Ksn"),
    ("keytool -importkeystore -srcstorepass 'Jn5bWq9Dtp' -deststorepass Lx2mGv7Rcz", "Jn5bWq9Dtp"),
    ("keytool -importkeystore -srcstorepass 'Jn5bWq9Dtp' -deststorepass Lx2mGv7Rcz", "Lx2mGv7Rcz"),
    ("jarsigner -keystore r.jks -storepass Vk4hNs8Qwd app.apk release", "Vk4hNs8Qwd"),
    ("redis-cli -h cache -p 6379 -a 'Mt6rBx3Zjp' --no-auth-warning ping", "Mt6rBx3Zjp"),
    ("redis-cli -a Hq9wDk2Lvs INFO", "Hq9wDk2Lvs"),
    ("url=jdbc:oracle:thin:app/Ns7cTz4Wqm@db.internal:1521/ORCL", "Ns7cTz4Wqm"),
    ("sqlplus -s app/Xp3vKd8Rgb@ORCL @migrate.sql", "Xp3vKd8Rgb"),
    ("expdp system/Bw5qLm9Tzh@ORCL directory=d dumpfile=x.dmp", "Bw5qLm9Tzh"),
    ("htpasswd -cbB /etc/nginx/.htpasswd admin Zr2kFw6Pqn", "Zr2kFw6Pqn"),
    ("htpasswd -nb admin 'Qc8tVx4Mjd' > users.txt", "Qc8tVx4Mjd"),
    ("net use Z: \\\\files\\builds /user:CORP\\ci Kd7wPq3Xbv /persistent:no", "Kd7wPq3Xbv"),
    ('NET USE "\\\\files\\builds" Gt4zNm8Rwc /USER:ci', "Gt4zNm8Rwc"),
]

LEFT = [
    "openssl rsa -in enc.key -passin env:KEY_PASS -out plain.key",
    "openssl rsa -in enc.key -passin file:/run/secrets/key_pass -out plain.key",
    "openssl pkcs12 -export -in c.pem -passout stdin -out a.p12",
    "openssl req -new -passout pass:$KEY_PASSPHRASE -out r.csr",
    "openssl enc -aes-256-cbc -kfile key.txt -in f",
    "keytool -list -keystore a.jks -storepass:env STOREPASS",
    "keytool -list -keystore a.jks -storepass:file pass.txt",
    'keytool -list -keystore a.jks -storepass "${STORE_PASSWORD}"',
    "a high-pass filter, a by-pass valve and a two-pass compiler",
    "redis-cli -h cache ping",
    "redis-cli -a $REDIS_PASSWORD ping",
    "tar -a -cf out.tar.gz dir",
    "url=jdbc:oracle:thin:@db.internal:1521/ORCL",
    "url=jdbc:oracle:thin:app/${DB_PASSWORD}@db.internal:1521/ORCL",
    "sqlplus / as sysdba",
    "sqlplus -s /nolog @init.sql",
    "htpasswd -c .htpasswd admin",
    'htpasswd -b .htpasswd admin "$ADMIN_PASSWORD"',
    "net use Z: \\\\files\\builds /user:ci /persistent:no",
    "net use Z: \\\\files\\builds * /user:ci",
    "net use Z: \\\\files\\builds %BUILD_PASSWORD% /user:ci",
    "The net use \\\\files\\docs mapping is persistent",
]


@pytest.mark.parametrize(("line", "password"), COMMANDS)
def test_a_command_line_password_is_redacted(line: str, password: str) -> None:
    for text in (line, line + "\n", json.dumps({"cmd": line})):
        out = redact(text)
        assert password not in out.text, out.text
        assert "password" in out.kinds, out
        assert out.text.count("\n") == text.count("\n")
        assert redact(out.text).text == out.text  # idempotent
    # Only the passwords go: the command, its flags, the quotes and the rest of the line stay.
    expected = line
    for other, p in COMMANDS:
        if other == line:
            expected = expected.replace(p, "[REDACTED:password]")
    assert redact(line).text == expected


@pytest.mark.parametrize("line", LEFT)
def test_a_command_told_where_its_password_is_is_left(line: str) -> None:
    assert redact(line).count == 0, redact(line)


@pytest.mark.asyncio
async def test_command_line_passwords_are_neither_indexed_nor_shown(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    script = "".join(f"{line}  # grebe release step\n" for line, _ in COMMANDS)
    repo = make_repo(tmp_path / "repo", {"ops/release.sh": script})
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        around = await engine.index_search("grebe release step keytool openssl", "repo")
        for _, password in COMMANDS[::3]:
            out = await engine.index_search(password, "repo")
            assert out.hits == [], (password, out.text)
    assert {h["path"] for h in around.hits} == {"ops/release.sh"}
    shown = around.text + json.dumps(around.to_json())
    assert "[REDACTED:password]" in shown
    words = chunk_words(dirs[0])
    for _, password in COMMANDS:
        assert password not in shown
        assert not any(password.lower() in w.lower() for w in words), password
