"""The tool definitions as each model API takes them, checked against the API's published schema.

The schemas below are written from each API's documentation of a tool definition:

- Anthropic Messages API, a client tool in ``tools``: ``name`` (``^[a-zA-Z0-9_-]{1,64}$``),
  ``description``, ``input_schema`` (a JSON Schema whose ``type`` is ``object``), optional
  ``type: "custom"`` and ``cache_control``; any other key is rejected.
- OpenAI Chat Completions, a function tool in ``tools``: ``{"type": "function", "function":
  {"name", "description", "parameters", "strict"}}``; the name is ``a-z A-Z 0-9 _ -``, at most
  64 characters; ``parameters`` is a JSON Schema object.
- MCP (specification 2025-06-18, ``Tool`` in ``tools/list``): ``name`` and ``inputSchema``
  (``type: "object"``, ``properties``, ``required``) required; ``title``, ``description``,
  ``outputSchema``, ``annotations`` and ``_meta`` optional.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from nodwyn_retrieval import Engine
from nodwyn_retrieval.store.log import LogWriter
from nodwyn_retrieval.store.paths import project_dirs, project_key
from nodwyn_retrieval.tools import FORMATS, WORKING_RULE, tool_definitions, working_rule

from tests.support import make_repo

NAME = {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}
INPUT_SCHEMA = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"const": "object"},
        "properties": {"type": "object", "additionalProperties": {"type": "object"}},
        "required": {"type": "array", "items": {"type": "string"}},
    },
}
ANTHROPIC_TOOL = {
    "type": "object",
    "required": ["name", "input_schema"],
    "properties": {
        "type": {"enum": ["custom"]},
        "name": NAME,
        "description": {"type": "string"},
        "input_schema": INPUT_SCHEMA,
        "cache_control": {"type": "object"},
    },
    "additionalProperties": False,
}
OPENAI_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": NAME,
                "description": {"type": "string"},
                "parameters": INPUT_SCHEMA,
                "strict": {"type": ["boolean", "null"]},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
MCP_TOOL = {
    "type": "object",
    "required": ["inputSchema", "name"],
    "properties": {
        "name": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": INPUT_SCHEMA,
        "outputSchema": INPUT_SCHEMA,
        "annotations": {"type": "object"},
        "_meta": {"type": "object"},
    },
}
PUBLISHED = {"anthropic": ANTHROPIC_TOOL, "openai": OPENAI_TOOL, "mcp": MCP_TOOL}


def parts(fmt: str, tool: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """name, description and the input schema of a definition in any format."""
    if fmt == "openai":
        f = tool["function"]
        return f["name"], f["description"], f["parameters"]
    return tool["name"], tool["description"], tool["input_schema" if fmt == "anthropic" else
                                                   "inputSchema"]  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("conversation", "earlier"), [(True, True), (True, False), (False, False)])
def test_each_definition_is_what_the_api_takes_as_it_is(
    fmt: str, conversation: bool, earlier: bool
) -> None:
    defs = tool_definitions(fmt, conversation=conversation, earlier=earlier)  # type: ignore[arg-type]
    assert defs
    for tool in defs:
        jsonschema.validate(tool, PUBLISHED[fmt])
        name, description, schema = parts(fmt, tool)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "rule" not in tool
        assert description
        for prop, spec in schema["properties"].items():
            assert spec.get("description"), (name, prop)
    if fmt == "mcp":
        assert all(set(t) == {"name", "description", "inputSchema"} for t in defs)


def test_the_scopes_offered_are_the_ones_that_can_work() -> None:
    def search(**kw: bool) -> dict[str, Any]:
        return tool_definitions(**kw)[0]["input_schema"]

    assert search(conversation=False, earlier=False)["properties"]["scope"]["enum"] == ["repo"]
    assert search(conversation=True, earlier=False)["properties"]["scope"]["enum"] == [
        "repo",
        "conversation",
    ]
    full = tool_definitions(conversation=True, earlier=True)
    assert full[0]["input_schema"]["properties"]["scope"]["enum"] == [
        "repo",
        "conversation",
        "earlier",
    ]
    assert "allowed" in full[0]["description"]
    assert "task" in full[2]["input_schema"]["properties"]
    assert "allowed" in full[2]["description"]
    no_log = tool_definitions(conversation=False, earlier=True)
    assert [t["name"] for t in no_log] == ["index-search", "index-update"]
    assert "conversation" not in no_log[0]["description"]
    no_earlier = tool_definitions(conversation=True, earlier=False)
    assert "task" not in no_earlier[2]["input_schema"]["properties"]
    assert "earlier" not in no_earlier[0]["description"]


def test_the_working_rule_is_apart_and_names_recall_only_when_offered() -> None:
    assert working_rule(conversation=False) == WORKING_RULE
    assert "recall" in working_rule(conversation=True)
    assert "recall" not in WORKING_RULE
    with pytest.raises(ValueError, match="format must be anthropic, openai or mcp"):
        tool_definitions("gemini")  # type: ignore[arg-type]


def test_the_definitions_are_new_each_call() -> None:
    a = tool_definitions()
    a[0]["input_schema"]["properties"].clear()
    assert tool_definitions()[0]["input_schema"]["properties"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"keychain/bind.py": "def check_binding(host):\n    return host == 'example'\n"},
    )


@pytest.mark.asyncio
async def test_an_engine_offers_what_its_session_can_do(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1]) as bare:
        tools = bare.tools()
        assert [t["name"] for t in tools] == ["index-search", "index-update"]
        assert tools[0]["input_schema"]["properties"]["scope"]["enum"] == ["repo"]
        assert "recall" not in bare.working_rule()
        # What the model asks anyway is answered for the model, not for the developer.
        conv = await bare.call_tool("index-search", {"query": "binding", "scope": "conversation"})
        rec = await bare.call_tool("recall", {"seq": 1})
    for out in (conv, rec):
        assert out.is_error
        assert "log=" not in out.text
        assert "open the engine" not in out.text
        assert "not available" in out.text
    tasks = project_dirs(dirs[0], project_key(repo)).tasks
    mine = tasks / "now.jsonl"
    LogWriter(mine).close()
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], log=mine) as alone:
        names = [t["function"]["name"] for t in alone.tools("openai") if t["type"] == "function"]
        scope = alone.tools("mcp")[0]["inputSchema"]["properties"]["scope"]["enum"]
    assert names == ["index-search", "index-update", "recall"]
    assert scope == ["repo", "conversation"]  # no other task yet: no earlier scope
    LogWriter(tasks / "before.jsonl").close()
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], log=mine) as both:
        tools = both.tools("anthropic")
        assert "recall" in both.working_rule()
    assert tools[0]["input_schema"]["properties"]["scope"]["enum"] == [
        "repo",
        "conversation",
        "earlier",
    ]


@pytest.mark.asyncio
async def test_what_a_schema_accepts_the_engine_runs_and_what_it_refuses_is_an_error(
    repo: Path, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    log = tmp_path / "t.jsonl"
    with LogWriter(log) as w:
        w.append("person.message", turn=1, text="Where is the binding checked?")
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], log=log) as engine:
        schemas = {t["name"]: t["input_schema"] for t in engine.tools()}
        good = [
            ("index-search", {"query": "check binding", "scope": "repo"}),
            ("index-search", {"query": "binding", "scope": "conversation", "limit": 3}),
            ("index-search", {"query": "binding", "scope": "repo", "path": "keychain"}),
            ("index-update", {}),
            ("recall", {"seq": 1, "start": 1, "count": 1}),
        ]
        bad = [
            ("index-search", {"query": "x"}),
            ("index-search", {"query": "x", "scope": "web"}),
            ("index-search", {"query": "x", "scope": "repo", "limit": 21}),
            ("index-update", {"paths": ["a"]}),
            ("recall", {"seq": 0}),
        ]
        for name, args in good:
            jsonschema.validate(args, schemas[name])
            out = await engine.call_tool(name, args)
            assert not out.is_error, (name, args, out.text)
        for name, args in bad:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(args, schemas[name])
            out = await engine.call_tool(name, args)
            assert out.is_error, (name, args)
