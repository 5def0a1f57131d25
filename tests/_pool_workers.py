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


def main_module() -> tuple[str, str | None]:
    """The worker's ``__main__``: its name and the file it runs, if any."""
    main = sys.modules["__main__"]
    return main.__name__, getattr(main, "__file__", None)


def defined_in_main() -> object:
    """A function that claims to be the running script's own, as a script's function does."""

    def f() -> None:
        return None

    f.__module__ = "__main__"
    f.__qualname__ = "f"
    return f


def import_path() -> list[str]:
    return list(sys.path)


def print_and_square(x: int) -> int:
    print("a line on standard output", flush=True)
    sys.stdout.buffer.write(b"\x00\x01\x02 raw bytes\n")
    sys.stdout.flush()
    return x * x


def wait_a_little() -> None:
    time.sleep(0.2)


def slow_pid(seconds: float) -> int:
    """This worker's process id, after a sleep: works given at once land on different workers."""
    time.sleep(seconds)
    return os.getpid()


def steps_until_deadline(limit: float) -> int:
    """Steps of a millisecond until the work's deadline (bus._worker.past_deadline) or limit s."""
    from nodwyn_retrieval.bus._worker import past_deadline
    from nodwyn_retrieval.errors import DeadlineExceeded

    end = time.monotonic() + limit
    steps = 0
    while time.monotonic() < end:
        if past_deadline():
            raise DeadlineExceeded(f"stopped after {steps} steps")
        time.sleep(0.001)
        steps += 1
    return steps


def blas_env() -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")}


def gc_state() -> tuple[int, int]:
    import gc

    return gc.get_threshold()[0], gc.get_freeze_count()


class _Cycle:
    def __init__(self) -> None:
        self.me = self
        self.payload = bytearray(64 * 1024)


def make_cycles(n: int) -> int:
    """n garbage cycles of 64 KiB each (freed only by the cyclic collector); the worker's peak
    resident set afterwards, in KiB."""
    import resource

    for _ in range(n):
        _Cycle()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
