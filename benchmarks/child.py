"""A benchmark module run in a child process that writes its rows as JSON: `json_rows`.

Each extra with a TensorFlow of its own (the emulated step, the known-truth family, the
interpreter lock) runs as `python -m <module> --json PATH` in the repository's root, so its
runtime and threads end with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]


def json_rows(
    module: str, what: str, *, failure_has_rows: bool = False, timeout_s: float | None = None
) -> list[dict[str, Any]]:
    """The list `python -m module --json PATH` wrote; `what` names it in errors.

    With `failure_has_rows`, a failing exit status still returns the rows it wrote (a check
    that failed is an answer).

    Raises:
        RuntimeError: it wrote nothing, or failed without `failure_has_rows`; the message
            carries the end of its output.
    """
    with tempfile.TemporaryDirectory(prefix="tfperf-bench-") as folder:
        path = Path(folder) / "rows.json"
        command = [sys.executable, "-m", module, "--json", str(path)]
        done = subprocess.run(
            command, cwd=_REPO, capture_output=True, text=True, check=False, timeout=timeout_s
        )
        failed = done.returncode != 0 and not failure_has_rows
        if failed or not path.exists():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            how = "failed" if path.exists() else "wrote nothing"
            raise RuntimeError(
                f"{what} {how} (exit status {done.returncode}); run `python -m {module}` to "
                f"see why. It ended with:\n{tail}"
            )
        rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return rows
