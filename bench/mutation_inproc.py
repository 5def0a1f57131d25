"""Mutation testing in one process: pytest-gremlins's gremlins, each run without a new process.

    python bench/mutation_inproc.py guard/redact.py
    python bench/mutation_inproc.py guard/guard.py --deps nodwyn_retrieval.guard.beneath
    python bench/mutation_inproc.py guard/secret_rules.py --deps nodwyn_retrieval.guard.redact
    ONLY=g12,g40 python bench/mutation_inproc.py retrieval/bm25.py --out /tmp/bm25.json

bench/mutation.py starts pytest-gremlins's own runner, which runs a new test process for every
gremlin; on two shared cores under load that is about one gremlin a minute, and a module of 300
gremlins takes hours. This script uses the same gremlins (pytest-gremlins's transformer and all
its operators) and the same tests (bench/mutation.py's ``TESTS`` for the module, or those after
``--``), run with ``-x``, but in this one process:

- the module's instrumented code is executed again for each gremlin with ``ACTIVE_GREMLIN`` set,
  so a gremlin evaluated at import time (a dataclass flag, a constant) takes effect;
- every object another module took from it (``from m import f``) is swapped for the new one, and
  the modules named by ``--deps`` are reloaded the same way (a module whose values another
  compiles at its import needs it: ``guard/secret_rules.py``'s rules are built into
  ``guard.redact``'s expressions, so without ``--deps nodwyn_retrieval.guard.redact`` no gremlin
  of it reaches a redaction and every one survives);
- Hypothesis's example database is off, so an example one gremlin found is not replayed against
  the next.

Checked against bench/mutation.py on guard/decision.py: the same 20 gremlins, the same 15 killed
and the same 5 survivors. A gremlin whose tests pass survives; a failure, or a gremlin that breaks
the module's import, kills it; one that runs past ``MUTANT_SECONDS`` (120 by default) counts as
killed by timeout. Writes the results as JSON after every gremlin (``--out``, by default
bench/out/mutation/<module>.inproc.json); a file ``<out>.stop`` ends the run after the current
gremlin. Not part of CI.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import os
import signal
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def _own(value: object) -> bool:
    """An object the module's code made (never a shared singleton such as None or 0)."""
    if isinstance(value, types.FunctionType | type):
        return True
    if isinstance(value, tuple | list | dict | frozenset | set):
        return len(value) > 0
    return type(value).__module__ != "builtins" and not isinstance(value, types.ModuleType)


def _swap(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Point every other module's name for an object of ``old`` at its remade one in ``new``."""
    changed = {
        id(v): new[k]
        for k, v in old.items()
        if k in new and new[k] is not v and not k.startswith("__") and _own(v)
    }
    if not changed:
        return
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict) or names is new:
            continue
        for k, v in list(names.items()):
            remade = changed.get(id(v))
            if remade is not None and v is not remade:
                names[k] = remade


class _Alarm(KeyboardInterrupt):
    """A gremlin's tests ran past their time."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Alarm


def main() -> int:
    argv = sys.argv[1:]
    tests_given: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, tests_given = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a module's path in the checkout, e.g. guard/redact.py")
    parser.add_argument("--deps", nargs="*", default=[], help="modules to reload after each load")
    parser.add_argument("--out", type=Path, help="the results' JSON file")
    args = parser.parse_args(argv)

    import pytest
    from hypothesis import settings
    from mutation import TESTS
    from pytest_gremlins.instrumentation.transformer import (
        get_default_registry,
        transform_source,
    )
    from pytest_gremlins.plugin import _inject_gremlin_active

    settings.register_profile("mutation", database=None)
    settings.load_profile("mutation")
    tests = tests_given or [str(ROOT / "tests" / t) for t in TESTS.get(args.module, [])]
    if not tests:
        parser.error(f"bench/mutation.py lists no tests for {args.module}: give them after --")
    out: Path = args.out or ROOT / "bench" / "out" / "mutation" / (
        args.module.replace("/", "__") + ".inproc.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    only = {g for g in os.environ.get("ONLY", "").split(",") if g}
    timeout = int(os.environ.get("MUTANT_SECONDS", "120"))

    path = ROOT / args.module
    # A package's __init__.py is the package itself.
    dotted = args.module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    name = "nodwyn_retrieval." + dotted
    gremlins, tree = transform_source(
        path.read_text(encoding="utf-8"), str(path), get_default_registry().get_all()
    )
    code = compile(ast.fix_missing_locations(_inject_gremlin_active(tree)), str(path), "exec")
    importlib.import_module("nodwyn_retrieval.entry")
    module = importlib.import_module(name)

    def load(gremlin: str | None) -> None:
        if gremlin is None:
            os.environ.pop("ACTIVE_GREMLIN", None)
        else:
            os.environ["ACTIVE_GREMLIN"] = gremlin
        old = dict(module.__dict__)
        exec(code, module.__dict__)  # noqa: S102  the module's own code, instrumented
        _swap(old, module.__dict__)
        for dep in args.deps:
            dep_module = sys.modules[dep]
            dep_old = dict(dep_module.__dict__)
            importlib.reload(dep_module)
            _swap(dep_old, dep_module.__dict__)

    def run() -> int:
        for loaded in [n for n in sys.modules if n.startswith(("tests.", "test_"))]:
            if loaded != "tests.support":
                del sys.modules[loaded]
        signal.alarm(timeout)
        try:
            flags = ["-x", "-q", "--tb=no", "-p", "no:cacheprovider", "--no-header"]
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                return int(pytest.main([*flags, "-W", "ignore::UserWarning", *tests]))
        except _Alarm:
            return -1
        finally:
            signal.alarm(0)

    signal.signal(signal.SIGALRM, _on_alarm)
    load(None)
    start = time.monotonic()
    if run() != 0:
        print(f"{args.module}: its tests fail without a gremlin", file=sys.stderr)
        return 1
    results: list[dict[str, Any]] = []
    for g in gremlins:
        if out.with_name(out.name + ".stop").exists():
            break
        if only and g.gremlin_id not in only:
            continue
        began = time.monotonic()
        try:
            load(g.gremlin_id)
            rc = run()
        except Exception as e:  # a gremlin that breaks the import is killed by it
            rc = 99
            print("load failed", g.gremlin_id, type(e).__name__, e, file=sys.stderr)
        # pytest's 2 is an interrupted run: the alarm inside a test's own handler.
        status = {0: "survived", -1: "timeout", 2: "timeout"}.get(rc, "zapped")
        results.append(
            {"id": g.gremlin_id, "line": g.line_number, "description": g.description,
             "operator": g.operator_name, "status": status,
             "seconds": round(time.monotonic() - began, 1)}
        )  # fmt: skip
        print(g.gremlin_id, g.line_number, status, g.description, file=sys.stderr, flush=True)
        out.write_text(
            json.dumps({"module": args.module, "tests": tests, "results": results}, indent=1)
        )
    load(None)
    statuses = [r["status"] for r in results]
    summary = {
        "module": args.module,
        "gremlins": len(statuses),
        "killed": len(statuses) - statuses.count("survived"),
        "survived": statuses.count("survived"),
        "timeout": statuses.count("timeout"),
        "seconds": round(time.monotonic() - start),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
