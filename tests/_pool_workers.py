"""Functions the process-pool tests send to workers: importable, top-level, one job each."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from nodwyn_retrieval.errors import BadInput


def square(x: int) -> int:
    return x * x


def worker_pid() -> int:
    return os.getpid()


def raise_value_error(text: str) -> None:
    raise ValueError(text)


def raise_bad_input(text: str) -> None:
    raise BadInput(text)


class _Unpicklable(Exception):
    """An exception that cannot be rebuilt on the other side (its __init__ needs two arguments)."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(f"{a} {b}")


def raise_unpicklable() -> None:
    raise _Unpicklable("needs", "two")


def call_sys_exit() -> None:
    sys.exit(4)


def exit_abruptly() -> None:
    """Die the way an out-of-memory kill looks to the parent: no exception, no cleanup."""
    os._exit(3)


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def wait_for(path: str, limit: float = 30.0) -> str:
    """Block until ``path`` exists (or ``limit`` seconds pass), to hold a worker busy."""
    give_up = time.monotonic() + limit
    while not Path(path).exists() and time.monotonic() < give_up:
        time.sleep(0.005)
    return "released"


def mark(path: str) -> str:
    """Leave a file behind as proof that the work ran."""
    Path(path).write_text("ran", encoding="utf-8")
    return "marked"
