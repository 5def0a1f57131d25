"""Processes for the fault tests (tests/test_faults.py): searchers and an editor of one tree.

Run as ``python -m tests._fault_workers <role> <json arguments>``. Each role does its work and
writes one JSON document to the path it was given; an exception ends the process with a
traceback on stderr and a non-zero status, which the test reports.

The editor writes each file with a word of its own (``fileword<i>``, only ever in file i) and a
version word (``ver<v>``, one per write), and journals every write before making it, so a search
result can be checked against every state the tree has been in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.store.manifest import load_manifest, manifest_path
from nodwyn_retrieval.store.paths import project_dirs, project_key

__all__ = ["editor", "file_body", "file_path", "main", "searcher"]


def file_path(i: int) -> str:
    """The path of the editor's file i."""
    return f"pkg{i % 3}/mod_{i:02d}.py"


def file_body(i: int, v: int, lines: int = 12) -> str:
    """File i at version v: its own word, its version word, and some code."""
    body = [f"def fileword{i}_entry():", f'    """ver{v} of fileword{i}."""']
    body += [f"    step_{k} = {k} * {v}  # ver{v}" for k in range(lines)]
    body.append(f"    return fileword{i}")
    return "\n".join(body) + "\n"


def _journal(journal: Path, record: dict[str, Any]) -> None:
    with journal.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def editor(args: dict[str, Any]) -> dict[str, Any]:
    """Edit the tree ``ops`` times: rewrite in place, replace by a rename, delete, create."""
    root = Path(args["root"])
    scratch = Path(args["scratch"])
    journal = Path(args["journal"])
    rng = random.Random(args["seed"])
    n_files: int = args["files"]
    v: int = args["first_version"]
    done = {"rewrite": 0, "rename": 0, "delete": 0}
    for _ in range(args["ops"]):
        i = rng.randrange(n_files)
        path = root / file_path(i)
        how = rng.choice(["rewrite", "rewrite", "rename", "delete"])
        if how == "delete" and path.exists():
            _journal(journal, {"delete": file_path(i)})
            path.unlink()
        else:
            how = "rename" if how == "delete" else how
            v += 1
            _journal(journal, {"v": v, "path": file_path(i)})
            body = file_body(i, v, rng.randrange(4, 40))
            path.parent.mkdir(parents=True, exist_ok=True)
            if how == "rewrite":
                # Truncated, then written in two steps: a reader may see it empty or half done.
                with path.open("w", encoding="utf-8") as f:
                    half = len(body) // 2
                    f.write(body[:half])
                    f.flush()
                    time.sleep(rng.random() / 500)
                    f.write(body[half:])
            else:
                tmp = scratch / f"edit-{v}.tmp"
                tmp.write_text(body, encoding="utf-8")
                os.replace(tmp, path)
        done[how] += 1
        time.sleep(rng.random() / 100)
    return {"ops": args["ops"], "done": done, "last_version": v}


def _versions(journal: Path) -> list[int]:
    out = []
    with contextlib.suppress(FileNotFoundError):
        for line in journal.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if "v" in rec:
                    out.append(rec["v"])
    return out


async def _search_loop(args: dict[str, Any]) -> dict[str, Any]:
    root = Path(args["root"])
    data, config = Path(args["data"]), Path(args["config"])
    journal = Path(args["journal"])
    rng = random.Random(args["seed"])
    mp = manifest_path(project_dirs(data, project_key(root)).trees, root)
    results: list[list[Any]] = []
    updates: list[dict[str, Any]] = []
    torn = 0
    loads = 0
    reopen_every = max(2, args["ops"] // 4)
    engine: Engine | None = None
    try:
        for op in range(args["ops"]):
            if engine is None or op % reopen_every == 0:
                if engine is not None:
                    await engine.close()
                engine = await Engine.open(
                    root, data_dir=data, config_dir=config, workers=1, record=_keep(updates)
                )
            roll = rng.random()
            if roll < 0.1:
                await engine.index_update()
            else:
                if roll < 0.35:
                    query = f"fileword{rng.randrange(args['files'])}"
                else:
                    versions = _versions(journal) or [0]
                    query = f"ver{rng.choice(versions[-20:])}"
                out = await engine.index_search(query, "repo", limit=5)
                results.append([query, [h["path"] for h in out.hits], out.header["text"]])
            loads += 1
            try:
                load_manifest(mp)
            except FormatError:
                torn += 1
    finally:
        if engine is not None:
            await engine.close()
    return {"results": results, "updates": updates, "torn_manifests": torn, "loads": loads}


def _keep(updates: list[dict[str, Any]]) -> Any:
    def sink(event: dict[str, Any]) -> None:
        if event.get("kind") == "index.update":
            updates.append(event)

    return sink


def searcher(args: dict[str, Any]) -> dict[str, Any]:
    """Search (and now and then update, and open the engine again) ``ops`` times."""
    return asyncio.run(_search_loop(args))


ROLES = {"editor": editor, "searcher": searcher}


def main(argv: list[str]) -> int:
    role, raw = argv
    args = json.loads(raw)
    out = ROLES[role](args)
    Path(args["out"]).write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
