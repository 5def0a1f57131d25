"""Names a package loads on first use (PEP 562): its ``__getattr__`` asks :func:`load`, so that
importing the package, or one module of it, does not import every module its names come from."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def load(package: str, where: Mapping[str, str], namespace: dict[str, Any], name: str) -> Any:
    """The value of ``name`` in the package, imported from the module ``where`` names (a full
    module name, or one relative to the package) and kept in its namespace; AttributeError for
    a name it does not export."""
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, package), name)
    namespace[name] = value
    return value
