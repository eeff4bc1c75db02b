"""The cost of a finite dataset's restarts, measured apart and weighed by a real epoch.

A finite dataset restarts at every epoch end, and the first step after a restart waits while
the pipeline fills again: a shuffle buffer refilling, a parallel map ramping up, a cache being
re-read. A profile window of a few hundred stand-in records restarts far more often than
training on the real data does, so its raw wait share says more about the window than about
training. Here the restart steps are taken out (`StepRecord.epoch` says where the dataset
restarted), the steady wait is measured without them, and the restart cost is folded back in
once per *real* epoch. Pure functions on plain records: tests assert exact figures.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from tfperf.frameworks import StageNode
from tfperf.results import PhaseResult, StepRecord
from tfperf.results.stages import EpochSource, RestartCost, StageKind


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


def restart_cost(phase: PhaseResult, epoch: EpochInfo | None = None) -> RestartCost | None:
    """What the restarts in `phase` cost, and the wait share with one restart per real epoch.

    Returns None when no measured step followed a restart, or no other step was measured.
    """
    epoch = epoch or EpochInfo()
    records = phase.records
    firsts = set(restart_indices(records))
    measured = [i for i, record in enumerate(records) if not record.warmup]
    steady = [records[i] for i in measured if i not in firsts]
    if not firsts or not steady:
        return None
    restarts = [records[i] for i in sorted(firsts)]
    steady_wait = math.fsum(r.wait_s for r in steady) / len(steady)
    compute = math.fsum(records[i].compute_s for i in measured) / len(measured)
    per_restart = max(0.0, statistics.fmean(r.wait_s for r in restarts) - steady_wait)
    steps, source = epoch.steps, epoch.source
    if steps is None:
        steps, source = observed_epoch_steps(records) or len(records), EpochSource.OBSERVED
    weighted_wait = steady_wait + per_restart / steps
    window_wait = math.fsum(records[i].wait_s for i in measured)
    examples_per_step = statistics.fmean(records[i].examples for i in measured)
    return RestartCost(
        restarts=len(restarts),
        seconds_per_restart=per_restart,
        stage=epoch.stage,
        stage_kind=epoch.stage_kind,
        steady_wait_s_per_step=steady_wait,
        steady_wait_fraction=_share(steady_wait, steady_wait + compute),
        weighted_wait_fraction=_share(weighted_wait, weighted_wait + compute),
        window_wait_share=_share(math.fsum(r.wait_s for r in restarts), window_wait),
        epoch_steps=steps,
        epoch_source=source,
        weighted_examples_per_sec=_share(examples_per_step, weighted_wait + compute),
    )


def restart_dominates(cost: RestartCost) -> bool:
    """Whether restarts cost more wait per real epoch than the steady steps do."""
    return cost.seconds_per_restart / cost.epoch_steps > cost.steady_wait_s_per_step


def restart_advice(cost: RestartCost) -> str:
    """Advice when the wait is mostly restarts: what refills, and how to avoid restarting."""
    share = f"{cost.weighted_wait_fraction:.0%}"
    what = _what_refills(cost)
    return (
        f"Steps wait for input {share} of the time over a real epoch of {cost.epoch_steps:,} "
        f"steps ({_source(cost)}), almost all of it at restarts: each restart of the dataset "
        f"costs {cost.seconds_per_restart:.3g} s while {what}; between restarts steps wait "
        f"{cost.steady_wait_fraction:.0%} of the time. {_restart_fix(cost)} Prefetch does not "
        "help here: the stall is the pipeline filling again, not input failing to overlap."
    )


def restart_note(cost: RestartCost) -> str:
    """One sentence on restarts that do not dominate the wait: their cost, and their weight."""
    where = f" while {cost.stage} fills again" if cost.stage else ""
    return (
        f" The dataset restarted {cost.restarts} time{'s' * (cost.restarts != 1)} in this "
        f"window ({cost.seconds_per_restart:.3g} s each{where}, "
        f"{cost.window_wait_share:.0%} of the window's wait); over a real epoch of "
        f"{cost.epoch_steps:,} steps ({_source(cost)}) "
        "that weighs little, and the figures above count it once per epoch."
    )


def _what_refills(cost: RestartCost) -> str:
    if cost.stage_kind is StageKind.WORKERS:
        return "the loader's worker processes start again"
    if cost.stage is None:
        return "the pipeline fills again"
    if cost.stage_kind is StageKind.SHUFFLE:
        return f"{cost.stage} refills its buffer"
    if cost.stage_kind is StageKind.CACHE:
        return f"{cost.stage} is read again from the start"
    return f"{cost.stage} ramps up again"


_REPEAT = (
    "Call repeat() on the dataset and pass steps_per_epoch to fit, so the pipeline never "
    "restarts and stays warm across epochs"
)


def _restart_fix(cost: RestartCost) -> str:
    if cost.stage_kind is StageKind.WORKERS:
        return (
            "Pass persistent_workers=True to the DataLoader, so its workers outlive each "
            "epoch instead of starting again (and re-importing what they load) at every one."
        )
    if cost.stage_kind is StageKind.SHUFFLE:
        return (
            f"{_REPEAT} (repeat() before shuffle() keeps the buffer full across epochs); or "
            "use a smaller shuffle buffer and keep the order random by shuffling file names "
            "(list_files(shuffle=True))."
        )
    if cost.stage_kind is StageKind.CACHE:
        return (
            f"{_REPEAT}; place cache() in memory after the expensive deterministic stages and "
            "before shuffle, so a restart re-reads decoded data only."
        )
    return f"{_REPEAT}; cache() after the expensive stages also shortens each restart."


def _source(cost: RestartCost) -> str:
    return {
        EpochSource.CARDINALITY: "the dataset's cardinality",
        EpochSource.GIVEN: "--epoch-steps",
        EpochSource.OBSERVED: "one pass of the profiled data; give --epoch-steps for the real one",
    }[cost.epoch_source]


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
