"""The best a pipeline can do on this machine, and tfperf's own estimate of how to get there.

Plain records, filled by the pipeline model (`tfperf.measure`) and read by the terminal, JSON and
HTML reports. Rates are examples per second.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from tfperf.knobs import KNOBS
from tfperf.results._json import KnobsField, as_knobs
from tfperf.results._references import Reference

#: How far apart two rates of one pipeline can be and still be one figure to tfperf: repeated
#: windows of one configuration differ by a few percent on a quiet machine.
RATE_NOISE = 0.05


class LimitBound(str, Enum):
    """What caps a pipeline's rate on this machine."""

    COMPUTE = "compute"  # the model's own step: input could not make training faster
    CPU = "cpu"  # the host's cores, shared by the input pipeline and the model
    SEQUENTIAL_STAGE = "sequential-stage"  # a stage that cannot run in parallel
    # A stage tuning can run in parallel, at its best parallelism: its CPU per example over the
    # usable cores (or, for one that waits, the most threads tfperf gives a stage).
    PARALLEL_STAGE = "parallel-stage"
    MEASURED = "measured"  # a measured rate above every term: the model erred low


@dataclasses.dataclass
class LimitTerm:
    """One candidate for the limit: a rate, what it is, and how it was computed."""

    bound_by: LimitBound
    examples_per_sec: float
    detail: str  # e.g. "2 usable cores ÷ (0.31 ms input + 0.05 ms model CPU per example)"
    stage_label: str | None = None  # for a stage's term: the stage that binds


@dataclasses.dataclass
class Limit:
    """The rate no configuration of this pipeline can exceed here: the smallest of the terms, or a
    measured rate above it.

    A limit is never below a rate tfperf measured for a configuration of the pipeline: where
    one is (the model erred low), `examples_per_sec` is that measured rate, `bound_by` is
    MEASURED, `model_examples_per_sec` keeps the smallest term and `revised_by` names the
    measurement (`tfperf.measure.revise_limit`). Reports read `examples_per_sec` and
    `explanation` only, so a page never shows the model's figure beside a larger measured one.

    The limit is training's: the input alone (the pipeline-only phase) may run faster than a
    limit bound by the model's step or by the cores the input shares with it, and that is no
    contradiction, since alone the input has the cores to itself. Where it did,
    `input_alone_examples_per_sec` keeps that rate and `bound_words` states it beside the
    limit, so a page never shows a measured rate above the limit without saying why.

    `python_stage` names a parallel stage whose function calls Python (tf.numpy_function,
    tf.py_function): its threads queue for the process's one interpreter lock, a bound no
    term counts, so the input may stop short of the limit with cores idle (docs/limit.md,
    "A stage that calls Python"). None when no such stage runs.
    """

    examples_per_sec: float
    bound_by: LimitBound
    explanation: str  # what binds, and what would lift it
    terms: list[LimitTerm]
    python_stage: str | None = None
    #: The smallest term, when a measured rate above it revised the limit (else None).
    model_examples_per_sec: float | None = None
    #: What measured the rate the limit was revised to, e.g. "pipeline only" or "trial 7".
    revised_by: str | None = None
    #: The pipeline-only rate, where it ran above this limit (a training limit: the input
    #: alone has the cores to itself); None where it did not, or was not measured.
    input_alone_examples_per_sec: float | None = None
    #: What measured it: "pipeline only", or "stage analysis" (the whole pipeline's cut).
    input_alone_by: str | None = None

    @property
    def revised(self) -> bool:
        """Whether a measured rate above the model's terms set the limit."""
        return self.revised_by is not None

    @property
    def bound_words(self) -> str:
        """What sets the limit, for a report's Limit line: "bound by cpu", or the revision,
        and the input alone's rate where it ran above the limit, with why that is no
        contradiction."""
        words = (
            f"revised to the measured rate ({self.revised_by})"
            if self.revised_by is not None
            else f"bound by {self.bound_by.value}"
        )
        alone = self.input_alone_examples_per_sec
        if alone is None or alone <= self.examples_per_sec:
            return words
        why = (
            "the model's step caps training, not the input"
            if self.bound_by is LimitBound.COMPUTE
            else "alone the input has the cores to itself, in training it shares them with "
            "the model's step"
        )
        return (
            f"{words}; the input alone ran faster, {alone:,.0f} examples/s "
            f"({self.input_alone_by or 'pipeline only'}), "
            f"which is no contradiction: this limit is training's, and {why}"
        )


@dataclasses.dataclass
class TrainingRate:
    """The model alone under one training setting: what a larger batch or a precision buys.

    Measured in the baseline trial on one cached batch built with the setting (the
    compute-only phase's method), so the limit can be stated for each training setting the
    search may choose (`tfperf.tuner._training.training_estimate`).

    Attributes:
        batch_size: the `batch_size` knob the batch was built with.
        mixed_precision: the precision policy the model was built under.
        examples_per_sec: the model's rate on that batch.
        model_cpu_s_per_example: CPU seconds the process spent per example meanwhile.
        steps: timed steps (after two untimed ones).
        duration_s: seconds the probe took, its build and trace included (None: not timed,
            as in results written before it was), so a tune prices its later trials without
            it (`tfperf.study.prices`).
    """

    batch_size: int
    mixed_precision: str
    examples_per_sec: float
    model_cpu_s_per_example: float | None
    steps: int
    duration_s: float | None = None

    def setting(self) -> dict[str, Any]:
        """The knob values this rate was measured under: its fields named as knobs."""
        names = KNOBS.names()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in names}


@dataclasses.dataclass
class Estimate:
    """A configuration the pipeline model proposes, and how well its prediction held."""

    knobs: KnobsField
    predicted_examples_per_sec: float
    trial_number: int | None = None  # the study trial that measured it
    measured_examples_per_sec: float | None = None
    # Training knobs the estimate changes (batch size, precision, shuffle buffer): empty for
    # the estimate that keeps training as written; the training estimate changes them when the
    # model predicts that a training setting lifts the limit beyond the noise.
    changes_training: list[str] = dataclasses.field(default_factory=list)
    # Which of the model's proposals it is (`tfperf.tuner._proposers`); its value is the label
    # of the trial that measured it. Records from before kinds existed read as the estimate.
    kind: Reference = Reference.ESTIMATE

    def __post_init__(self) -> None:
        # A mapping in `to_dict()`'s shape is read as the knobs it describes.
        self.knobs = as_knobs(self.knobs)

    @property
    def error(self) -> float | None:
        """Measured over predicted, minus one (0.1 = the model was 10% pessimistic)."""
        if self.measured_examples_per_sec is None or self.predicted_examples_per_sec <= 0:
            return None
        return self.measured_examples_per_sec / self.predicted_examples_per_sec - 1
