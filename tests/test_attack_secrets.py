"""Credential shapes a leaked-key scanner looks for that the redaction missed, each with its near
misses: an SSH.com (RFC 4716) private key, a PEM private key encoded again in base64 (a
kubeconfig's client-key-data), Braintree's and Amazon MWS's tokens, a netrc entry, a Docker
config's identity token, a registry login's -p and the mysql clients' glued -p. Every body is
drawn at random here: no sample is anyone's."""

from __future__ import annotations

import base64
import random
import string

import pytest
from nodwyn_retrieval.guard import redact

B62 = string.ascii_letters + string.digits
RNG = random.Random(20261202)


def rnd(n: int, alphabet: str = B62) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def b64(nbytes: int) -> str:
    return base64.b64encode(bytes(RNG.randrange(256) for _ in range(nbytes))).decode()


def pem(label: str) -> str:
    body = "\n".join(b64(48) for _ in range(10))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def gone(text: str, *secrets: str, kind: str) -> str:
    """The redaction of text: none of the secrets left, a marker of kind, the lines kept."""
    out = redact(text)
    for s in secrets:
        assert s not in out.text, (s, out.text)
    assert kind in out.kinds, out
    assert out.text.count("\n") == text.count("\n")
    assert redact(out.text).text == out.text  # idempotent
    return out.text


def kept(text: str) -> None:
    assert redact(text).count == 0, redact(text)


def test_an_ssh2_private_key_is_redacted_whole() -> None:
    lines = [b64(48) for _ in range(8)]
    for encrypted in ("ENCRYPTED ", ""):
        text = (
            f"---- BEGIN SSH2 {encrypted}PRIVATE KEY ----\n"
            'Comment: "deploy@ci"\n' + "\n".join(lines) + "\n"
            f"---- END SSH2 {encrypted}PRIVATE KEY ----\n"
        )
        out = gone(text, *lines, kind="private-key")
        assert out.startswith("[REDACTED:private-key]")
        # A block cut short (no END line) loses its base64 lines too.
        gone(text.split("---- END")[0], *lines, kind="private-key")


def test_an_ssh2_public_key_is_left() -> None:
    kept(
        f"---- BEGIN SSH2 PUBLIC KEY ----\nComment: me\n{b64(60)}\n---- END SSH2 PUBLIC KEY ----\n"
    )


@pytest.mark.parametrize(
    "label",
    [
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "DSA PRIVATE KEY",
        "PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ],
)
def test_a_private_key_in_base64_is_redacted(label: str) -> None:
    blob = base64.b64encode(pem(label).encode()).decode()
    kube = (
        "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
        f"    client-certificate-data: {base64.b64encode(pem('CERTIFICATE').encode()).decode()}\n"
        f"    client-key-data: {blob}\n"
        "    username: admin\n"
    )
    out = gone(kube, blob[20:60], blob[-40:], kind="private-key")
    assert "    client-key-data: [REDACTED:private-key]\n    username: admin\n" in out
    # Wrapped as base64(1) writes it, 76 characters a line: every line goes, the next stays.
    wrapped = "\n".join(blob[i : i + 76] for i in range(0, len(blob), 76))
    out = gone(f"{wrapped}\nnext: line\n", blob[200:276], blob[-20:], kind="private-key")
    assert out.endswith("\nnext: line\n")


def test_a_certificate_or_a_public_key_in_base64_is_left() -> None:
    for label in ("CERTIFICATE", "PUBLIC KEY", "RSA PUBLIC KEY"):
        blob = base64.b64encode(pem(label).encode()).decode()
        kept(f"client-certificate-data: {blob}\n")


def test_braintree_and_amazon_mws_tokens() -> None:
    for env in ("production", "sandbox"):
        ident = rnd(16, string.ascii_lowercase + string.digits)
        tok = f"access_token${env}${ident}${rnd(32, '0123456789abcdef')}"
        assert gone(f'BRAINTREE = "{tok}"\n', tok, kind="braintree-token") == (
            'BRAINTREE = "[REDACTED:braintree-token]"\n'
        )
    uuid = "-".join(rnd(n, "0123456789abcdef") for n in (8, 4, 4, 4, 12))
    gone(f"MWS_AUTH_TOKEN: amzn.mws.{uuid}\n", uuid, kind="amazon-mws-token")
    # Fillers and a word that only starts the same are left.
    kept("access_token$production$xxxxxxxxxxxxxxxx$00000000000000000000000000000000")
    kept("amzn.mws.00000000-0000-0000-0000-000000000000 and amzn.mws.region")


def test_a_netrc_entry_on_one_line_on_several_and_written_by_a_script() -> None:
    pw = rnd(14) + "#1"
    for text in (
        f"machine api.example.com login deploy password {pw}\n",
        f"machine api.example.com\n  login deploy\n  password {pw}\n",
        f"machine a login b password {pw} machine c login d password x{pw}\n",
        f"RUN printf 'machine git.example.com\\n  login ci\\n  password {pw}\\n' > /root/.netrc\n",
        f'echo "machine h login u password {pw}" >> ~/.netrc\n',
        f"machine h login u account acct password {pw}\n",
    ):
        out = gone(text, pw, kind="password")
        assert "machine" in out
        assert "password [REDACTED:password]" in out


def test_what_only_looks_like_a_netrc_entry_is_left() -> None:
    kept("machine learning password manager\n")
    kept("the machine learning login flow password manager is good\n")
    kept('echo "machine h login u password $GH_TOKEN" >> ~/.netrc\n')
    kept("machine h login u password changeme\n")
    kept("machine h login u password\n")


def test_a_docker_config_identity_token() -> None:
    tok = rnd(40)
    text = (
        f'{{"auths": {{"r.example.com": {{"identitytoken": "{tok}"}}}}, "registrytoken": "{tok}x"}}'
    )
    out = gone(text, tok, kind="token")
    assert '"identitytoken": "[REDACTED:token]"' in out
    kept('{"identitytoken": "<token>", "registrytoken": ""}')


def test_a_registry_login_password_given_as_p() -> None:
    pw = rnd(18) + "!"
    for tool in ("docker", "podman", "nerdctl", "buildah", "helm registry"):
        for given in (pw, f"'{pw}'", f'"{pw}"'):
            text = f"{tool} login -u ci -p {given} registry.example.com\n"
            out = gone(text, pw, kind="password")
            assert out.endswith(" registry.example.com\n")
    kept('docker login -u ci -p "$REGISTRY_PASSWORD" registry.example.com\n')
    kept("docker login -u ci -p ${{ secrets.REGISTRY_PASSWORD }} ghcr.io\n")
    kept("echo $PW | docker login -u ci --password-stdin ghcr.io\n")
    kept("docker run -p 8080:80 nginx  # login -p\n")


def test_a_mysql_password_glued_to_p() -> None:
    pw = rnd(12) + "%"
    for text in (
        f"mysql -u root -p{pw} app\n",
        f"mysqldump -h db -u backup -p'{pw}' app > app.sql\n",
        f'mysqladmin -uroot -p"{pw}" status\n',
    ):
        gone(text, pw, kind="password")
    kept("mysql -u root -p app\n")
    kept("mysql -u root -p$MYSQL_ROOT_PASSWORD app\n")
    kept("gcc $(mysql_config --cflags) -pthread -o x x.c\n")
    kept("mysql -h db -P3306 -u root app\n")


def test_a_netrc_password_of_three_characters_is_taken_and_of_two_left() -> None:
    gone("machine h login u password x9Z\n", "x9Z", kind="password")
    kept("machine h login u password x9\n")


def test_sql_passwords() -> None:
    pw = rnd(14) + "!"
    for text in (
        f"CREATE USER app WITH PASSWORD '{pw}';\n",
        f"create role app with login encrypted password '{pw}';\n",
        f"ALTER USER postgres PASSWORD '{pw}';\n",
        f"CREATE LOGIN app WITH PASSWORD = '{pw}', CHECK_POLICY = OFF;\n",
        f"CREATE USER 'app'@'%' IDENTIFIED BY '{pw}';\n",
        f'GRANT ALL ON db.* TO "app"@"%" IDENTIFIED BY "{pw}";\n',
        f"ALTER USER app IDENTIFIED BY PASSWORD '{pw}';\n",
    ):
        out = gone(text, pw, kind="password")
        assert "'[REDACTED:password]'" in out or '"[REDACTED:password]"' in out
    kept("ALTER USER app PASSWORD NULL;\n")
    kept("CREATE USER app WITH PASSWORD :'pw';\n")
    kept("CREATE USER app WITH PASSWORD '${DB_PASSWORD}';\n")
    kept("-- each user is identified by 'name' and by 'email'\n")
    kept("SELECT password FROM users WHERE name = 'alice';\n")


def test_sshpass_and_a_powershell_securestring() -> None:
    pw = rnd(14) + "%"
    for text in (
        f"sshpass -p '{pw}' ssh u@h\n",
        f"sshpass -p {pw} scp a h:b\n",
        f"sshpass -v -p{pw} ssh h\n",
    ):
        gone(text, pw, kind="password")
    kept('sshpass -p "$SSHPASS" ssh h\n')
    kept("sshpass -f ~/.pw ssh h\n")
    kept("sshpass -e ssh h\n")
    for text in (
        f"$p = ConvertTo-SecureString '{pw}' -AsPlainText -Force\n",
        f'ConvertTo-SecureString -String "{pw}" -AsPlainText -Force\n',
    ):
        gone(text, pw, kind="password")
    kept("$p = ConvertTo-SecureString $env:PW -AsPlainText -Force\n")
    # Without -AsPlainText the string is already an encrypted one, not the password itself.
    kept("$p = ConvertTo-SecureString '01000000d08c9ddf0115d1118c7a00c04fc297eb' -Key $k\n")


def test_a_secret_defined_by_a_c_macro() -> None:
    key = rnd(32)
    text = f'#include <stdio.h>\n#define API_KEY "{key}"\n  #  define DB_PASSWORD "{rnd(12)}"\n'
    gone(text, key, kind="api-key")
    assert "password" in redact(text).kinds
    # Near misses: a macro of another name, a number, a macro that is an expression, a word.
    for left in (
        f'#define API_URL "{rnd(32)}"\n',
        "#define API_KEY_LENGTH 32\n",
        "#define API_KEY get_key()\n",
        "#define PASSWORD_PROMPT \"Password: \"\n",
        "#define TOKEN\n",
        f'x = 1; API_KEY "{rnd(32)}"\n',  # no #define before it
    ):
        assert redact(left).text == left, left


def test_a_secret_in_triple_quotes_and_after_a_yaml_scalar_tag() -> None:
    pw = rnd(14)
    gone(f'[db]\npassword = """{pw}"""\n', pw, kind="password")
    gone(f"password = '''{pw}'''\n", pw, kind="password")
    gone(f'password = """\n{pw}"""\n', pw, kind="password")  # TOML drops that first break
    gone(f"db:\n  password: !!str {pw}\n", pw, kind="password")
    gone(f'db:\n  password: !!str "{pw}"\n', pw, kind="password")
    token = rnd(40)
    gone(f'{{"identitytoken": "{token}"}}\nidentity_token = "{token}"\n', token, kind="token")
    for left in (
        'password = """\nWhat the user types to log in.\n"""\n',  # a docstring over lines
        'password = """ask"""\n',  # too short for a password
        "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n",  # encrypted: a tag of its own
        'password = """"""\n',
        'password = """s3cr3tP4ssw0rd',  # not closed, at the text's end
        "password = '''s3cr3tP4ssw0rd\n",  # not closed
    ):
        assert redact(left).text == left, left


def test_a_reference_to_a_key_type_is_left() -> None:
    for left in (
        "MLKEM768X25519PrivateKey = rust_openssl.hpke.MLKEM768X25519PrivateKey\n",
        "    private_key: x25519.X25519PrivateKey\n    | ec.EllipticCurvePrivateKey,\n",
        "signing_key = keys.Ed25519SigningKey\n",
    ):
        assert redact(left).text == left, left
    # A dotted value whose last part does not name a secret is judged as before.
    jwt_like = f"{rnd(20)}.{rnd(8)}.{rnd(30)}"
    gone(f"api_key = {jwt_like}\n", jwt_like, kind="api-key")
