"""The actor runtime (mailboxes, ``tell``, ``ask``, failure rules, supervision, stop) and the
process pool; no domain logic."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodwyn_retrieval.bus.actor import Actor, ActorRef, ActorSystem, RestartPolicy
    from nodwyn_retrieval.bus.pool import ProcessPool

# Each name is imported on first use: a worker process imports the pool's worker half alone,
# not the actors' runtime and asyncio.
_WHERE = {
    "Actor": "nodwyn_retrieval.bus.actor",
    "ActorRef": "nodwyn_retrieval.bus.actor",
    "ActorSystem": "nodwyn_retrieval.bus.actor",
    "RestartPolicy": "nodwyn_retrieval.bus.actor",
    "ProcessPool": "nodwyn_retrieval.bus.pool",
}

__all__ = ["Actor", "ActorRef", "ActorSystem", "ProcessPool", "RestartPolicy"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'nodwyn_retrieval.bus' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
