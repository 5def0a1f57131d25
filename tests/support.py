"""Test support: real git repositories built in temporary directories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in cwd with a fixed identity; return its stdout."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def make_repo(path: Path, files: dict[str, str | bytes], *, commit: bool = True) -> Path:
    """A real git repository at path holding files, committed unless told otherwise."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, body in files.items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            f.write_bytes(body)
        else:
            f.write_text(body, encoding="utf-8")
    if commit and files:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "fixture")
    return path
