# ruff: noqa: E501  (a table of commands: one pattern a line reads best)
"""Passwords given to a command on its command line, by a flag or a place of its own.

Each rule is one tool's documented syntax, anchored on the tool's name or its flag, so that the
same words elsewhere (``-a`` of another command, ``user/x@host`` in prose) are left:

- OpenSSL's pass phrase arguments, ``-passin``/``-passout``/``-pass``/``-password`` ``pass:X``
  (``env:VAR``, ``file:path``, ``fd:N`` and ``stdin`` name where it is: left), and ``enc -k X``;
- Java's keytool and jarsigner, ``-storepass X``, ``-keypass X`` and their ``-src``/``-dest``
  forms (``-storepass:env VAR`` and ``:file`` are left);
- ``redis-cli -a X``;
- Oracle's ``user/password@`` of a ``jdbc:oracle:thin:`` URL and of ``sqlplus`` (and the tools
  taking the same logon: ``expdp``, ``impdp``, ``sqlldr``, ``rman``);
- ``htpasswd -b``'s password, the command's last argument;
- Windows' ``net use \\\\server\\share PASSWORD`` (the word after the share that is not an option,
  mixing two of lowercase, uppercase and digits: "net use \\\\srv\\docs mapping" is prose).

Only the password is replaced (kind ``password``), its quotes kept; a reference (``$VAR``,
``%VAR%``, ``${{ secrets.X }}``) or a placeholder is left. The quotes may be escaped (the command
inside a JSON string). :mod:`guard.redact` tries these after the provider formats.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nodwyn_retrieval.guard.secret_rules import Rule, random_body
from nodwyn_retrieval.guard.secret_values import is_placeholder

__all__ = ["COMMAND_RULES"]

_Q = r"(?P<q>\\?[\"']|)"
"""An optional opening quote, plain or escaped; the value is closed by the same (``(?P=q)``)."""
_V = r"(?P<v>(?P<b>(?:[^\s\"'\\]|\\(?![\"']))+))"
"""A value: one word, up to a quote (a backslash before a quote is that quote's escape)."""
_END = r"(?=[ \t]*(?:$|\r?\n|\\n|[;|&)<>]|\d>)|[ \t]+#|\\?\"[ \t]*(?:$|[,}\]\r\n]))"
"""The end of a command: a line's end, a shell operator or comment, or the end of a string
holding it (its ``\\n``, or its closing quote ending a JSON value)."""


def _value(s: str) -> bool:
    v = s.strip("\"'")
    return len(v) >= 3 and not is_placeholder(v)


def _random_value(s: str) -> bool:
    """A value that must also look random: its place is a word of a sentence too."""
    return random_body(s) and _value(s)


def _command(
    pattern: str,
    locators: tuple[str, ...],
    flags: int = 0,
    *,
    check: Callable[[str], bool] = _value,
) -> Rule:
    return Rule("password", pattern, tuple(x.lower() for x in locators), 0, check, flags)


COMMAND_RULES: tuple[Rule, ...] = (
    _command(
        # openssl ... -passout pass:X (quoted whole or after "pass:"); -passin, -pass, -password.
        r"(?<![A-Za-z0-9_-])-pass(?:in|out|word)?[ \t]+"
        + _Q
        + r"pass:(?P<r>\\?[\"']|)"
        + _V
        + r"(?P=r)(?P=q)",
        ("-pass",),
    ),
    _command(
        # openssl enc ... -k X: the pass phrase itself (-kfile names a file).
        r"(?<![A-Za-z0-9_./-])openssl(?:\.exe)?[ \t][^\n]*?(?<![^ \t])-k[ \t]+"
        + _Q
        + _V
        + r"(?P=q)",
        ("openssl",),
    ),
    _command(
        # keytool/jarsigner -storepass X -keypass Y (-srcstorepass, -deststorepass, -srckeypass,
        # -destkeypass); -storepass:env VAR and -storepass:file F are left.
        r"(?<![A-Za-z0-9_-])-(?:src|dest)?(?:store|key)pass[ \t]+" + _Q + _V + r"(?P=q)",
        (
            "-storepass",
            "-keypass",
            "-srcstorepass",
            "-deststorepass",
            "-srckeypass",
            "-destkeypass",
        ),
    ),
    _command(
        # redis-cli [options] -a X
        r"(?<![A-Za-z0-9_./-])redis-cli(?:\.exe)?[ \t][^\n]*?(?<![^ \t])-a[ \t]+"
        + _Q
        + _V
        + r"(?P=q)",
        ("redis-cli",),
    ),
    _command(
        # jdbc:oracle:thin:scott/PASSWORD@host:1521/orcl (and oci)
        r"(?i:jdbc:oracle:(?:thin|oci8?):)[A-Za-z0-9_$#.]+/(?P<v>(?P<b>[^\s@/\"'\\]+))@",
        ("jdbc:oracle:",),
    ),
    _command(
        # sqlplus [-s] scott/PASSWORD[@db], and the tools taking the same logon
        r"(?<![A-Za-z0-9_./-])(?i:sqlplus|expdp|impdp|sqlldr|rman)(?:\.exe)?"
        r"[ \t]+(?:-[A-Za-z]+[ \t]+)*(?:(?i:userid|target)=)?[\"']?[A-Za-z0-9_$#.]+/"
        r"(?P<v>(?P<b>[^\s@/\"'\\]+))(?=@|[ \t\"']|$|\r?\n)",
        ("sqlplus", "expdp", "impdp", "sqlldr", "rman"),
    ),
    _command(
        # htpasswd -b[cmBs...] FILE USER PASSWORD, htpasswd -nb USER PASSWORD: the last argument.
        r"(?<![A-Za-z0-9_./-])htpasswd[ \t]+(?:-[A-Za-z]+[ \t]+(?:\d+[ \t]+)?)*?-[A-Za-z]*b[A-Za-z]*"
        r"(?:[ \t]+-[A-Za-z]+(?:[ \t]+\d+)?)*(?:[ \t]+(?![-\"'])[^\s;|&\"']+){1,2}?[ \t]+"
        + _Q
        + _V
        + r"(?P=q)"
        + _END,
        ("htpasswd",),
    ),
    _command(
        # net use [Z:] \\server\share PASSWORD [/user:DOMAIN\name] [/persistent:no]
        r"(?<![A-Za-z0-9_-])(?i:net)[ \t]+(?i:use)[ \t](?:[^\n]*?[ \t])?(?:\\?\")?"
        r"(?:\\\\){1,2}[^\s\\\"]+(?:\\{1,2}[^\s\\\"]+)+(?:\\?\")?"
        r"(?:[ \t]+/[^\s]+)*[ \t]+(?P<q>\"?)(?P<v>(?P<b>[^\s/*\"][^\s\"]*))(?P=q)",
        ("net use",),
        flags=re.IGNORECASE,
        check=_random_value,
    ),
)
"""Every command's password, in the order a tie at one offset is decided."""
