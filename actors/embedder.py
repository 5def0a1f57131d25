"""The embeddings actor, disabled (§10; the person's answer 1: embeddings wait for a model).

It is started with the others so that the shape of the system is the one §10 will fill in: a
request to embed is answered with :class:`errors.Disabled`, saying how a person would turn it on,
and nothing is ever sent anywhere. ``status`` reports ``embeddings: off``.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodwyn_retrieval.bus import Actor
from nodwyn_retrieval.errors import Disabled
from nodwyn_retrieval.store.config import Config

__all__ = ["EMBEDDINGS_OFF", "Embed", "EmbedStatus", "EmbedderActor", "Embedding"]

EMBEDDINGS_OFF = (
    "embeddings are off: a person turns them on by naming a server and a model as "
    "[index] embed_server and embed_model in config.toml (an Ollama /api/embed or an "
    "OpenAI-compatible /v1/embeddings server); this version ranks by words alone"
)


@dataclass(frozen=True, slots=True)
class Embed:
    """Embed texts (chunks at index-update, or a query at a search)."""

    texts: tuple[str, ...]
    """The redacted texts."""


@dataclass(frozen=True, slots=True)
class EmbedStatus:
    """Ask what the embeddings are; the reply is an EmbedStatus with text filled in."""

    text: str = "off"
    """'off', or '<server>/<model>' once §10 is built and configured."""


@dataclass(frozen=True, slots=True)
class Embedding:
    """Vectors for an Embed (never produced while embeddings are off)."""

    vectors: tuple[tuple[float, ...], ...]
    """One vector per text."""


class EmbedderActor(Actor):
    """Answers that embeddings are off; sends nothing."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __repr__(self) -> str:
        return "<EmbedderActor off>"

    async def handle(self, message: object) -> object:
        match message:
            case EmbedStatus():
                return EmbedStatus("off")
            case Embed():
                raise Disabled(EMBEDDINGS_OFF)
        raise TypeError(f"embedder cannot handle {type(message).__name__}")
