"""The best a pipeline can do on this machine, and tfperf's own estimate of how to get there.

Plain records, filled by the pipeline model (`tfperf.measure`) and read by the terminal, JSON and
HTML reports. Rates are examples per second.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any


class LimitBound(str, Enum):
    """What caps a pipeline's rate on this machine."""

    COMPUTE = "compute"  # the model's own step: input could not make training faster
    CPU = "cpu"  # the host's cores, shared by the input pipeline and the model
    SEQUENTIAL_STAGE = "sequential-stage"  # a stage that cannot run in parallel


@dataclasses.dataclass
class LimitTerm:
    """One candidate for the limit: a rate, what it is, and how it was computed."""

    bound_by: LimitBound
    examples_per_sec: float
    detail: str  # e.g. "2 usable cores ÷ (0.31 ms input + 0.05 ms model CPU per example)"
    stage_label: str | None = None  # for SEQUENTIAL_STAGE: the stage that binds


@dataclasses.dataclass
class Limit:
    """The smallest of the terms: the rate no configuration of this pipeline can exceed here."""

    examples_per_sec: float
    bound_by: LimitBound
    explanation: str  # one sentence: what binds, and what would lift it
    terms: list[LimitTerm]


@dataclasses.dataclass
class Estimate:
    """The configuration the pipeline model predicts best, and how well the prediction held."""

    knobs: dict[str, Any]
    predicted_examples_per_sec: float
    trial_number: int | None = None  # the study trial that measured it
    measured_examples_per_sec: float | None = None

    @property
    def error(self) -> float | None:
        """Measured over predicted, minus one (0.1 = the model was 10% pessimistic)."""
        if self.measured_examples_per_sec is None or self.predicted_examples_per_sec <= 0:
            return None
        return self.measured_examples_per_sec / self.predicted_examples_per_sec - 1
