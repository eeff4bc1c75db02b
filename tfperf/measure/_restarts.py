"""The cost of a finite dataset's restarts, measured apart and weighed by a real epoch.

A finite dataset restarts at every epoch end, and the first step after a restart waits while
the pipeline fills again: a shuffle buffer refilling, a parallel map ramping up, a cache being
re-read. A profile window of a few hundred stand-in records restarts far more often than
training on the real data does, so its raw wait share says more about the window than about
training. Here the restart steps are taken out (`StepRecord.epoch` says where the dataset
restarted), the steady wait is measured without them, and the restart cost is folded back in
once per *real* epoch. Pure functions on plain records: tests assert exact figures.

A restart's cost is stated only from enough evidence: at least `MIN_RESTART_SAMPLES`
restarts, whose waits share one cost (their middle half within `SPREAD_RATIO` times their
median, or within a step), centred on their median, never their mean. A restart wait far beyond any
restart of the same pipeline run alone (the pipeline-only phase, `ALONE_RATIO`) is set apart:
the pipeline was not what it waited for. With less, the record says it cannot tell
(`RestartCost.evidence`) and what would settle it, and names no stage.

Which stage a restart waits for is measured where the stage analysis ran (`attribute`): each
cut pipeline's time to its first element after a fresh start, less the time of the cut below
it, is that stage's own share of the wait; the largest share names the stage, and the advice
follows from it (a parallel map for a map written on one thread, not a smaller shuffle buffer
for a shuffle of four file names). A stage is named only from that measurement: never one a
`cache()` above it serves from the second epoch on, one whose own share is within noise, or
one whose share explains too little of the restart. Without the stage analysis no tf.data
stage is named (`restart_stage` reads a candidate off the stage graph for `EpochInfo`).

The verdict follows the wait weighed by the real epoch (`verdict_wait`): restarts happen
once per epoch of training too, and are its cost; what `repeat()` would save is the restart
finding's to say (`tfperf.findings`), never the verdict's to leave out. Where the restarts
cannot say what one costs, the verdict follows the wait between them, the part that is
known, and the restart finding says what would tell.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from tfperf.findings import PARALLEL_ARGUMENT
from tfperf.frameworks import StageNode
from tfperf.results import PhaseResult, StepRecord
from tfperf.results.stages import (
    EpochSource,
    RestartCost,
    RestartEvidence,
    StageKind,
    StageStat,
)

#: Fewer steps than this in an epoch leaves no steady part to measure: such an epoch is
#: all start-up, whatever one buffer holds.
SHORT_EPOCH_STEPS = 3
#: An epoch whose early steps (after the restart step) still wait this many times as long as
#: its late steps never settled: the pipeline ramps up through the whole epoch, rather than
#: refilling one buffer at the restart and running steadily after it.
RAMP_FACTOR = 2.0
#: ... and by over this share of a mean step: two waits near zero (microseconds apart) differ
#: by any factor, and that is noise, not a ramp.
RAMP_MIN_SHARE = 0.1

#: Restarts needed to state what one costs: from one or two, a single stall (a busy machine,
#: a garbage collection) is the figure, and two unlike samples have no middle.
MIN_RESTART_SAMPLES = 3
#: Restart waits whose middle half (first to third quartile) spans more than their median
#: share no one cost: the median of 0.004, 0.006, 0.015, 1.8 and 4.7 s stands for none of
#: them, nor does that of restarts alternating 74 ms and 863 ms. The middle half, not the
#: range: one stall among twenty restarts changes nothing.
SPREAD_RATIO = 1.0
#: A restart wait over this many times the longest restart of the pipeline run alone was not
#: the pipeline filling again (the same pipeline never took that long alone); a model
#: competing for the CPU slows a refill by far less.
ALONE_RATIO = 5.0
#: A stage's own delay to its first element under this is within what scheduling on a busy
#: machine adds to one fresh start: it names no stage.
FIRST_ELEMENT_NOISE_S = 0.005
#: Share of a restart's wait (the median of its waits, a fresh start's whole delay as the
#: first-element times are) the named stage's own delay must explain: a stage adding a tenth
#: of the wait is not what the restart waits for.
EXPLAINS_SHARE = 0.25

#: A stage every restart repeats by construction (a loader's workers started again, which its
#: first batch measures): named whatever the restart count, since it is a fact of the loader's
#: settings, not read off the restarts' waits; their cost still needs the evidence.
_REPEATED_BY_CONSTRUCTION = frozenset({StageKind.WORKERS})

#: Kinds that pass elements on without making them: never the stage a restart waits for.
_PASSES_ON = frozenset({StageKind.PREFETCH, StageKind.REPEAT, StageKind.TAKE, StageKind.SKIP})


@dataclasses.dataclass(frozen=True)
class EpochInfo:
    """What the profile knows about a real epoch, from outside the measured steps.

    Attributes:
        steps: batches in one real epoch; None when unknown (then one pass of the profile counts).
        source: where `steps` came from.
        stage: label of the stage whose warm-up a restart repeats, e.g. `shuffle(10000)`.
        stage_kind: that stage's kind.
    """

    steps: int | None = None
    source: EpochSource = EpochSource.GIVEN
    stage: str | None = None
    stage_kind: StageKind | None = None

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"`epoch steps >= 1` must hold, but got steps={self.steps}")


def restart_indices(records: Sequence[StepRecord]) -> list[int]:
    """Indices of the measured steps that are the first after the dataset restarted."""
    return [
        index
        for index in range(1, len(records))
        if records[index].epoch != records[index - 1].epoch and not records[index].warmup
    ]


def observed_epoch_steps(records: Sequence[StepRecord]) -> int | None:
    """Steps of the first complete epoch in `records`; None when no epoch was completed."""
    if not records or records[-1].epoch == records[0].epoch:
        return None
    first = records[0].epoch
    return sum(1 for record in records if record.epoch == first)


def restart_cost(
    phase: PhaseResult, epoch: EpochInfo | None = None, alone: PhaseResult | None = None
) -> RestartCost | None:
    """What the restarts in `phase` cost, and the wait share with one restart per real epoch.

    Args:
        phase: the end-to-end phase.
        epoch: a real epoch's length and what a restart repeats; None: one observed pass.
        alone: the pipeline-only phase, whose own restarts say what the pipeline takes to
            restart; a restart wait far beyond them is set apart (`ALONE_RATIO`).

    Where every measured step was the first of a pass (a loop that starts the data again
    for each batch), no step waited between restarts: the steady wait is 0.

    Returns None when no measured step followed a restart.
    """
    epoch = epoch or EpochInfo()
    records = phase.records
    firsts = set(restart_indices(records))
    measured = [i for i, record in enumerate(records) if not record.warmup]
    steady = [records[i] for i in measured if i not in firsts]
    if not firsts:
        return None
    waits = [records[i].wait_s for i in sorted(firsts)]
    steady_wait = math.fsum(r.wait_s for r in steady) / len(steady) if steady else 0.0
    compute = math.fsum(records[i].compute_s for i in measured) / len(measured)
    between = steady or [records[i] for i in measured]
    step_s = steady_wait + math.fsum(r.compute_s for r in between) / len(between)
    own = _AloneRestarts.of(alone)
    kept, apart = own.set_apart(waits, step_s)
    evidence = _evidence(kept, step_s)
    per_restart = (
        max(0.0, statistics.median(kept) - steady_wait) if kept else own.seconds_per_restart or 0.0
    )
    steps, source = epoch.steps, epoch.source
    if steps is None:
        steps, source = observed_epoch_steps(records) or len(records), EpochSource.OBSERVED
    weighted_wait = steady_wait + per_restart / steps
    window_wait = math.fsum(records[i].wait_s for i in measured)
    examples_per_step = statistics.fmean(records[i].examples for i in measured)
    named = epoch.stage_kind in _REPEATED_BY_CONSTRUCTION
    return RestartCost(
        restarts=len(waits),
        seconds_per_restart=per_restart,
        stage=epoch.stage if named else None,
        stage_kind=epoch.stage_kind if named else None,
        steady_wait_s_per_step=steady_wait,
        steady_wait_fraction=_share(steady_wait, steady_wait + compute),
        weighted_wait_fraction=_share(weighted_wait, weighted_wait + compute),
        window_wait_share=_share(math.fsum(waits), window_wait),
        epoch_steps=steps,
        epoch_source=source,
        weighted_examples_per_sec=_share(examples_per_step, weighted_wait + compute),
        short_epoch=never_steady(records, observed_epoch_steps(records)),
        restart_waits_s=kept,
        set_apart_waits_s=apart,
        evidence=evidence,
        would_tell=_would_tell(evidence, kept),
        steady_steps=len(steady),
        pipeline_restarts=len(own.waits),
        pipeline_restart_waits_s=own.waits,
        pipeline_seconds_per_restart=own.seconds_per_restart,
    )


@dataclasses.dataclass(frozen=True)
class _AloneRestarts:
    """The restarts of the pipeline run alone (the pipeline-only phase)."""

    waits: list[float]
    seconds_per_restart: float | None

    @classmethod
    def of(cls, alone: PhaseResult | None) -> _AloneRestarts:
        if alone is None:
            return cls([], None)
        records = alone.records
        firsts = set(restart_indices(records))
        steady = [r.wait_s for i, r in enumerate(records) if not r.warmup and i not in firsts]
        waits = [records[i].wait_s for i in sorted(firsts)]
        if not waits:
            return cls([], None)
        steady_wait = statistics.fmean(steady) if steady else 0.0
        return cls(waits, max(0.0, statistics.median(waits) - steady_wait))

    def set_apart(self, waits: list[float], step_s: float) -> tuple[list[float], list[float]]:
        """(`waits` kept, `waits` set apart): apart, those far beyond every restart alone.

        Only with `MIN_RESTART_SAMPLES` restarts alone to compare with, and only a wait over
        `ALONE_RATIO` times their longest and over a step longer than it.
        """
        if len(self.waits) < MIN_RESTART_SAMPLES:
            return list(waits), []
        bound = max(self.waits)
        beyond = [w > ALONE_RATIO * bound and w - bound > step_s for w in waits]
        kept = [w for w, out in zip(waits, beyond, strict=True) if not out]
        return kept, [w for w, out in zip(waits, beyond, strict=True) if out]


def _evidence(waits: Sequence[float], step_s: float) -> RestartEvidence:
    """Whether `waits` (the restart waits kept) state one cost: enough, sharing one cost."""
    if len(waits) < MIN_RESTART_SAMPLES:
        return RestartEvidence.FEW_RESTARTS
    first, _, third = statistics.quantiles(waits, n=4, method="inclusive")
    spread = third - first
    if spread > SPREAD_RATIO * statistics.median(waits) and spread > step_s:
        return RestartEvidence.WIDE_SPREAD
    return RestartEvidence.ENOUGH


def _would_tell(evidence: RestartEvidence, waits: Sequence[float]) -> str | None:
    """What would settle a restart cost the evidence cannot tell; None when it can."""
    if evidence is RestartEvidence.FEW_RESTARTS:
        counted = f"{len(waits)} restart{'s' * (len(waits) != 1)}"
        return (
            f"cannot tell what a restart costs from {counted}: profile with more --steps, so "
            f"the window crosses at least {MIN_RESTART_SAMPLES} restarts, and with "
            "--epoch-steps set to the real epoch's length"
        )
    if evidence is RestartEvidence.WIDE_SPREAD:
        return (
            f"cannot tell what a restart costs: its {len(waits)} restarts waited from "
            f"{min(waits):.3g} s to {max(waits):.3g} s; profile again on a quieter machine, "
            "with more --steps and --epoch-steps set to the real epoch's length"
        )
    return None


def never_steady(records: Sequence[StepRecord], epoch_steps: int | None) -> bool:
    """Whether an epoch of `epoch_steps` steps is too short to reach a steady state.

    True when it has fewer than `SHORT_EPOCH_STEPS` steps, or when the measured steps of its
    first half (the restart step left out) wait over `RAMP_FACTOR` times as long as those of
    its second half, and by over `RAMP_MIN_SHARE` of a mean step: the wait falls through the
    whole epoch instead of settling.
    """
    if epoch_steps is None:
        return False
    if epoch_steps < SHORT_EPOCH_STEPS:
        return True
    early: list[float] = []
    late: list[float] = []
    steps: list[float] = []
    position = -1
    for index, record in enumerate(records):
        position = 0 if index and record.epoch != records[index - 1].epoch else position + 1
        if record.warmup or position == 0:  # a restart's own wait is measured apart
            continue
        (early if position <= epoch_steps // 2 else late).append(record.wait_s)
        steps.append(record.step_s)
    if not early or not late:
        return False
    early_s, late_s = statistics.fmean(early), statistics.fmean(late)
    return early_s > RAMP_FACTOR * late_s and early_s - late_s > RAMP_MIN_SHARE * (
        statistics.fmean(steps)
    )


def attribute(cost: RestartCost, stages: Sequence[StageStat]) -> RestartCost:
    """`cost` with its stage measured: the stage whose own share of the time to the first
    element after a fresh start is largest (see the module docstring).

    A batch of B waits for B elements of the stage below: B - 1 of them at that stage's
    steady rate, which is that stage's share, not the batch's. A stage is a candidate only
    when its own share is measured (it and the stage below it have a first element), above
    `FIRST_ELEMENT_NOISE_S` and at least `EXPLAINS_SHARE` of a restart's wait, and it runs
    at a restart: stages a `cache()` above them serves from the second epoch on do not, and
    stages that only pass elements on (`prefetch`, `repeat`, `take`, `skip`) add only noise.
    `cost` comes back unchanged when its evidence is not enough (it names no stage then) or no
    stage is a candidate.
    """
    if not cost.evidence_enough or not cost.restart_waits_s:
        return cost
    own = own_first_element_s(stages)
    skipped = {s.index for s in stages if s.kind in _PASSES_ON} | cached_before(stages)
    wait = statistics.median(cost.restart_waits_s)
    floor = max(FIRST_ELEMENT_NOISE_S, EXPLAINS_SHARE * wait)
    candidates = [i for i in own if i not in skipped and own[i] > floor]
    if not candidates:
        return cost
    index = max(candidates, key=lambda i: own[i])
    late = next(stage for stage in stages if stage.index == index)
    return dataclasses.replace(
        cost,
        stage=late.label,
        stage_kind=late.kind,
        measured=True,
        stage_own_s=own[index],
        stage_sequential=_sequential(late),
    )


def own_first_element_s(stages: Sequence[StageStat]) -> dict[int, float]:
    """Each stage's own seconds of the time to a first element after a fresh start, by index.

    Only for stages measured right after a measured stage (or the source): across a stage
    without a first element, the difference holds that stage's share too, so it is no one's.
    The time a batch waits gathering its other elements goes to the stage that sets their
    pace (`_pacer`), not to a cheap map that happens to sit right below the batch.
    """
    own: dict[int, float] = {}
    below: StageStat | None = None
    reached, gap = 0.0, False
    for stage in stages:
        if stage.first_element_s is None:
            gap = True
            continue
        carried = _gathered_s(stage, below)
        if not gap:
            own[stage.index] = stage.first_element_s - reached - carried
            pacer = _pacer([s for s in stages if s.index < stage.index and s.index in own])
            if pacer is not None:
                own[pacer.index] += carried
        reached, below, gap = stage.first_element_s, stage, False
    return own


def _pacer(below: Sequence[StageStat]) -> StageStat | None:
    """Of `below` (source first), the stage that adds the most time per element to the cut
    before it: the one whose rate the stages above it inherit. The earlier on a tie."""
    paced: StageStat | None = None
    most, before = -math.inf, 0.0
    for stage in below:
        rate = stage.elements_per_sec
        if not rate:
            continue
        if 1 / rate - before > most:
            paced, most = stage, 1 / rate - before
        before = 1 / rate
    return paced


def cached_before(stages: Sequence[StageStat]) -> set[int]:
    """Indices of the stages below the last `cache()`: from the second epoch on, the cache
    serves their elements and they do not run, at a restart or between."""
    caches = [stage.index for stage in stages if stage.kind is StageKind.CACHE]
    if not caches:
        return set()
    return {stage.index for stage in stages if stage.index < max(caches)}


def _gathered_s(stage: StageStat, below: StageStat | None) -> float:
    size = stage.parameters.get("batch_size")
    rate = below.elements_per_sec if below is not None else None
    if stage.kind is not StageKind.BATCH or not isinstance(size, int) or not rate:
        return 0.0
    return (size - 1) / rate


def _sequential(stage: StageStat) -> bool:
    """A map or read written without parallelism (absent or 1), so one thread runs it."""
    argument = PARALLEL_ARGUMENT.get(stage.kind)
    if argument is None or stage.kind is StageKind.BATCH:
        return False
    value = stage.parameters.get(argument)
    return value is None or value in (0, 1)


def verdict_wait(end_to_end: PhaseResult, cost: RestartCost | None) -> float:
    """The wait share the verdict follows: weighed by the real epoch where the dataset
    restarted and the restarts say what one costs; the wait between restarts where they do
    not (their cost is unknown, and the restart finding says so); else the phase's own."""
    if cost is None:
        return end_to_end.input_wait_fraction
    if cost.evidence in (RestartEvidence.FEW_RESTARTS, RestartEvidence.WIDE_SPREAD):
        return cost.steady_wait_fraction
    return cost.weighted_wait_fraction


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def restart_stage(stages: Sequence[StageNode]) -> tuple[str, StageKind] | None:
    """The stage whose warm-up a restart repeats: the largest shuffle buffer, else a cache
    re-read, else the first parallel map or interleave; None when none is in the pipeline."""
    shuffles = [s for s in stages if s.kind is StageKind.SHUFFLE]
    if shuffles:
        largest = max(shuffles, key=lambda s: int(s.parameters.get("buffer_size", 0)))
        return largest.label, largest.kind
    for kinds in ({StageKind.CACHE}, {StageKind.MAP, StageKind.INTERLEAVE, StageKind.READ}):
        found = next((s for s in stages if s.kind in kinds), None)
        if found is not None:
            return found.label, found.kind
    return None
