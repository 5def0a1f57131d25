"""The store under faults, with real processes (ADR 0050 §4, the storage rules).

What is promised (docs/reliability.md): nothing the person wrote is changed; the index is derived
and rebuilt from the files; no torn or damaged file is ever trusted and none crashes a search; a
full disk degrades to answering from memory and says so; a file that changes, vanishes, hangs or
points outside the tree while it is indexed never makes a search crash, hang or read outside.

Counts are CI-sized by default and raised by environment variables:

- ``NODWYN_FAULT_OPS`` (200): operations of two searching processes and an editing one;
- ``NODWYN_FAULT_KILLS`` (50): updates killed with SIGKILL at a random instant;
- ``NODWYN_FAULT_KILL_FILES`` (200): files in the tree those updates index.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from nodwyn_retrieval.actors.indexer import SNAPSHOT_MAGIC, SNAPSHOT_VERSION
from nodwyn_retrieval.errors import FormatError
from nodwyn_retrieval.retrieval.tree import TreeSegment
from nodwyn_retrieval.store import atomic
from nodwyn_retrieval.store.chunkstore import ChunkStore, read_pack
from nodwyn_retrieval.store.codec import HEADER, decode
from nodwyn_retrieval.store.manifest import MAGIC as MF_MAGIC
from nodwyn_retrieval.store.manifest import VERSION as MF_VERSION
from nodwyn_retrieval.store.manifest import _from_payload, load_manifest, manifest_path
from nodwyn_retrieval.store.mem import MemIndex, mem_path
from nodwyn_retrieval.store.packs import reset_indexes
from nodwyn_retrieval.store.paths import ProjectDirs

from tests._fault_workers import file_body, file_path
from tests._faults_support import FILES, ROOT, env, open_engine, paths_of, pdirs_of
from tests.support import git, make_repo

OPS = int(os.environ.get("NODWYN_FAULT_OPS", "200"))
KILLS = int(os.environ.get("NODWYN_FAULT_KILLS", "50"))
KILL_FILES = int(os.environ.get("NODWYN_FAULT_KILL_FILES", "200"))

pytestmark = pytest.mark.slow


def store_problems(pd: ProjectDirs) -> tuple[list[str], int]:
    """Every stored file that does not decode (none should: each write is atomic), and how many
    temporary files killed writers left (allowed: never read, swept by the collection)."""
    bad: list[str] = []
    temp = 0
    for path in sorted(pd.index.rglob("*")):
        if path.is_dir():
            continue
        name = path.name
        if name.endswith(atomic.TEMP_SUFFIX):
            temp += 1
            continue
        try:
            if name.endswith(".ckp"):
                read_pack(path.read_bytes())
            elif name.endswith(".manifest"):
                load_manifest(path)
            elif name.endswith(".snap"):
                TreeSegment.from_obj(decode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, path.read_bytes()))
            elif not (name.endswith(".lock") or name == "gc.marker"):
                bad.append(f"{path.relative_to(pd.index)}: unknown file")
        except FormatError as e:
            bad.append(f"{path.relative_to(pd.index)}: {e}")
    return bad, temp


# -- two processes searching one tree while a third edits it --------------------------------------


def spawn(role: str, args: dict[str, Any]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests._fault_workers", role, json.dumps(args)],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@contextlib.contextmanager
def reaped(procs: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """Every process ends before the test does: killed if it is still running."""
    try:
        yield
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


def test_two_processes_search_one_tree_while_a_third_edits_it(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    n_files = 12
    repo = make_repo(tmp_path / "repo", {file_path(i): file_body(i, i) for i in range(n_files)})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    journal = tmp_path / "journal.jsonl"
    journal.write_text(
        "".join(json.dumps({"v": i, "path": file_path(i)}) + "\n" for i in range(n_files))
    )
    edits = max(1, OPS * 2 // 5)
    searches = max(1, (OPS - edits) // 2)
    common = {"root": str(repo), "journal": str(journal), "files": n_files}
    store = {"data": str(dirs[0]), "config": str(dirs[1])}
    roles = [
        ("editor", {**common, "scratch": str(scratch), "ops": edits, "first_version": n_files}),
        ("searcher", {**common, **store, "ops": searches}),
        ("searcher", {**common, **store, "ops": searches}),
    ]
    procs: list[subprocess.Popen[bytes]] = []
    outs: list[Path] = []
    with reaped(procs):
        for k, (role, args) in enumerate(roles):
            out = tmp_path / f"out-{k}.json"
            outs.append(out)
            procs.append(spawn(role, {**args, "out": str(out), "seed": k}))
        errs = [p.communicate(timeout=600)[1].decode(errors="replace") for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 0, err[-4000:]
    # Every state the tree was in: version v was written to one path, fileword i only in file i.
    written: dict[int, str] = {}
    for line in journal.read_text().splitlines():
        rec = json.loads(line)
        if "v" in rec:
            written[rec["v"]] = rec["path"]
    docs = [json.loads(o.read_text()) for o in outs]
    n_results = 0
    for doc in docs[1:]:
        assert doc["torn_manifests"] == 0
        for query, hits, _header in doc["results"]:
            n_results += 1
            if query.startswith("ver"):
                v = int(query[3:])
                assert set(hits) <= {written[v]}, (query, hits)
            else:
                i = int(query[len("fileword") :])
                assert set(hits) <= {file_path(i)}, (query, hits)
        assert all(u["saved"] for u in doc["updates"]), doc["updates"]
    assert n_results > 0
    # Each file is as the editor last left it (written or deleted): nothing else wrote to it.
    state: dict[str, int | None] = {}
    for line in journal.read_text().splitlines():
        rec = json.loads(line)
        state[rec.get("path") or rec["delete"]] = rec.get("v")
    for path, ver in state.items():
        if ver is None:
            assert not (repo / path).exists()
        else:
            i = int(path.rsplit("_", 1)[1][:-3])
            assert f'"""ver{ver} of fileword{i}."""' in (repo / path).read_text()
    # When the edits stop, a new session finds every file by its own word and its last version.
    last: dict[str, int] = {}
    for v, path in written.items():
        last[path] = max(v, last.get(path, -1))
    final = asyncio.run(final_search(repo, dirs, n_files, last))
    assert final == []
    print(
        f"\nconcurrency: {edits} edits {docs[0]['done']}, {2 * searches} searches and updates, "
        f"{sum(d['loads'] for d in docs[1:])} manifest loads, none torn"
    )


async def final_search(
    repo: Path, dirs: tuple[Path, Path], n_files: int, last: dict[str, int]
) -> list[str]:
    wrong: list[str] = []
    async with await open_engine(repo, *dirs) as engine:
        for i in range(n_files):
            p = file_path(i)
            want = [p] if (repo / p).exists() else []
            got = paths_of(await engine.index_search(f"fileword{i} ver{last[p]}", "repo", 1))
            if (repo / p).exists() and got != want:
                wrong.append(f"{p}: {got}")
            if not (repo / p).exists() and p in got:
                wrong.append(f"{p} deleted but found")
    return wrong


# -- an update killed with SIGKILL at a random instant -------------------------------------------


def run_entry(*args: str, dirs: tuple[Path, Path], root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "nodwyn_retrieval", *args, "--root", str(root),
         "--data-dir", str(dirs[0]), "--config-dir", str(dirs[1])],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def test_an_update_killed_at_any_instant_leaves_a_store_the_next_search_uses(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    rng = random.Random(50)
    version = {i: i for i in range(KILL_FILES)}
    repo = make_repo(
        tmp_path / "repo", {file_path(i): file_body(i, v, 40) for i, v in version.items()}
    )
    pd = pdirs_of(repo, dirs[0])
    # How long a process takes to start and a whole first build to run here: kills land
    # between the two, where the update works.
    t0 = time.monotonic()
    p = run_entry("tools", dirs=dirs, root=repo)
    with reaped([p]):
        assert p.wait(timeout=600) == 0, p.communicate()[1]
    started = time.monotonic() - t0
    t0 = time.monotonic()
    p = run_entry("update", dirs=dirs, root=repo)
    with reaped([p]):
        assert p.wait(timeout=600) == 0, p.communicate()[1]
    whole = time.monotonic() - t0
    next_v = KILL_FILES
    landed = 0
    temp_seen = 0
    for rnd in range(KILLS):
        if rnd % 3 == 0:
            shutil.rmtree(pd.index)  # the first build, with most writes, killed
        else:
            for i in rng.sample(range(KILL_FILES), k=max(1, KILL_FILES // 10)):
                version[i] = next_v = next_v + 1
                (repo / file_path(i)).write_text(file_body(i, version[i], 40))
        p = run_entry("update", dirs=dirs, root=repo)
        with reaped([p]):
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=rng.uniform(min(0.8 * started, 0.5 * whole), whole))
            if p.poll() is None:
                landed += 1
                p.send_signal(signal.SIGKILL)
            p.wait()
        bad, temp = store_problems(pd)
        temp_seen += temp
        assert bad == [], f"round {rnd}: {bad}"
        wrong = asyncio.run(search_some(repo, dirs, version, rng))
        assert wrong == [], f"round {rnd}: {wrong}"
    assert landed > 0, "no kill landed while an update ran"
    # Nothing the person wrote was changed by the killed updates or the searches after them.
    changed = [
        file_path(i)
        for i, v in version.items()
        if (repo / file_path(i)).read_text() != file_body(i, v, 40)
    ]
    assert changed == []
    print(
        f"\nkills: {KILLS} updates of {KILL_FILES} files, {landed} killed while running, "
        f"{temp_seen} temporary files seen, no stored file torn, every next search right"
    )


async def search_some(
    repo: Path, dirs: tuple[Path, Path], version: dict[int, int], rng: random.Random
) -> list[str]:
    wrong = []
    async with await open_engine(repo, *dirs) as engine:
        for i in rng.sample(sorted(version), k=3):
            out = await engine.index_search(f"fileword{i} ver{version[i]}", "repo", limit=1)
            if paths_of(out) != [file_path(i)]:
                wrong.append(f"fileword{i} ver{version[i]}: {paths_of(out)}")
    return wrong


# -- a damaged chunk record, manifest, snapshot or .mem ------------------------------------------

QUERIES = {"check binding": "keychain/bind.py", "serve listen": "server/http.py"}


def write_log(path: Path) -> None:
    events = []
    seq = 0
    for turn, (message, output) in enumerate(
        [("the credential binding", "func Bind(host string)"), ("zebracorn", "zebracorn found")],
        start=1,
    ):
        for kind, fields in (
            ("person.message", {"text": message}),
            ("llm.resp", {"text": "Look.", "calls": [{"id": f"c{turn}", "name": "fs-read",
                                                       "args": {"path": "x.go"}}]}),
            ("tool.result", {"call_id": f"c{turn}", "name": "fs-read", "output": output}),
            ("turn.end", {}),
        ):  # fmt: skip
            seq += 1
            events.append(
                {"seq": seq, "ts": "2026-10-15T09:00:00Z", "kind": kind, "turn": turn,
                 "agent": "main", **fields}
            )  # fmt: skip
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def damage(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "bit-flipped":
        out = bytearray(data)
        for at in (len(data) // 3, len(data) // 2, 2 * len(data) // 3):
            out[max(at, HEADER.size)] ^= 0x10
        return bytes(out)
    if how == "garbage":
        return bytes((i * 151 + 7) % 256 for i in range(len(data)))
    magic, version, flags = HEADER.unpack_from(data)
    return HEADER.pack(magic, version + 1, flags) + data[HEADER.size :]


def decodes(kind: str, data: bytes) -> bool:
    """Whether damaged bytes still decode (a flip can land where it changes only a value)."""
    try:
        if kind == "chunk":
            read_pack(data)
        elif kind == "manifest":
            _from_payload(decode(MF_MAGIC, MF_VERSION, data))
        elif kind == "snapshot":
            TreeSegment.from_obj(decode(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, data))
        else:
            with MemIndex.from_bytes(data) as m:
                m.fold()
    except FormatError:
        return False
    return True


DAMAGES = ["truncated", "bit-flipped", "garbage", "future-version"]


def damage_cases() -> Iterator[Any]:
    for kind in ("chunk", "manifest", "snapshot", "mem"):
        for how in DAMAGES:
            yield pytest.param(kind, how, id=f"{kind}-{how}")


def targets(kind: str, pd: ProjectDirs, repo: Path, log: Path) -> list[Path]:
    mp = manifest_path(pd.trees, repo)
    if kind == "chunk":
        return [p.path for p in ChunkStore(pd.chunks).list_packs()]
    if kind == "manifest":
        return [mp]
    if kind == "snapshot":
        return [mp.with_suffix(".snap")]
    return [mem_path(log)]


@pytest.mark.parametrize(("kind", "how"), list(damage_cases()))
@pytest.mark.asyncio
async def test_a_damaged_stored_file_is_rebuilt_reported_and_never_trusted(
    tmp_path: Path, dirs: tuple[Path, Path], kind: str, how: str
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    log = tmp_path / "task.jsonl"
    write_log(log)
    pd = pdirs_of(repo, dirs[0])
    async with await open_engine(repo, *dirs, log=log, record=lambda e: None) as engine:
        await engine.index_update()
        await engine.index_search("zebracorn", "conversation")
    files = targets(kind, pd, repo, log)
    assert files
    failing = 0
    for f in files:
        bad = damage(f.read_bytes(), how)
        failing += not decodes(kind, bad)
        f.write_bytes(bad)
    # A pack is never changed once written: this process's lookup must read it again, as a new
    # process would, to see what was done to it behind its back.
    reset_indexes()
    if kind == "chunk":
        # The snapshot holds every record's words: without it the records are read again.
        manifest_path(pd.trees, repo).with_suffix(".snap").unlink()
    before = {p: (repo / p).read_bytes() for p in FILES}
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, *dirs, log=log, record=events.append) as engine:
        for query, path in QUERIES.items():
            out = await engine.index_search(query, "repo")
            assert paths_of(out)[0] == path
        conv = await engine.index_search("zebracorn", "conversation")
        assert conv.hits
        await engine.index_update()
        out = await engine.index_search("check binding", "repo")
        assert paths_of(out)[0] == "keychain/bind.py"
    assert {p: (repo / p).read_bytes() for p in FILES} == before  # the person's files untouched
    assert store_problems(pd)[0] == []
    if kind == "mem":
        with MemIndex.open(mem_path(log)) as m:  # rebuilt whole
            m.fold()
        return
    updates = [e for e in events if e["kind"] == "index.update"]
    assert updates
    rebuilt = sum(e["rebuilt"] for e in updates)
    if failing:
        assert rebuilt >= 1, updates
    else:
        assert rebuilt == 0


@pytest.mark.asyncio
async def test_a_damaged_record_the_snapshot_covers_is_not_read_and_rebuilt_when_needed(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    """With the snapshot whole, a session never reads the records: a damaged one is found by the
    next reader that needs it (another worktree, a lost snapshot) and rebuilt there."""
    repo = make_repo(tmp_path / "repo", FILES)
    pd = pdirs_of(repo, dirs[0])
    async with await open_engine(repo, *dirs) as engine:
        await engine.index_update()
    for f in targets("chunk", pd, repo, tmp_path):
        f.write_bytes(damage(f.read_bytes(), "garbage"))
    events: list[dict[str, Any]] = []
    async with await open_engine(repo, *dirs, record=events.append) as engine:
        out = await engine.index_search("check binding", "repo")
        assert paths_of(out)[0] == "keychain/bind.py"
    assert not [e for e in events if e["kind"] == "index.update" and e["rebuilt"]]
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    async with await open_engine(wt, *dirs, record=events.append) as engine:
        out = await engine.index_search("check binding", "repo")
        assert paths_of(out)[0] == "keychain/bind.py"
    assert sum(e["rebuilt"] for e in events if e["kind"] == "index.update") == len(FILES)
    assert store_problems(pd)[0] == []


# -- a full disk -----------------------------------------------------------------------------


class _NoSpaceFile:
    """A temporary file whose writes fail as on a full disk."""

    def __init__(self, fd: int) -> None:
        self._f = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _NoSpaceFile:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._f.close()


class _FullDiskOs:
    """store.atomic's view of ``os`` on a full disk: writing (or renaming into place) fails."""

    def __init__(self, at: str) -> None:
        self.at = at

    def fdopen(self, fd: int, mode: str = "r") -> Any:
        return _NoSpaceFile(fd) if self.at == "write" else os.fdopen(fd, mode)

    def replace(self, src: str, dst: Path | str) -> None:
        if self.at == "replace":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.replace(src, dst)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def no_temp_left(data: Path) -> list[str]:
    return [str(p) for p in data.rglob("*") if p.name.endswith(atomic.TEMP_SUFFIX)]


@pytest.mark.parametrize("at", ["write", "replace"])
@pytest.mark.asyncio
async def test_a_full_disk_answers_from_memory_and_says_the_index_was_not_saved(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    pd = pdirs_of(repo, dirs[0])
    monkeypatch.setattr(atomic, "os", _FullDiskOs(at))
    async with await open_engine(repo, *dirs) as engine:
        out = await engine.index_search("check binding", "repo")
        assert paths_of(out)[0] == "keychain/bind.py"
        assert "the index could not be saved (no space left on device" in out.text
        assert "answering from memory" in out.header["text"]
        up = await engine.index_update()
        assert "the index could not be saved: no space left on device" in up.text
        again = await engine.index_search("serve listen", "repo")
        assert paths_of(again)[0] == "server/http.py"
    assert no_temp_left(dirs[0]) == []
    assert not manifest_path(pd.trees, repo).exists()
    assert list(ChunkStore(pd.chunks).iter_entries()) == []
    assert store_problems(pd)[0] == []


@pytest.mark.asyncio
async def test_once_space_is_back_the_index_kept_in_memory_is_saved(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    pd = pdirs_of(repo, dirs[0])
    async with await open_engine(repo, *dirs) as engine:
        monkeypatch.setattr(atomic, "os", _FullDiskOs("write"))
        out = await engine.index_search("check binding", "repo")
        assert "could not be saved" in out.text
        monkeypatch.setattr(atomic, "os", os)
        out = await engine.index_search("check binding", "repo")
        assert "could not be saved" not in out.text
        saved = manifest_path(pd.trees, repo).exists()
    assert saved


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        pytest.skip("no mount command here: the full disk is injected instead (ENOSPC tests)")
    if done.returncode != 0:
        pytest.skip(
            "cannot mount a small tmpfs here (needs root and the right to mount: "
            f"{done.stderr.strip() or done.returncode}); the full disk is injected instead"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


@pytest.mark.asyncio
async def test_a_really_full_disk_answers_from_memory_and_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    config = tmp_path / "config"
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        data = disk / "data"
        filler = disk / "filler"
        with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        pd = pdirs_of(repo, data)
        async with await open_engine(repo, data, config) as engine:
            out = await engine.index_search("check binding", "repo")
            assert paths_of(out)[0] == "keychain/bind.py"
            assert "the index could not be saved" in out.text
            assert "answering from memory" in out.text
            assert no_temp_left(data) == []
            assert store_problems(pd)[0] == []
            filler.unlink()
            # Space is back: a change is indexed and saved.
            (repo / "server/http.py").write_text("def serve(port):\n    return listen(port)\n#\n")
            out = await engine.index_search("serve listen", "repo")
            assert paths_of(out)[0] == "server/http.py"
            assert "could not be saved" not in out.text
        assert manifest_path(pd.trees, repo).is_file()
        assert store_problems(pd)[0] == []
