"""Shared fixtures: isolated data and configuration directories."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Isolated data and configuration directories, also set in the environment."""
    data = tmp_path / "data"
    config = tmp_path / "config"
    monkeypatch.setenv("NODWYN_RETRIEVAL_DATA_DIR", str(data))
    monkeypatch.setenv("NODWYN_RETRIEVAL_CONFIG_DIR", str(config))
    return data, config
