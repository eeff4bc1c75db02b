"""`python -m benchmarks.offload [--smoke]`: `tfperf offload`'s prediction against the service.

Runs `tfperf offload` on `offload_heavy.py` (a CPU-heavy map, a model far faster than the
input) with a local tf.data service of k = 1 and 2 workers of one core each, and prints, for
each k, the rate the pinned measurement predicts (k times one pinned core) beside the rate
measured through the real service, and their ratio. The issue's bar: `workers_needed` >= 2,
and the one-worker measurement within 0.6-1.5x of the prediction; the exit status is 1 when
either misses. Run it on a quiet machine: another process on the cores moves both figures.
`python -m benchmarks` (`make bench`) runs it too and writes its section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.offload_record import BAND, OffloadResult, offload_result
from benchmarks.suite import BENCHMARKS_DIR

__all__ = ["BAND", "PIPELINE", "measure_offload", "run", "table"]

PIPELINE = BENCHMARKS_DIR / "offload_heavy.py"


def run(seconds: float, workers: int) -> dict[str, object]:
    """`tfperf offload` on the heavy pipeline; its JSON result.

    Raises:
        RuntimeError: it failed; the message carries the end of its output.
    """
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        command = [
            sys.executable, "-m", "tfperf", "offload", str(PIPELINE), "--quiet",
            "--max-cores", "1", "--max-workers", str(workers), "--seconds", str(seconds),
            "--json", str(out / "o.json"), "--html", str(out / "o.html"),
        ]  # fmt: skip
        done = subprocess.run(
            command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise RuntimeError(
                f"`tfperf offload` failed (exit status {done.returncode}); it ended with:\n{tail}"
            )
        data: dict[str, object] = json.loads((out / "o.json").read_text())
    return data


def table(data: dict[str, object]) -> tuple[list[str], bool]:
    """The lines of the predicted-against-measured table, and whether the bar is met."""
    result = offload_result(data)
    lines = ["workers  predicted ex/s  measured ex/s  measured/predicted"]
    for row in result.rows:
        lines.append(
            f"{row.workers:>7}  {row.predicted_examples_per_sec:>14,.0f}  "
            f"{row.measured_examples_per_sec:>13,.0f}  {row.ratio:>18.2f}"
        )
    lines.append(
        f"workers_needed: {result.workers_needed}; binds: {result.binds}; bar met: {result.met}"
    )
    return lines, result.met


def measure_offload(log: Callable[[str], None]) -> OffloadResult:
    """The full run (k = 1 and 2 workers), for `python -m benchmarks`.

    Raises:
        RuntimeError: `tfperf offload` failed, or its result lacks the figures.
    """
    log("offload to tf.data service, k = 1 and 2 workers (python -m benchmarks.offload)")
    try:
        return offload_result(run(seconds=3.0, workers=2))
    except (OSError, ValueError, KeyError, TypeError) as error:  # no JSON, or not offload's
        raise RuntimeError(f"the offload benchmark wrote no usable result: {error}") from None


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.offload")
    parser.add_argument("--smoke", action="store_true", help="short windows, one worker")
    args = parser.parse_args()
    data = run(seconds=0.5 if args.smoke else 3.0, workers=1 if args.smoke else 2)
    lines, met = table(data)
    print("\n".join(lines))
    return 0 if met or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
