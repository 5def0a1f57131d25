"""The packages whose names load on first use (the top level, bus, store, guard): every name they
export is the very object of the module it comes from, an unknown name is an AttributeError
that says which, and `from package import *` gives them all."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ("nodwyn_retrieval", "nodwyn_retrieval.bus", "nodwyn_retrieval.store",
            "nodwyn_retrieval.guard")  # fmt: skip


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_modules_own(package: str) -> None:
    pkg = importlib.import_module(package)
    where = pkg._WHERE
    for name in pkg.__all__:
        if name == "__version__":
            continue
        value = getattr(pkg, name)
        if name in where:
            module = importlib.import_module(where[name], package)
            assert value is getattr(module, name), name
    assert set(where) <= set(pkg.__all__)


@pytest.mark.parametrize("package", PACKAGES)
def test_an_unknown_name_says_which(package: str) -> None:
    pkg = importlib.import_module(package)
    with pytest.raises(AttributeError, match=rf"{package}.*'no_such_name'"):
        _ = pkg.no_such_name


def test_a_star_import_and_the_guards_redact_in_a_new_process() -> None:
    """In a process of its own (nothing loaded before): a star import brings every name, and
    guard's redact is the function, not its module, whatever is imported first."""
    code = (
        "import nodwyn_retrieval.guard.redact\n"
        "from nodwyn_retrieval.guard import redact\n"
        "assert callable(redact) and not hasattr(redact, '__file__'), redact\n"
        "ns = {}\n"
        "exec('from nodwyn_retrieval.store import *', ns)\n"
        "import nodwyn_retrieval.store as s\n"
        "assert set(s.__all__) <= set(ns), set(s.__all__) - set(ns)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
