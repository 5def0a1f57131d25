"""What the attacks on the root and the reads share: a file outside the root with words found
nowhere else, and the check that none of them reached the store, a result or the log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nodwyn_retrieval.store.chunkstore import ChunkStore, read_pack
from nodwyn_retrieval.store.codec import HEADER, decode

# Words of the file outside the root: no file inside a test's tree holds any of them.
OUTSIDE_WORDS = ("quokka", "wallaby", "platypus", "bandicoot")
OUTSIDE_TEXT = "def quokka_wallaby():\n    return 'platypus bandicoot'\n"
ROOT = Path(__file__).resolve().parent.parent


def plant_outside(path: Path, names: tuple[str, ...] = ("a.py",)) -> Path:
    """A directory outside every root holding files of the outside words."""
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_text(OUTSIDE_TEXT, encoding="utf-8")
    return path


def chunk_words(data_dir: Path) -> set[str]:
    """Every word of every chunk record under the data directory, each record decoded."""
    words: set[str] = set()
    for chunks in data_dir.glob("projects/*/index/chunks"):
        store = ChunkStore(chunks)
        for key, _, _ in store.iter_entries():
            rec = store.get(key)
            assert rec is not None, key
            words.update(rec.vocab)
    return words


def assert_no_outside_bytes(data_dir: Path, *texts: str, logs: tuple[Path, ...] = ()) -> None:
    """None of the outside words in a chunk record, a snapshot, a manifest, any text given (a
    result, an output) or a log; and not one raw byte sequence of the outside file anywhere."""
    found = chunk_words(data_dir) & set(OUTSIDE_WORDS)
    assert not found, f"chunk records hold outside words: {sorted(found)}"
    raw = OUTSIDE_TEXT.encode()
    for path in [*data_dir.rglob("*"), *logs]:
        if not path.is_file():
            continue
        data = path.read_bytes()
        assert raw not in data, path
        text = data.decode("utf-8", "replace")
        if path.suffix == ".ckp":
            text = repr([(k, r.vocab) for k, r in read_pack(data)])  # each record's words
        elif len(data) >= HEADER.size and path.suffix in {".snap", ".manifest"}:
            magic, version, _ = HEADER.unpack_from(data)
            # Decoded, so a compressed payload is searched too.
            text = repr(decode(magic, version, data))
        for w in OUTSIDE_WORDS:
            assert w not in text, f"{path} holds the outside word {w!r}"
    for text in texts:
        for w in OUTSIDE_WORDS:
            assert w not in text, f"an output holds the outside word {w!r}: {text[:300]}"


def cli(
    *args: str, cwd: Path, dirs: tuple[Path, Path], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own, with the data and configuration directories."""
    full = {
        **(env if env is not None else os.environ),
        "NODWYN_RETRIEVAL_DATA_DIR": str(dirs[0]),
        "NODWYN_RETRIEVAL_CONFIG_DIR": str(dirs[1]),
        "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p),
    }
    return subprocess.run(
        [sys.executable, "-m", "nodwyn_retrieval", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
