"""The assignment rule of redaction (:mod:`guard.redact`): a name holding a secret word, glued or
not, given a literal value in any of the usual syntaxes (code, shell, ``.env``, INI, YAML, TOML,
JSON, XML, C macros), and the AWS secret key after its name.

:func:`secret_name` says whether a name is a credential's, and of which kind; :func:`assignment`
judges the place where a secret word occurs: where the name around it begins and ends, the
operator after it, and whether the value is a literal credential or code (an expression, a type,
a reference, a placeholder). docs/redaction.md lists what is taken and what is left, and why.
"""

from __future__ import annotations

import functools
import re

from nodwyn_retrieval.guard.secret_rules import Rule, random_body
from nodwyn_retrieval.guard.secret_values import (
    MARKER_PREFIX,
    entropy,
    high_entropy,
    is_placeholder,
)

__all__ = [
    "AWS_SECRET",
    "NAME_REST",
    "NAME_WORD",
    "SECRET_LOCATORS",
    "assignment",
    "judgeable",
    "secret_name",
]

_MARKER_PREFIX = MARKER_PREFIX
_is_placeholder = is_placeholder

# The secret words a name may end in, each with the kind of its marker. A name's last word is one
# of these, or is one glued after qualifier words (DBPassword, accesstoken, PGPASSWORD).
_SECRET_WORDS: dict[str, str] = {
    "password": "password", "passwd": "password", "pass": "password", "pwd": "password",
    "passphrase": "password", "passcode": "password",
    "secret": "secret", "secrets": "secret", "secretkey": "secret", "privatekey": "secret",
    "signingkey": "secret", "encryptionkey": "secret", "masterkey": "secret",
    "token": "token",
    "apikey": "api-key",
    "auth": "credential", "authorization": "credential", "credential": "credential",
    "credentials": "credential", "creds": "credential", "authkey": "credential",
}  # fmt: skip
# "key" after one of these is a secret word (api_key, SECRET_KEY, private-key).
_KEY_QUALIFIERS = frozenset(
    {"api", "secret", "private", "signing", "encryption", "master", "auth", "client", "app"}
)
# Words that may be glued before a secret word: a service, a role or a purpose.
_GLUE = frozenset(
    {
        "db", "pg", "postgres", "postgresql", "mysql", "mssql", "sql", "redis", "mongo", "mongodb",
        "smtp", "mail", "email", "imap", "pop", "ftp", "sftp", "ssh", "ldap", "admin", "root",
        "user", "username", "master", "app", "application", "client", "access", "refresh",
        "session", "bearer", "api", "auth", "oauth", "bot", "github", "gh", "gitlab", "slack",
        "aws", "azure", "gcp", "npm", "pypi", "docker", "registry", "private", "secret",
        "service", "account", "deploy", "ci", "id", "jwt", "webhook", "signing", "encryption",
        "store", "keystore", "truststore", "key", "login", "sudo", "vault", "personal",
        "consumer", "x", "my", "new", "old", "current", "default", "proxy", "http", "https",
        "web", "server", "system", "sys", "super", "superuser", "rabbit", "rabbitmq", "amqp",
        "kafka", "elastic", "influx", "grafana", "jenkins", "sonar", "nexus", "openai",
        "stripe", "twilio", "sendgrid", "mailgun", "discord", "telegram", "heroku",
        "cloudflare", "cf", "okta", "shopify", "hf", "wp", "site", "cookie", "hmac", "wifi",
        "vpn", "remote", "local", "dev", "prod", "staging", "live", "api2", "oidc", "saml",
        "sso", "basic", "digest", "verify", "verification", "reset", "invite", "upload",
        "download", "read", "write", "org", "team", "project", "gateway", "broker", "agent",
        "runner", "trigger", "pipeline", "install", "bootstrap", "join", "cluster", "node",
        "encrypt", "decrypt", "share", "shared", "ticket", "license", "pat", "ssl", "tls",
        "cert", "keychain", "wallet", "database", "data", "sa", "svc", "integration", "partner",
        "identity",
    }
)  # fmt: skip
# Words that make a name something else than a credential: a public key token, a CSRF or paging
# token, a tokenizer's special token, a length, a field's label.
_NOT_SECRET = frozenset(
    {
        "public", "pub", "publishable", "csrf", "xsrf", "next", "page", "continuation",
        "cancellation", "cancel", "sync", "eos", "bos", "pad", "unk", "sep", "cls", "mask",
        "max", "min", "num", "placeholder", "prompt", "regex", "pattern", "hint", "forgot",
        "show", "hide", "toggle", "visible", "is", "has", "use", "allow", "require", "requires",
        "needs", "no", "non", "un", "low", "high", "band", "multi", "first", "second", "render",
        "sub", "by", "special", "start", "end", "stop", "sentence", "word", "lexer", "parse",
        "cursor", "resume", "marker", "prev", "previous", "label", "type", "kind", "last",
    }
)  # fmt: skip
# Trailing words that qualify the value without changing what it is (PASSWORD_PROD, token_b64).
_SUFFIXES = frozenset(
    {"str", "string", "b64", "base64", "enc", "encrypted", "raw", "plain",
     "plaintext", "prod", "production", "dev", "development", "staging", "stage", "test",
     "testing", "live", "local", "old", "new", "default", "base", "1", "2", "3"}
)  # fmt: skip
# The words a glued secret word may end in, longest first.
_GLUED_TAILS = tuple(sorted(_SECRET_WORDS, key=len, reverse=True))
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_NAME_REST = re.compile(r"[A-Za-z0-9_-]*")
_MAX_NAME = 80


def _glued(word: str) -> str | None:
    """The secret word a glued word ends in, when all that is glued before it are qualifiers."""
    for tail in _GLUED_TAILS:
        if word.endswith(tail) and len(word) > len(tail):
            if _splits(word[: -len(tail)]):
                return tail
            return None
    return None


def _splits(s: str) -> bool:
    """True when s is one or more qualifier words glued together (dbadmin, mysqlroot)."""
    ok = [True] + [False] * len(s)
    for i in range(1, len(s) + 1):
        for j in range(max(0, i - 12), i):
            if ok[j] and s[j:i] in _GLUE:
                ok[i] = True
                break
    return ok[len(s)]


@functools.lru_cache(maxsize=16384)  # a pure function of a name, and names repeat in a text
def secret_name(name: str) -> str | None:
    """The marker kind when name is a credential's (``DB_PASSWORD``, ``accessToken``), else None.

    The name's words are split at ``_``, ``-``, ``.`` and case changes (``DBPassword`` is DB and
    Password). Trailing digits and qualifiers (``_PROD``, ``_b64``) are dropped. The last word must
    be a secret word, or ``key`` after ``api``/``secret``/``private``..., or a secret word glued
    after qualifier words only (``pgpassword``, ``accesstoken``; not ``untoken``). No word may say
    it is something else: ``publicKeyToken``, ``csrf_token``, ``next_page_token``, ``eos_token``.
    """
    words = [w.lower() for w in _NAME_WORD.findall(name)]
    while len(words) > 1 and words[-1] in _SUFFIXES:
        words.pop()
    if not words:
        return None
    last = words[-1]
    kind = _SECRET_WORDS.get(last)
    if kind is None and last == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS:
        kind = "secret" if words[-2] != "api" else "api-key"
        words.pop()
    if kind is None:
        tail = _glued(last)
        if tail is None:
            return None
        kind = _SECRET_WORDS[tail]
    if any(w in _NOT_SECRET for w in words[:-1]):
        return None
    return kind


# After the name: an optional closing quote or bracket of a key (d["password"], "password": ...),
# an optional type (password: str = ..., var xToken string = ...), then the operator. The blanks
# before the operator are sp's alone, taken whole (possessive), and no operator begins with a
# blank (a blank before "value" is seen behind it): where sp and the operator's own leading
# blanks could share a run, each way of cutting it was tried, and a secret word followed by
# 20,000 blanks took 12 s to judge (a 1 MiB file of them, hours).
_OPERATOR = re.compile(
    r"""(?P<close>\\["']|["'`]?)\]?"""
    r"""(?:[ \t]*:[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]{0,40}\])?"""
    r"""(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*)*(?=[ \t]*=[^=])"""
    r"""|[ \t]+(?:string|String|str|\[\]byte)(?=[ \t]*=[^=]))?"""
    r"""(?P<sp>[ \t]*+)(?P<op>:=|=>|\?=|=(?!=|~[ \t/])|:(?![:=])|,|\(|>"""
    r"""|(?:,[ \t]*|\r?\n[ \t]*-?[ \t]*|(?<=[ \t]))\\?["']?value\\?["']?[ \t]*[:=])"""
    r"""(?P<sp2>[ \t]*)"""
)
# A quoted value on one line (a string prefix allowed): backslash escapes are skipped.
_QUOTED = re.compile(r"""[bBrRuUf@]{0,2}(?P<q>["'`])(?P<v>(?:\\.|(?!(?P=q))[^\\\n])*)(?P=q)""")
# A quoted value inside a string, its quotes escaped: the source of a notebook's cell, a
# package.json script, a command in a JSON log (DB_PASSWORD=\"x\", {\"token\": \"x\"}).
_ESCAPED_QUOTED = re.compile(r"""\\(?P<q>["'])(?P<v>[^\\\n"']*)\\(?P=q)""")


def _quoted_at(text: str, pos: int) -> re.Match[str] | None:
    """The quoted value at pos, its quotes plain or escaped (groups q and v)."""
    return _QUOTED.match(text, pos) or _ESCAPED_QUOTED.match(text, pos)


# A bare value: up to whitespace, a quote or a separator of the syntax around it.
_BARE = re.compile(r"""(?:[^\s"'`,;&)<>\]}|-]|->|-)+""")
_XML_VALUE = re.compile(r"[^<\n]+")
_NAME_KEY = re.compile(r"""(?:name|key)\\?["']?[ \t]*[:=][ \t]*\\?["']?$""")
_TUPLE_TARGET = re.compile(r"(?:^|\n)[ \t]*[A-Za-z_][\w.]*[ \t]*,[ \t]*$")
_CONTINUED = re.compile(r"[ \t]*(?:[+%*]|\.(?:format|join|encode|replace|strip)\b)")
_FLAG_VALUE = re.compile(r"""[ \t]+(?:\\?["'])?(?P<v>(?:[^\s"'`;|&<>\\]|\\(?!["']))+)""")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An attribute chain of words (self.password, settings.DB_PASSWORD), a call or a subscript; a
# dotted random string (a Discord token, O40.Qltg5p) is not one.
_EXPRESSION = re.compile(
    r"[A-Za-z_$][A-Za-z_$]*\d*(?:(?:\.|::|->)[A-Za-z_$][A-Za-z_$]*\d*)+|[A-Za-z_$][\w$.]*[(\[].*"
)
# A dotted chain of identifiers: a reference (rust_openssl.hpke.X25519PrivateKey) when its last
# part names a secret itself, as no credential's value does.
_REFERENCE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
# A C or C++ macro's definition before a name: #define API_KEY "..."
_DEFINE = re.compile(r"(?:^|\n)[ \t]*#[ \t]*define[ \t]+$")
_DEFINED = re.compile(r"[ \t]+")
# A variable set by a command taking its name and its value as two words: a Dockerfile's
# ENV NAME value (its older form), csh's setenv NAME value, fish's set -x NAME value.
_SET_COMMAND = re.compile(
    r"(?:^|\n|\\n|\")[ \t]*(?:ENV|setenv|set(?:[ \t]+-[a-zA-Z]*x[a-zA-Z]*|[ \t]+--export)+)[ \t]+$"
)
_LINE_END = re.compile(r"[ \t]*(?:\r?\n|\\n|$)")  # a "\n" escape ends it in a JSON string
# A YAML scalar's tag before its value: password: !!str x
_YAML_SCALAR_TAG = re.compile(r"!!(?:str|binary)[ \t]+")
# A YAML tag, anchor or alias (!vault, &defaults, *defaults), a file reference (@secret.txt).
_YAML_NODE = re.compile(r"[!&*]{1,2}[A-Za-z_][A-Za-z_.-]*|@[\w.-]*[./][\w./-]*|~")
# After "name:", the rest of the line when the value is on the lines below: a block scalar's
# indicator (|, >, with a chomping and an indentation indicator), a comment, or nothing.
_YAML_BLOCK = re.compile(
    r"(?P<ind>[|>](?:[-+]?[1-9]?|[1-9][-+])(?=[ \t\r\n#]))?[ \t]*(?:#[^\n]*)?\r?\n"
)
# A line of a YAML value below its name: its indentation, its text.
_YAML_LINE = re.compile(r"([ \t]*)([^\n]*?)[ \t\r]*(?:\n|$)")
# A plain scalar's line that is a node of its own: a mapping's key, a list's item, a flow
# collection, a quoted string, an anchor or tag, a comment.
_YAML_NODE_LINE = re.compile(r"""[-?[{"'!&*#%@`]|[^\n]*?:(?:[ \t]|$)""")
_YAML_MAX_LINES = 40
"""The most lines, blank ones too, a credential's block scalar is read over (a wrapped token)."""
_GRAMMAR = re.compile(r"\d+\*|\*\(|\*[A-Z]+$")  # ABNF's repetition: 1*tchar, *( field )
_CHAIN_HEAD = re.compile(r"[a-z_$][\w$]*[.:-]|[A-Z][a-z][\w$]*[.:-]")
_CALL = re.compile(r"[A-Za-z_$][\w$.:>-]*[(\[]")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_TYPE_NAMES = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
     "float64", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f32", "f64", "utf8",
     "sha1", "sha256", "sha512", "md5", "base64", "oauth2", "http2", "v1", "v2", "v3"}
)  # fmt: skip
_MIN_PASSWORD = 4
"""A password shorter than this is a flag, a tokenizer's token or a placeholder, not a password."""
_MIN_KEY = 8
"""A token, secret or API key shorter than this must hold a digit to be taken for one."""


def _quoted_secret(value: str, kind: str) -> bool:
    if _is_placeholder(value) or any(c.isspace() for c in value):
        return False
    if high_entropy(value):
        return True
    if kind in ("password", "credential"):
        return len(value) >= _MIN_PASSWORD
    return len(value) >= _MIN_KEY or (
        len(value) >= _MIN_PASSWORD and any(c.isdigit() for c in value)
    )


def _jumbled(value: str) -> bool:
    """Lowercase, uppercase and digits all mixed, with high plain entropy: O40.Qltg5p, not a.b2."""
    return (
        len(value) >= _MIN_KEY
        and any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
        and entropy(value) >= 3.0
    )


def _bare_secret(value: str, kind: str, tight: bool, after: str) -> bool:
    """A bare value is a literal in shell, .env, INI, YAML and query strings, an expression in code.

    tight: ``NAME=value`` with no space around the ``=`` (shell, .env, a connection string, a
    query string, a command-line flag): any literal is taken, except an identifier passed as a
    keyword argument (``f(password=pw)``, followed by ``,`` or ``)``). Spaced (``key = value``,
    ``key: value``): an identifier is an expression or a type unless it mixes letters and digits
    or has high entropy; anything else (``p@ss-w0rd!``) is a literal.
    """
    if _is_placeholder(value) or value[0] in "${[(\\" or value.startswith(("%(", "%{")):
        return False
    if not tight and _YAML_NODE.fullmatch(value):
        return False
    if _NUMBER.fullmatch(value):
        return tight and len(value) >= 6  # a PIN in a .env file; a number in code
    if _CALL.match(value):
        return False
    # self.pw, settings.DB_PASSWORD, Config.KEY: code; in NAME=value, ZJXADUC84.UT is not.
    code_like = not tight or _CHAIN_HEAD.match(value) or after[:1] in (",", ")")
    if code_like and _EXPRESSION.fullmatch(value) and not _jumbled(value):
        return False
    if (
        code_like
        and _REFERENCE.fullmatch(value)
        and secret_name(value.rpartition(".")[2]) is not None
    ):
        return False  # X25519PrivateKey = rust_openssl.hpke.X25519PrivateKey: a re-export
    if "(" in value and not tight:
        return False  # !!lookup(x), a call inside an expression
    if kind == "credential" and value.isalpha():
        return False  # auth=basic, creds=Multistage: a scheme's name, not the credential
    if high_entropy(value) and len(value) >= _MIN_KEY:
        return True
    short = len(value) < (_MIN_PASSWORD if kind in ("password", "credential") else _MIN_KEY)
    if short and not (len(value) >= _MIN_PASSWORD and any(c.isdigit() for c in value)):
        return False
    identifier = _IDENTIFIER.fullmatch(value) is not None
    if tight:
        return not (identifier and after[:1] in (",", ")"))
    if identifier:
        mixed = any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
        # Random letters change case every few characters; a type's CamelCase does not.
        jumbled = len(value) >= 16 and len(_NAME_WORD.findall(value)) * 3 >= len(value)
        return (mixed or jumbled) and value.lower() not in _TYPE_NAMES
    if re.fullmatch(r"[a-z][a-z.-]*", value):  # kebab-case names: my-service, client-credentials
        return False
    # p@ss-w0rd!, not 1*tchar (a grammar) nor a path: two kinds of character, no * or /.
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )
    return sum(classes) >= 2 and _GRAMMAR.match(value) is None and "/" not in value


def _yaml_block(text: str, start: int, pos: int, kind: str, plain: bool) -> tuple[int, int] | None:
    """(value start, value end) of a YAML value under a credential's name: a block scalar
    (``password: |`` then its lines) or a plain scalar on the next line, more indented than the
    name's line. Its lines, joined, must be one literal: a line holding a blank (a passphrase,
    a certificate, a document) is left, as a quoted value holding one is; the shapes inside are
    each their own rule's. start: where the name begins; pos: the first line below it; plain:
    no block indicator (the value must then be one line, and not a node of its own)."""
    line_start = text.rfind("\n", 0, start) + 1
    head = text[line_start:start]
    indent = len(head) - len(head.lstrip(" \t-"))  # "- password: |": the item's key's column
    parts: list[str] = []
    first = last = -1
    for _ in range(_YAML_MAX_LINES):  # blank lines count: a run of them is not read whole
        if pos >= len(text):
            break
        m = _YAML_LINE.match(text, pos)
        if m is None or m.end() == pos:
            break
        lead, body = m.group(1), m.group(2)
        if not body:  # a blank line inside the block
            pos = m.end()
            continue
        if len(lead) <= indent:
            break
        if plain and (parts or _YAML_NODE_LINE.match(body) is not None):
            return None  # a mapping or a list below the name, or a plain scalar over lines
        if first < 0:
            first = m.start(2)
        parts.append(body)
        last = m.start(2) + len(body)
        pos = m.end()
    if not parts or any(c.isspace() for p in parts for c in p):
        return None
    value = "".join(parts)
    # A plain value is read as a bare one after a blank ("if token:" then "continue" is code);
    # a block scalar's is a string, as if quoted.
    ok = _bare_secret(value, kind, False, "") if plain else _quoted_secret(value, kind)
    return (first, last) if ok else None


def _after_name(text: str, at: int) -> tuple[int, re.Match[str] | None, bool]:
    """Where the name around the secret word at ``at`` ends, the operator after it, and whether
    there is anything to judge: an operator, or a blank before a flag's value. Most places a
    secret word occurs have neither (``pass`` in code, a word in prose), whatever the name is,
    and neither has any other secret word of that name (its name ends in the same place)."""
    end = _NAME_REST.match(text, at).end()  # type: ignore[union-attr]
    m = _OPERATOR.match(text, end)
    return end, m, m is not None or text[end : end + 1] in (" ", "\t")


def judgeable(text: str, at: int) -> bool:
    """Whether the place of the secret word at ``at`` can be an assignment (:func:`_after_name`):
    the scanner keeps only those places to judge."""
    return _after_name(text, at)[2]


def _assignment(text: str, at: int, floor: int = 0) -> tuple[int, int, str, int] | None:
    """(value start, value end, kind, name end) of a secret-named assignment around offset at.

    floor: where a credential already taken ends; the name starts after it, as it will once that
    credential is a marker (``-----BEGIN ... KEY-------password x``: the name is ``--password``).
    """
    end, m, something = _after_name(text, at)
    if not something:
        return None
    # The name begins where the run of name characters before at does, at most _MAX_NAME back
    # and not before floor: that run, read backwards, is the match at the start of the reversed
    # characters before at (one slice and one match, not a step a character).
    lo = max(floor, at - _MAX_NAME)
    start = at - _NAME_REST.match(text[lo:at][::-1]).end()  # type: ignore[union-attr]
    if text.endswith(_MARKER_PREFIX, 0, start):
        return None  # the kind inside a marker: [REDACTED:private-key]=...
    name = text[start:end]
    kind = secret_name(name)
    if kind is None:
        return None
    if name.startswith("--") and text[end : end + 1] in (" ", "\t"):
        # --password hunter2: a command-line flag naming a secret, then its value.
        f = _FLAG_VALUE.match(text, end)
        # A flag's value holding ":" is a structured argument (builtin:test_1:0, host:port).
        if f is None or ":" in f.group("v") or not _bare_secret(f.group("v"), kind, False, ""):
            return None
        return f.start("v"), f.end("v"), kind, end
    if m is None and _SET_COMMAND.search(text, max(0, start - 40), start):
        # ENV DB_PASSWORD x, setenv DB_PASSWORD x, set -gx DB_PASSWORD x: the value is the rest
        # of the line, one word (a value holding blanks is left, as elsewhere), or quoted.
        at_v = _DEFINED.match(text, end).end()  # type: ignore[union-attr]
        q = _quoted_at(text, at_v)
        if q is not None and q.group("q") != "`":
            ok, vs, ve = _quoted_secret(q.group("v"), kind), q.start("v"), q.end("v")
            after = q.end()
        else:
            b = _BARE.match(text, at_v)
            if b is None:
                return None
            value = b.group().split("\\n", 1)[0]  # ENV X v\nRUN ...: a Dockerfile in a JSON string
            if not value:
                return None
            vs = b.start()
            ok, ve, after = _bare_secret(value, kind, True, ""), vs + len(value), vs + len(value)
        if not ok or _LINE_END.match(text, after) is None:
            return None
        return vs, ve, kind, end
    if m is None:
        # #define API_KEY "x": a macro's name, then its literal.
        if not _DEFINE.search(text, max(0, start - 40), start):
            return None
        q = _QUOTED.match(text, _DEFINED.match(text, end).end())  # type: ignore[union-attr]
        if q is None or text[q.start() : q.start() + 1] not in ('"', "'"):
            return None
        if not _quoted_secret(q.group("v"), kind):
            return None
        return q.start("v"), q.end("v"), kind, end
    op, close = m.group("op"), m.group("close")
    before = text[start - 1] if start > 0 else ""
    pos = m.end()
    if op == ",":
        # ("password", "x"), define('DB_PASSWORD', 'x'): only after a whole quoted name.
        if not close or before != close or text[: start - 1].rstrip()[-1:] != "(":
            return None
        if kind == "credential" or name.lower() == "pass":
            return None  # ("pass", ...) is Python's keyword, ("AUTH", ...) a capability
    elif op == "(":
        # setPassword("x"), with_token("x"): a setter; not check_password("x") nor string_to_token.
        if close or _NAME_WORD.match(name.lstrip("_-")) is None:
            return None
        if _NAME_WORD.findall(name)[0].lower() not in ("set", "with"):
            return None
    elif op == ">":
        # <password>x</password>
        if before != "<" or close:
            return None
        v = _XML_VALUE.match(text, pos)
        if v is None or not text.startswith("</", v.end()):
            return None
        value = v.group().strip()
        if not _quoted_secret(value, kind):
            return None
        vs = v.start() + (len(v.group()) - len(v.group().lstrip()))
        return vs, vs + len(value), kind, end
    elif "value" in op and _NAME_KEY.search(text, max(0, start - 24), start) is None:
        # <add key="DBPassword" value="x"/>, - name: API_TOKEN / value: x, {"name": .., "value": ..}
        return None
    if op == "=" and m.group("sp") and _TUPLE_TARGET.search(text, max(0, start - 80), start):
        return None  # user, password = "wile", "coyote": which value is whose is not known
    if op == ":" and not close and (block := _YAML_BLOCK.match(text, pos)) is not None:
        # password: |, password: >-, or the value alone on the next line, more indented.
        got = _yaml_block(text, start, block.end(), kind, block.group("ind") is None)
        return None if got is None else (got[0], got[1], kind, end)
    if op == ":" and (tag := _YAML_SCALAR_TAG.match(text, pos)) is not None:
        # password: !!str x: the tag says the value is a string, a literal as if quoted.
        pos = tag.end()
        b = _BARE.match(text, pos)  # none where a quote follows: the quoted value, below
        if b is not None:
            return (b.start(), b.end(), kind, end) if _quoted_secret(b.group(), kind) else None
    if text.startswith(('"""', "'''"), pos):
        # password = """x""" (TOML's, Python's): a value on one line, the line break right
        # after the opening quotes left out; a string over lines is not a credential's.
        quotes = text[pos : pos + 3]
        at_v = pos + 3 + (text[pos + 3 : pos + 4] == "\n")
        close_at = text.find(quotes, at_v, at_v + 1024)
        if close_at < 0 or "\n" in text[at_v:close_at]:
            return None
        if not _quoted_secret(text[at_v:close_at], kind):
            return None
        return at_v, close_at, kind, end
    q = _quoted_at(text, pos)
    if q is not None:
        if op == "(" and text[q.end() : q.end() + 1] not in (")", ","):
            return None
        if _CONTINUED.match(text, q.end()) is not None:
            return None  # "user:" + password, "%s:%s" % (u, p), "{}".format(...): an expression
        if not _quoted_secret(q.group("v"), kind):
            return None
        return q.start("v"), q.end("v"), kind, end
    if op in (",", "(") or ("value" in op and close):
        return None
    b = _BARE.match(text, pos)
    if b is None:
        return None
    value = b.group()
    tight = not m.group("sp") and not m.group("sp2") and op in ("=", ":=")
    if op == ":" and not m.group("sp2") and not close:
        return None  # a:b, a ternary, a URL's port, a label
    if not _bare_secret(value, kind, tight, text[b.end() : b.end() + 1]):
        return None
    return b.start(), b.end(), kind, end


# The aws secret access key: forty base64 characters after its name, quoted or bare, given by
# an operator or by blanks alone (`aws configure set aws_secret_access_key KEY`, a Dockerfile's
# `ENV AWS_SECRET_ACCESS_KEY KEY`, csh's setenv, fish's `set -x`).
_AWS_SECRET = Rule(
    "aws-secret-key",
    (
        r"""(?i:(?:aws_?)?secret_?access_?key)["'`]?\]?"""
        r"""(?:[ \t]*(?::=|=>|=(?!=)|:)[ \t]*|[ \t]+)["']?"""
        r"""(?P<v>(?P<b>[A-Za-z0-9/+=]{40}))(?![A-Za-z0-9/+=])"""
    ),
    ("secret_access_key", "secretaccesskey"),
    0,
    random_body,
)

_SECRET_LOCATORS = (
    "pass", "pwd", "secret", "token", "api_key", "apikey", "api-key", "auth", "credential",
    "creds", "private_key", "privatekey", "private-key", "signing_key", "signingkey",
    "encryption_key", "master_key", "client_key", "app_key",
)  # fmt: skip


# The names the scanner (guard.redact) uses.
assignment = _assignment
AWS_SECRET = _AWS_SECRET
NAME_REST = _NAME_REST
NAME_WORD = _NAME_WORD
SECRET_LOCATORS = _SECRET_LOCATORS
