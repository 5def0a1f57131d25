"""The worker processes start from the library's own entry point, not from the caller's script.

A plain script with no ``if __name__ == "__main__":`` guard opens an Engine and builds a tree
through the process pool, in a process of its own: its top level must run exactly once.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import make_repo

SCRIPT = textwrap.dedent(
    """
    import asyncio
    import os
    import sys

    import nodwyn_retrieval.actors._batches as batches
    from nodwyn_retrieval import Engine

    runs, repo, data, config = sys.argv[1:5]
    with open(runs, "a", encoding="utf-8") as f:  # the top level: once per run of the script
        f.write(f"{os.getpid()} {__name__}\\n")

    batches.POOL_MIN_BYTES = 1  # every batch goes to the pool, however small the tree


    async def build():
        engine = await Engine.open(repo, data_dir=data, config_dir=config, workers=2)
        try:
            out = await engine.index_update()
            found = await engine.index_search("walrus_parser_helper", "repo")
            print(out.summary["read"], repr(engine._pool))
            print(found.hits[0]["path"])
        finally:
            await engine.close()


    asyncio.run(build())
    """
)


def test_a_script_without_a_main_guard_runs_once_while_the_pool_builds(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"pkg/mod_{i:02}.py": f"def function_{i}(x):\n    return x + {i}\n" * 40 for i in range(30)
    }
    files["pkg/target.py"] = "def walrus_parser_helper():\n    return 1\n"
    repo = make_repo(tmp_path / "repo", files)
    script = tmp_path / "plain_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    runs = tmp_path / "runs.txt"
    done = subprocess.run(
        [sys.executable, script, runs, repo, tmp_path / "d", tmp_path / "c"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = runs.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1, lines  # never again in a worker, as __mp_main__ or otherwise
    assert lines[0].endswith(" __main__")
    summary, path = done.stdout.splitlines()
    read, state = summary.split(" ", 1)
    assert read == "31"
    assert state.startswith("<ProcessPool started,")  # the pool did the work
    assert path == "pkg/target.py"
