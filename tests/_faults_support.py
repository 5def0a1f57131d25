"""What the fault tests share (tests/test_faults.py, tests/test_faults_files.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nodwyn_retrieval import entry
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.store.paths import ProjectDirs, project_dirs, project_key

ROOT = Path(__file__).resolve().parent.parent

FILES: dict[str, str | bytes] = {
    "keychain/bind.py": "def check_binding(host):\n    return host == 'example'\n",
    "server/http.py": "def serve(port):\n    return listen(port)\n",
    "docs/manual.md": "# Manual\n\nHow the server listens on a port.\n",
}


def env() -> dict[str, str]:
    """The environment of a child process that imports the checkout's package."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


async def open_engine(root: Path, data: Path, config: Path, **kw: Any) -> Engine:
    return await Engine.open(root, data_dir=data, config_dir=config, workers=1, **kw)


def paths_of(out: entry.SearchOutput) -> list[str]:
    return [h["path"] for h in out.hits]


def pdirs_of(root: Path, data: Path) -> ProjectDirs:
    return project_dirs(data, project_key(root))
