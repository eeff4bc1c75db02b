"""How the `tfperf` process starts and ends: signals, and what the user's code left running.

- SIGTERM (a batch scheduler's stop, `kill PID`) is handled like Ctrl-C: it raises `Terminated`,
  a `KeyboardInterrupt`, so every path that records an interrupted trial runs; the exit status
  is then 143 (128 + SIGTERM) instead of 130.
- When the work is done, threads the pipeline file started must not keep tfperf alive, and
  processes it started (also in sessions of their own, which a process-group kill misses) must
  not outlive it: `finish` stops them, names them, and ends the process.
- Nor must the interpreter's teardown keep the user waiting after the last line: with
  TensorFlow, Keras, Optuna and plotly loaded, `Py_FinalizeEx`'s garbage collections and
  module clearing walk millions of objects, several seconds on a quiet machine and tens of
  seconds on a loaded one. Nothing tfperf wrote needs them (its files and study transactions are
  closed by then), so `finish` runs the exit handlers and ends the process without them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "Terminated",
    "finish",
    "handle_sigterm",
    "interrupted_status",
    "reap_orphans",
]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised as an interrupt so the cleanup of a Ctrl-C runs."""


_terminated = threading.Event()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    if _terminated.is_set():
        return  # a second SIGTERM while the first one's cleanup runs: let it finish
    _terminated.set()
    raise Terminated("interrupted by SIGTERM")


@contextlib.contextmanager
def handle_sigterm() -> Iterator[None]:
    """SIGTERM raises `Terminated` inside the block (in the main thread; elsewhere a no-op)."""
    _terminated.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_status() -> int:
    """130 after Ctrl-C, 143 after SIGTERM."""
    return EXIT_TERMINATED if _terminated.is_set() else EXIT_INTERRUPTED


def reap_orphans() -> None:
    """Makes this process adopt orphans of its descendants (Linux), so `finish` finds them.

    A process the pipeline starts in a session of its own and whose parent exits would be
    adopted by init and never seen again; as a child subreaper, tfperf adopts it instead.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def finish(status: int) -> NoReturn:
    """Stops what the user's code left running, then ends the process with `status`.

    Processes still running under tfperf are killed and listed on stderr. The exit handlers
    (`atexit`: logging's flush, the user's own) run, but not the interpreter's teardown: it
    would wait forever for threads that are not daemons, and takes seconds to tens of seconds
    to collect TensorFlow's objects (see the module's docstring).
    """
    stopped = _stop_descendants()
    if stopped:
        print(
            "tfperf: stopped processes the pipeline left running: " + "; ".join(stopped) + ".",
            file=sys.stderr,
        )
    if not _stray_threads():
        # With a stray thread left, a handler that joins threads (concurrent.futures') would
        # wait for it forever: the handlers are skipped then, as before.
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`) or stream
            stream.flush()
    os._exit(status)


def _stray_threads() -> list[threading.Thread]:
    return [
        thread
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
    ]


def _stop_descendants() -> list[str]:
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    stopped = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                child.wait(timeout=0)
                continue
            described = f"pid {child.pid} ({' '.join(child.cmdline())[:80] or child.name()})"
            child.kill()
            child.wait(timeout=2)
            stopped.append(described)
    return stopped
