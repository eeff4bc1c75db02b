"""Running the installed `tfperf` console script in a child process, as a user's shell does."""

from __future__ import annotations

import os
import subprocess
import sys
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
