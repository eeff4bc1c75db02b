"""What restarting a finite dataset cost, weighed by a real epoch, and how sure that is."""

from __future__ import annotations

import dataclasses
from enum import Enum

from tfperf.results._stages import StageKind


class EpochSource(str, Enum):
    """Where the length of a real epoch came from, for weighing the cost of a restart."""

    CARDINALITY = "cardinality"  # the dataset's own cardinality, in batches
    GIVEN = "epoch-steps"  # the user said so (`--epoch-steps`)
    OBSERVED = "observed"  # batches counted in one pass during the profile (cardinality unknown)
    LOOP = "loop"  # the script's own loop started the data again after this many batches


#: Each source of an epoch's length, in words.
EPOCH_SOURCE_WORDS = {
    EpochSource.CARDINALITY: "the dataset's cardinality",
    EpochSource.GIVEN: "--epoch-steps",
    EpochSource.OBSERVED: "one pass of the profiled data; --epoch-steps gives the real one",
    EpochSource.LOOP: "where the script's loop starts the data again",
}


class RestartEvidence(str, Enum):
    """Whether the measured restarts say what one restart costs and what it waits for."""

    ENOUGH = "enough"  # enough restarts, sharing one cost
    FEW_RESTARTS = "few-restarts"  # fewer than the restart rules need to state a cost
    WIDE_SPREAD = "wide-spread"  # the restarts' waits share no one cost: a median stands for none
    UNRECORDED = "unrecorded"  # read from a result written before the evidence was recorded


#: For a result written before restarts recorded their evidence: fewer restarts than this
#: state no cost (the measuring side's own rule is `tfperf.measure._restarts`').
UNRECORDED_MIN_RESTARTS = 3


@dataclasses.dataclass
class RestartCost:
    """What the dataset's restarts cost in the end-to-end phase, and what that is per real epoch.

    A finite dataset restarts at the end of every epoch; the first step after a restart waits
    for the pipeline to fill again (a shuffle buffer refilling, a parallel map ramping up). The
    profile window restarts as often as its few hundred records run out, which says nothing
    about a real epoch: the restart cost is measured apart and weighed by `epoch_steps`.

    Attributes:
        restarts: restarts measured in the end-to-end phase (after warm-up).
        seconds_per_restart: median wait of a first step after a restart (set-apart waits left
            out), beyond the steady wait.
        stage: label of the stage whose warm-up a restart repeats, e.g. `shuffle(10000)`; None
            when no stage of the pipeline explains it.
        stage_kind: that stage's kind, for the advice.
        steady_wait_s_per_step: mean wait of the other measured steps.
        steady_wait_fraction: wait share of step time without the restart steps.
        weighted_wait_fraction: wait share with one restart per `epoch_steps` steps: the figure
            the verdict follows.
        window_wait_share: share of the window's measured wait that fell on restart steps.
        epoch_steps: steps (batches) in one real epoch.
        epoch_source: where `epoch_steps` came from.
        weighted_examples_per_sec: end-to-end examples/s with the restart weighed by the epoch.
        measured: True when `stage` is the stage whose output was measured late after a
            fresh start (the stage analysis's first-element times); False when it was taken
            from the stage graph alone (no stage analysis ran).
        stage_own_s: that stage's own share of the time to the first batch after a fresh
            start, seconds; None when not measured.
        stage_sequential: the stage is a map or read that could run in parallel but is
            written to run on one thread.
        short_epoch: an epoch holds too few steps for the pipeline to reach a steady state
            (`tfperf.measure._restarts.SHORT_EPOCH_STEPS`): the wait is the epoch's own
            length, not a buffer refilling.
        restart_waits_s: the wait of every restart step counted in `seconds_per_restart`,
            seconds, in the order measured: the evidence and its spread.
        set_apart_waits_s: restart waits left out of the pipeline's restart cost, seconds:
            each waited far longer than any restart of the pipeline alone, so what it waited
            for was not the pipeline filling again (see `tfperf.measure._restarts`).
        evidence: whether the restarts are enough to state a cost and name a stage; when
            not, `stage` is None and `would_tell` says what would settle it.
        would_tell: what would settle a restart cost that cannot be told, e.g. more
            `--steps`; None when the evidence is enough.
        steady_steps: measured steps between restarts, from which the steady wait comes.
        pipeline_restarts: restarts measured in the pipeline-only phase; 0 when none.
        pipeline_restart_waits_s: the wait of each of them, seconds.
        pipeline_seconds_per_restart: the pipeline alone's restart cost, the median restart
            wait beyond its steady wait, seconds; None when the pipeline alone did not restart
            beyond a step.
    """

    restarts: int
    seconds_per_restart: float
    stage: str | None
    stage_kind: StageKind | None
    steady_wait_s_per_step: float
    steady_wait_fraction: float
    weighted_wait_fraction: float
    window_wait_share: float
    epoch_steps: int
    epoch_source: EpochSource
    weighted_examples_per_sec: float
    measured: bool = False
    stage_own_s: float | None = None
    stage_sequential: bool = False
    short_epoch: bool = False
    # Added with the restart evidence: results written before it load as UNRECORDED.
    restart_waits_s: list[float] = dataclasses.field(default_factory=list)
    set_apart_waits_s: list[float] = dataclasses.field(default_factory=list)
    evidence: RestartEvidence = RestartEvidence.UNRECORDED
    would_tell: str | None = None
    steady_steps: int = 0
    pipeline_restarts: int = 0
    pipeline_restart_waits_s: list[float] = dataclasses.field(default_factory=list)
    pipeline_seconds_per_restart: float | None = None

    @property
    def evidence_enough(self) -> bool:
        """Whether the restarts measured are enough to state their cost and name a stage."""
        return self.evidence is RestartEvidence.ENOUGH

    @property
    def cost_told(self) -> bool:
        """Whether a page may state the cost: the evidence was enough, or (in a result written
        before restarts recorded their evidence) at least `UNRECORDED_MIN_RESTARTS` were
        measured. Every page asks this one question before it prints `seconds_per_restart`."""
        if self.evidence is RestartEvidence.UNRECORDED:
            return self.restarts >= UNRECORDED_MIN_RESTARTS
        return self.evidence_enough

    @property
    def waiting_on(self) -> str:
        """What a restart waits for, in words: `" while shuffle(640) fills again"`, or
        `" while waiting for map(decode)"` for a stage measured late; "" when none is known."""
        if self.stage is None:
            return ""
        if self.stage_kind is StageKind.WORKERS:
            return " while the loader's workers start again"
        refills = self.stage_kind in (StageKind.SHUFFLE, StageKind.CACHE)
        if self.measured and not refills:
            return f" while waiting for {self.stage}"
        return f" while {self.stage} fills again"

    @property
    def dominates(self) -> bool:
        """Whether restarts cost more wait per real epoch than the steady steps do."""
        return self.seconds_per_restart / self.epoch_steps > self.steady_wait_s_per_step
