"""One import namespace: the wheel installs ``nodwyn_retrieval`` and nothing else, a user's own
``errors.py``, ``store/`` and ``bus.py`` shadow nothing of it, and a user's loop type-checks with
``mypy --strict`` against the installed package (``py.typed``).

The wheel is built from a copy of the checkout with ``pip wheel --no-deps --no-build-isolation``
(setuptools from the dev extra; about 2 s) and installed with ``pip install --target`` into a
bare virtual environment made without pip: no network, no index.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from nodwyn_retrieval import __version__

from tests.support import make_repo

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", "build", "dist", "__pycache__", ".mypy_cache", ".ruff_cache",
        ".pytest_cache", ".hypothesis"}  # fmt: skip


def _copy_checkout(dest: Path) -> None:
    """The checkout's files (tracked or new, not ignored), or the whole tree outside git."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=False,
    )  # fmt: skip
    if listed.returncode == 0 and listed.stdout:
        for name in listed.stdout.decode().split("\0"):
            src = ROOT / name
            if name and src.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name)
        return
    shutil.copytree(
        ROOT, dest, dirs_exist_ok=True,
        ignore=lambda d, names: [n for n in names if n in SKIP or n.endswith(".egg-info")],
    )  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("wheel")
    _copy_checkout(src)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (whl,) = out.glob("nodwyn_retrieval-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A bare virtual environment holding the wheel: (its python, its site-packages)."""
    env = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
         purelib, str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return python, Path(purelib)


def test_the_wheel_holds_the_package_its_types_and_its_license_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    dist = f"nodwyn_retrieval-{__version__}.dist-info"
    assert {n.split("/", 1)[0] for n in names} == {"nodwyn_retrieval", dist}
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert packages == {
        "nodwyn_retrieval",
        *(
            f"nodwyn_retrieval/{p}"
            for p in ("actors", "bus", "guard", "retrieval", "store", "store/transcripts")
        ),
    }
    assert {f"{p}/py.typed" for p in packages} <= set(names)
    assert f"{dist}/licenses/LICENSE" in names
    assert not [n for n in names if n.split("/")[1:2] in (["tests"], ["bench"], ["examples"])]
    entry_points = zipfile.ZipFile(wheel).read(f"{dist}/entry_points.txt").decode()
    assert "nodwyn-retrieval = nodwyn_retrieval.cli:main" in entry_points


USER_LOOP = '''
import errors, store, bus          # the user's own modules, imported first on purpose
import asyncio, json, sys

from nodwyn_retrieval import Engine
from nodwyn_retrieval.errors import ActorDead


async def main() -> None:
    root, data = sys.argv[1], sys.argv[2]
    async with await Engine.open(root, data_dir=data, config_dir=data + "/config") as engine:
        out = await engine.index_search("check binding", "repo")
        up = await engine.index_update()
    mine = {m: getattr(sys.modules[m], "__file__", None) for m in ("errors", "store", "bus")}
    import nodwyn_retrieval
    print(json.dumps({"paths": [h["path"] for h in out.hits], "files": up.summary["files"],
                      "mine": mine, "lib": nodwyn_retrieval.__file__,
                      "errors": ActorDead.__module__}))


asyncio.run(main())
'''


def test_a_users_own_errors_store_and_bus_shadow_nothing(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _python, site = installed
    repo = make_repo(
        tmp_path / "repo",
        {"keychain/bind.py": "def check_binding(host):\n    return host == 'example'\n",
         "server/http.py": "def serve(port):\n    return port\n"},
    )  # fmt: skip
    user = tmp_path / "user"
    (user / "store").mkdir(parents=True)
    (user / "errors.py").write_text("class MyError(Exception):\n    pass\n")
    (user / "store" / "__init__.py").write_text("SHELVES = 3\n")
    (user / "bus.py").write_text("ROUTE = 'the user bus'\n")
    (user / "loop.py").write_text(USER_LOOP)
    # The user's directory first on the path (it holds the script), then the installed wheel; the
    # dependencies come from this interpreter's environment.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "loop.py", str(repo), str(tmp_path / "data")],
        cwd=user, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    doc = json.loads(ran.stdout.splitlines()[-1])
    assert doc["paths"][0] == "keychain/bind.py"
    assert doc["files"] == 2
    assert doc["mine"] == {
        "errors": str(user / "errors.py"),
        "store": str(user / "store" / "__init__.py"),
        "bus": str(user / "bus.py"),
    }
    assert doc["lib"] == str(site / "nodwyn_retrieval" / "__init__.py")
    assert doc["errors"] == "nodwyn_retrieval.errors"


TYPED_LOOP = '''
from __future__ import annotations

from nodwyn_retrieval import Engine, SearchOutput


async def turn(root: str, query: str) -> tuple[str, list[dict[str, object]]]:
    engine = await Engine.open(root, log="task.jsonl")
    try:
        out: SearchOutput = await engine.index_search(query, scope="repo")
        tools = engine.tools("anthropic")
        return out.text + engine.working_rule(), [dict(t) for t in tools]
    finally:
        await engine.close()
'''

UNTYPED_USE = '''
from nodwyn_retrieval import Engine


async def wrong(root: str) -> int:
    engine = await Engine.open(root)
    reveal_type(engine)
    return engine.tools()
'''


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_a_users_loop_type_checks_strictly_and_sees_the_engine_typed(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _site = installed
    (tmp_path / "good.py").write_text(textwrap.dedent(TYPED_LOOP))
    (tmp_path / "bad.py").write_text(textwrap.dedent(UNTYPED_USE))

    def mypy(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
             "--python-executable", str(python), name],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    good = mypy("good.py")
    assert good.returncode == 0, good.stdout
    assert "Success: no issues found in 1 source file" in good.stdout
    bad = mypy("bad.py")
    assert bad.returncode == 1
    assert 'Revealed type is "nodwyn_retrieval.entry.Engine"' in bad.stdout
    assert 'Incompatible return value type (got "list[dict[str, Any]]", expected "int")' in (
        bad.stdout
    )
    assert "py.typed" not in bad.stdout
