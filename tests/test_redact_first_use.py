"""The redaction rules compiled at their first use (guard/secret_rules.py's ``Rule.pattern``):
threads that first redact at the same moment, in a process that has redacted nothing yet, get the
text one thread alone gets."""

from __future__ import annotations

import json
import subprocess
import sys

from nodwyn_retrieval.guard import redact

# Shapes of several rules (provider shapes, the generic ones, the assignment rule) and text that
# holds locators without a credential.
TEXTS = [
    'password = "hunter2-Xq9!vault"\nAuthorization: Bearer abcDEF1234567890ghiJKL\n',
    "token ghp_" + "aB3" * 12 + " and AKIA" + "Q" * 16 + "\n",
    "curl -u admin:s3cr3tPass https://example.invalid/\npostgres://app:Pw0rdXyz@db.invalid/x\n",
    "def token_for(user):\n    return user.auth_key  # no value here\n",
    "SG." + "a1B2c3D4e5F6g7H8i9J0kL" + "." + "m1N2o3P4q5R6s7T8u9V0wX1y2Z3a4B5c6D7e8F9g0H1" + "\n",
]

_CHILD = """
import json, sys, threading
from nodwyn_retrieval.guard import redact
texts = json.loads(sys.argv[1])
start = threading.Barrier(8)
out = [None] * 8
def run(i):
    start.wait()
    out[i] = [redact(t).text for t in texts]
threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(out))
"""


def test_threads_redacting_first_at_once_get_what_one_gets() -> None:
    expected = [redact(t).text for t in TEXTS]
    # the shapes are taken (the texts are worth racing on)
    assert sum(t.count("[REDACTED:") for t in expected) >= 6
    assert expected[3] == TEXTS[3]
    for _ in range(3):
        got = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(TEXTS)],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        assert json.loads(got.stdout) == [expected] * 8


def test_a_rule_compiled_once_is_kept() -> None:
    from nodwyn_retrieval.guard.secret_rules import RULES

    rule = RULES[0]
    assert rule.pattern is rule.pattern
    assert rule.pattern.pattern == rule.source
