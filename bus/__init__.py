"""The actor runtime (mailboxes, ``tell``, ``ask``, failure rules, supervision, stop) and the
process pool; no domain logic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodwyn_retrieval._lazy import load

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
    return load(__name__, _WHERE, globals(), name)
