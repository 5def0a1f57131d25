"""The three tools' contract: their names, arguments, limits and definitions for a model.

index-search, index-update and recall (ADR 0050 §1): what each takes, the checks every argument
passes at the engine's edge, and the JSON-schema definitions an agent loop offers its model with
the working rule (§11).
"""

from __future__ import annotations

from typing import Any

from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.retrieval.words import query_words

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SCOPES",
    "WORKING_RULE",
    "check_limit",
    "check_query",
    "check_scope",
    "only",
    "tool_definitions",
]

SCOPES = ("repo", "conversation", "earlier")
DEFAULT_LIMIT = 8  # §1
MAX_LIMIT = 20  # §1

WORKING_RULE = (
    "To find code by what it does or under several possible names, search for the words with "
    "index-search; use a grep for an exact string or pattern."
)


def check_query(query: object) -> str:
    if not isinstance(query, str):
        raise BadInput(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise BadInput("query is empty: give the words or names to search for")
    if not query_words(query):
        raise BadInput(f"query {query!r} has no words to search for: give words or names")
    return query


def check_scope(scope: object) -> str:
    if scope not in SCOPES:
        raise BadInput(f"scope must be repo, conversation or earlier, got {scope!r}")
    return str(scope)


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BadInput(f"limit must be a whole number between 1 and {MAX_LIMIT}, got {limit!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def only(arguments: dict[str, Any], allowed: set[str], tool: str) -> None:
    extra = sorted(set(arguments) - allowed)
    if extra:
        raise BadInput(f"{tool} takes {', '.join(sorted(allowed))}; unknown: {', '.join(extra)}")


def tool_definitions(*, conversation: bool = True) -> list[dict[str, Any]]:
    """index-search, index-update and recall as JSON-schema tools (§1, §11)."""
    search = {
        "name": "index-search",
        "description": (
            "Rank what matches plain words or names, best first. Use it to find code by what it "
            "does or when you would otherwise guess several names (cred|binding|host|key): give "
            "the words, not a pattern. scope 'repo' searches the working tree's files (chunks of "
            "lines; each result is path:A-B with its best lines, so go on with a ranged read); "
            "'conversation' searches this session's messages and tool results, including ones "
            "shown as [elided seq=N]; 'earlier' searches the project's other tasks when the "
            "person allows it. Use a grep instead for an exact string or regular expression."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Plain words or names."},
                "scope": {"type": "string", "enum": list(SCOPES)},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                          "default": DEFAULT_LIMIT},
                "path": {"type": "string",
                         "description": "repo only: a file or directory to narrow to."},
            },
            "required": ["query", "scope"],
            "additionalProperties": False,
        },
    }  # fmt: skip
    update = {
        "name": "index-update",
        "description": (
            "Bring the repository's search index up to date now (at most 60 s a call; call again "
            "to go on). index-search refreshes by itself, so use this only for a large tree the "
            "search said is partial, or with path to add a directory git ignores."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "additionalProperties": False,
        },
    }
    recall = {
        "name": "recall",
        "description": (
            "Read back one event of this conversation by its seq: use it when the window shows "
            "[elided seq=N] or a search names a seq, instead of running the call again. start "
            "and count read it in lines, as a ranged file read does. task reads an earlier "
            "task's event, when the person allows earlier tasks."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "seq": {"type": "integer", "minimum": 1},
                "start": {"type": "integer", "minimum": 1},
                "count": {"type": "integer", "minimum": 1},
                "task": {"type": "string"},
            },
            "required": ["seq"],
            "additionalProperties": False,
        },
    }
    tools: list[dict[str, Any]] = [search, update]
    if conversation:
        tools.append(recall)
    for t in tools:
        t["rule"] = WORKING_RULE
    return tools
