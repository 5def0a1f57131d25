"""What the person decides, in the configuration directory: ``workspaces.toml`` and ``config.toml``.

§9: searching earlier tasks is off unless the person allows it for the project, on this computer:
``earlier_tasks = true`` on the project's entry in ``workspaces.toml``. It is read at every call,
so a change takes effect at once, and a file the person broke by hand turns it off rather than
crashing a search (the parse error is kept for a status to show). Writing it keeps the person's
comments, layout and other projects: tomllib cannot write, so tomlkit does.

``workspaces.toml``::

    [projects."<project key>"]
    earlier_tasks = true          # §9, off when absent
    root = "/path/to/checkout"    # optional: which tree the key was made from, for a person

§10 and the result cap: ``config.toml``'s ``[index]`` table, read by :func:`load_config`, which
says exactly which setting is wrong and why.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodwyn_retrieval.errors import BadInput
from nodwyn_retrieval.store.atomic import file_lock, store_error, write_atomic

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_RESULT_CAP",
    "RESULT_CAP_MAX",
    "RESULT_CAP_MIN",
    "WORKSPACES_FILE",
    "Config",
    "earlier_tasks",
    "load_config",
    "set_earlier_tasks",
    "workspaces_error",
]

WORKSPACES_FILE = "workspaces.toml"
CONFIG_FILE = "config.toml"
DEFAULT_RESULT_CAP = 16_000
RESULT_CAP_MIN = 1_000
RESULT_CAP_MAX = 1_000_000


def _show(value: object) -> str:
    """A value as a person wrote it in TOML, for an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    return repr(value)


# -- workspaces.toml ---------------------------------------------------------------------------


def _read_workspaces(config_dir: Path) -> tuple[dict[str, Any], str | None]:
    """The parsed file (empty when missing) and the problem with it, if any."""
    path = Path(config_dir) / WORKSPACES_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, str(store_error("reading", path, exc))
    try:
        return tomllib.loads(data.decode("utf-8")), None
    except UnicodeDecodeError:
        return {}, f"{WORKSPACES_FILE}: not UTF-8 text"
    except tomllib.TOMLDecodeError as exc:
        return {}, f"{WORKSPACES_FILE}: {exc}"


def _entry(doc: dict[str, Any], project_key: str) -> tuple[bool, str | None]:
    projects = doc.get("projects", {})
    if not isinstance(projects, dict):
        return False, f"{WORKSPACES_FILE}: projects must be a table, got {_show(projects)}"
    entry = projects.get(project_key, {})
    if not isinstance(entry, dict):
        return False, f'{WORKSPACES_FILE}: [projects."{project_key}"] must be a table'
    on = entry.get("earlier_tasks", False)
    if not isinstance(on, bool):
        return False, (
            f'{WORKSPACES_FILE}: [projects."{project_key}"] earlier_tasks must be true or false,'
            f" got {_show(on)}"
        )
    return on, None


def earlier_tasks(config_dir: Path, project_key: str) -> bool:
    """Whether the person allows searching this project's earlier tasks (§9).

    Read at every call. A missing file or entry is False; so is a file that does not parse or an
    entry of the wrong shape, which :func:`workspaces_error` explains. Never raises."""
    doc, problem = _read_workspaces(config_dir)
    if problem is not None:
        return False
    on, _ = _entry(doc, project_key)
    return on


def workspaces_error(config_dir: Path, project_key: str | None = None) -> str | None:
    """Why ``workspaces.toml`` turns earlier tasks off although it may say otherwise: a parse
    error, or (with ``project_key``) an entry of the wrong shape; None when nothing is wrong."""
    doc, problem = _read_workspaces(config_dir)
    if problem is not None or project_key is None:
        return problem
    return _entry(doc, project_key)[1]


def set_earlier_tasks(
    config_dir: Path, project_key: str, on: bool, root: str | None = None
) -> None:
    """Turn searching earlier tasks on or off for ``project_key`` (``earlier on|off``, §9),
    keeping the file's comments, layout, other projects and this entry's other settings.

    ``root``, when given, is recorded beside it. Written atomically under a lock beside the file,
    so two saves never lose each other's change. A file that does not parse is left as the person
    wrote it: :class:`errors.BadInput` says what to fix."""
    # Imported here: only the switch writes the file, and a search never does.
    import tomlkit  # noqa: PLC0415
    import tomlkit.exceptions  # noqa: PLC0415
    import tomlkit.items  # noqa: PLC0415

    config_dir = Path(config_dir)
    path = config_dir / WORKSPACES_FILE
    with file_lock(config_dir / f"{WORKSPACES_FILE}.lock"):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except UnicodeDecodeError:
            raise BadInput(f"{path}: not UTF-8 text; fix it or remove it") from None
        except OSError as exc:
            raise store_error("reading", path, exc) from exc
        try:
            doc = tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as exc:
            raise BadInput(f"{path}: {exc}; fix it or remove it") from None
        if "projects" not in doc:
            doc.add("projects", tomlkit.table(is_super_table=True))
        projects = doc["projects"]
        if not isinstance(projects, tomlkit.items.AbstractTable):
            raise BadInput(f"{path}: projects must be a table, got {_show(projects)}")
        if project_key in projects:
            entry = projects[project_key]
            if not isinstance(entry, dict):
                raise BadInput(f'{path}: [projects."{project_key}"] must be a table')
        else:
            inline = isinstance(projects, tomlkit.items.InlineTable)
            entry = tomlkit.inline_table() if inline else tomlkit.table()
            key = tomlkit.items.SingleKey(project_key, tomlkit.items.KeyType.Basic)
            projects.add(key, entry)
        entry["earlier_tasks"] = bool(on)
        if root is not None:
            entry["root"] = root
        write_atomic(path, tomlkit.dumps(doc).encode("utf-8"))


# -- config.toml -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """``config.toml``'s ``[index]`` table."""

    embed_server: str | None = None
    """§10: the embeddings server (an Ollama or OpenAI-compatible base URL); off when None."""
    embed_model: str | None = None
    """§10: the embeddings model on that server; off when None."""
    result_cap: int = DEFAULT_RESULT_CAP
    """The characters a search or recall returns at most (§8: "the window's result cap")."""
    deny: tuple[str, ...] = ()
    """Denylist patterns added to the guard's own (§3)."""

    @property
    def embeddings(self) -> bool:
        """Whether embeddings are configured (both server and model, §10)."""
        return self.embed_server is not None and self.embed_model is not None


_SETTINGS = ("deny", "embed_model", "embed_server", "result_cap")


def _bad(what: str) -> BadInput:
    return BadInput(f"{CONFIG_FILE}: [index] {what}")


def _optional_str(table: dict[str, Any], name: str) -> str | None:
    value = table.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _bad(f"{name} must be a string, got {_show(value)}")
    return value


def load_config(config_dir: Path) -> Config:
    """``config.toml``'s ``[index]`` settings; the defaults when the file or the table is absent.

    Validated at the edge: a setting of the wrong type or out of range, or one this program does
    not know (a typo would otherwise be silently ignored), is :class:`errors.BadInput` naming it,
    e.g. ``config.toml: [index] result_cap must be an integer, got 'x'``."""
    path = Path(config_dir) / CONFIG_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise store_error("reading", path, exc) from exc
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"{CONFIG_FILE}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{CONFIG_FILE}: {exc}") from None
    table = doc.get("index", {})
    if not isinstance(table, dict):
        raise BadInput(f"{CONFIG_FILE}: index must be a table, got {_show(table)}")
    unknown = sorted(set(table) - set(_SETTINGS))
    if unknown:
        raise _bad(f"has no setting {unknown[0]!r} (known: {', '.join(_SETTINGS)})")

    result_cap = table.get("result_cap", DEFAULT_RESULT_CAP)
    if type(result_cap) is not int:
        raise _bad(f"result_cap must be an integer, got {_show(result_cap)}")
    if not RESULT_CAP_MIN <= result_cap <= RESULT_CAP_MAX:
        raise _bad(
            f"result_cap must be between {RESULT_CAP_MIN} and {RESULT_CAP_MAX}, got {result_cap}"
        )

    deny = table.get("deny", [])
    if not isinstance(deny, list):
        raise _bad(f"deny must be a list of strings, got {_show(deny)}")
    for i, pattern in enumerate(deny):
        if not isinstance(pattern, str) or not pattern:
            raise _bad(f"deny[{i}] must be a non-empty string, got {_show(pattern)}")

    server = _optional_str(table, "embed_server")
    model = _optional_str(table, "embed_model")
    if (server is None) != (model is None):
        missing, given = (
            ("embed_model", "embed_server")
            if model is None
            else (
                "embed_server",
                "embed_model",
            )
        )
        raise _bad(f"{missing} must be set with {given} (§10: both, or neither)")
    return Config(embed_server=server, embed_model=model, result_cap=result_cap, deny=tuple(deny))
