"""Every entry of the default denylist, each with paths it must deny (ADR 0050 §3, docs/guard.md).

The table is written out by hand, entry by entry: dropping or weakening one entry of
guard/denylist.py fails the check of its own paths, and an entry added there without paths here
fails the completeness check. Each path is denied by the pattern named, not by another one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import DEFAULT_DENY, default_guard

from tests.support import make_repo

DENIED: dict[str, tuple[str, ...]] = {
    ".git": (".git/config", ".git/hooks/pre-commit", "vendor/lib/.git"),
    ".env": (".env", "config/.env", ".ENV"),
    ".env.*": (".env.local", "app/.env.production", ".env.example"),
    "*.pem": ("certs/server.pem", "key.PEM"),
    "*.key": ("server.key", "tls/private.key"),
    "*.p12": ("store.p12",),
    "*.pfx": ("store.pfx",),
    "*.jks": ("android/release.jks", "truststore.jks"),
    "*.keystore": ("android/debug.keystore", "release.keystore"),
    "id_rsa*": ("keys/id_rsa", "keys/id_rsa.pub"),
    "id_dsa*": ("id_dsa", "backup/id_dsa.pub", "id_dsa_old"),
    "id_ecdsa*": ("id_ecdsa", "id_ecdsa_sk"),
    "id_ed25519*": ("id_ed25519", "deploy/id_ed25519.pub"),
    ".ssh/": ("home/.ssh/config", ".ssh/known_hosts"),
    "**/.aws/credentials": (".aws/credentials", "ops/.aws/credentials"),
    "**/.docker/config.json": (".docker/config.json", "ci/runner/.docker/config.json"),
    "**/.kube/config": (".kube/config", "clusters/prod/.kube/config"),
    ".netrc": (".netrc", "home/.netrc"),
    "_netrc": ("_netrc", "windows/_netrc"),
    ".npmrc": (".npmrc", "web/.npmrc"),
    ".pypirc": (".pypirc",),
    ".pgpass": (".pgpass", "db/.pgpass"),
    ".htpasswd": (".htpasswd", "public/admin/.htpasswd"),
    ".git-credentials": (".git-credentials",),
    "credentials.json": ("credentials.json", "CREDENTIALS.JSON", "google/credentials.json"),
    "application_default_credentials.json": (
        "application_default_credentials.json",
        "gcloud/application_default_credentials.json",
    ),
}

# Neighbours of the entries above that are ordinary files: the patterns are no wider than named.
ALLOWED = (
    ".gitignore",
    ".github/workflows/ci.yml",
    "docs/env.md",
    "keys.py",
    "a.keys",
    "store.jks.md",
    "keystore.py",
    "notes_id/README.md",
    ".docker/daemon.json",
    ".kube/cache.txt",
    "docker/config.json",
    "kube/config",
    "netrc.md",
    "htpasswd.py",
    "pgpass.sql",
    "default_credentials.md",
    ".aws/config",
)

CASES = [(pattern, path) for pattern, paths in DENIED.items() for path in paths]


def test_every_default_entry_has_paths_here() -> None:
    assert set(DEFAULT_DENY) == set(DENIED)
    assert len(DEFAULT_DENY) == 26


@pytest.mark.parametrize(("pattern", "path"), CASES, ids=[p for _, p in CASES])
def test_each_default_entry_denies_its_paths(tmp_path: Path, pattern: str, path: str) -> None:
    d = default_guard(tmp_path).precheck(path)
    assert not d.allowed
    assert d.rule == "denylist"
    assert d.reason == f"path {path} matches the denylist pattern {pattern}"


@pytest.mark.parametrize("path", ALLOWED)
def test_the_neighbours_of_the_entries_are_allowed(tmp_path: Path, path: str) -> None:
    assert default_guard(tmp_path).precheck(path).allowed


@pytest.mark.asyncio
async def test_no_file_a_default_entry_denies_is_indexed_or_found(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    # One file at each path (but .git's, which git owns), each holding one word that only it
    # holds, beside one ordinary file that holds them all.
    files: dict[str, str | bytes] = {}
    for pattern, paths in DENIED.items():
        for path in paths:
            if pattern == ".git" or path.lower() in {p.lower() for p in files}:
                continue
            files[path] = "secret = 1\n"
    files["ordinary.txt"] = "secret = 0\n"
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        summary = (await engine.index_update()).summary
        out = await engine.index_search("secret", "repo", limit=20)
    assert [h["path"] for h in out.hits] == ["ordinary.txt"]
    assert summary["files"] == 1
    assert summary["skipped"]["denied"] == len(files) - 1
