"""Running the installed `tfperf` console script in a child process, as a user's shell does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.deadlines import HANG_S

#: The console script installed beside this interpreter.
TFPERF = str(Path(sys.executable).with_name("tfperf"))


def run_tfperf(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`tfperf ARGV` run in `cwd`, its output captured; TensorFlow's C++ logging kept out."""
    return subprocess.run(
        [TFPERF, *argv],
        cwd=cwd,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )


def _as_a_terminal_runs_it() -> None:
    """SIGINT back to its default in the child, as in a terminal's foreground job.

    A shell starts a background job (`make test &`, a CI runner's script) with SIGINT ignored,
    the child inherits that, and Python then installs no KeyboardInterrupt handler: a Ctrl-C
    test would test the shell, not tfperf.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_tfperf(cwd: Path, *argv: str) -> subprocess.Popen[str]:
    """`tfperf ARGV` started in `cwd` as a terminal's foreground job, its output piped."""
    return subprocess.Popen(
        [TFPERF, *argv],
        cwd=cwd,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_a_terminal_runs_it,
    )


def wait_for_file(process: subprocess.Popen[str], path: Path, timeout_s: float = HANG_S) -> None:
    """Waits until `process`'s pipeline has written `path`; a hang guard, not a limit."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)
