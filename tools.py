"""The three tools' contract: their names, arguments, limits and definitions for a model.

index-search, index-update and recall (ADR 0050 §1): what each takes, the checks every argument
passes at the engine's edge, and their definitions as each model API takes them
(:func:`tool_definitions`: Anthropic's Messages API, OpenAI's Chat Completions, MCP's
``tools/list``), with the working rule a system prompt carries beside them (:func:`working_rule`,
§11). Every text here is written for the model that reads it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.retrieval.words import MAX_WORD_BYTES, query_words

__all__ = [
    "DEFAULT_LIMIT",
    "FORMATS",
    "MAX_LIMIT",
    "SCOPES",
    "WORKING_RULE",
    "ToolFormat",
    "check_limit",
    "check_query",
    "check_scope",
    "only",
    "shown_text",
    "tool_definitions",
    "working_rule",
]

SCOPES = ("repo", "conversation", "earlier")
DEFAULT_LIMIT = 8  # §1
MAX_LIMIT = 20  # §1

ToolFormat = Literal["anthropic", "openai", "mcp"]
FORMATS: tuple[ToolFormat, ...] = ("anthropic", "openai", "mcp")

WORKING_RULE = (
    "To find code by what it does or under several possible names, search for the words with "
    "index-search; use a grep for an exact string or pattern."
)
_RECALL_RULE = (
    " When the conversation shows [elided seq=N], read it back with recall instead of running "
    "the call again."
)


def working_rule(*, conversation: bool = True) -> str:
    """The working rule for the system prompt beside the tools (§11); it names recall only when
    recall is offered."""
    return WORKING_RULE + (_RECALL_RULE if conversation else "")


def shown_text(text: str, most: int = 120) -> str:
    """A caller's text as an error names it: on one line, and cut short when it is long."""
    shown = text if text.isprintable() else repr(text)[1:-1]
    return shown if len(shown) <= most else f"{shown[:most]}... ({len(text)} characters)"


def check_query(query: object) -> str:
    if not isinstance(query, str):
        raise BadInput(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise BadInput("query is empty: give the words or names to search for")
    if not query_words(query):
        if any(_too_long(run) for run in _RUNS.findall(query)):
            raise BadInput(
                f"query '{shown_text(query)}' has no words to search for: a word over "
                f"{MAX_WORD_BYTES} bytes (a hash, a minified line) is never indexed; give "
                "shorter words or names"
            )
        raise BadInput(
            f"query '{shown_text(query)}' has no words to search for: give words or names"
        )
    return query


_RUNS = re.compile(r"\w+")


def _too_long(run: str) -> bool:
    """Whether a run of word characters is over the length of any indexed word."""
    return len(run.encode("utf-8", "surrogatepass")) > MAX_WORD_BYTES


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


def _search(conversation: bool, earlier: bool) -> tuple[str, str, dict[str, Any]]:
    scopes = [s for s, on in zip(SCOPES, (True, conversation, earlier), strict=True) if on]
    what = [
        "'repo' searches the working tree's files in chunks of lines; each result is path:A-B "
        "with its best lines, so go on with a ranged read of that file"
    ]
    if conversation:
        what.append(
            "'conversation' searches this session's messages and tool results, including ones "
            "shown as [elided seq=N]; each result names its seq for recall"
        )
    if earlier:
        what.append(
            "'earlier' searches the project's other tasks; it answers only when the person has "
            "allowed it for this project, and otherwise says it is off"
        )
    description = (
        "Rank what matches plain words or names, best first. Use it to find code by what it does "
        "or when you would otherwise guess several names (cred|binding|host|key): give the "
        "words, not a pattern. Scope " + "; ".join(what) + ". Use a grep instead for an exact "
        "string or regular expression."
    )
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": (
                    "Plain words or names to look for, e.g. 'retry backoff http client'; "
                    "not a regular expression."
                ),
            },
            "scope": {
                "type": "string",
                "enum": scopes,
                "description": "Where to search: " + ", ".join(scopes) + " (see above).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": f"How many results, 1 to {MAX_LIMIT}; {DEFAULT_LIMIT} if left out.",
            },
            "path": {
                "type": "string",
                "description": (
                    "Scope repo only: a file or directory, relative to the repository root, to "
                    "search within."
                ),
            },
        },
        "required": ["query", "scope"],
        "additionalProperties": False,
    }
    return "index-search", description, schema


def _update() -> tuple[str, str, dict[str, Any]]:
    description = (
        "Bring the repository's search index up to date now (at most 60 s a call; call again "
        "to go on). index-search refreshes by itself, so use this only for a large tree the "
        "search said is partial, or with path to add a directory git ignores."
    )
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": (
                    "A file or directory, relative to the repository root, to index now; a "
                    "directory is indexed whole, files git ignores included. Leave it out for "
                    "the whole repository."
                ),
            }
        },
        "additionalProperties": False,
    }
    return "index-update", description, schema


def _recall(earlier: bool) -> tuple[str, str, dict[str, Any]]:
    description = (
        "Read back one event of this conversation by its seq: use it when the conversation "
        "shows [elided seq=N] or a search result names a seq, instead of running the call "
        "again. start and count read it in lines, as a ranged file read does."
    )
    properties: dict[str, Any] = {
        "seq": {
            "type": "integer",
            "minimum": 1,
            "description": "The event's seq, as [elided seq=N] or a search result names it.",
        },
        "start": {
            "type": "integer",
            "minimum": 1,
            "description": "The first line to read, from 1; leave it out for the whole event.",
        },
        "count": {
            "type": "integer",
            "minimum": 1,
            "description": "How many lines to read from start; leave it out for all that fit.",
        },
    }
    if earlier:
        description += (
            " task reads an event of an earlier task instead, when the person has allowed "
            "earlier tasks for this project."
        )
        properties["task"] = {
            "type": "string",
            "description": (
                "An earlier task's id, as an 'earlier' search result names it; leave it out "
                "for this conversation."
            ),
        }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": ["seq"],
        "additionalProperties": False,
    }
    return "recall", description, schema


def tool_definitions(
    format: ToolFormat = "anthropic",
    *,
    conversation: bool = True,
    earlier: bool = True,
) -> list[dict[str, Any]]:
    """index-search, index-update and recall as the API named by ``format`` takes them (§1).

    - ``"anthropic"``: ``{"name", "description", "input_schema"}`` (Messages API ``tools``);
    - ``"openai"``: ``{"type": "function", "function": {"name", "description", "parameters"}}``
      (Chat Completions ``tools``);
    - ``"mcp"``: ``{"name", "description", "inputSchema"}`` (MCP ``tools/list``).

    Only what can work is offered: ``conversation`` (a session log is read) adds the conversation
    scope and recall; ``earlier`` (the project has other tasks) adds the earlier scope and
    recall's ``task``. The working rule is not in the definitions: see :func:`working_rule`.
    Each call returns new dicts, free to change.
    """
    if format not in FORMATS:
        raise BadInput(f"format must be anthropic, openai or mcp, got {format!r}")
    specs = [_search(conversation, earlier), _update()]
    if conversation:
        specs.append(_recall(earlier))
    out: list[dict[str, Any]] = []
    for name, description, schema in specs:
        if format == "anthropic":
            out.append({"name": name, "description": description, "input_schema": schema})
        elif format == "openai":
            out.append(
                {
                    "type": "function",
                    "function": {"name": name, "description": description, "parameters": schema},
                }
            )
        else:
            out.append({"name": name, "description": description, "inputSchema": schema})
    return out
