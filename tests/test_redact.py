"""redact(): every known credential shape replaced, realistic code left alone (ADR 0050 §3).

The canaries are assembled at run time from pieces, so this file holds no string a secret scanner
would take for a live credential.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodwyn_retrieval.guard import KINDS, Redaction, marker, redact, scan
from nodwyn_retrieval.guard.redact import B64_LIMIT, HEX_LIMIT, entropy, high_entropy


def _noise(n: int, alphabet: str = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYz") -> str:
    """n characters that look random: mixed case and digits."""
    return (alphabet * (n // len(alphabet) + 1))[:n]


AWS_ID = "AKIA" + "Z7Q2XJ5K3M9P4R8T"
AWS_TEMP_ID = "ASIA" + "Q4R8T2Z7XJ5K3M9P"
AWS_SECRET = _noise(36) + "/K7+"
GITHUB = "gh" + "p_" + _noise(36)
GITHUB_OAUTH = "gh" + "o_" + _noise(36)
GITHUB_PAT = "github" + "_pat_" + _noise(22) + "_" + _noise(59)
OPENAI = "sk-" + _noise(48)
OPENAI_PROJECT = "sk-" + "proj-" + _noise(40) + "-" + _noise(20)
ANTHROPIC = "sk-" + "ant-api03-" + _noise(80)
SLACK = "xo" + "xb-" + "123456789012-1234567890123-" + _noise(24)
GOOGLE = "AI" + "za" + _noise(35)
STRIPE = "sk" + "_live_" + _noise(24)
STRIPE_RESTRICTED = "rk" + "_live_" + _noise(24)
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0." + _noise(43)
KEY_BODY = [_noise(64), _noise(64)[::-1], _noise(40)]
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE"
    + " KEY-----\n"
    + "\n".join(KEY_BODY)
    + "\n-----END RSA PRIVATE KEY-----"
)
URL_PASSWORD = "S3cr3t-" + _noise(10)
ASSIGNED = "hunter2-" + _noise(12)


# (kind, text holding a canary, the canary that must not survive)
CANARIES: list[tuple[str, str, str]] = [
    ("aws-access-key", f"aws_access_key_id = {AWS_ID}\n", AWS_ID),
    ("aws-access-key", f'{{"AccessKeyId": "{AWS_TEMP_ID}"}}', AWS_TEMP_ID),
    ("aws-secret-key", f"aws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    ("aws-secret-key", f'AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"', AWS_SECRET),
    ("github-token", f"export GITHUB_TOKEN={GITHUB}\n", GITHUB),
    ("github-token", f"auth = ({GITHUB_OAUTH},)", GITHUB_OAUTH),
    ("github-token", f"pat: {GITHUB_PAT}", GITHUB_PAT),
    ("openai-key", f"OPENAI_API_KEY={OPENAI}", OPENAI),
    ("openai-key", f"client = OpenAI(key={OPENAI_PROJECT})", OPENAI_PROJECT),
    ("anthropic-key", f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    ("slack-token", f"slack = {SLACK}", SLACK),
    ("google-api-key", f"maps?key={GOOGLE}&q=x", GOOGLE),
    ("stripe-key", f"stripe.api_key = {STRIPE}", STRIPE),
    ("stripe-key", f"restricted: {STRIPE_RESTRICTED}", STRIPE_RESTRICTED),
    ("jwt", f"Authorization: Bearer {JWT}", JWT),
    ("private-key", f"key = '''\n{PRIVATE_KEY}\n'''\n", KEY_BODY[0]),
    (
        "url-password",
        f"DATABASE_URL=postgres://admin:{URL_PASSWORD}@db.example.com/app",
        URL_PASSWORD,
    ),
    ("password", f'password = "{ASSIGNED}"', ASSIGNED),
    ("password", f"login(user='me', passwd='{ASSIGNED}')", ASSIGNED),
    ("password", f'{{"db_password": "{ASSIGNED}"}}', ASSIGNED),
    ("password", f'DB_PASSWORD: str = "{ASSIGNED}"', ASSIGNED),
    ("secret", f"SECRET_KEY = '{ASSIGNED}'", ASSIGNED),
    ("secret", f'client_secret: "{ASSIGNED}"', ASSIGNED),
    ("token", f'accessToken := "{ASSIGNED}"', ASSIGNED),
    ("token", f'config["auth_token"] = "{ASSIGNED}"', ASSIGNED),
    ("api-key", f'"apiKey": "{ASSIGNED}"', ASSIGNED),
    ("api-key", f"x-api-key => '{ASSIGNED}'", ASSIGNED),
]


@pytest.mark.parametrize(("kind", "text", "canary"), CANARIES)
def test_a_canary_of_each_shape_is_redacted_and_never_appears(
    kind: str, text: str, canary: str
) -> None:
    out = redact(text)
    assert canary not in out.text
    assert marker(kind) in out.text
    assert out.kinds == (kind,)
    assert out.count == 1


def test_every_canary_names_a_known_kind() -> None:
    # Every kind's own canary, drawn from its provider's format, is in tests/test_redact_shapes.py.
    assert {k for k, _, _ in CANARIES} <= set(KINDS)


def test_an_assignment_keeps_its_name_and_quotes() -> None:
    assert redact(f'password = "{ASSIGNED}"').text == 'password = "[REDACTED:password]"'


def test_a_url_keeps_its_scheme_user_and_host() -> None:
    out = redact(f"postgres://admin:{URL_PASSWORD}@db.example.com:5432/app")
    assert out.text == "postgres://admin:[REDACTED:url-password]@db.example.com:5432/app"


def test_a_private_key_block_keeps_its_lines() -> None:
    text = f"before\n{PRIVATE_KEY}\nafter\n"
    out = redact(text)
    assert out.text == "before\n[REDACTED:private-key]" + "\n" * (len(KEY_BODY) + 1) + "\nafter\n"
    assert out.text.count("\n") == text.count("\n")


def test_a_private_key_in_a_json_string_is_redacted() -> None:
    escaped = PRIVATE_KEY.replace("\n", "\\n")
    out = redact(f'{{"private_key": "{escaped}\\n", "client_email": "x@y.z"}}')
    assert KEY_BODY[1] not in out.text
    assert out.kinds == ("private-key",)


def test_a_private_key_cut_short_is_redacted_through_its_body() -> None:
    text = "-----BEGIN OPENSSH PRIVATE" + " KEY-----\n" + "\n".join(KEY_BODY) + "\n"
    out = redact(text)
    assert all(line not in out.text for line in KEY_BODY)
    assert out.text.count("\n") == text.count("\n")


def test_a_credential_inside_an_assignment_is_redacted_once() -> None:
    out = redact(f'token = "{GITHUB}"')
    assert out.count == 1
    assert GITHUB not in out.text


def test_a_key_inside_a_placeholder_value_is_still_redacted() -> None:
    out = redact(f'password = "${{{AWS_ID}}}"')
    assert AWS_ID not in out.text
    assert out.kinds == ("aws-access-key",)


def test_several_credentials_are_listed_in_text_order() -> None:
    out = redact(f"a = {GOOGLE}\nb = {AWS_ID}\nc = {GOOGLE}\n")
    assert out.kinds == ("google-api-key", "aws-access-key", "google-api-key")
    assert out.count == 3


def test_scan_names_the_line_of_each_credential() -> None:
    text = f"one\ntwo {AWS_ID}\nthree\nfour password='{ASSIGNED}'\n"
    found = scan(text)
    assert [(f.kind, f.line) for f in found] == [("aws-access-key", 2), ("password", 4)]
    assert text[found[0].start : found[0].end] == AWS_ID
    assert text[found[1].start : found[1].end] == ASSIGNED


FALSE_POSITIVES = [
    "token = tokens[0]",
    "password = getpass()",
    'password = getpass("Password: ")',
    'print("Token: " + token + " expired")',
    "from sklearn import svm  # pip install sk-learn",
    "def get_secret(self):\n    return self._secret\n",
    "See https://docs.example.com/path?q=1 and http://host:8080/x@y",
    "ssh://git@github.com/org/repo.git",
    "mailto:someone@example.com",
    "data = 'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwYWJjZGVm'",
    'password = ""',
    "password = ''",
    'password = "${DB_PASSWORD}"',
    'password = "$DB_PASSWORD"',
    'secret = "{secret}"',
    'password = "<your password>"',
    'token = "%s" % value',
    'api_key = "****************"',
    'api_key = os.environ["API_KEY"]',
    "token = '('",
    'cl.token = "quit"',
    'pad_token = "[PAD]"',
    'eos_token = "</s>"',
    'app.secret_key = "secret_key"',
    '"secret": "YOUR-SECRET-KEY"',
    'password="test"',
    'SECRET_KEY = "config"',
    "password => 'password',",
    '-c remote.lop.token="fooYYY"',
    '$last_update_token = "\\"$last_update_token\\"";',
    "git clone https://user:pwd@example.com/ clone",
    'echo "https://home-user:home-pass@example.com"',
    '"http://username:password@hostname/..."',
    "the-task-management-dashboard-component-is-long",
    "ftp://anonymous:guest%40example.org@ftp.example.org/pub",
    "https://user:pass@proxy:8080",
    'untokenized = "abcdefgh12"',
    "if password == 'hunter2hunter2':",
    "ASIAN_COUNTRIES = ['IN', 'CN']",
    "x = 'AKIA' + suffix",
    "eyJ0eXAi is the start of a header",
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_realistic_code_without_credentials_is_left_alone(text: str) -> None:
    out = redact(text)
    assert out == Redaction(text, 0, ())


def test_redacting_twice_changes_nothing() -> None:
    text = "\n".join(t for _, t, _ in CANARIES)
    once = redact(text)
    twice = redact(once.text)
    assert once.count == len(CANARIES)
    assert twice == Redaction(once.text, 0, ())


@pytest.mark.parametrize("kind", KINDS)
def test_a_marker_matches_no_shape(kind: str) -> None:
    for text in (
        marker(kind),
        f'password = "{marker(kind)}"',
        f"x://u:{marker(kind)}@host",
        f"{marker(kind)}=00000123",  # the kind inside a marker is not a name (private-key=...)
        f"{marker(kind)}: hunter22x",
    ):
        assert redact(text).count == 0


def test_empty_text() -> None:
    assert redact("") == Redaction("", 0, ())


def test_a_non_ascii_text_keeps_offsets() -> None:
    # "İ" lowercases to two characters: the keyword shapes must still find their place.
    text = "İİİ " + f'password = "{ASSIGNED}" ' + "é" * 3 + f" {AWS_ID}"
    out = redact(text)
    assert ASSIGNED not in out.text
    assert AWS_ID not in out.text
    assert out.text.startswith("İİİ password = ")


# Pieces that make shapes likely, so generated text reaches the patterns, not only the gates.
_PIECES = st.sampled_from(
    [
        "AKIA", "ASIA", "ghp_", "github_pat_", "sk-", "sk-ant-", "sk_live_", "xoxb-", "AIza",
        "eyJ", ".", "://", ":", "@", "password", "PASSWORD", "token", "secret", "api_key",
        " = ", "=", ": ", '"', "'", "`", "\\", "\n", "\r\n", "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----", "\\n", "$", "{", "}", "[", "]", "<", ">", "%s",
        "[REDACTED:token]", "İ", "é", " ", "glpat-", "xoxe.xoxp-1-", "Bearer ", "Basic ",
        "curl -u ", "--password ", "value: ", "<password>", "</password>", "define(", "(", ")",
        "kind: Secret\ndata:\n  ", "  ", "DBPassword", "accesstoken", "=~", ",", "->", "::",
        "AccountKey=", "Q~", "AZDO", ":AA", "-us", "AAAAAAAAAAAAAAAAAAAAAA", "SK", "SG.",
    ]
)  # fmt: skip
_TEXT = st.lists(
    st.one_of(_PIECES, st.text(alphabet="aB3dE5fG7hJ9kL2mN4pQ6rS8tU1vW0xYz+/_-", max_size=50)),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), _TEXT))
def test_redact_never_raises_and_keeps_the_line_count(text: str) -> None:
    out = redact(text)
    assert out.text.count("\n") == text.count("\n")
    assert out.count == len(out.kinds)
    assert all(k in KINDS for k in out.kinds)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), _TEXT))
def test_redact_is_idempotent(text: str) -> None:
    once = redact(text).text
    assert redact(once).text == once


# --- The assignment rule's boundaries ------------------------------------------------------------

# A name holding a secret word, glued or not, in any case: its literal value is redacted.
SECRET_NAMES = [
    ("DBPassword", "password"),
    ("SMTPPassword", "password"),
    ("APIToken", "token"),
    ("clientsecret", "secret"),
    ("accesstoken", "token"),
    ("PGPASSWORD", "password"),
    ("MYSQL_PWD", "password"),
    ("mysqlrootpassword", "password"),
    ("keystorePassword", "password"),
    ("authToken", "token"),
    ("db_password2", "password"),
    ("DB_PASSWORD_PROD", "password"),
    ("x-api-key", "api-key"),
    ("apiKey", "api-key"),
    ("SECRET_KEY", "secret"),
    ("privateKey", "secret"),
    ("basic_auth", "credential"),
    ("registry_credentials", "credential"),
]

# Names where a secret word is only part of another word, or says it is something else.
NOT_SECRET_NAMES = [
    "untoken",  # a glued prefix must be a qualifier word (db, access, client...): "un" is not
    "untokenized",
    "publicKeyToken",  # .NET's public key token is a hash of a public key
    "publickeytoken",
    "csrf_token",
    "next_page_token",
    "eos_token",
    "bypass",
    "compass",
    "author",
    "tokenizer",
    "password_hash",
    "token_url",
    "secret_name",
    "passwordLength",
]


@pytest.mark.parametrize(("name", "kind"), SECRET_NAMES)
def test_a_secret_name_glued_or_not_has_its_value_redacted(name: str, kind: str) -> None:
    out = redact(f'{name} = "{ASSIGNED}"')
    assert out.text == f'{name} = "{marker(kind)}"'


@pytest.mark.parametrize("name", NOT_SECRET_NAMES)
def test_a_name_that_only_holds_a_secret_word_is_left_alone(name: str) -> None:
    text = f'{name} = "abcdefgh12"'
    assert redact(text) == Redaction(text, 0, ())


@pytest.mark.parametrize("op", ["==", "!=", "===", "!==", "<=", ">=", "=~"])
def test_a_comparison_is_not_an_assignment(op: str) -> None:
    for text in (f"if password {op} 'hunter2hunter2':", f"assert token {op} 'abcdefgh12'"):
        assert redact(text).count == 0


ASSIGNMENT_STYLES = [
    ("python", f'DB_PASSWORD = "{ASSIGNED}"\n'),
    ("python kwarg", f'connect(user="app", password="{ASSIGNED}")'),
    ("js", f"const dbPassword = '{ASSIGNED}';"),
    ("ts", f'const apiToken: string = "{ASSIGNED}";'),
    ("go var", f'var xToken string = "{ASSIGNED}"'),
    ("go short", f'dbPassword := "{ASSIGNED}"'),
    ("java", f'private static final String API_TOKEN = "{ASSIGNED}";'),
    ("java setter", f'mail.setPassword("{ASSIGNED}");'),
    ("ruby", f"{{ :password => '{ASSIGNED}' }}"),
    ("php", f"$db_password = '{ASSIGNED}';"),
    ("php define", f"define( 'DB_PASSWORD', '{ASSIGNED}' );"),
    ("shell export", f"export DB_PASSWORD={ASSIGNED}\n"),
    ("shell inline", f"MYSQL_PWD={ASSIGNED} mysqldump app\n"),
    ("curl --user", f"curl --user deploy:{ASSIGNED} https://ci.example.com\n"),
    ("curl -u", f"curl -s -u deploy:{ASSIGNED} https://ci.example.com\n"),
    ("cli flag", f"tool login --password {ASSIGNED}\n"),
    (".env", f"STRIPE_SECRET={ASSIGNED}\n"),
    ("ini", f"[db]\npassword = {ASSIGNED}\n"),
    ("yaml", f"db:\n  password: {ASSIGNED}\n"),
    ("yaml env list", f'env:\n  - name: API_TOKEN\n    value: "{ASSIGNED}"\n'),
    ("toml", f'[publish]\ntoken = "{ASSIGNED}"\n'),
    ("json", f'{{"clientsecret": "{ASSIGNED}"}}'),
    ("xml element", f"<password>{ASSIGNED}</password>"),
    ("xml attribute", f'<datasource password="{ASSIGNED}" />'),
    ("xml add key", f'<add key="DBPassword" value="{ASSIGNED}" />'),
    ("connection string", f"Server=db;User Id=sa;Password={ASSIGNED};"),
    ("query string", f"jdbc:mysql://db/app?user=app&password={ASSIGNED}&ssl=true"),
]


@pytest.mark.parametrize(("style", "text"), ASSIGNMENT_STYLES)
def test_a_literal_assigned_in_each_syntax_is_redacted(style: str, text: str) -> None:
    out = redact(text)
    assert ASSIGNED not in out.text, style
    assert out.count == 1


# Not a credential: colour maps, masks, placeholders, references, calls, types, public key tokens.
NOT_REDACTED = [
    "    Token: '#d0d0d0',",  # a pygments style
    "    Token.Keyword: 'bold #008000',",
    "    Name.Token: 'bg:#ffffff',",
    'password = "****"',
    'return "{}:****".format(user)',  # a URL's password shown masked
    'token = "xxxx-xxxx-xxxx"',
    'password = "<password>"',
    "password: changeme",
    'token = "xxx"',
    "PASSWORD=${DB_PASSWORD}",
    'dsn = "host=db password=%(password)s"',
    "password = %(password)s",
    'password = os.environ["DB_PASSWORD"]',
    "token = get_token()",
    "secret = settings.SECRET_KEY",
    "password = self.password",
    "api_key: ${{ secrets.API_KEY }}",
    "token: str",
    "password: Optional[str] = None",
    "password: SecretStr",
    'Password string `json:"password"`',
    "private String password;",
    "  apiKey?: string;",
    '<assemblyIdentity name="System.Xml" publicKeyToken="b77a5c561934e089" culture="neutral"/>',
    '"System.Xml, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b77a5c561934e089"',
    "('AUTH', 'NONAUTH')",  # a capability, not a credential
    "capabilities = 'LOGINDISABLED AUTH=CRAM-MD5'",
    "SERVER_AUTH = '1.3.6.1.5.5.7.3.1'",  # an OID
    "pwd: 3.0-",  # a version table
    "jsonnet_token = r'[^\\W\\d]\\w*'",  # a regular expression
    "long_auth = 'username' + 'password'*10",
    "user, password = 'wile', 'coyote'",  # which value is whose is not known
    "symtable.symtable('pass', b'spam', 'exec')",
    "# token          = 1*tchar",  # a grammar
    "authorization = base64.decodebytes(authorization)",
    "--username and --password options instead of the URL",
    "$auth = Git::credential({",  # Perl: a call
    '"AUTH=XOAUTH2",',  # a mechanism's name
    "smtpAuth = XOAUTH2",
    "s->store_token = !!string_list_lookup(fields, name);",  # C
    "new_item->token = arg_tok->token;",
    "git push -u origin main:main",  # -u user:password is curl's, not git's
    "git commit -a --fixup=amend:HEAD",
    "id=1 creds=Multistage YS1naXQtdG9rZW4=",  # a scheme's name
    'fsmonitor-client query --token "builtin:test_00000001:0"',  # a structured argument
]


@pytest.mark.parametrize("text", NOT_REDACTED)
def test_what_only_looks_like_an_assignment_is_left_alone(text: str) -> None:
    assert redact(text) == Redaction(text, 0, ())


# --- Entropy, as detect-secrets measures it ---------------------------------------------------


def test_entropy_is_shannons_over_the_characters() -> None:
    assert entropy("") == 0.0
    assert entropy("aaaa") == 0.0
    assert entropy("abcd") == 2.0
    assert entropy("aabb") == 1.0


def test_high_entropy_uses_detect_secrets_limits() -> None:
    assert (B64_LIMIT, HEX_LIMIT) == (4.5, 3.0)
    # Hex over 3.0 bits a character; all digits pay 1.2 / log2(length), as detect-secrets does.
    assert high_entropy("123456789a")  # log2(10) = 3.32
    assert not high_entropy("1234567890")  # 3.32 - 1.2 / 3.32 = 2.96
    # Base64 over 4.5 bits: 32 distinct characters are 5.0; 16 are 4.0.
    assert high_entropy("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"[::-1] + "+/")
    assert not high_entropy("ABCDEFGHIJKLMNOP" * 2)
    assert not high_entropy("not base64 or hex!")


def test_a_high_entropy_value_is_redacted_where_a_word_would_not_be() -> None:
    # A bare identifier after a secret name is code (a variable), unless it is random.
    assert redact("token = access_token_value").count == 0
    out = redact("token = kQ7vXpL2mN9rT4wY8zB3cF6hJ1dG5sA0")
    assert out.kinds == ("token",)
