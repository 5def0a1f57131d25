#!/usr/bin/env bash
# Make a small git repository, index it, and search it: the main job on a small example.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo="$work/repo"
mkdir -p "$repo/keychain" "$repo/docs"
cat > "$repo/keychain/bind.py" <<'PY'
"""Credential bindings: which host a key may be sent to."""


class Binding:
    def __init__(self, host: str, method: str, key_position: str) -> None:
        self.host = host
        self.method = method
        self.key_position = key_position


def check_binding(binding: Binding, host: str) -> bool:
    """A credential is sent only to the host it is bound to; localhost is refused."""
    if host in ("localhost", "127.0.0.1"):
        return False
    return binding.host == host
PY
cat > "$repo/docs/manual.md" <<'MD'
# Manual

## Keys

A key is bound to a host, a method and a position in the request.
MD
git -C "$repo" init -q
export NODWYN_RETRIEVAL_DATA_DIR="$work/data" NODWYN_RETRIEVAL_CONFIG_DIR="$work/config"
cd "$repo"
echo "\$ nodwyn-retrieval update"
nodwyn-retrieval update
echo
echo "\$ nodwyn-retrieval search \"credential binding localhost\""
nodwyn-retrieval search "credential binding localhost"
