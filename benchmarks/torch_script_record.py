"""The PyTorch script's zero-change row in `python -m benchmarks`: its record, and how it is
measured (`benchmarks.torch_script` in a child). `benchmarks.render_zero_change` renders it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["TorchScript", "run_torch_script"]

_REPO = Path(__file__).resolve().parents[1]
#: How long the child may run: its study, then the side-by-side rounds.
TIMEOUT_S = 2 * 3600.0


@dataclasses.dataclass
class TorchScript:
    """`benchmarks/zero_change/torch_train.py` tuned with `tfperf tune --write-patch` (`trials`
    trials), then its whole loop as written and as patched, `rounds` interleaved runs each,
    each a fresh process: end-to-end examples/s per run. `goal` is patched/original's bar."""

    trials: int | None
    rounds: int
    original: list[float]
    patched: list[float]
    goal: float
    diff: str


def run_torch_script(trials: int, out: Path, log: Callable[[str], None]) -> TorchScript:
    """Runs `python -m benchmarks.torch_script --trials N --out OUT` and reads its result.

    A ratio below the goal makes the child exit 1: its result is still the answer.

    Raises:
        RuntimeError: it wrote no result; the message carries the end of its output.
    """
    log(f"PyTorch script (python -m benchmarks.torch_script --trials {trials})")
    path = out / "result.json"
    path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "benchmarks.torch_script", "--trials", str(trials)]
    done = subprocess.run(
        [*command, "--out", str(out)],
        cwd=_REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
    )
    if not path.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(
            f"the PyTorch script's benchmark wrote no result (exit status {done.returncode}); "
            f"run `python -m benchmarks.torch_script` to see why. It ended with:\n{tail}"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    names = [field.name for field in dataclasses.fields(TorchScript)]
    return TorchScript(**{name: data[name] for name in names})
