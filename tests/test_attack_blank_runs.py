"""A file holding a secret word followed by a long run of blanks is redacted at once.

The assignment rule judges what follows a secret word (``password``, ``token``, ``pass`` in
``sshpass``, ``secret`` in ``kind: secret``...) with one expression (``guard/_assignment.py``
``_OPERATOR``), whose blanks before the operator and the operator's own leading blanks could share
a run: every way of cutting the run was tried. ``password`` and 5,000 spaces took 1 s to redact,
20,000 took 12.5 s, and a 1 MiB file of them (what a read takes) hours: its build, or the search
that read it, never ended. Those blanks are one run now, taken whole.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from nodwyn_retrieval.guard import redact

from tests._hostile import ROOT, cli
from tests.support import make_repo

MIB = 1 << 20


@pytest.mark.parametrize("word", ["password", "sshpass", "kind: secret", '"identitytoken"'])
@pytest.mark.parametrize("blank", [" ", "\t"])
def test_a_secret_word_and_a_mebibyte_of_blanks_is_redacted_in_a_process_that_ends(
    word: str, blank: str
) -> None:
    """In a process of its own, so the old expression's hours are stopped by the bound (60 s;
    this takes a tenth of a second)."""
    program = textwrap.dedent(f"""
        from nodwyn_retrieval.guard import redact
        text = {word!r} + {blank!r} * {MIB} + '!\\n' + 'password = "hunter22x"'
        r = redact(text)
        print(r.text.count("\\n"), "hunter22x" in r.text)
    """)
    out = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines, kept = out.stdout.split()
    assert lines == "1"  # a replacement adds or removes no line
    assert kept == "False"  # and the credential after the blanks is still taken


def test_what_the_operator_finds_after_blanks_is_unchanged() -> None:
    """The forms whose operator follows blanks: the same replacements as before."""
    assert redact("password   =   'hunter22x'").text == "password   =   '[REDACTED:password]'"
    assert redact("password \t: hunter22x").text == "password \t: [REDACTED:password]"
    assert redact('  - name: API_TOKEN\n    value: s3cr3tT0kenValue9').kinds == ("token",)
    assert redact('<add key="DBPassword"   value="hunter22x"/>').kinds == ("password",)
    assert redact("name: DB_PASSWORD\n  value: hunter22x").kinds == ("password",)
    assert redact("password: str   = 'hunter22x'").kinds == ("password",)
    assert redact("password" + " " * 5000 + "x").count == 0


def test_a_clone_holding_such_a_file_is_searched(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    blanks = "password" + " " * (MIB - 200) + "\n"
    clone = make_repo(
        tmp_path / "clone",
        {"blanks.txt": blanks, "app.py": "def inside_wombat():\n    return 1\n",
         "conf.py": "def inside_config():\n    token = 'ghp_" + "aB3dE5" * 6 + "'\n"},
    )  # fmt: skip
    out = cli("--root", str(clone), "update", cwd=tmp_path, dirs=dirs)
    assert out.returncode == 0, out.stderr
    found = cli("--root", str(clone), "search", "inside wombat", cwd=tmp_path, dirs=dirs)
    assert found.returncode == 0, found.stderr
    assert "app.py" in found.stdout
    assert "partial" not in found.stdout, found.stdout
