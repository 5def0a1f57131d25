"""The actor runtime (mailboxes, ``tell``, ``ask``, failure rules, supervision, stop) and the
process pool; no domain logic."""

from __future__ import annotations

from nodwyn_retrieval.bus.actor import Actor, ActorRef, ActorSystem, RestartPolicy
from nodwyn_retrieval.bus.pool import ProcessPool

__all__ = ["Actor", "ActorRef", "ActorSystem", "ProcessPool", "RestartPolicy"]
