# ruff: noqa: E501  (a table of formats: one pattern a line reads best)
"""The provider shapes: credentials a vendor issues in a documented, recognisable format.

Each rule is a vendor's own format (a fixed prefix, a fixed structure, an alphabet and a length),
as the public secret scanners list them (gitleaks' rule list and trufflehog's detectors, which
document the formats the vendors publish). :mod:`guard.redact` finds every rule's *locators*
(lowercase literals every match holds) in one multi-pattern scan of the lowercased text, and
tries the rule's compiled pattern only there. A few rules whose literal is short and frequent once
lowercased (``SK``, ``SG.``, ``API-``) are *direct*: their pattern starts with a case-sensitive
literal, which the regex engine searches for at C speed over the original text.

A rule's pattern is tried with ``match`` at the locator's offset less ``back`` (a format whose
literal is not its first character: ``[a-z0-9]{14}.atlasv1.``). A named group ``v`` is the part
replaced (the whole match without one); a group ``b`` is the random body, which must look random
(:func:`random_body`) unless the rule says otherwise. Patterns carry their own word boundaries:
``task-...`` does not hold ``sk-...``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from nodwyn_retrieval.guard.secret_values import is_placeholder

__all__ = ["RULES", "Rule", "random_body"]

# A token's left edge: no letter, digit or "_" runs into it (a dash ends a word, as in
# deploy-key-ghp_..., which the scanners take too). Its right edge: the body ends.
_L = r"(?<![A-Za-z0-9_])"
_R = r"(?![A-Za-z0-9_-])"
_R_B64 = r"(?![A-Za-z0-9+/=_-])"
_HEX = "[0-9a-f]"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

Check = Callable[[str], bool]


def random_body(s: str) -> bool:
    """A machine-made body: two or more of lowercase, uppercase and digits, three characters or more.

    Random keys are; words, kebab-case names, ``xxxx`` or ``XXXX`` fillers and ``0000`` are not.
    """
    if len(set(s)) < 3:
        return False
    kinds = (
        any("a" <= c <= "z" for c in s),
        any("A" <= c <= "Z" for c in s),
        any("0" <= c <= "9" for c in s),
    )
    return sum(kinds) >= 2


def _letters_random(s: str) -> bool:
    """A letters-only random body (Hugging Face): mixed case and no long repeat."""
    return len(set(s)) >= 8 and any(c.islower() for c in s) and any(c.isupper() for c in s)


def _any(s: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    """The marker's kind: ``[REDACTED:kind]``."""
    source: str
    """The regular expression, compiled as :attr:`pattern`."""
    locators: tuple[str, ...]
    """Lowercase literals every match holds, ``back`` characters from its start; empty: direct."""
    back: int
    check: Check
    """Applied to group ``b`` (the random body) when the pattern has one."""
    flags: int = 0
    _compiled: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @property
    def pattern(self) -> re.Pattern[str]:
        """The expression compiled, tried with ``match`` at the locator's offset less ``back``.

        Compiled at its first use, not at the import: most texts hold the locators of few rules
        or none, and a process that never redacts compiles none. Two threads first using a rule
        at once each compile it and one of the equal patterns is kept."""
        compiled = self._compiled
        if compiled is None:
            compiled = re.compile(self.source, self.flags)
            object.__setattr__(self, "_compiled", compiled)  # frozen: a cache, not a field's change
        return compiled


def _rule(
    kind: str,
    pattern: str,
    locators: tuple[str, ...] | str,
    *,
    back: int = 0,
    check: Check = random_body,
    flags: int = 0,
) -> Rule:
    locs = (locators,) if isinstance(locators, str) else locators
    return Rule(kind, pattern, tuple(x.lower() for x in locs), back, check, flags)


def _prefixed(
    kind: str, prefixes: tuple[str, ...], body: str, *, check: Check = random_body
) -> Rule:
    """prefix + random body, as a word: the common shape of a modern vendor token."""
    alt = "|".join(re.escape(p) for p in prefixes)
    return _rule(kind, _L + f"(?:{alt})(?P<b>{body})" + _R, prefixes, check=check)


def _b64_heads(heads: tuple[str, ...]) -> tuple[str, ...]:
    """The base64 every encoding of these PEM BEGIN lines starts with (whole 3-byte groups)."""
    out = []
    for head in heads:
        raw = head.encode()
        out.append(base64.b64encode(raw[: len(raw) // 3 * 3]).decode())
    return tuple(out)


_B64_PEM_HEADS = _b64_heads(
    (
        "-----BEGIN PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN DSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    )
)


_NETRC_SEP = r"(?:[ \t]|\r?\n|\\\\?n)+"
"""What separates a netrc file's words: blanks, newlines, and the "\\n" of a printf writing one
(escaped again, "\\\\n", where that command is itself a JSON string)."""


def _netrc_value(s: str) -> bool:
    """A netrc or a login command's password: a literal, not a reference or a placeholder."""
    v = s.strip("\"'")
    return len(v) >= 3 and not is_placeholder(v)


RULES: tuple[Rule, ...] = (
    # --- keys and key files ------------------------------------------------------------------------
    _rule(
        "private-key",
        # To the END line; a block cut short (no END) through its base64 lines. Real newlines and
        # the "\n" escapes of a key held in a JSON string are both followed.
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:[ \t]*(?:\r?\n|\\n)[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*))*)",
        "-----begin",
        check=_any,
    ),
    _rule(
        "private-key",
        # PuTTY's .ppk: the private half is the base64 lines after "Private-Lines: N", then the MAC.
        r"Private-Lines:[ \t]*\d+[ \t]*\r?\n(?:[A-Za-z0-9+/=]{4,}[ \t]*\r?\n)*"
        r"(?:Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+)?",
        "private-lines:",
        check=_any,
    ),
    _rule(
        "private-key",
        # The SSH.com (RFC 4716) form, four dashes and spaces: what ssh-keygen -e and some
        # Windows clients write. Its headers ("Comment: ...") and base64 lines, to the END line.
        r"---- BEGIN SSH2 (?:ENCRYPTED )?PRIVATE KEY ----"
        r"(?:[\s\S]*?---- END SSH2 (?:ENCRYPTED )?PRIVATE KEY ----"
        r"|(?:[ \t]*\r?\n[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*))*)",
        "---- begin ssh2",
        check=_any,
    ),
    _rule(
        "private-key",
        # A PEM private key encoded again in base64: a kubeconfig's client-key-data, a Helm
        # value, a CI variable. "-----BEGIN RSA PRIVATE KEY-----" is "LS0tLS1CRUdJTiBSU0Eg...";
        # the blob on its line, and the 64- or 76-character lines of one wrapped by base64(1).
        r"(?<![A-Za-z0-9+/])(?:" + "|".join(_B64_PEM_HEADS) + r")[A-Za-z0-9+/]*={0,2}"
        r"(?:\r?\n[ \t]*[A-Za-z0-9+/]{64,76}(?=\r?\n|$))*"
        r"(?:\r?\n[ \t]*[A-Za-z0-9+/]{8,75}={0,2}(?![^\r\n]))?",
        "ls0tls1crudjtib",
        check=_any,
    ),
    _rule(
        "age-secret-key",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        "age-secret-key-1",
    ),
    # --- clouds ------------------------------------------------------------------------------------
    _rule(
        "aws-access-key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
        ("akia", "asia", "abia", "acca", "a3t"),
        check=_any,
    ),
    _rule(
        "aws-session-token",
        r"(?<![A-Za-z0-9+/])(?:FwoGZXIvYXdzE|IQoJb3JpZ2luX2Vj)[A-Za-z0-9+/=]{100,}",
        ("fwogzxivyxdze", "iqojb3jpz2lux2vj"),
        check=_any,
    ),
    _rule("google-api-key", _L + r"AIza(?P<b>[0-9A-Za-z_-]{35})" + _R, "aiza"),
    _prefixed("google-oauth-secret", ("GOCSPX-",), r"[A-Za-z0-9_-]{28}"),
    _rule("google-oauth-token", _L + r"ya29\.(?P<b>[A-Za-z0-9_-]{30,})" + _R, "ya29."),
    _rule("google-oauth-token", r"(?<![A-Za-z0-9/])1//0(?P<b>[A-Za-z0-9_-]{40,})" + _R, "1//0"),
    _rule(
        "azure-client-secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~(?P<b>[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_~.-])",
        "q~",
        back=4,
    ),
    _rule(
        "azure-storage-key",
        r"(?i:AccountKey)[ \t]*=[ \t]*(?P<v>(?P<b>[A-Za-z0-9+/]{86})==)",
        "accountkey",
    ),
    _rule(
        "azure-storage-key",
        r"(?i:SharedAccessKey)[ \t]*=[ \t]*(?P<v>(?P<b>[A-Za-z0-9+/]{42,43})=)",
        "sharedaccesskey",
    ),
    _rule(
        "azure-sas-token",
        # A shared access signature in a URL: ...&sig=<base64 of 32 bytes, URL-encoded>.
        r"(?<=[?&;])sig=(?P<v>(?P<b>[A-Za-z0-9%+/]{40,100})(?:%3D|=)?)(?![A-Za-z0-9%+/=])",
        "sig=",
    ),
    _rule(
        "azure-devops-token",
        # The 84-character personal access token: 76 random characters, "AZDO", 4 more.
        r"(?<![A-Za-z0-9])(?P<b>[A-Za-z0-9]{76})AZDO[A-Za-z0-9]{4}(?![A-Za-z0-9])",
        "azdo",
        back=76,
    ),
    _rule(
        "azure-apim-key",
        r"(?i:Ocp-Apim-Subscription-Key)[\"']?[ \t]*[:=,][ \t]*[\"']?(?P<v>(?P<b>[0-9a-f]{32}))"
        + _R,
        "ocp-apim-subscription-key",
    ),
    _rule("alibaba-access-key", _L + r"LTAI(?P<b>[A-Za-z0-9]{20})" + _R, "ltai"),
    _rule(
        "digitalocean-token",
        _L + r"do[opr]_v1_(?P<b>[a-f0-9]{64})" + _R,
        ("dop_v1_", "doo_v1_", "dor_v1_"),
    ),
    _rule(
        "cloudflare-origin-ca-key", _L + r"v1\.0-(?P<b>[a-f0-9]{24})-[a-f0-9]{146}" + _R, "v1.0-"
    ),
    _prefixed("heroku-api-key", ("HRKU-AA",), r"[0-9A-Za-z_-]{58}"),
    _rule("yandex-api-key", _L + r"AQVN(?P<b>[A-Za-z0-9_-]{35,38})" + _R, "aqvn"),
    _prefixed("ibm-cloud-key", ("IBMCLOUD_APIKEY_",), r"[A-Za-z0-9_-]{32,}"),
    # --- source hosting, CI, packages ---------------------------------------------------------------
    _rule(
        "github-token",
        _L
        + r"(?:gh[pousr]_(?P<b>[A-Za-z0-9]{36,255})|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule(
        "gitlab-token",
        _L
        + r"gl(?:pat|ptt|rt|soat|cbt|dt|ffct|ft|imt|agent|oas|dt)-(?P<b>[0-9A-Za-z_.-]{20,300})"
        + _R,
        (
            "glpat-",
            "glptt-",
            "glrt-",
            "glsoat-",
            "glcbt-",
            "gldt-",
            "glffct-",
            "glft-",
            "glimt-",
            "glagent-",
            "gloas-",
        ),
    ),
    _rule("gitlab-token", _L + r"GR1348941(?P<b>[0-9A-Za-z_-]{20})" + _R, "gr1348941"),
    _rule("gitlab-token", r"_gitlab_session=(?P<v>(?P<b>[0-9a-z]{32}))" + _R, "_gitlab_session="),
    _prefixed("npm-token", ("npm_",), r"[A-Za-z0-9]{36}"),
    _rule(
        "pypi-token",
        r"(?<![A-Za-z0-9_-])pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}",
        "pypi-ag",
        check=_any,
    ),
    _prefixed("rubygems-token", ("rubygems_",), r"[a-f0-9]{48}"),
    _rule("clojars-token", _L + r"CLOJARS_(?P<b>[a-z0-9]{60})" + _R, "clojars_"),
    _prefixed("docker-hub-token", ("dckr_pat_", "dckr_oat_"), r"[A-Za-z0-9_-]{27,}"),
    _prefixed("buildkite-token", ("bkua_",), r"[a-f0-9]{40}"),
    _rule("circleci-token", _L + r"CCIPAT_(?P<b>[A-Za-z0-9]{22})_[a-f0-9]{40}" + _R, "ccipat_"),
    _prefixed("sonarqube-token", ("squ_", "sqp_", "sqa_"), r"[a-f0-9]{40}"),
    _prefixed("deno-token", ("ddp_", "ddw_"), r"[A-Za-z0-9]{36}"),
    _prefixed("netlify-token", ("nfp_",), r"[A-Za-z0-9]{36,40}"),
    _prefixed("render-token", ("rnd_",), r"[A-Za-z0-9]{32}"),
    _rule(
        "sourcegraph-token",
        _L + r"sgp_(?:[a-f0-9]{16}_|local_)?(?P<b>[a-f0-9]{40})" + _R,
        "sgp_",
    ),
    _rule("artifactory-token", _L + r"AKCp(?P<b>[A-Za-z0-9]{69})" + _R, "akcp"),
    _rule("artifactory-token", _L + r"cmVmd(?P<b>[A-Za-z0-9]{59})" + _R, "cmvmd"),
    _rule(
        "octopus-deploy-key", r"API-(?<![A-Za-z0-9_-]API-)(?P<b>[A-Z0-9]{26})" + _R, (), check=_any
    ),
    _rule("pulumi-token", _L + r"pul-(?P<b>[a-f0-9]{40})" + _R, "pul-"),
    _rule("prefect-token", _L + r"pnu_(?P<b>[A-Za-z0-9]{36})" + _R, "pnu_"),
    _prefixed("scalingo-token", ("tk-us-",), r"[A-Za-z0-9_-]{48}"),
    _rule(
        "fly-token",
        _L + r"(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_(?P<b>[A-Za-z0-9+/]{100,})={0,3})",
        ("fo1_", "fm1a_", "fm1r_", "fm2_"),
        check=_any,
    ),
    _prefixed("infracost-token", ("ico-",), r"[A-Za-z0-9]{32}"),
    _prefixed("readme-token", ("rdme_",), r"[a-z0-9]{70}"),
    _rule(
        "terraform-cloud-token",
        r"(?<![A-Za-z0-9])(?P<b>[A-Za-z0-9]{14})\.atlasv1\.[A-Za-z0-9_=-]{60,70}" + _R,
        ".atlasv1.",
        back=14,
    ),
    _prefixed("hashicorp-vault-token", ("hvs.", "hvb.", "hvr."), r"[A-Za-z0-9_-]{24,300}"),
    _rule(
        "doppler-token",
        _L + r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?P<b>[A-Za-z0-9]{40,44})" + _R,
        ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
    ),
    _prefixed(
        "harness-token", ("pat.", "sat."), r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"
    ),
    # --- chat and messages --------------------------------------------------------------------------
    _rule(
        "slack-token",
        _L + r"xox[abposre]-(?P<b>[0-9]+-[A-Za-z0-9-]{8,})",
        ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-"),
        check=_any,
    ),
    _rule("slack-token", _L + r"xoxe\.xox[bp]-\d-(?P<b>[A-Z0-9]{100,170})", "xoxe.xox"),
    _rule("slack-token", _L + r"xapp-\d-[A-Z0-9]+-\d+-(?P<b>[a-z0-9]{20,})", "xapp-", check=_any),
    _rule(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>(?P<b>[A-Za-z0-9+/]{30,80}))",
        "hooks.slack.com/",
    ),
    _rule(
        "discord-webhook",
        r"discord(?:app)?\.com/api/webhooks/(?P<v>\d{5,25}/(?P<b>[A-Za-z0-9_-]{60,70}))",
        ("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
    ),
    _rule(
        "telegram-bot-token",
        r"(?<![0-9A-Za-z_-])\d{5,16}:AA(?P<b>[A-Za-z0-9_-]{33})" + _R,
        ":aa",
        back=-1,  # the digits before ":" are found by a backward scan
    ),
    _rule(
        "microsoft-teams-webhook",
        r"\.webhook\.office\.com/webhookb2/(?P<v>(?P<b>[A-Za-z0-9@/-]{60,300}))",
        ".webhook.office.com/webhookb2/",
    ),
    _rule(
        "sendgrid-key",
        r"SG\.(?<![A-Za-z0-9_-]SG\.)(?P<b>[A-Za-z0-9_-]{22})\.[A-Za-z0-9_-]{43}" + _R,
        (),
    ),
    _rule(
        "sendinblue-key",
        _L + r"x(?:keysib|smtpsib)-(?P<b>[a-f0-9]{64})-[A-Za-z0-9]{16}" + _R,
        ("xkeysib-", "xsmtpsib-"),
    ),
    _rule("mailgun-key", r"key-(?<![A-Za-z0-9_-]key-)(?P<b>[0-9a-f]{32})" + _R, ()),
    _rule(
        "mailchimp-key",
        r"(?<![A-Za-z0-9_-])(?P<b>[0-9a-f]{32})-us\d{1,2}" + _R,
        "-us",
        back=32,
    ),
    _rule("twilio-key", r"SK(?<![A-Za-z0-9_-]SK)(?P<b>[0-9a-fA-F]{32})" + _R, ()),
    # --- payments and commerce ----------------------------------------------------------------------
    _rule(
        "stripe-key",
        _L + r"(?:sk|rk)_(?:live|test|prod)_(?P<b>[0-9A-Za-z]{10,250})" + _R,
        ("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"),
    ),
    _prefixed("stripe-key", ("whsec_",), r"[A-Za-z0-9]{32,}"),
    _prefixed("shopify-token", ("shpat_", "shpca_", "shppa_", "shpss_"), r"[a-fA-F0-9]{32}"),
    _rule(
        "square-token",
        _L + r"(?:sq0atp|sq0csp)-(?P<b>[A-Za-z0-9_-]{22,60})" + _R,
        ("sq0atp-", "sq0csp-"),
    ),
    _rule("square-token", _L + r"EAAA(?P<b>[A-Za-z0-9_-]{60})" + _R, "eaaa"),
    _rule("facebook-token", _L + r"EAA[MC](?P<b>[A-Za-z0-9]{100,})" + _R, ("eaam", "eaac")),
    _rule("shippo-token", _L + r"shippo_(?:live|test)_(?P<b>[a-fA-F0-9]{40})" + _R, "shippo_"),
    _rule("easypost-key", _L + r"EZ[AT]K(?P<b>[A-Za-z0-9]{54})" + _R, ("ezak", "eztk")),
    _rule("duffel-token", _L + r"duffel_(?:test|live)_(?P<b>[A-Za-z0-9_=-]{43})" + _R, "duffel_"),
    _rule(
        "flutterwave-key",
        _L + r"FLW(?:SECK|PUBK)(?:_TEST)?-(?P<b>[a-h0-9]{12,32})(?:-X)?" + _R,
        ("flwseck", "flwpubk"),
    ),
    # --- AI and data --------------------------------------------------------------------------------
    _rule(
        "anthropic-key",
        _L + r"sk-ant-(?:api\d\d-|admin\d\d-|oat\d\d-|ort\d\d-)?(?P<b>[A-Za-z0-9_-]{20,})",
        "sk-ant-",
    ),
    _rule(
        "openai-key",
        _L + r"sk-(?P<b>(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})" + _R,
        "sk-",
    ),
    _prefixed("huggingface-token", ("hf_", "api_org_"), r"[A-Za-z]{34}", check=_letters_random),
    _prefixed("groq-key", ("gsk_",), r"[A-Za-z0-9]{52}"),
    _prefixed("replicate-token", ("r8_",), r"[A-Za-z0-9]{37}"),
    _prefixed("xai-key", ("xai-",), r"[A-Za-z0-9]{80}"),
    _prefixed("perplexity-key", ("pplx-",), r"[A-Za-z0-9]{48}"),
    _rule("langsmith-key", _L + r"lsv2_(?:pt|sk)_(?P<b>[a-f0-9]{32})_[a-f0-9]{10}" + _R, "lsv2_"),
    _rule("pinecone-key", _L + r"pcsk_[A-Za-z0-9]{4,8}_(?P<b>[A-Za-z0-9]{40,})" + _R, "pcsk_"),
    _prefixed("tavily-key", ("tvly-",), r"(?:dev-|prod-)?[A-Za-z0-9]{32}"),
    _rule("databricks-token", _L + r"dapi(?P<b>[a-f0-9]{32})(?:-\d)?" + _R, "dapi"),
    _rule("clickhouse-key", _L + r"4b1d(?P<b>[A-Za-z0-9]{38})" + _R, "4b1d"),
    _rule(
        "planetscale-token",
        _L + r"pscale_(?:tkn|oauth|pw)_(?P<b>[A-Za-z0-9_=.-]{32,64})" + _R,
        "pscale_",
    ),
    _prefixed("supabase-token", ("sbp_",), r"[a-f0-9]{40}"),
    _prefixed("supabase-token", ("sb_secret_",), r"[A-Za-z0-9_-]{31,}"),
    # --- productivity, monitoring, identity ---------------------------------------------------------
    _prefixed("linear-key", ("lin_api_",), r"[A-Za-z0-9]{40}"),
    _prefixed("linear-key", ("lin_oauth_",), r"[a-f0-9]{64}"),
    _rule("notion-token", _L + r"ntn_(?P<b>[0-9]{11}[A-Za-z0-9]{35})" + _R, "ntn_"),
    _rule("notion-token", _L + r"secret_(?P<b>[A-Za-z0-9]{43})" + _R, "secret_"),
    _rule("postman-key", _L + r"PMAK-(?P<b>[a-f0-9]{24})-[a-f0-9]{34}" + _R, "pmak-"),
    _prefixed("grafana-token", ("glc_",), r"[A-Za-z0-9+/]{32,400}={0,3}"),
    _rule("grafana-token", _L + r"glsa_(?P<b>[A-Za-z0-9]{32})_[A-Fa-f0-9]{8}" + _R, "glsa_"),
    _rule("grafana-token", _L + r"eyJrIjoi(?P<b>[A-Za-z0-9]{70,400})={0,3}" + _R_B64, "eyjrijoi"),
    _rule("sentry-token", _L + r"sntryu_(?P<b>[a-f0-9]{64})" + _R, "sntryu_"),
    _rule(
        "sentry-token",
        _L + r"sntrys_eyJ(?P<b>[A-Za-z0-9+/=]{40,400})_[A-Za-z0-9+/]{43}" + _R_B64,
        "sntrys_eyj",
    ),
    _rule(
        "atlassian-token",
        _L + r"AT[AC]TT3(?P<b>[A-Za-z0-9_=-]{150,250})" + _R,
        ("atatt3", "atctt3"),
    ),
    _rule("dynatrace-token", _L + r"dt0c01\.(?P<b>[A-Z0-9]{24})\.[A-Z0-9]{64}" + _R, "dt0c01."),
    _rule(
        "new-relic-key",
        _L + r"NR(?:AK|JS|II)-(?P<b>[A-Za-z0-9-]{19,32})" + _R,
        ("nrak-", "nrjs-", "nrii-"),
    ),
    _rule(
        "okta-token",
        r"(?i:SSWS)[ \t]+(?P<v>00(?P<b>[A-Za-z0-9_-]{40}))" + _R,
        "ssws",
    ),
    _rule(
        "1password-key",
        _L
        + r"A3-(?P<b>[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})"
        + _R,
        "a3-",
    ),
    _rule("1password-key", _L + r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}", "ops_eyj", check=_any),
    _prefixed("frameio-token", ("fio-u-",), r"[A-Za-z0-9_=-]{64}"),
    _prefixed("figma-token", ("figd_",), r"[A-Za-z0-9_-]{40}"),
    _prefixed("contentful-token", ("CFPAT-",), r"[A-Za-z0-9_-]{43}"),
    _rule(
        "hubspot-token", _L + r"pat-(?:na|eu)1-(?P<b>" + _UUID + ")" + _R, ("pat-na1-", "pat-eu1-")
    ),
    _rule(
        "airtable-token", r"pat(?<![A-Za-z0-9_-]pat)(?P<b>[A-Za-z0-9]{14})\.[a-f0-9]{64}" + _R, ()
    ),
    _prefixed("adafruit-key", ("aio_",), r"[A-Za-z0-9]{28}"),
    _rule("clickup-token", _L + r"pk_\d{6,9}_(?P<b>[A-Z0-9]{32})" + _R, "pk_"),
    _rule(
        "mapbox-token", _L + r"sk\.eyJ(?P<b>[A-Za-z0-9_-]{50,})\.[A-Za-z0-9_-]{20,}" + _R, "sk.eyj"
    ),
    _rule("adobe-secret", _L + r"p8e-(?P<b>[A-Za-z0-9]{32})" + _R, "p8e-"),
    _rule("intra42-secret", _L + r"s-s4t2(?:ud|af)-(?P<b>[a-f0-9]{64})" + _R, "s-s4t2"),
    _rule(
        "maxmind-key",
        r"(?<![A-Za-z0-9_-])(?P<b>[A-Za-z0-9]{6}_[A-Za-z0-9]{29})_mmk" + _R,
        "_mmk",
        back=36,
    ),
    _rule("openshift-token", _L + r"sha256~(?P<b>[A-Za-z0-9_-]{43})" + _R, "sha256~"),
    _rule("typeform-token", _L + r"tfp_(?P<b>[A-Za-z0-9_=.-]{59})" + _R, "tfp_"),
    _rule(
        "settlemint-token",
        _L + r"sm_(?:pat|aat|sat)_(?P<b>[A-Za-z0-9]{16})" + _R,
        ("sm_pat_", "sm_aat_", "sm_sat_"),
    ),
    _rule(
        "tailscale-key",
        _L + r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-(?P<b>[A-Za-z0-9]{20,})" + _R,
        "tskey-",
    ),
    _rule(
        "twitter-bearer-token",
        "A" * 22 + r"(?<![A-Za-z0-9%]" + "A" * 22 + r")(?P<b>[A-Za-z0-9%]{80,120})(?![A-Za-z0-9%])",
        (),
    ),
    _rule(
        "razorpay-key",
        _L + r"rzp_(?:live|test)_(?P<b>[A-Za-z0-9]{14})" + _R,
        ("rzp_live_", "rzp_test_"),
    ),
    _rule(
        "plaid-token",
        _L + r"access-(?:sandbox|development|production)-(?P<b>" + _UUID + ")" + _R,
        ("access-sandbox-", "access-development-", "access-production-"),
    ),
    _rule(
        "launchdarkly-key",
        _L + r"(?:api|sdk|mob)-(?P<b>" + _UUID + ")" + _R,
        ("api-", "sdk-", "mob-"),
    ),
    _rule("dropbox-token", _L + r"sl\.(?:u\.)?(?P<b>[A-Za-z0-9_-]{130,})" + _R, "sl."),
    _prefixed("bitbucket-token", ("ATBB",), r"[A-Za-z0-9_=.-]{32,}"),
    _rule("intercom-token", _L + r"dG9rOi(?P<b>[A-Za-z0-9_=+/-]{40,})", "dg9roi"),
    _rule("nuget-key", _L + r"oy2(?P<b>[a-z0-9]{43})" + _R, "oy2"),
    _rule("elevenlabs-key", _L + r"sk_(?P<b>[a-f0-9]{48})" + _R, "sk_"),
    _rule("langfuse-key", _L + r"sk-lf-(?P<b>" + _UUID + ")" + _R, "sk-lf-"),
    _rule("resend-key", _L + r"re_(?P<b>[A-Za-z0-9]{8}_[A-Za-z0-9]{24})" + _R, "re_"),
    _prefixed("neon-key", ("napi_",), r"[a-z0-9]{64}"),
    _rule(
        "braintree-token",
        _L + r"access_token\$(?:production|sandbox)\$(?P<b>[0-9a-z]{16}\$[0-9a-f]{32})" + _R,
        ("access_token$production$", "access_token$sandbox$"),
        check=lambda b: all(random_body(part) for part in b.split("$")),
    ),
    _rule("amazon-mws-token", _L + r"amzn\.mws\.(?P<b>" + _UUID + ")" + _R, "amzn.mws."),
    _rule(
        "token",
        # A Docker config.json's identity and registry tokens (its "auth" is the assignment rule's).
        r'(?:identitytoken|registrytoken)"[ \t]*:[ \t]*"(?P<v>(?P<b>[^"\s]{8,}))"',
        ('identitytoken"', 'registrytoken"'),
        check=_netrc_value,
    ),
    _rule(
        "password",
        # A netrc entry, on one line or several: machine HOST [login USER] [account A] password P
        # (also written into .netrc by a script or a Dockerfile). "login" or the password must
        # follow the host: prose's "machine learning password manager" holds neither order.
        # Lines may be the "\n" escapes of a printf or an echo -e writing the file.
        r"(?<![A-Za-z0-9_-])machine[ \t]+[^\s\\]+(?:"
        + _NETRC_SEP
        + r"(?:login|account|port)[ \t]+[^\s\\]+)+"
        + _NETRC_SEP
        + r"password[ \t]+(?P<v>(?P<b>(?:[^\s\\]|\\(?!\\?n))+?))"
        r"(?=\\\\?n|[\'\"]?[ \t]*(?:\r?\n|$)|[\'\"][ \t;|&>)]|"
        + _NETRC_SEP
        + r"(?:machine|login|account|port|macdef|default)[ \t])",
        "machine",
        check=_netrc_value,
    ),
    _rule(
        "password",
        # A registry login's password as a short flag: docker/podman/nerdctl/buildah/helm login -p.
        r"(?<![A-Za-z0-9_-])(?:docker|podman|nerdctl|buildah|skopeo|helm[ \t]+registry)[ \t]+login"
        r"\b[^\n]*?[ \t]-p(?:[ \t]+|=)(?P<q>\\?[\"']|)(?P<v>(?P<b>[^\s\"']+))(?P=q)",
        ("docker", "podman", "nerdctl", "buildah", "skopeo", "helm"),
        check=_netrc_value,
    ),
    _rule(
        "password",
        # The mysql clients' password glued to -p (mysql -u root -pS3cret db).
        r"(?<![A-Za-z0-9_./-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mariadb)"
        r"(?:\.exe)?[ \t][^\n]*?(?<![^ \t])-p(?P<q>\\?[\"']|)(?P<v>(?P<b>[^\s\"'|;&)]+))(?P=q)",
        ("mysql", "mariadb"),
        check=_netrc_value,
    ),
    _rule(
        "password",
        # SQL's own syntax: CREATE/ALTER USER, ROLE or LOGIN ... [WITH] [ENCRYPTED] PASSWORD [=] 'x'
        # (PostgreSQL, SQL Server, Snowflake, Redshift).
        r"(?<![A-Za-z0-9_])(?:create|alter)[ \t]+(?:user|role|login)[ \t][^;\n]*?(?<![A-Za-z0-9_])"
        r"(?:encrypted[ \t]+)?password[ \t]*=?[ \t]*(?P<q>\\?['\"])(?P<v>(?P<b>[^'\"\n]+))(?P=q)",
        ("create user", "alter user", "create role", "alter role", "create login", "alter login"),
        check=_netrc_value,
        flags=re.IGNORECASE,
    ),
    _rule(
        "password",
        # IDENTIFIED BY [PASSWORD] 'x' (MySQL, MariaDB, Oracle: CREATE USER, ALTER USER, GRANT). Its
        # start is not found with it, so the value must look random too: prose's "identified by
        # 'name'" is left.
        r"(?<![A-Za-z0-9_])identified[ \t]+by[ \t]+(?:password[ \t]+)?(?P<q>\\?['\"])(?P<v>(?P<b>[^'\"\n]+))(?P=q)",
        "identified by",
        check=lambda b: random_body(b) and _netrc_value(b),
        flags=re.IGNORECASE,
    ),
    _rule(
        "password",
        # sshpass -p PASSWORD, quoted or bare.
        r"(?<![A-Za-z0-9_-])sshpass[ \t]+(?:-[A-Za-oq-z][ \t]+(?:[^\s-][^\s]*[ \t]+)?)*-p[ \t]*"
        r"(?P<q>\\?[\"']|)(?P<v>(?P<b>[^\s\"']+))(?P=q)",
        "sshpass",
        check=_netrc_value,
    ),
    _rule(
        "password",
        # PowerShell's plain text made a SecureString: ConvertTo-SecureString [-String] 'x' -AsPlainText.
        r"(?<![A-Za-z0-9_-])ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?(?P<q>\\?['\"])(?P<v>(?P<b>[^'\"\n]+))(?P=q)"
        r"(?=[^\n]*-AsPlainText)",
        "convertto-securestring",
        check=_netrc_value,
        flags=re.IGNORECASE,
    ),
    # --- tokens in general ---------------------------------------------------------------------------
    _rule(
        "jwt",
        # A JWT encoded again in base64 (a Kubernetes Secret's data, a config's value): "eyJ..."
        # is "ZXlK...", then its header's first parameter.
        r"(?<![A-Za-z0-9+/])ZXlK(?:aGJHY2lPaU|MGVYQWlPaU|cmFXUWlP|amRIa2lPaU|NWRXbGlPaU)(?P<b>[A-Za-z0-9+/]{40,})={0,2}",
        "zxlk",
    ),
    _rule(
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        "eyj",
        check=_any,
    ),
)
"""Every provider shape, in the order a tie at one offset is decided."""
