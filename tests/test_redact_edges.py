"""The edges of redaction: where a value stops being a credential, and where a shape stops.

Each case is what reaches the index (or what is wrongly hidden from it) on one side of a boundary
the rules draw: a length, a character class, an operator, a syntax, a Kubernetes document's
extent. They are written as redact()'s output, so any implementation that redacts the same text
passes, and one that moves a boundary fails. The canaries are assembled from pieces, so this file
holds no string a secret scanner would take for a live credential.
"""

from __future__ import annotations

import base64

import pytest
from nodwyn_retrieval.guard import Redaction, marker, redact, scan

from bench.secrets_corpus import PROVIDERS, samples


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _left(text: str) -> None:
    assert redact(text) == Redaction(text, 0, ()), text


def _taken(text: str, value: str, kind: str) -> None:
    """value, wherever it stands in text, is replaced by kind's marker, and nothing else is."""
    out = redact(text)
    assert out.text == text.replace(value, marker(kind), 1), (text, out.text)
    assert out.kinds == (kind,)


# --- Lengths: the shortest credential taken, one character less left -------------------------


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ('password = "abcd"', "abcd", "password"),  # a password of 4 is one
        ('auth = "abcd"', "abcd", "credential"),
        ('token = "abcdefgh"', "abcdefgh", "token"),  # a token of 8 is one
        ('token = "ab12"', "ab12", "token"),  # or of 4 with a digit
        ("PASSWORD=abcd", "abcd", "password"),
        ("TOKEN=abcdefgh", "abcdefgh", "token"),
        ("TOKEN=abc1", "abc1", "token"),
        ("PASSWORD=123456", "123456", "password"),  # a PIN in a .env file
        ("curl -u deploy:ab1 https://ci.example.com", "ab1", "basic-auth"),
        ("Authorization: Bearer abcdefghijklmno1", "abcdefghijklmno1", "bearer-token"),
        ("Authorization: Basic " + _b64(b"user:abc"), _b64(b"user:abc"), "basic-auth"),
        # Base64 sent without its padding is still decoded.
        ("Authorization: Basic " + _b64(b"user:abc").rstrip("="), "dXNlcjphYmM", "basic-auth"),
        ("Authorization: Bearer AbcdEfghIjklMnop", "AbcdEfghIjklMnop", "bearer-token"),  # 4 humps
        ("token = aBcDeFgHiJkLmNoP", "aBcDeFgHiJkLmNoP", "token"),  # random letters, 16
        ("token = AbcDefGhiJklMnoPqr", "AbcDefGhiJklMnoPqr", "token"),  # a case change in 3
    ],
)
def test_the_shortest_value_of_each_rule_is_taken(text: str, value: str, kind: str) -> None:
    _taken(text, value, kind)


@pytest.mark.parametrize(
    "text",
    [
        'password = "abc"',
        'auth = "abc"',
        'token = "abcdefg"',
        'token = "ab1"',
        'cl.token = "quit"',
        "PASSWORD=abc",
        "TOKEN=abcdefg",
        "TOKEN=ab1",
        "PASSWORD=12345",  # too short for a PIN
        "password = 123456",  # a number in code
        "curl -u deploy:123456 https://ci.example.com",  # digits only: a port, an id
        "Authorization: Bearer abcdefghijklmn1",  # 15: too short for a bearer token
        "Authorization: Bearer SomeLongIdentifierName",  # a name, not a token
        "Authorization: Bearer AbcdEfghIjklMnopq",  # a case change in more than 4: a name
        "Authorization: Bearer 1234567890123456",  # digits only: an id, not a token
        "Authorization: Bearer YourApiTokenHere",  # a placeholder
        "Authorization: Basic abcdefghi",  # not base64
        "Authorization: Basic ////////////",  # base64 of bytes that are not text
        "Authorization: Basic " + _b64(b"user:ab"),  # a password of 2
        "Authorization: Basic " + _b64(b"useronly1234"),  # no user:password inside
        "Authorization: Basic " + _b64(b"user:password"),  # a placeholder
        "Authorization: Basic " + _b64(b"user:\x01abcd"),  # not printable: not a header's
        "token = aBcDeFgHiJkLmNo",  # random letters, but 15
        "token = TokenProviderFactoryImpl",  # a class's name
    ],
)
def test_one_character_short_or_the_wrong_kind_is_left(text: str) -> None:
    _left(text)


# --- What a bare value is ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("password: hunter22", "hunter22", "password"),  # YAML
        ("password = hunter22", "hunter22", "password"),  # INI
        ("password: p@ss-w0rd!", "p@ss-w0rd!", "password"),  # two kinds of character
        ("PASSWORD=hunter\n", "hunter", "password"),  # tight: any literal
        ("TOKEN=Ab1.Cde2", "Ab1.Cde2", "token"),  # dotted, but jumbled: a literal
        ("TOKEN=Abc1.Def2", "Abc1.Def2", "token"),
        ("tool --password\thunter22", "hunter22", "password"),  # a flag, its value after a tab
        ("password: hunter!!", "hunter!!", "password"),  # letters and symbols: two kinds
        # High entropy wins over a word's look: 32 distinct letters with one case change.
        ("token = abcdefghijklmnopqrstuvwxyzABCDEF", "abcdefghijklmnopqrstuvwxyzABCDEF", "token"),
    ],
)
def test_a_bare_literal_is_taken(text: str, value: str, kind: str) -> None:
    _taken(text, value, kind)


@pytest.mark.parametrize(
    "text",
    [
        "password:hunter22",  # a:b with no space is a label or a ternary, not YAML
        '"password:hunter22"',
        "password=%{DB}",
        "password: !vault",
        "password=getpass()",
        "PASSWORD=settings.DB",  # an attribute chain
        "password = CONFIG.DB_VALUE2",  # a constant's attribute, spaced: code
        "password: APP.MAIN_DB2",
        "TOKEN=Abc.Def",  # a chain of words, not jumbled
        "f(password=pw)",  # a keyword argument's variable
        "f(password=pw, x)",
        "connect(password=dbpass_var)",  # a variable long enough to be a password
        "connect(password=dbpass_var, timeout=3)",
        "password = hunter",  # a variable
        "password = int32",  # a type
        "password: my-service-name",  # kebab-case: a name
        "password: /etc/pw.txt",  # a path
        "password: @#!%^&",  # one kind of character only
        "password: blue-green-deploy",  # kebab-case: a name
        "password: contraseña",  # letters only, as "hunter" is
    ],
)
def test_code_and_names_after_a_secret_word_are_left(text: str) -> None:
    _left(text)


# --- Syntaxes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ('with_token("abcdefgh12")', "abcdefgh12", "token"),  # a setter: with_...
        ("<password> hunter2x </password>", "hunter2x", "password"),  # only the value, spaces stay
        ("verificationtoken = 'abcdefgh12'", "abcdefgh12", "token"),  # the longest glued word
        ("applicationtoken = 'abcdefgh12'", "abcdefgh12", "token"),
        ("dbadminpwd = 'hunter2x'", "hunter2x", "password"),  # two qualifiers glued
        ("mypassword = 'hunter2x'", "hunter2x", "password"),
        ("API_KEY = 'hunter2x99'", "hunter2x99", "api-key"),
        ("CLIENT_KEY = 'hunter2x99'", "hunter2x99", "secret"),
        ("password_prod = 'hunter2x'", "hunter2x", "password"),  # a trailing qualifier
        ("password_1_2 = 'hunter2x'", "hunter2x", "password"),
        ("[REDACTED:token] token=abcdefgh12", "abcdefgh12", "token"),  # after a closed marker
    ],
)
def test_each_syntax_takes_the_value_only(text: str, value: str, kind: str) -> None:
    _taken(text, value, kind)


@pytest.mark.parametrize(
    "text",
    [
        'check_password("hunter2x")',  # a check, not a setter
        'setPassword("hunter2x" if a else b)',  # an expression
        "setPassword(hunter2x)",  # a variable
        '("password", hunter2x)',  # a variable
        "passwordpass = 'hunter2x'",  # "password" is not a qualifier
        "publicpassword = 'hunter2x'",
        "public_password = 'hunter2x'",
        "password_public='hunter2x'",
        "monkey_key='hunter2x99'",  # key after a word that is not a qualifier
        "KEY = 'hunter2x99'",
        "prod = 'hunter2x'",
        "[REDACTED:password]=hunter2x",  # a marker's kind is not a name
        # The quoted forms need their own opening: one quote on both sides of the name, a "<"
        # before an element (not the text's last character), no quotes around a setter.
        '("password\', "hunter2x")',
        "'setPassword'(\"hunter2x\")",
        '<password">hunter2x</password>',
        "password>hunter2x</password>\n<",
    ],
)
def test_names_and_calls_that_are_not_an_assignment_are_left(text: str) -> None:
    _left(text)


def test_several_assignments_on_a_line_are_each_taken_with_their_own_kind() -> None:
    text = "password = 'hunter2x' token = 'abcdefgh12' secret = 'zzzzqqqq1'"
    out = redact(text)
    assert out.text == (
        "password = '[REDACTED:password]' token = '[REDACTED:token]' secret = '[REDACTED:secret]'"
    )
    assert out.kinds == ("password", "token", "secret")
    assert [(f.kind, f.start, f.end, f.line) for f in scan(text)] == [
        ("password", 12, 20, 1),
        ("token", 31, 41, 1),
        ("secret", 53, 62, 1),
    ]


def test_scan_counts_lines_across_findings() -> None:
    text = "a\nb password='hunter2x'\n\nc TOKEN=abcdefgh12\n\n\nsecret: 'zzzzqqqq1'\n"
    found = scan(text)
    assert [(f.kind, f.line) for f in found] == [("password", 2), ("token", 4), ("secret", 7)]
    for f in found:
        assert text[f.start : f.end] in ("hunter2x", "abcdefgh12", "zzzzqqqq1")


@pytest.mark.parametrize("lead", ["İİİ ", "é ", "日本語 "])
def test_non_ascii_text_before_a_credential_keeps_the_offsets(lead: str) -> None:
    text = f"{lead}password = 'hunter2x' {lead}"
    assert redact(text).text == f"{lead}password = '[REDACTED:password]' {lead}"
    (f,) = scan(text)
    assert text[f.start : f.end] == "hunter2x"


# --- Provider tokens alone, at the text's edges -----------------------------------------------

# Formats a scanner can only tell from the name or URL around them (a bare 40-character base64
# string, 32 hex digits, a webhook's path): they are not expected to be found on their own.
NEEDS_CONTEXT = {
    "authorization-token",
    "aws-secret-key",
    "azure-apim",
    "azure-client-secret",
    "azure-sas",
    "azure-service-bus",
    "azure-storage-key",
    "cloudflare-api-token",
    "cloudflare-global-key",
    "discord-bot",
    "discord-webhook",
    "okta",
    "slack-webhook",
    "teams-webhook",
    "twilio-auth-token",
}
ALONE = [s for s in samples(per_shape=2, seed=11) if s.shape in PROVIDERS]


@pytest.mark.parametrize("shape", sorted(set(PROVIDERS) - NEEDS_CONTEXT))
def test_a_provider_token_is_redacted_at_the_start_and_the_end_of_a_text(shape: str) -> None:
    # A format found some characters after its start (a Terraform token's ".atlasv1.") must be
    # found at offset 0, and one whose end is checked must be found at the text's end.
    for s in (x for x in ALONE if x.shape == shape):
        for text in (s.secret, s.secret + "\n", "x " + s.secret, "\n" + s.secret + "\n"):
            out = redact(text)
            assert s.secret not in out.text, (shape, text)
            assert out.count == 1, (shape, text, out.kinds)


# --- Kubernetes Secrets ------------------------------------------------------------------------

K8S = marker("kubernetes-secret")


def test_every_value_of_a_secrets_data_is_taken_and_nothing_after_it() -> None:
    text = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ntype: Opaque\n"
        "data:\n  username: YWRtaW4=\n  dsn: cG9zdGdyZXM=\nother: 1\n"
    )
    out = redact(text)
    assert out.text == text.replace("YWRtaW4=", K8S).replace("cG9zdGdyZXM=", K8S)
    assert out.kinds == ("kubernetes-secret", "kubernetes-secret")


def test_string_data_keeps_its_quotes_and_leaves_a_reference() -> None:
    text = "kind: Secret\nstringData:\n  password: \"hunter\"\n  ref: '{{ .Values.x }}'\n"
    assert redact(text).text == text.replace("hunter", K8S)


def test_a_block_scalar_is_taken_with_its_lines_kept() -> None:
    text = "kind: Secret\ndata:\n  cert: |\n    AAAA\n    BBBB\n  key: dmFs\nmetadata:\n  name: x\n"
    out = redact(text)
    assert out.text == (
        f"kind: Secret\ndata:\n  cert: |\n{K8S}\n\n  key: {K8S}\nmetadata:\n  name: x\n"
    )
    assert out.text.count("\n") == text.count("\n")
    # A blank line inside the block is part of it; the block ends the document.
    text = "kind: Secret\ndata:\n  cert: |-\n    AAAA\n\n    BBBB\n"
    out = redact(text)
    assert out.text == f"kind: Secret\ndata:\n  cert: |-\n{K8S}\n\n\n"
    # An empty block takes nothing, and the next entry is still taken.
    text = "kind: Secret\ndata:\n  cert: |\n  key: dmFs\n"
    assert redact(text).text == f"kind: Secret\ndata:\n  cert: |\n  key: {K8S}\n"


def test_only_the_secrets_own_document_is_taken() -> None:
    text = (
        "kind: ConfigMap\ndata:\n  a: plain\n---\nkind: Secret\ndata:\n  b: c2VjcmV0\n"
        "---\nkind: ConfigMap\ndata:\n  c: plain2\n"
    )
    assert redact(text).text == text.replace("c2VjcmV0", K8S)
    _left("kind: ConfigMap\ndata:\n  username: admin\n")
    _left("mykind: Secret\ndata:\n  b: c2VjcmV0\n")


def test_a_secrets_kind_may_follow_its_data_or_carry_a_comment() -> None:
    text = "data:\n  b: c2VjcmV0\n  c: ZGVm\nkind: Secret\n"
    assert redact(text).text == text.replace("c2VjcmV0", K8S).replace("ZGVm", K8S)
    text = "kind: Secret # the app's\ndata:\n    b: c2VjcmV0\n    c: ZGVm\n"
    assert redact(text).text == text.replace("c2VjcmV0", K8S).replace("ZGVm", K8S)


def test_a_secret_already_redacted_is_left() -> None:
    _left("kind: Secret\ndata:\n  b: [REDACTED:password]\n")


def test_a_name_after_a_credential_taken_is_read_as_it_will_be_once_that_is_a_marker() -> None:
    # Found by the fuzz test of idempotence: a key block cut short, then a flag glued to its
    # dashes. The name starts where the key ends, on the first pass as on the second.
    text = "-----BEGIN" + "PRIVATE KEY-------password 1-xo"
    once = redact(text)
    assert once.text == "[REDACTED:private-key]--password [REDACTED:password]"
    assert once.kinds == ("private-key", "password")
    assert redact(once.text).text == once.text


def test_a_token_glued_to_a_credential_taken_is_judged_as_after_its_marker() -> None:
    # Found the same way: a token glued to a key block's dashes, taken once the block is a
    # marker (its left edge is "]" then), so it is taken on the first pass.
    token = "gl" + "pat-" + "AAAAAABDIIIKKKPao00w"
    once = redact("-----BEGIN" + "PRIVATE KEY-----" + token)
    assert once.text == "[REDACTED:private-key][REDACTED:gitlab-token]"
    assert redact(once.text).text == once.text
    # Not glued, the left edge is the text's own: a token inside a word is not one, and a dash
    # ends a word (`key-ghp_...`, `--token=glpat-...`, as the scanners read it).
    for inside in ("x", "x_", "9"):
        assert redact(inside + token).count == 0, inside
    for after in ("x-", "key-", "--", "-"):
        out = redact(after + token)
        assert out.text == after + "[REDACTED:gitlab-token]", after
        assert redact(out.text).text == out.text


def test_a_provider_token_after_a_dash_is_taken_and_a_word_holding_its_prefix_is_not() -> None:
    gh = "gh" + "p_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    assert redact(f"deploy-key-{gh}\n").text == "deploy-key-[REDACTED:github-token]\n"
    # task-... holds the letters of sk-..., but they start inside the word "task"
    sk = "sk-" + "proj-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3k"
    assert redact(sk).kinds == ("openai-key",)
    assert redact("ta" + sk).count == 0


def test_results_are_values_that_cannot_be_changed_after_the_fact() -> None:
    # A redaction handed to the index and to the log is one value: neither can alter what the
    # other sees, and findings can be kept in sets (the same credential found twice is one).
    text = "password = 'hunter2x'\ntoken = 'abcdefgh12'\n"
    out = redact(text)
    found = scan(text)
    assert len({*found, *scan(text)}) == 2
    assert {out: 1}[redact(text)] == 1
    with pytest.raises(AttributeError):
        out.text = text  # type: ignore[misc]
    with pytest.raises(AttributeError):
        found[0].start = 0  # type: ignore[misc]


def test_a_secret_in_a_list_has_its_own_data_taken_and_no_other_items() -> None:
    # A kind: List of resources, the way kubectl get -o yaml writes several: the Secret is an
    # item, written `- kind: Secret` or with its kind under the item's first key.
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: ConfigMap\n  data:\n    mode: plain\n"
        "- kind: Secret\n  metadata:\n    name: app\n  data:\n    password: aHVudGVyMg==\n"
        "    user: YWRtaW4=\n"
        "- kind: ConfigMap\n  data:\n    level: debug\n"
    )
    out = redact(text)
    assert out.text == text.replace("aHVudGVyMg==", K8S).replace("YWRtaW4=", K8S)
    text = (
        "items:\n  - apiVersion: v1\n    kind: Secret\n    stringData:\n      token: s3cr3tvalue\n"
        "  - apiVersion: v1\n    kind: ConfigMap\n    data:\n      color: blue\n"
    )
    assert redact(text).text == text.replace("s3cr3tvalue", K8S)
    # The last item runs to the document's end.
    text = "- kind: ConfigMap\n  data:\n    a: plain\n- kind: Secret\n  data:\n    k: dmFs\n"
    assert redact(text).text == text.replace("dmFs", K8S)


def test_a_secret_whose_kind_is_indented_outside_a_list_is_its_whole_document() -> None:
    # An indented kind: Secret under a mapping key, not an item of a list: the Secret is read as
    # its whole document, as a kind: Secret at the margin is.
    text = "spec:\n  template:\n    kind: Secret\n    data:\n      key: c2VjcmV0dmFs\n"
    assert redact(text).text == text.replace("c2VjcmV0dmFs", K8S)
    text = "wrapper:\n  kind: Secret\ndata:\n  key: c2VjcmV0dmFs\n---\nother:\n  k: plain\n"
    assert redact(text).text == text.replace("c2VjcmV0dmFs", K8S)


def test_a_key_beside_an_items_data_ends_its_data() -> None:
    text = "- kind: Secret\n  data:\n    a: dmFsdWVvbmU=\n  type: Opaque\n  note: kept\n"
    assert redact(text).text == text.replace("dmFsdWVvbmU=", K8S)
    text = "kind: Secret\ndata:\n  a: dmFsdWVvbmU=\ntype: Opaque\n"
    assert redact(text).text == text.replace("dmFsdWVvbmU=", K8S)


def test_a_secrets_data_is_taken_beside_provider_tokens_before_and_after_it() -> None:
    # A provider's token elsewhere in the text, before the Secret or after its value, does not
    # keep the Secret's own value from being taken; one inside the value is taken as itself.
    token = "gl" + "pat-" + "AAAAAABDIIIKKKPao00w"
    text = (
        f"# deploy with {token}\nkind: Secret\ndata:\n  a: dmFsdWVvbmU=\n"
        f"  b: {token}\n  c: dHdvdmFsdWU=\n# and {token}\n"
    )
    out = redact(text)
    gl = marker("gitlab-token")
    assert out.text == (
        f"# deploy with {gl}\nkind: Secret\ndata:\n  a: {K8S}\n  b: {gl}\n  c: {K8S}\n# and {gl}\n"
    )
    assert out.kinds == (
        "gitlab-token",
        "kubernetes-secret",
        "gitlab-token",
        "kubernetes-secret",
        "gitlab-token",
    )


def test_a_block_scalar_that_ends_the_text_keeps_its_last_line_break() -> None:
    for tail in ("\n", ""):
        text = f"kind: Secret\ndata:\n  cert: |\n    AAAA\n    BBBB{tail}"
        out = redact(text)
        assert out.text == f"kind: Secret\ndata:\n  cert: |\n{K8S}\n{tail}", repr(tail)
        assert out.text.count("\n") == text.count("\n")


def test_a_secret_is_read_to_the_texts_end_without_a_last_line_break() -> None:
    text = "kind: Secret\ndata:\n  a: dmFsdWVvbmU=\n  b: dHdvdmFsdWU="
    assert redact(text).text == text.replace("dmFsdWVvbmU=", K8S).replace("dHdvdmFsdWU=", K8S)
    text = "data:\n  a: dmFsdWVvbmU=\nkind: Secret"
    assert redact(text).text == text.replace("dmFsdWVvbmU=", K8S)
    text = "- kind: Secret\n  data:\n    a: dmFsdWVvbmU="
    assert redact(text).text == text.replace("dmFsdWVvbmU=", K8S)
