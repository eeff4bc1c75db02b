"""Which stage limits an input pipeline, and what usually speeds a stage of its kind up.

Pure functions on measured `StageStat`s (the pipeline cut after each stage and run alone):
what each stage adds per example, the costliest stage, the first that falls short of the
model's consumption. No clock, no TensorFlow: tests assert exact figures. What to change at
the limiting stage is a finding (`tfperf.findings`), made once the whole profile is known.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfperf.results import RATE_NOISE
from tfperf.results.stages import StageKind, StageReport, StageStat

#: Stages that pass elements on without per-example work: any time they seem to add is noise
#: (or overlap), so they are never named as the limiting stage.
NO_WORK_KINDS = frozenset({StageKind.PREFETCH, StageKind.REPEAT, StageKind.TAKE, StageKind.SKIP})


def with_added_costs(stages: Sequence[StageStat]) -> list[StageStat]:
    """Copies of `stages` with what each adds per example to the stage before it.

    A stage's rate is that of the pipeline cut after it, so `1 / examples_per_sec` is the time
    per example of everything up to it; the difference from the previous stage measured in
    examples is what this stage adds (the whole time for the first such stage). The same
    holds for CPU seconds per example.
    """
    result = []
    time_before = cpu_before = 0.0
    for stage in stages:
        rate, cpu = stage.examples_per_sec, stage.cpu_s_per_example
        if rate is None or rate <= 0:
            result.append(
                dataclasses.replace(stage, added_s_per_example=None, added_cpu_s_per_example=None)
            )
            continue
        added_cpu = None if cpu is None else cpu - cpu_before
        result.append(
            dataclasses.replace(
                stage, added_s_per_example=1 / rate - time_before, added_cpu_s_per_example=added_cpu
            )
        )
        time_before, cpu_before = 1 / rate, cpu if cpu is not None else cpu_before
    return result


def find_bottleneck(stages: Sequence[StageStat]) -> int | None:
    """Index of the stage that adds the most time per example; None if none adds a
    measurable share.

    Stages without an added time (not counted in examples, or not measured) and stages that do
    no per-example work (`NO_WORK_KINDS`) are not candidates; a tie goes to the earlier stage.
    A stage adding no more than `RATE_NOISE` of the time per example of the pipeline cut after
    it adds nothing two windows of one cut could tell apart (stages after a `cache()` that
    only pass elements on), so none is named then.
    """
    candidates = [
        stage
        for stage in stages
        if stage.added_s_per_example is not None and stage.kind not in NO_WORK_KINDS
    ]
    if not candidates:
        return None
    worst = max(candidates, key=lambda stage: stage.added_s_per_example or 0.0)
    added, rate = worst.added_s_per_example or 0.0, worst.examples_per_sec or 0.0
    return worst.index if added * rate > RATE_NOISE else None


def falls_short(stages: Sequence[StageStat], consumption: float | None) -> int | None:
    """Index of the first stage whose cut pipeline delivers fewer examples/s than `consumption`."""
    if consumption is None:
        return None
    for stage in stages:
        if stage.examples_per_sec is not None and stage.examples_per_sec < consumption:
            return stage.index
    return None


def stage_report(
    stages: Sequence[StageStat],
    consumption: float | None,
    *,
    seconds_per_stage: float,
    warmup_s: float,
    duration_s: float,
    note: str | None,
) -> StageReport:
    """The report on measured stages (added costs already set): bottleneck and shortfall."""
    return StageReport(
        stages=list(stages),
        bottleneck_index=find_bottleneck(stages),
        falls_short_index=falls_short(stages, consumption),
        consumption_examples_per_sec=consumption,
        seconds_per_stage=seconds_per_stage,
        warmup_s=warmup_s,
        duration_s=duration_s,
        note=note,
        advice="",  # the limiting-stage finding's sentence (`tfperf.findings.conclude`)
    )
