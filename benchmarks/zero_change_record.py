"""What the zero-change row of a benchmark run measured, as plain dataclasses.

The plain-file twin of one benchmark pipeline (`benchmarks/zero_change/`) is tuned with `tfperf
tune --write-patch` (verified hand-over on), and the benchmark then measures the patched file
against the original side by side, as it measures the other configurations. No TensorFlow, no
Optuna and no other benchmark module here: `benchmarks/record.py` holds this in its record.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class RatioFigure:
    """A ratio of medians and its relative spread, as tfperf reported it."""

    ratio: float
    spread: float


@dataclasses.dataclass
class ZeroChange:
    """The zero-change row: the twin of `contract` (a suite pipeline's name), tuned and handed over.

    `claimed` is tfperf's tuned/baseline speed-up of the study (its winner over the file as
    written); `verified` the hand-over's own patched/original ratio (None with its reason in
    `verify_problem`). `original` and `patched` are the benchmark's end-to-end examples/s of
    the file as written and as patched, one value per interleaved fresh-process repeat.
    `diff` is the patch, `manual_edits` what tfperf could not write. `problem` says why there
    is no measurement (the study found no gain, the patch did not apply).
    """

    contract: str
    pipeline: str
    trials: int
    steps: int
    best_label: str
    claimed: RatioFigure | None
    verified: RatioFigure | None
    verify_problem: str | None
    diff: str
    manual_edits: list[str]
    original: list[float]
    patched: list[float]
    failures: list[str] = dataclasses.field(default_factory=list)
    problem: str | None = None
