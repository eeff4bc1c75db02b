"""Running a test in an interpreter of its own, for tests that fork DataLoader workers.

A pytest worker process may have loaded TensorFlow for an earlier test file, and a process
forked from one that runs TensorFlow's threads can crash in the child (seen in CI: a worker
killed by a segmentation fault while yielding its first tensors). tfperf itself never forks
from such a process: a PyTorch measurement runs in a child that imports torch alone. A test
decorated with `in_clean_process` runs its body in a fresh `python -m pytest` of that one
test, so its workers fork from an interpreter that holds only what the test imports.
"""

from __future__ import annotations

import functools
import inspect
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.deadlines import HANG_S

#: Set to the test's name in the interpreter that runs it.
CHILD = "TFPERF_TEST_IN_CLEAN_PROCESS"
ROOT = Path(__file__).resolve().parents[1]


def in_clean_process(test: Callable[[], None]) -> Callable[[], None]:
    """`test` (taking no fixtures), run in a fresh interpreter unless it already is one."""

    @functools.wraps(test)
    def run() -> None:
        if os.environ.get(CHILD) == test.__name__:
            test()
            return
        node = f"{Path(inspect.getfile(test)).relative_to(ROOT)}::{test.__name__}"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-n0", "-q", "-p", "no:cacheprovider", node],
            cwd=ROOT,
            env={**os.environ, CHILD: test.__name__},
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
        assert done.returncode == 0, f"{node} failed:\n{done.stdout[-6000:]}{done.stderr[-2000:]}"

    return run
