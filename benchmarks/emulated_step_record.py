"""The emulated accelerator step's benchmark in `python -m benchmarks`: its rows, how they are
measured (`benchmarks.emulated_accelerator` in a child, with its own TensorFlow) and their
section of the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from benchmarks.child import json_rows

__all__ = ["EmulatedStepRow", "emulated_step_section", "run_emulated_step"]


@dataclasses.dataclass
class EmulatedStepRow:
    """One emulated step: the wait the issue expects, the one measured end to end, and the
    model's from the measured pipeline-only interval (`tfperf.results.Utilisation`)."""

    step_s: float
    expected_wait: float
    measured_wait: float
    model_wait: float
    input_interval_s: float
    min_step_s: float


def run_emulated_step(log: Callable[[str], None]) -> list[EmulatedStepRow]:
    """Runs `python -m benchmarks.emulated_accelerator` in a child and reads its rows.

    Raises:
        RuntimeError: the benchmark failed; the message carries the end of its output.
    """
    log("emulated accelerator step (python -m benchmarks.emulated_accelerator)")
    rows = json_rows("benchmarks.emulated_accelerator", "the emulated-step benchmark")
    return [EmulatedStepRow(**row) for row in rows]


def emulated_step_section(rows: list[EmulatedStepRow]) -> str:
    """The report's section: each step's expected, measured and modelled wait side by side."""
    if not rows:
        return ""
    lines = [
        "## Emulated accelerator step",
        "",
        "`python -m benchmarks.emulated_accelerator`: an input delivering a batch every ~5 ms "
        "(a sequential map sleeping 5 ms per batch, prefetched) feeds an emulated step "
        "(`--step-time`). With prefetch a step waits `max(0, interval - step)`: about 0.8 of "
        "a 1 ms step and nothing of a 20 ms one.",
        "",
        "| emulated step | expected wait | measured wait | model's wait | input interval | "
        "shortest step at 90% |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r.step_s * 1e3:g} ms | {r.expected_wait:.2f} | {r.measured_wait:.2f} | "
        f"{r.model_wait:.2f} | {r.input_interval_s * 1e3:.2f} ms | {r.min_step_s * 1e3:.2f} ms |"
        for r in rows
    ]
    return "\n".join(lines)
