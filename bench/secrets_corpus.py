# ruff: noqa: E501  (a table of formats and templates: one line each reads best)
"""A corpus of planted credentials: every shape redaction promises to catch, in realistic files.

Usage: python bench/secrets_corpus.py OUT_DIR [--per-shape N] [--seed S]

Each *shape* is a credential format as its provider documents it (a prefix, an alphabet, a
length, a checksum where the format has one: GitHub's and npm's CRC32 in base62) or an assignment
style (a secret-named variable given a literal in one language or configuration syntax). Every
sample draws a fresh random body, so no sample is a real credential and no two are alike, and is
planted in a file of the language or format where people put it (Python, JS/TS, Go, Java, Ruby,
PHP, shell, .env, INI, YAML, TOML, JSON, XML, Dockerfile, Terraform, Markdown...).

The module is imported by the redaction benchmark and by the tests: :func:`samples` gives the
samples without writing anything, :func:`SHAPES` names every shape. The bodies are assembled at
run time, so this file holds no string a secret scanner would take for a live credential.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import sys
import urllib.parse
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

B62 = string.ascii_letters + string.digits
LOWER_NUM = string.ascii_lowercase + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = B62 + "+/"
URLSAFE = B62 + "-_"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
BASE32 = string.ascii_uppercase + "234567"


@dataclass(frozen=True, slots=True)
class Sample:
    shape: str
    """The shape's name: a provider format (``github-pat``) or an assignment style (``go-var``)."""
    secret: str
    """What must not reach the index: the credential (or its secret part) as planted."""
    path: str
    """The file it is planted in, relative to the tree's root."""
    text: str
    """The file's whole text."""


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def s(self, alphabet: str, n: int) -> str:
        while True:
            out = "".join(self.r.choice(alphabet) for _ in range(n))
            # A random body mixes character classes; redraw the rare one that does not.
            classes = sum(
                any(c in group for c in out)
                for group in (string.ascii_lowercase, string.ascii_uppercase, string.digits)
            )
            if classes >= min(
                2,
                sum(
                    any(c in g for c in alphabet)
                    for g in (string.ascii_lowercase, string.ascii_uppercase, string.digits)
                ),
            ):
                return out

    def digits(self, n: int) -> str:
        return str(self.r.randint(1, 9)) + "".join(
            self.r.choice(string.digits) for _ in range(n - 1)
        )

    def b64(self, nbytes: int, alphabet: str = "std") -> str:
        raw = bytes(self.r.getrandbits(8) for _ in range(nbytes))
        if alphabet == "url":
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return base64.b64encode(raw).decode()

    def password(self) -> str:
        """A person's password: letters, digits and a symbol or two, 10 to 16 characters."""
        n = self.r.randint(10, 16)
        body = [self.r.choice(B62) for _ in range(n - 2)]
        body.insert(self.r.randrange(len(body)), self.r.choice(string.digits))
        body.insert(self.r.randrange(len(body)), self.r.choice("!#%^*-_.~@"))
        return "".join(body)

    def b64url_json(self, obj: dict[str, object]) -> str:
        return (
            base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode())
            .decode()
            .rstrip("=")
        )


def _base62(n: int, width: int) -> str:
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = (string.digits + string.ascii_uppercase + string.ascii_lowercase)[d] + out
    return out.rjust(width, "0")


def _checksummed(g: _Gen, prefix: str) -> str:
    """GitHub's and npm's format: 30 random base62 characters and their CRC32 in 6 base62."""
    body = g.s(B62, 30)
    return prefix + body + _base62(zlib.crc32(body.encode()), 6)


def _pem(g: _Gen, label: str, lines: int = 12) -> str:
    body = "\n".join(g.b64(48) for _ in range(lines)) + "\n" + g.b64(20)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _jwt(g: _Gen) -> str:
    head = g.b64url_json({"alg": "HS256", "typ": "JWT"})
    claims = {"sub": g.digits(10), "iat": 1700000000 + g.r.randint(0, 10**7), "name": "svc"}
    return f"{head}.{g.b64url_json(claims)}.{g.b64(32, 'url')}"


# --- Provider formats: name -> a generator of one credential -------------------------------------

Make = Callable[[_Gen], str]

PROVIDERS: dict[str, Make] = {
    "github-pat": lambda g: _checksummed(g, "ghp_"),
    "github-oauth": lambda g: _checksummed(g, "gho_"),
    "github-app": lambda g: _checksummed(g, g.r.choice(["ghu_", "ghs_"])),
    "github-refresh": lambda g: _checksummed(g, "ghr_"),
    "github-fine-grained": lambda g: "github_pat_" + g.s(B62, 22) + "_" + g.s(B62, 59),
    "gitlab-pat": lambda g: "glpat-" + g.s(URLSAFE, 20),
    "gitlab-pat-routable": lambda g: "glpat-" + g.s(URLSAFE, 36) + ".01." + g.s(LOWER_NUM, 7),
    "gitlab-pipeline-trigger": lambda g: "glptt-" + g.s(HEX, 40),
    "gitlab-runner": lambda g: "glrt-" + g.s(URLSAFE, 20),
    "gitlab-runner-registration": lambda g: "GR1348941" + g.s(URLSAFE, 20),
    "gitlab-scim": lambda g: "glsoat-" + g.s(URLSAFE, 20),
    "gitlab-deploy": lambda g: "gldt-" + g.s(URLSAFE, 20),
    "gitlab-cicd-job": lambda g: "glcbt-" + g.s(B62, 2) + "_" + g.s(URLSAFE, 20),
    "gitlab-oauth-secret": lambda g: "gloas-" + g.s(HEX, 64),
    "slack-bot": lambda g: f"xoxb-{g.digits(12)}-{g.digits(13)}-{g.s(B62, 24)}",
    "slack-user": lambda g: f"xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}-{g.s(HEX, 32)}",
    "slack-app": lambda g: f"xapp-1-A{g.s(UPPER_NUM, 10)}-{g.digits(13)}-{g.s(HEX, 64)}",
    "slack-config": lambda g: "xoxe.xoxp-1-" + g.s(UPPER_NUM, 166),
    "slack-refresh": lambda g: f"xoxe-1-{g.s(UPPER_NUM, 146)}",
    "slack-webhook": lambda g: f"T{g.s(UPPER_NUM, 8)}/B{g.s(UPPER_NUM, 10)}/{g.s(B62, 24)}",
    "stripe-live": lambda g: "sk_live_" + g.s(B62, 99),
    "stripe-test": lambda g: "sk_test_" + g.s(B62, 24),
    "stripe-restricted": lambda g: "rk_live_" + g.s(B62, 24),
    "stripe-webhook": lambda g: "whsec_" + g.s(B62, 32),
    "openai-project": lambda g: "sk-proj-" + g.s(URLSAFE, 74) + "T3BlbkFJ" + g.s(URLSAFE, 74),
    "openai-legacy": lambda g: "sk-" + g.s(B62, 20) + "T3BlbkFJ" + g.s(B62, 20),
    "openai-service": lambda g: "sk-svcacct-" + g.s(URLSAFE, 58) + "T3BlbkFJ" + g.s(URLSAFE, 58),
    "anthropic-api": lambda g: "sk-ant-api03-" + g.s(URLSAFE, 93) + "AA",
    "anthropic-admin": lambda g: "sk-ant-admin01-" + g.s(URLSAFE, 93) + "AA",
    "aws-access-key": lambda g: g.r.choice(["AKIA", "ASIA", "ABIA"]) + g.s(BASE32, 16),
    "aws-session-token": lambda g: "FwoGZXIvYXdzE" + g.b64(220),
    "google-api-key": lambda g: "AIza" + g.s(URLSAFE, 35),
    "google-oauth-secret": lambda g: "GOCSPX-" + g.s(URLSAFE, 28),
    "google-oauth-access": lambda g: "ya29." + g.s(URLSAFE, 150),
    "google-refresh": lambda g: "1//0" + g.s(URLSAFE, 100),
    "azure-client-secret": lambda g: (
        g.s(B62, 3) + str(g.r.randint(0, 9)) + "Q~" + g.s(B62 + "_~.-", 34)
    ),
    "azure-storage-key": lambda g: g.b64(64),
    "azure-sas": lambda g: g.b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"),
    "azure-service-bus": lambda g: g.b64(32),
    "azure-devops": lambda g: g.s(B62, 76) + "AZDO" + g.s(B62, 4),
    "azure-apim": lambda g: g.s(HEX, 32),
    "pypi": lambda g: "pypi-AgEIcHlwaS5vcmc" + g.b64(120, "url"),
    "testpypi": lambda g: "pypi-AgENdGVzdC5weXBpLm9yZw" + g.b64(120, "url"),
    "npm": lambda g: _checksummed(g, "npm_"),
    "huggingface": lambda g: "hf_" + g.s(string.ascii_letters, 34),
    "huggingface-org": lambda g: "api_org_" + g.s(string.ascii_letters, 34),
    "cloudflare-origin-ca": lambda g: "v1.0-" + g.s(HEX, 24) + "-" + g.s(HEX, 146),
    "shopify-access": lambda g: "shpat_" + g.s(HEX, 32),
    "shopify-custom": lambda g: "shpca_" + g.s(HEX, 32),
    "shopify-private-app": lambda g: "shppa_" + g.s(HEX, 32),
    "shopify-shared-secret": lambda g: "shpss_" + g.s(HEX, 32),
    "twilio-api-key": lambda g: "SK" + g.s(HEX, 32),
    "sendgrid": lambda g: "SG." + g.s(URLSAFE, 22) + "." + g.s(URLSAFE, 43),
    "mailgun": lambda g: "key-" + g.s(HEX, 32),
    "mailchimp": lambda g: g.s(HEX, 32) + "-us" + str(g.r.randint(1, 21)),
    "discord-webhook": lambda g: g.digits(18) + "/" + g.s(URLSAFE, 68),
    "telegram-bot": lambda g: g.digits(10) + ":AA" + g.s(URLSAFE, 33),
    "digitalocean-pat": lambda g: "dop_v1_" + g.s(HEX, 64),
    "digitalocean-oauth": lambda g: "doo_v1_" + g.s(HEX, 64),
    "databricks": lambda g: "dapi" + g.s(HEX, 32),
    "vault-service": lambda g: "hvs." + g.s(URLSAFE, 95),
    "vault-batch": lambda g: "hvb." + g.s(URLSAFE, 160),
    "terraform-cloud": lambda g: g.s(LOWER_NUM, 14) + ".atlasv1." + g.s(LOWER_NUM + "_-", 67),
    "doppler": lambda g: g.r.choice(["dp.pt.", "dp.st.", "dp.sa."]) + g.s(B62, 43),
    "linear": lambda g: "lin_api_" + g.s(B62, 40),
    "notion": lambda g: "ntn_" + g.digits(11) + g.s(B62, 35),
    "notion-legacy": lambda g: "secret_" + g.s(B62, 43),
    "postman": lambda g: "PMAK-" + g.s(HEX, 24) + "-" + g.s(HEX, 34),
    "grafana-cloud": lambda g: "glc_" + g.b64(90).rstrip("="),
    "grafana-service-account": lambda g: "glsa_" + g.s(B62, 32) + "_" + g.s(HEX, 8),
    "grafana-api-key": lambda g: "eyJrIjoi" + g.s(B62, 90),
    "sentry-user": lambda g: "sntryu_" + g.s(HEX, 64),
    "sentry-org": lambda g: (
        "sntrys_"
        + g.b64url_json(
            {
                "iat": 1700000000,
                "url": "https://sentry.io",
                "region_url": "https://us.sentry.io",
                "org": "acme",
            }
        )
        + "_"
        + g.s(B62, 43)
    ),
    "atlassian": lambda g: "ATATT3" + g.s(URLSAFE + "=", 186),
    "supabase": lambda g: "sbp_" + g.s(HEX, 40),
    "supabase-secret": lambda g: "sb_secret_" + g.s(URLSAFE, 31),
    "age": lambda g: "AGE-SECRET-KEY-1" + g.s(BECH32, 58),
    "jwt": _jwt,
    "heroku": lambda g: "HRKU-AA" + g.s(URLSAFE, 58),
    "alibaba": lambda g: "LTAI" + g.s(B62, 20),
    "yandex": lambda g: "AQVN" + g.s(URLSAFE, 36),
    "groq": lambda g: "gsk_" + g.s(B62, 52),
    "replicate": lambda g: "r8_" + g.s(B62, 37),
    "xai": lambda g: "xai-" + g.s(B62, 80),
    "perplexity": lambda g: "pplx-" + g.s(B62, 48),
    "langsmith": lambda g: "lsv2_pt_" + g.s(HEX, 32) + "_" + g.s(HEX, 10),
    "pinecone": lambda g: "pcsk_" + g.s(B62, 6) + "_" + g.s(B62, 60),
    "tavily": lambda g: "tvly-" + g.s(B62, 32),
    "docker-hub": lambda g: "dckr_pat_" + g.s(URLSAFE, 27),
    "buildkite": lambda g: "bkua_" + g.s(HEX, 40),
    "circleci": lambda g: "CCIPAT_" + g.s(B62, 22) + "_" + g.s(HEX, 40),
    "sonarqube": lambda g: g.r.choice(["squ_", "sqp_", "sqa_"]) + g.s(HEX, 40),
    "deno": lambda g: "ddp_" + g.s(B62, 36),
    "netlify": lambda g: "nfp_" + g.s(B62, 36),
    "render": lambda g: "rnd_" + g.s(B62, 32),
    "figma": lambda g: "figd_" + g.s(URLSAFE, 40),
    "contentful": lambda g: "CFPAT-" + g.s(URLSAFE, 43),
    "hubspot": lambda g: "pat-na1-" + "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12)),
    "airtable": lambda g: "pat" + g.s(B62, 14) + "." + g.s(HEX, 64),
    "adafruit": lambda g: "aio_" + g.s(B62, 28),
    "mapbox-secret": lambda g: "sk.eyJ" + g.s(URLSAFE, 60) + "." + g.s(URLSAFE, 22),
    "dynatrace": lambda g: "dt0c01." + g.s(UPPER_NUM, 24) + "." + g.s(UPPER_NUM, 64),
    "new-relic": lambda g: "NRAK-" + g.s(UPPER_NUM, 27),
    "1password": lambda g: "A3-" + "-".join(g.s(UPPER_NUM, n) for n in (6, 11, 5, 5, 5)),
    "facebook": lambda g: "EAAC" + g.s(B62, 150),
    "square": lambda g: "sq0atp-" + g.s(URLSAFE, 22),
    "shippo": lambda g: "shippo_live_" + g.s(HEX, 40),
    "easypost": lambda g: "EZAK" + g.s(B62, 54),
    "flutterwave": lambda g: "FLWSECK_TEST-" + g.s("abcdefgh0123456789", 32) + "-X",
    "sourcegraph": lambda g: "sgp_" + g.s(HEX, 16) + "_" + g.s(HEX, 40),
    "artifactory": lambda g: "AKCp" + g.s(B62, 69),
    "octopus": lambda g: "API-" + g.s(UPPER_NUM, 26),
    "pulumi": lambda g: "pul-" + g.s(HEX, 40),
    "prefect": lambda g: "pnu_" + g.s(B62, 36),
    "scalingo": lambda g: "tk-us-" + g.s(URLSAFE, 48),
    "fly": lambda g: "fo1_" + g.s(URLSAFE, 43),
    "infracost": lambda g: "ico-" + g.s(B62, 32),
    "readme": lambda g: "rdme_" + g.s(LOWER_NUM, 70),
    "rubygems": lambda g: "rubygems_" + g.s(HEX, 48),
    "clojars": lambda g: "CLOJARS_" + g.s(LOWER_NUM, 60),
    "planetscale": lambda g: "pscale_tkn_" + g.s(URLSAFE, 43),
    "typeform": lambda g: "tfp_" + g.s(URLSAFE, 59),
    "tailscale": lambda g: "tskey-auth-k" + g.s(B62, 10) + "CNTRL-" + g.s(B62, 33),
    "openshift": lambda g: "sha256~" + g.s(URLSAFE, 43),
    "twitter-bearer": lambda g: "A" * 22 + g.s(B62 + "%", 90),
    "teams-webhook": lambda g: (
        "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12))
        + "@"
        + "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12))
        + "/IncomingWebhook/"
        + g.s(HEX, 32)
        + "/"
        + "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12))
    ),
    "adobe": lambda g: "p8e-" + g.s(B62, 32),
    "clickhouse": lambda g: "4b1d" + g.s(B62, 38),
    "clickup": lambda g: "pk_" + g.digits(8) + "_" + g.s(UPPER_NUM, 32),
    "duffel": lambda g: "duffel_live_" + g.s(URLSAFE, 43),
    "frameio": lambda g: "fio-u-" + g.s(URLSAFE, 64),
    "harness": lambda g: "pat." + g.s(URLSAFE, 22) + "." + g.s(B62, 24) + "." + g.s(B62, 20),
    "ibm-cloud": lambda g: "IBMCLOUD_APIKEY_" + g.s(URLSAFE, 44),
    "intra42": lambda g: "s-s4t2ud-" + g.s(HEX, 64),
    "maxmind": lambda g: g.s(B62, 6) + "_" + g.s(B62, 29) + "_mmk",
    "sendinblue": lambda g: "xkeysib-" + g.s(HEX, 64) + "-" + g.s(B62, 16),
    "settlemint": lambda g: "sm_pat_" + g.s(B62, 16),
    "fly-macaroon": lambda g: "fm2_" + g.b64(120).rstrip("="),
    "1password-service": lambda g: "ops_eyJ" + g.b64(240).rstrip("="),
    "aws-secret-key": lambda g: g.b64(30),
    "authorization-token": lambda g: g.s(B62, 40),
    "razorpay": lambda g: "rzp_live_" + g.s(B62, 14),
    "plaid": lambda g: "access-production-" + "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12)),
    "launchdarkly": lambda g: "sdk-" + "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12)),
    "dropbox": lambda g: "sl.u." + g.s(URLSAFE, 140),
    "bitbucket": lambda g: "ATBB" + g.s(B62, 32),
    "intercom": lambda g: "dG9rOi" + g.b64(45).rstrip("="),
    "nuget": lambda g: "oy2" + g.s(LOWER_NUM, 43),
    "elevenlabs": lambda g: "sk_" + g.s(HEX, 48),
    "langfuse": lambda g: "sk-lf-" + "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12)),
    "resend": lambda g: "re_" + g.s(B62, 8) + "_" + g.s(B62, 24),
    "neon": lambda g: "napi_" + g.s(LOWER_NUM, 64),
    "jwt-base64": lambda g: base64.b64encode(_jwt(g).encode()).decode().rstrip("="),
    "okta": lambda g: "00" + g.s(URLSAFE, 40),
    "cloudflare-api-token": lambda g: g.s(URLSAFE, 40),
    "cloudflare-global-key": lambda g: g.s(HEX, 37),
    "discord-bot": lambda g: (
        g.r.choice("MN") + g.s(B62, 25) + "." + g.s(URLSAFE, 6) + "." + g.s(URLSAFE, 38)
    ),
    "twilio-auth-token": lambda g: g.s(HEX, 32),
}

# --- Where each provider's credential is planted --------------------------------------------------

# (path, text) templates; {s} is the credential, {env} an environment variable's name for it.
Plant = tuple[str, str]

_PY = (
    "settings.py",
    '"""Service settings."""\nimport os\n\nDEBUG = False\n{env} = "{s}"\nTIMEOUT = 30\n',
)
_JS = (
    "src/config.js",
    "// client configuration\nexport const config = {{\n  region: 'eu-west-1',\n  key: '{s}',\n  retries: 3,\n}};\n",
)
_TS = (
    "src/client.ts",
    "import {{ Client }} from './client';\n\nconst client = new Client({{ auth: `{s}` }});\nexport default client;\n",
)
_ENV = (".env.local", "# local overrides\nNODE_ENV=development\n{env}={s}\nPORT=8080\n")
_YAML = ("deploy/values.yaml", "replicaCount: 2\nimage:\n  tag: v1.4.2\nsecrets:\n  {envl}: {s}\n")
_SH = (
    "scripts/deploy.sh",
    "#!/usr/bin/env bash\nset -euo pipefail\nexport {env}={s}\n./bin/release --region eu\n",
)
_JSON = (
    "config/credentials.local.json",
    '{{\n  "service": "billing",\n  "credential": "{s}",\n  "retries": 3\n}}\n',
)
_GO = (
    "internal/client/client.go",
    'package client\n\nconst defaultKey = "{s}"\n\nfunc New() *Client {{ return &Client{{key: defaultKey}} }}\n',
)
_MD = ("docs/setup.md", "# Setup\n\nExport the key before running the tool:\n\n```\n{s}\n```\n")
_TF = ("infra/main.tf", 'provider "service" {{\n  region = "eu-west-1"\n  token  = "{s}"\n}}\n')
_DOCKER = (
    "Dockerfile",
    'FROM python:3.12-slim\nENV {env}={s}\nCOPY . /app\nCMD ["python", "-m", "app"]\n',
)
_RB = (
    "config/initializers/client.rb",
    "Client.configure do |c|\n  c.timeout = 5\n  c.credential = '{s}'\nend\n",
)
_TOML = ("config.toml", '[service]\nname = "ingest"\ncredential = "{s}"\n')
_INI = ("setup.cfg", "[service]\nname = ingest\ncredential = {s}\n")
_XML = (
    "app.config.xml",
    '<?xml version="1.0"?>\n<configuration>\n  <appSettings>\n    <add key="ServiceCredential" value="{s}" />\n  </appSettings>\n</configuration>\n',
)
_PHP = (
    "config/services.php",
    "<?php\nreturn [\n    'service' => [\n        'credential' => '{s}',\n    ],\n];\n",
)
_JAVA = (
    "src/main/java/app/Keys.java",
    'package app;\n\npublic final class Keys {{\n    static final String SERVICE = "{s}";\n}}\n',
)
_PLAIN_PLANTS = (_PY, _JS, _TS, _ENV, _YAML, _SH, _JSON, _GO, _MD, _TF, _DOCKER, _RB, _TOML, _INI, _XML, _PHP, _JAVA)  # fmt: skip

# Formats that are only a credential in a context: a URL, a header, a connection string.
_CONTEXT: dict[str, tuple[Plant, ...]] = {
    "slack-webhook": (("notify.py", 'WEBHOOK = "https://hooks.slack.com/services/{s}"\n'),
                      (".github/workflows/ci.yml", "env:\n  SLACK_HOOK: https://hooks.slack.com/services/{s}\n")),
    "discord-webhook": (("bot/notify.js", "const url = 'https://discord.com/api/webhooks/{s}';\n"),),
    "teams-webhook": (("alerts.ps1", '$hook = "https://acme.webhook.office.com/webhookb2/{s}"\n'),),
    "azure-storage-key": (("appsettings.json", '{{"Storage": "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s};EndpointSuffix=core.windows.net"}}\n'),
                          (".env", "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s}\n")),
    "azure-sas": (("download.py", 'URL = "https://acme.blob.core.windows.net/data/report.csv?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig={s}"\n'),),
    "azure-service-bus": (("local.settings.json", '{{"Values": {{"Bus": "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}"}}}}\n'),),
    "azure-apim": (("api.http", "GET https://acme.azure-api.net/orders\nOcp-Apim-Subscription-Key: {s}\n"),),
    "okta": (("okta.sh", "curl -H 'Authorization: SSWS {s}' https://acme.okta.com/api/v1/users\n"),
             (".env", "OKTA_API_TOKEN={s}\n")),
    "cloudflare-api-token": (("wrangler.env", "CLOUDFLARE_API_TOKEN={s}\n"),
                             ("cf.py", 'cf = Cloudflare(api_token="{s}")\n')),
    "cloudflare-global-key": (("purge.sh", "curl -H 'X-Auth-Email: ops@example.com' -H 'X-Auth-Key: {s}' https://api.cloudflare.com/client/v4/zones\n"),),
    "discord-bot": ((".env", "DISCORD_BOT_TOKEN={s}\n"), ("bot.py", 'client.run(token="{s}")\n')),
    "twilio-auth-token": (("sms.py", 'TWILIO_AUTH_TOKEN = "{s}"\n'), ("twilio.env", "TWILIO_AUTH_TOKEN={s}\n")),
    "aws-secret-key": (("credentials.ini", "[default]\naws_access_key_id = AKIA{akid}\naws_secret_access_key = {s}\n"),
                       (".env.aws", "AWS_SECRET_ACCESS_KEY={s}\n"),
                       ("deploy.py", 'session = boto3.Session(aws_secret_access_key="{s}")\n')),
    "authorization-token": (("api.http", "GET https://api.example.com/v2/items\nAuthorization: Token {s}\n"),
                            ("client.py", 'headers = {{"Authorization": "token {s}"}}\n')),
    "azure-client-secret": (("appsettings.Development.json", '{{"AzureAd": {{"ClientSecret": "{s}"}}}}\n'), _ENV, _PY),
}  # fmt: skip

# --- Assignment styles: a secret-named name given a literal ----------------------------------------

# (shape, path, template); {p} is the secret value.
STYLES: tuple[tuple[str, str, str], ...] = (
    ("python-assign", "app/db.py", 'DB_HOST = "db.internal"\nDB_PASSWORD = "{p}"\n'),
    ("python-annotated", "app/settings.py", 'class Settings:\n    api_token: str = "{p}"\n'),
    ("python-dict", "app/conf.py", 'DATABASES = {{"default": {{"USER": "app", "PASSWORD": "{p}"}}}}\n'),
    ("python-kwarg", "app/connect.py", 'conn = psycopg.connect(host="db", user="app", password="{p}")\n'),
    ("python-subscript", "app/env.py", 'os.environ["SMTP_PASSWORD"] = "{p}"\n'),
    ("python-getenv-default", "app/keys.py", 'secret = os.getenv("CLIENT_SECRET", "{p}")\n'),
    ("js-const", "src/db.js", "const dbPassword = '{p}';\nmodule.exports = {{ dbPassword }};\n"),
    ("js-object", "src/auth.js", "export default {{\n  clientId: 'web',\n  clientSecret: '{p}',\n}};\n"),
    ("ts-typed", "src/api.ts", 'const apiToken: string = "{p}";\n'),
    ("go-var", "cmd/main.go", 'package main\n\nvar githubToken string = "{p}"\n'),
    ("go-short", "pkg/db/db.go", 'func open() {{\n\tdbPassword := "{p}"\n\t_ = dbPassword\n}}\n'),
    ("go-struct", "pkg/cfg/cfg.go", 'var c = Config{{\n\tUser:     "app",\n\tPassword: "{p}",\n}}\n'),
    ("java-field", "src/main/java/app/Db.java", 'class Db {{\n    private static final String DB_PASSWORD = "{p}";\n}}\n'),
    ("java-properties", "src/main/resources/application.properties", "spring.datasource.url=jdbc:postgresql://db/app\nspring.datasource.password={p}\n"),
    ("java-setter", "src/main/java/app/Mail.java", 'mail.setPassword("{p}");\n'),
    ("kotlin-val", "app/src/main/kotlin/Keys.kt", 'val apiKey: String = "{p}"\n'),
    ("csharp-prop", "Services/Smtp.cs", 'var smtp = new SmtpClient {{ Host = "mail", SMTPPassword = "{p}" }};\n'),
    ("ruby-hash", "config/database.rb", "DB = {{ user: 'app', password: '{p}' }}\n"),
    ("ruby-rocket", "config/mail.rb", "settings = {{ :user_name => 'app', :password => '{p}' }}\n"),
    ("php-var", "wp-login.php", "<?php\n$db_password = '{p}';\n"),
    ("php-array", "config/app.php", "<?php\nreturn ['api_key' => '{p}'];\n"),
    ("php-define", "wp-config.php", "<?php\ndefine( 'DB_PASSWORD', '{p}' );\n"),
    ("shell-export", "scripts/env.sh", "export DATABASE_PASSWORD={p}\n"),
    ("shell-export-quoted", "scripts/release.sh", 'export NPM_AUTH_TOKEN="{p}"\n'),
    ("shell-inline", "scripts/backup.sh", "MYSQL_PWD={p} mysqldump -u root app > app.sql\n"),
    ("shell-pgpassword", "scripts/restore.sh", "PGPASSWORD='{p}' psql -h db -U app\n"),
    ("curl-user", "scripts/api.sh", "curl --user deploy:{p} https://ci.example.com/api\n"),
    ("curl-u", "scripts/status.sh", "curl -s -u admin:{p} https://ci.example.com/status\n"),
    ("cli-flag", "Makefile", "login:\n\tregistry login --username ci --password {p}\n"),
    ("cli-flag-equals", "scripts/sync.sh", "rsync-tool --auth-token={p} --dest backup\n"),
    ("dotenv-bare", ".env", "APP_ENV=production\nSTRIPE_SECRET={p}\n"),
    ("dotenv-quoted", ".env.production", 'REDIS_PASSWORD="{p}"\n'),
    ("ini-bare", "config/app.ini", "[database]\nuser = app\npassword = {p}\n"),
    ("ini-tight", "my.cnf", "[client]\nuser=root\npassword={p}\n"),
    ("yaml-bare", "config/app.yml", "database:\n  user: app\n  password: {p}\n"),
    ("yaml-quoted", "docker-compose.yml", 'services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: "{p}"\n'),
    ("yaml-env-list", "k8s/deploy.yaml", 'env:\n  - name: API_TOKEN\n    value: "{p}"\n'),
    ("toml", "pyproject.local.toml", '[tool.publish]\ntoken = "{p}"\n'),
    ("json", "config/secrets.json", '{{\n  "clientsecret": "{p}"\n}}\n'),
    ("json-nested", "appsettings.json", '{{"Smtp": {{"Host": "mail", "Password": "{p}"}}}}\n'),
    ("xml-element", "conf/settings.xml", "<settings>\n  <server>\n    <password>{p}</password>\n  </server>\n</settings>\n"),
    ("xml-attribute", "conf/datasource.xml", '<datasource user="app" password="{p}" />\n'),
    ("xml-add-key", "Web.config", '<appSettings>\n  <add key="DBPassword" value="{p}" />\n</appSettings>\n'),
    ("connection-string", "appsettings.Production.json", '{{"Db": "Server=db;Database=app;User Id=sa;Password={p};"}}\n'),
    ("jdbc-query", "conf/db.conf", "url = jdbc:mysql://db:3306/app?user=app&password={p}&useSSL=true\n"),
    ("url-password", "alembic.ini", "sqlalchemy.url = postgresql://app:{p}@db.internal:5432/app\n"),
    ("redis-url", ".env.redis", "REDIS_URL=redis://:{p}@cache.internal:6379/0\n"),
    ("mongodb-url", "src/mongo.ts", 'const uri = "mongodb+srv://app:{p}@cluster0.example.net/app";\n'),
    ("glued-accesstoken", "lib/client.py", 'accesstoken = "{p}"\n'),
    ("glued-apitoken", "lib/api.cs", 'string APIToken = "{p}";\n'),
    ("glued-pgpassword", "docker/db.env", "PGPASSWORD={p}\n"),
    ("glued-mysql-pwd", "docker/mysql.env", "MYSQL_PWD={p}\n"),
    ("camel-authtoken", "src/auth.ts", 'this.authToken = "{p}";\n'),
    ("header-api-key", "api.http", "GET https://api.example.com/v1\nx-api-key: {p}\n"),
    ("basic-auth-header", "client.py", 'headers = {{"Authorization": "Basic {b}"}}\n'),
    ("bearer-header", "client.sh", "curl -H \"Authorization: Bearer {p}\" https://api.example.com\n"),
    ("private-key-password", "sign.py", 'key = load_key("key.pem", private_key_password="{p}")\n'),
    ("credentials-name", "deploy.py", 'REGISTRY_CREDENTIALS = "{p}"\n'),
)  # fmt: skip

_PRIVATE_KEYS: tuple[tuple[str, str], ...] = (
    ("rsa-private-key", "RSA PRIVATE KEY"),
    ("ec-private-key", "EC PRIVATE KEY"),
    ("openssh-private-key", "OPENSSH PRIVATE KEY"),
    ("pkcs8-private-key", "PRIVATE KEY"),
    ("encrypted-private-key", "ENCRYPTED PRIVATE KEY"),
    ("pgp-private-key", "PGP PRIVATE KEY BLOCK"),
)


def SHAPES() -> list[str]:
    """Every shape's name."""
    return [*PROVIDERS, *(s for s, _, _ in STYLES), *(s for s, _ in _PRIVATE_KEYS), "gcp-service-account", "putty-key", "kubernetes-secret", *_MORE_SHAPES, *_COMMAND_SHAPES]  # fmt: skip


def _env_name(shape: str) -> str:
    return shape.upper().replace("-", "_") + "_KEY"


def samples(per_shape: int = 4, seed: int = 20261201) -> list[Sample]:
    """per_shape samples of every shape, each in a file of its own (paths are unique)."""
    g = _Gen(random.Random(seed))
    out: list[Sample] = []
    for shape, make in PROVIDERS.items():
        plants = _CONTEXT.get(shape, _PLAIN_PLANTS)
        for i in range(per_shape):
            secret = make(g)
            turn = i if shape in _CONTEXT else i + len(out)
            path, tmpl = plants[turn % len(plants)]
            env = _env_name(shape)
            text = tmpl.format(s=secret, env=env, envl=env.lower(), akid=g.s(BASE32, 16))
            out.append(Sample(shape, secret, f"{shape}/{i}/{path}", text))
    for shape, path, tmpl in STYLES:
        for i in range(per_shape):
            token_only = any(w in shape for w in ("bearer", "api-key", "token", "flag-equals"))
            p = g.password() if i % 2 == 0 and not token_only else g.s(B62, 32)
            b = base64.b64encode(f"svc:{p}".encode()).decode()
            if "url" in shape or "jdbc" in shape:
                p = urllib.parse.quote(p, safe="")  # a URL's userinfo is percent-encoded
            text = tmpl.format(p=p, b=b)
            out.append(Sample(shape, b if "{b}" in tmpl else p, f"{shape}/{i}/{path}", text))
    for shape, label in _PRIVATE_KEYS:
        for i in range(per_shape):
            pem = _pem(g, label)
            secret = pem.split("\n")[1 + i % 6]
            where = (
                (f"keys/{i}/id_deploy", pem + "\n")
                if i % 2 == 0
                else (f"src/{i}/keys.py", f'SIGNING_KEY = """\n{pem}\n"""\n')
            )
            out.append(Sample(shape, secret, f"{shape}/{i}/{where[0]}", where[1]))
    for i in range(per_shape):
        value = base64.b64encode(g.password().encode()).decode()
        name = ("username", "dsn", "config.json", "connection")[i % 4]
        doc = (f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-{i}\ntype: Opaque\n"
               f"data:\n  {name}: {value}\n")  # fmt: skip
        out.append(
            Sample("kubernetes-secret", value, f"kubernetes-secret/{i}/k8s/secret.yaml", doc)
        )
    for i in range(per_shape):
        pem = _pem(g, "PRIVATE KEY")
        doc = {
            "type": "service_account",
            "project_id": "acme",
            "private_key_id": g.s(HEX, 40),
            "private_key": pem + "\n",
            "client_email": "svc@acme.iam.gserviceaccount.com",
        }
        out.append(
            Sample(
                "gcp-service-account",
                pem.split("\n")[2],
                f"gcp-service-account/{i}/sa.json",
                json.dumps(doc, indent=2) + "\n",
            )
        )
        lines = [g.b64(48) for _ in range(6)]
        ppk = (
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\nPublic-Lines: 2\n"
            f"{g.b64(48)}\n{g.b64(20)}\nPrivate-Lines: {len(lines)}\n"
            + "\n".join(lines)
            + f"\nPrivate-MAC: {g.s(HEX, 64)}\n"
        )
        out.append(Sample("putty-key", lines[3], f"putty-key/{i}/deploy.ppk", ppk))
    out += _more(g, per_shape)
    out += _commands(g, per_shape)
    return out


_MORE_SHAPES = ("ssh2-private-key", "base64-private-key", "braintree", "amazon-mws", "netrc",
                "docker-identity-token", "registry-login-p", "mysql-p", "sql-password", "sshpass",
                "securestring")  # fmt: skip


def _more(g: _Gen, per_shape: int) -> list[Sample]:
    """The shapes added after the rest, drawn last so the others' samples stay as they were."""
    out: list[Sample] = []
    for i in range(per_shape):
        lines = [g.b64(48) for _ in range(8)]
        key = "\n".join(lines)
        ssh2 = (f'---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "deploy-{i}"\n{key}\n'
                "---- END SSH2 ENCRYPTED PRIVATE KEY ----\n")  # fmt: skip
        out.append(Sample("ssh2-private-key", lines[4], f"ssh2-private-key/{i}/deploy.ssh2", ssh2))
        pem = _pem(g, ("RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY")[i % 3])
        blob = base64.b64encode((pem + "\n").encode()).decode()
        kube = ("apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
                f"    client-key-data: {blob}\n")  # fmt: skip
        out.append(
            Sample("base64-private-key", blob[100:140], f"base64-private-key/{i}/kubeconfig", kube)
        )
        bt = f"access_token$production${g.s(LOWER_NUM, 16)}${g.s(HEX, 32)}"
        out.append(Sample("braintree", bt, f"braintree/{i}/pay.py", f'BRAINTREE = "{bt}"\n'))
        uuid = "-".join(g.s(HEX, n) for n in (8, 4, 4, 4, 12))
        mws = f"amzn.mws.{uuid}"
        out.append(Sample("amazon-mws", mws, f"amazon-mws/{i}/mws.rb", f"MWS_AUTH = '{mws}'\n"))
        pw = g.password()
        netrc = (f"machine api.example.com login deploy password {pw}\n" if i % 2 == 0 else
                 f"RUN printf 'machine git.example.com\\n  login ci\\n  password {pw}\\n' > /root/.netrc\n")  # fmt: skip
        where = "netrc.txt" if i % 2 == 0 else "Dockerfile"
        out.append(Sample("netrc", pw, f"netrc/{i}/{where}", netrc))
        tok = g.s(B62, 40)
        doc = json.dumps({"auths": {"registry.example.com": {"identitytoken": tok}}}, indent=2)
        out.append(
            Sample(
                "docker-identity-token", tok, f"docker-identity-token/{i}/docker.json", doc + "\n"
            )
        )
        pw = g.password()
        tool = ("docker", "podman", "helm registry", "nerdctl")[i % 4]
        login = f"{tool} login -u ci -p '{pw}' registry.example.com\n"
        out.append(Sample("registry-login-p", pw, f"registry-login-p/{i}/login.sh", login))
        pw = g.password()
        mysql = f"mysqldump -h db -u backup -p'{pw}' app > app.sql\n"
        out.append(Sample("mysql-p", pw, f"mysql-p/{i}/backup.sh", mysql))
        pw = g.password().replace("'", "")
        sql = (f"CREATE USER app{i} WITH ENCRYPTED PASSWORD '{pw}';\n", f"CREATE USER 'app{i}'@'%' IDENTIFIED BY '{pw}';\n",
               f"ALTER ROLE app{i} PASSWORD '{pw}';\n", f"CREATE LOGIN app{i} WITH PASSWORD = '{pw}';\n")[i % 4]  # fmt: skip
        out.append(Sample("sql-password", pw, f"sql-password/{i}/migrations/001_users.sql", sql))
        pw = g.password()
        out.append(
            Sample(
                "sshpass",
                pw,
                f"sshpass/{i}/deploy.sh",
                f"sshpass -p '{pw}' scp app.tar host:/srv\n",
            )
        )
        pw = g.password()
        ps = f"$pw = ConvertTo-SecureString '{pw}' -AsPlainText -Force\n"
        out.append(Sample("securestring", pw, f"securestring/{i}/deploy.ps1", ps))
    return out


_COMMAND_SHAPES = ("openssl-pass", "keytool-storepass", "redis-cli-a", "oracle-logon", "htpasswd-b",
                   "net-use")  # fmt: skip


def _commands(g: _Gen, per_shape: int) -> list[Sample]:
    """Passwords on a command line (guard/command_rules.py), drawn after the shapes before."""
    out: list[Sample] = []
    for i in range(per_shape):
        pw = g.password().replace("@", "").replace("#", "")
        flag = ("-passout", "-passin", "-pass", "-password")[i % 4]
        line = f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out app.p12 {flag} pass:{pw}\n"
        out.append(Sample("openssl-pass", pw, f"openssl-pass/{i}/make-p12.sh", line))
        pw = g.password().replace("@", "")
        line = (f"keytool -importkeystore -srckeystore app.p12 -srcstoretype PKCS12 -destkeystore app.jks -deststorepass '{pw}'\n",
                f"jarsigner -keystore release.jks -storepass {pw} app.apk release\n")[i % 2]  # fmt: skip
        out.append(Sample("keytool-storepass", pw, f"keytool-storepass/{i}/sign.sh", line))
        pw = g.password()
        line = f"redis-cli -h cache.internal -p 6379 -a '{pw}' --no-auth-warning INFO\n"
        out.append(Sample("redis-cli-a", pw, f"redis-cli-a/{i}/check.sh", line))
        pw = g.s(B62, 14)
        line = (f"spring.datasource.url=jdbc:oracle:thin:app/{pw}@db.internal:1521/ORCL\n",
                f"sqlplus -s app/{pw}@ORCL @migrate.sql\n")[i % 2]  # fmt: skip
        where = ("application.properties", "migrate.sh")[i % 2]
        out.append(Sample("oracle-logon", pw, f"oracle-logon/{i}/{where}", line))
        pw = g.s(B62, 14)
        line = f"RUN htpasswd -cbB /etc/nginx/.htpasswd admin {pw}\n"
        out.append(Sample("htpasswd-b", pw, f"htpasswd-b/{i}/Dockerfile", line))
        pw = g.s(B62, 12)
        line = f"net use Z: \\\\files.corp\\builds {pw} /user:CORP\\builder /persistent:no\r\n"
        out.append(Sample("net-use", pw, f"net-use/{i}/map.cmd", line))
    return out


def write(root: Path, items: list[Sample]) -> None:
    for s in items:
        path = root / s.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(s.text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--per-shape", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    items = samples(args.per_shape, args.seed)
    write(args.out, items)
    print(f"{len(items)} samples of {len({s.shape for s in items})} shapes written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
