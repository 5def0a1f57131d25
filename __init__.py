"""nodwyn-retrieval: ranked search of a repository, a coding agent's conversation and its earlier
tasks, with recall of logged events.

The public entry is :class:`Engine`::

    from nodwyn_retrieval import Engine

    engine = await Engine.open(root, log="task.jsonl")   # the loop writes task.jsonl
    out = await engine.index_search("credential binding", scope="repo")
    print(out.text)
    tools = engine.tools("anthropic")     # or "openai", "mcp"; engine.working_rule() beside them
    await engine.close()

Every error raised on purpose is a :class:`RetrievalError` (see :mod:`nodwyn_retrieval.errors`).
Names are loaded on first use, so importing the package costs little until an engine is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from nodwyn_retrieval.actors.messages import Progress
    from nodwyn_retrieval.entry import Engine, SearchOutput, ToolOutput, UpdateOutput
    from nodwyn_retrieval.errors import (
        ActorDead,
        BadInput,
        DeadlineExceeded,
        Disabled,
        EngineClosed,
        FormatError,
        GuardRefused,
        NotFound,
        RetrievalError,
        StoreError,
        WorkerCrashed,
        WorkerError,
        WrongLoop,
    )
    from nodwyn_retrieval.tools import tool_definitions, working_rule

_WHERE = {
    "Engine": ".entry",
    "SearchOutput": ".entry",
    "ToolOutput": ".entry",
    "UpdateOutput": ".entry",
    "Progress": ".actors.messages",
    "tool_definitions": ".tools",
    "working_rule": ".tools",
    "ActorDead": ".errors",
    "BadInput": ".errors",
    "DeadlineExceeded": ".errors",
    "Disabled": ".errors",
    "EngineClosed": ".errors",
    "FormatError": ".errors",
    "GuardRefused": ".errors",
    "NotFound": ".errors",
    "RetrievalError": ".errors",
    "StoreError": ".errors",
    "WorkerCrashed": ".errors",
    "WorkerError": ".errors",
    "WrongLoop": ".errors",
}

__all__ = [
    "ActorDead",
    "BadInput",
    "DeadlineExceeded",
    "Disabled",
    "Engine",
    "EngineClosed",
    "FormatError",
    "GuardRefused",
    "NotFound",
    "Progress",
    "RetrievalError",
    "SearchOutput",
    "StoreError",
    "ToolOutput",
    "UpdateOutput",
    "WorkerCrashed",
    "WorkerError",
    "WrongLoop",
    "__version__",
    "tool_definitions",
    "working_rule",
]


def __getattr__(name: str) -> Any:
    # The helper imported here: `import nodwyn_retrieval` loads no module of the package.
    from nodwyn_retrieval._lazy import load  # noqa: PLC0415

    return load(__name__, _WHERE, globals(), name)
