"""Which stage limits an input pipeline, and what usually speeds a stage of its kind up.

Pure functions on measured `StageStat`s (the pipeline cut after each stage and run alone):
what each stage adds per example, the costliest stage, the first that falls short of the
model's consumption, and advice in words. No clock, no TensorFlow: tests assert exact figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfperf import findings
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
    """Index of the stage that adds the most time per example; None if none adds any.

    Stages without an added time (not counted in examples, or not measured) and stages that do
    no per-example work (`NO_WORK_KINDS`) are not candidates; a tie goes to the earlier stage.
    """
    candidates = [
        stage
        for stage in stages
        if stage.added_s_per_example is not None and stage.kind not in NO_WORK_KINDS
    ]
    if not candidates:
        return None
    worst = max(candidates, key=lambda stage: stage.added_s_per_example or 0.0)
    return worst.index if (worst.added_s_per_example or 0.0) > 0 else None


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
    """The report on measured stages (added costs already set): bottleneck, shortfall, advice."""
    report = StageReport(
        stages=list(stages),
        bottleneck_index=find_bottleneck(stages),
        falls_short_index=falls_short(stages, consumption),
        consumption_examples_per_sec=consumption,
        seconds_per_stage=seconds_per_stage,
        warmup_s=warmup_s,
        duration_s=duration_s,
        note=note,
        advice="",
    )
    report.advice = stage_advice(report)
    return report


#: A last cut this much below the pipeline-only phase was disturbed (the findings' rule).
DISTURBED_SHARE = findings.STAGES_DISTURBED_SHARE


def checked_against(report: StageReport, pipeline_only: float | None) -> StageReport:
    """`report`, saying so where its last cut ran slower than the pipeline-only phase beyond
    `DISTURBED_SHARE`: the same pipeline measured twice, so its figures were disturbed and the
    stage it names limiting may be noise (tfperf cannot tell)."""
    output = next(
        (s.examples_per_sec for s in reversed(report.stages) if s.examples_per_sec is not None),
        None,
    )
    if output is None or not pipeline_only or output >= (1 - DISTURBED_SHARE) * pipeline_only:
        return report
    note = (
        f"the last cut ran {output:,.0f} examples/s, {1 - output / pipeline_only:.0%} below the "
        f"pipeline-only phase's {pipeline_only:,.0f} for the same pipeline: the stage figures "
        "were disturbed (a busier machine), so tfperf cannot tell which stage limits; profile "
        "again on a quieter machine"
    )
    advice = f"The stage figures were disturbed ({note.split(':', 1)[0]}); read them with care. "
    return dataclasses.replace(
        report,
        note=f"{report.note}; {note}" if report.note else note,
        advice=advice + report.advice if report.advice else "",
    )


def stage_advice(report: StageReport) -> str:
    """What to change at the limiting stage, or that the pipeline keeps up; "" if none is named."""
    stage = report.bottleneck
    if stage is None or stage.added_s_per_example is None or stage.examples_per_sec is None:
        return ""
    added = f"{stage.added_s_per_example * 1000:.3g} ms"
    output = next(
        (s.examples_per_sec for s in reversed(report.stages) if s.examples_per_sec is not None),
        None,
    )
    consumption = report.consumption_examples_per_sec
    if report.keeps_up and consumption is not None and output is not None:
        # No stage is named limiting here, so this never sits beside a limiting stage; a wait
        # end to end then has a cause no single stage explains, and the sentence says which.
        return (
            f"Run alone, the pipeline delivers what the model consumes ({output:,.0f} vs "
            f"{consumption:,.0f} examples/s), so no single stage limits it; any wait for input "
            "end to end comes from running beside the model (the two share the cores) or from "
            f"restarts. The costliest stage, {stage.label}, adds {added} per example."
        )
    before = next(
        (
            s.examples_per_sec
            for s in reversed(report.stages[: stage.index])
            if s.examples_per_sec is not None
        ),
        None,
    )
    rates = f"{stage.examples_per_sec:,.0f} examples/s after it"
    if before is not None:
        rates = f"{before:,.0f} examples/s before it, {rates}"
    return (
        f"The limiting stage is {stage.label}: it adds {added} per example ({rates}). "
        + findings.stage_fix(stage, findings.PipelineFacts.from_parts(report.stages))
    )
