"""The worker process's own entry point: it runs the library's code, never the caller's script.

:class:`~nodwyn_retrieval.bus.pool.ProcessPool` starts each worker as
``python -c "import sys; sys.path[:] = [...]; from nodwyn_retrieval.bus._worker import main;
main([...])"``, with the caller's import path and the modules to preload. Unlike a worker started
by :mod:`multiprocessing` (whose spawn and fork-server children run the caller's ``__main__``
again as ``__mp_main__``), nothing here imports the script that opened the engine: a script
without ``if __name__ == "__main__":`` runs once.

The channel is the worker's standard input and output, taken over before any work runs: the
worker keeps private copies of both descriptors and points descriptor 0 at ``/dev/null`` and
descriptor 1 at standard error, so work that prints cannot corrupt a frame. A frame is an 8-byte
little-endian length and a pickle. The parent sends ``(fn, args, not_after)``; the worker answers
``(True, result)`` or ``(False, error)``, one frame per request, and exits when its input ends.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import BinaryIO, TypeVar, TypeVarTuple

from nodwyn_retrieval.errors import DeadlineExceeded, RetrievalError, WorkerError

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

HEADER = 8

GC_THRESHOLD = 50_000
"""The worker's first-generation threshold (the interpreter's is 700): a batch allocates many
objects that live until its answer is sent, and a collection each 700 of them traverses them
again and again; the preloaded modules are frozen out of every collection (gc.freeze), and the
young generations are collected after each answer."""

# The deadline of the work running in this process (time.monotonic), for work that looks at it
# between its steps (past_deadline); None when there is none or no work is running.
_running: list[float | None] = [None]


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _call(fn: Callable[[*Ts], T], args: tuple[*Ts], not_after: float | None) -> T:
    """Run ``fn`` unless its deadline has passed; raise only the library's errors.

    ``not_after`` is on the :func:`time.monotonic` clock, which every process shares.
    """
    if not_after is not None and time.monotonic() >= not_after:
        raise DeadlineExceeded(f"{_name(fn)} was not started before its deadline")
    _running[0] = not_after
    try:
        return fn(*args)
    except RetrievalError:
        raise
    except BaseException as exc:
        # Any exception may fail to pickle or to unpickle, and a SystemExit must not end the
        # worker: only the type and the text cross back.
        raise WorkerError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        _running[0] = None


def past_deadline() -> bool:
    """Whether the work running here (through :func:`_call`) is past its deadline: work made of
    many steps looks between them and stops (raising DeadlineExceeded), since its caller no
    longer waits for what it would return."""
    not_after = _running[0]
    return not_after is not None and time.monotonic() >= not_after


def read_frame(f: BinaryIO) -> bytes | None:
    """One frame's body, or None at the end of the input."""
    head = f.read(HEADER)
    if len(head) < HEADER:
        return None
    n = int.from_bytes(head, "little")
    body = f.read(n)
    return body if len(body) == n else None


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(HEADER, "little") + body


def _answer(request: bytes) -> bytes:
    try:
        fn, args, not_after = pickle.loads(request)  # noqa: S301 - our parent's own frames
    except Exception as exc:  # noqa: BLE001 - whatever fails to load is answered, not raised
        reply: tuple[bool, object] = (False, WorkerError(f"cannot load the work: {exc}"))
    else:
        try:
            reply = (True, _call(fn, args, not_after))
        except BaseException as exc:  # noqa: BLE001 - _call lets only the library's errors out
            reply = (False, exc)
    try:
        return pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - a result that cannot travel is answered as such
        what = "result" if reply[0] else "error"
        err = WorkerError(f"the {what} cannot be sent back: {type(exc).__name__}: {exc}")
        return pickle.dumps((False, err), pickle.HIGHEST_PROTOCOL)


def main(preload: Sequence[str]) -> None:
    """Serve requests from standard input until it ends (the pool has set ``sys.path``)."""
    # The parent handles an interrupt and stops its workers: a Ctrl-C sent to the terminal's
    # process group must not end a worker mid-frame with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    for name in preload:
        try:
            __import__(name)
        except ImportError as exc:
            print(f"nodwyn_retrieval worker: cannot preload {name}: {exc}", file=sys.stderr)
    # What the preload made lives as long as the worker: kept out of the collections, which then
    # look only at the work's objects; those are collected less often during a batch, and the
    # young ones after each (below).
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, second, third)
    with os.fdopen(rfd, "rb") as inp, os.fdopen(wfd, "wb") as out:
        while (request := read_frame(inp)) is not None:
            out.write(frame(_answer(request)))
            out.flush()
            # The batch's garbage cycles freed once it is answered, whatever their count: a
            # threshold counts objects, not bytes, and a few large ones must not wait for it.
            gc.collect(1)
