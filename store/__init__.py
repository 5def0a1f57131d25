"""The data and configuration directories and everything written in them (ADR 0050 §4, §9, §10).

- :mod:`store.paths`: the directories, project keys (a worktree shares its main repository's),
  a project's folders;
- :mod:`store.atomic`: atomic writes and inter-process locks;
- :mod:`store.codec`: the frame of every stored file (magic, version, flags) and bounded decoding;
- :mod:`store.chunkstore`: the content-addressed chunk store (import it from there: it is the one
  module that depends on ``retrieval``, and the rest of the package loads without it);
- :mod:`store.manifest`: per-tree manifests;
- :mod:`store.log`: the session log's writer and reader, task ids and task meta;
- :mod:`store.config`: ``workspaces.toml`` (the earlier-tasks switch) and ``config.toml``.

Everything in the data directory is derived and safe to delete: what fails to decode is rebuilt,
never trusted and never a crash. docs/store-format.md describes every file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodwyn_retrieval._lazy import load

if TYPE_CHECKING:
    from nodwyn_retrieval.store.atomic import file_lock, write_atomic
    from nodwyn_retrieval.store.codec import decode, encode
    from nodwyn_retrieval.store.config import (
        Config,
        earlier_tasks,
        load_config,
        set_earlier_tasks,
        workspaces_error,
    )
    from nodwyn_retrieval.store.log import (
        LogRead,
        LogWriter,
        TaskMeta,
        list_tasks,
        log_path,
        meta_path,
        read_event_at,
        read_log,
        task_meta,
        write_task_meta,
    )
    from nodwyn_retrieval.store.manifest import (
        Entry,
        Manifest,
        list_manifests,
        load_manifest,
        manifest_lock,
        manifest_path,
        save_manifest,
    )
    from nodwyn_retrieval.store.paths import (
        ProjectDirs,
        config_dir,
        data_dir,
        git_toplevel,
        project_dirs,
        project_key,
    )

# Each name is imported on first use: a worker process that needs the chunk store and the codec
# does not pay for the log's reader, the manifests, the configuration and filelock.
_WHERE = {
    "file_lock": "nodwyn_retrieval.store.atomic",
    "write_atomic": "nodwyn_retrieval.store.atomic",
    "decode": "nodwyn_retrieval.store.codec",
    "encode": "nodwyn_retrieval.store.codec",
    "Config": "nodwyn_retrieval.store.config",
    "earlier_tasks": "nodwyn_retrieval.store.config",
    "load_config": "nodwyn_retrieval.store.config",
    "set_earlier_tasks": "nodwyn_retrieval.store.config",
    "workspaces_error": "nodwyn_retrieval.store.config",
    "LogRead": "nodwyn_retrieval.store.log",
    "LogWriter": "nodwyn_retrieval.store.log",
    "TaskMeta": "nodwyn_retrieval.store.log",
    "list_tasks": "nodwyn_retrieval.store.log",
    "log_path": "nodwyn_retrieval.store.log",
    "meta_path": "nodwyn_retrieval.store.log",
    "read_event_at": "nodwyn_retrieval.store.log",
    "read_log": "nodwyn_retrieval.store.log",
    "task_meta": "nodwyn_retrieval.store.log",
    "write_task_meta": "nodwyn_retrieval.store.log",
    "Entry": "nodwyn_retrieval.store.manifest",
    "Manifest": "nodwyn_retrieval.store.manifest",
    "list_manifests": "nodwyn_retrieval.store.manifest",
    "load_manifest": "nodwyn_retrieval.store.manifest",
    "manifest_lock": "nodwyn_retrieval.store.manifest",
    "manifest_path": "nodwyn_retrieval.store.manifest",
    "save_manifest": "nodwyn_retrieval.store.manifest",
    "ProjectDirs": "nodwyn_retrieval.store.paths",
    "config_dir": "nodwyn_retrieval.store.paths",
    "data_dir": "nodwyn_retrieval.store.paths",
    "git_toplevel": "nodwyn_retrieval.store.paths",
    "project_dirs": "nodwyn_retrieval.store.paths",
    "project_key": "nodwyn_retrieval.store.paths",
}

__all__ = [
    "Config",
    "Entry",
    "LogRead",
    "LogWriter",
    "Manifest",
    "ProjectDirs",
    "TaskMeta",
    "config_dir",
    "data_dir",
    "decode",
    "earlier_tasks",
    "encode",
    "file_lock",
    "git_toplevel",
    "list_manifests",
    "list_tasks",
    "load_config",
    "load_manifest",
    "log_path",
    "manifest_lock",
    "manifest_path",
    "meta_path",
    "project_dirs",
    "project_key",
    "read_event_at",
    "read_log",
    "save_manifest",
    "set_earlier_tasks",
    "task_meta",
    "workspaces_error",
    "write_atomic",
    "write_task_meta",
]


def __getattr__(name: str) -> Any:
    return load(__name__, _WHERE, globals(), name)
