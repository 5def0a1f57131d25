"""Shared fixtures: isolated data and configuration directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodwyn_retrieval.guard import beneath


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Isolated data and configuration directories, also set in the environment."""
    data = tmp_path / "data"
    config = tmp_path / "config"
    monkeypatch.setenv("NODWYN_RETRIEVAL_DATA_DIR", str(data))
    monkeypatch.setenv("NODWYN_RETRIEVAL_CONFIG_DIR", str(config))
    return data, config


@pytest.fixture(params=["openat2", "walk"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once with openat2 and once with the walk it falls back to."""
    if request.param == "openat2":
        if not beneath.openat2_available():
            pytest.skip("this kernel (or its seccomp filter) has no openat2")
    else:
        monkeypatch.setattr(beneath, "openat2_available", lambda: False)
    return str(request.param)
