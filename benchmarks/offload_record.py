"""The offload benchmark in `python -m benchmarks`: its rows (prediction against the real
service, `benchmarks.offload`), and their section of the report.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["BAND", "OffloadResult", "OffloadRow", "offload_result", "offload_section"]

#: The issue's band for the one-worker measurement over the prediction.
BAND = (0.6, 1.5)


@dataclasses.dataclass
class OffloadRow:
    """k workers: the rate the pinned one-core measurement predicts (k times it), and the
    rate measured through the real local service."""

    workers: int
    predicted_examples_per_sec: float
    measured_examples_per_sec: float

    @property
    def ratio(self) -> float:
        """Measured over predicted; 0 when nothing was predicted."""
        if self.predicted_examples_per_sec <= 0:
            return 0.0
        return self.measured_examples_per_sec / self.predicted_examples_per_sec


@dataclasses.dataclass
class OffloadResult:
    """`tfperf offload` on the CPU-heavy pipeline: its answer and each k's rows."""

    workers_needed: int | None
    binds: str
    rows: list[OffloadRow]

    @property
    def met(self) -> bool:
        """The issue's bar: at least two workers needed, one worker's ratio within `BAND`."""
        one = next((row.ratio for row in self.rows if row.workers == 1), 0.0)
        return (
            self.workers_needed is not None
            and self.workers_needed >= 2
            and BAND[0] <= one <= BAND[1]
        )


def offload_result(data: dict[str, Any]) -> OffloadResult:
    """The rows of `tfperf offload`'s JSON result (its `verify` points, one per k)."""
    per_worker = float(data["predicted_per_worker_examples_per_sec"])
    rows = [
        OffloadRow(
            int(point["workers"]),
            int(point["workers"]) * per_worker,
            float(point["examples_per_sec"]),
        )
        for point in data["verify"]
    ]
    needed = data["workers_needed"]
    return OffloadResult(None if needed is None else int(needed), str(data["binds"]), rows)


def offload_section(result: OffloadResult | None) -> str:
    """The report's section: each k's predicted and measured rate side by side."""
    if result is None:
        return ""
    lines = [
        "## Offload to tf.data service",
        "",
        "`python -m benchmarks.offload`: `tfperf offload benchmarks/offload_heavy.py` (a "
        "CPU-heavy map, a model far faster than the input) with workers of one core on a "
        "real local tf.data service. The prediction for k workers is k times the rate "
        "measured in a process pinned to one core. The bar: `workers_needed` >= 2 and one "
        f"worker's measured rate within {BAND[0]:g}-{BAND[1]:g}x of the prediction.",
        "",
        "| workers | predicted ex/s | measured ex/s | measured / predicted |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {row.workers} | {row.predicted_examples_per_sec:,.0f} | "
        f"{row.measured_examples_per_sec:,.0f} | {row.ratio:.2f} |"
        for row in result.rows
    ]
    needed = "none" if result.workers_needed is None else str(result.workers_needed)
    met = "yes" if result.met else "**no**"
    lines += ["", f"`workers_needed`: {needed}; binds: {result.binds}; bar met: {met}."]
    return "\n".join(lines)
