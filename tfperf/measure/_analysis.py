"""Pure functions that turn step records into figures, a verdict and advice.

No clock, no TensorFlow: everything here is computed from plain records, so tests assert exact
numbers. The verdict thresholds are those of TensorBoard's input-pipeline analyser, so the two
tools agree on the same run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tfperf.results import (
    Phase,
    PhaseResult,
    StageKind,
    StageReport,
    StageStat,
    StepRecord,
    StepTimeStats,
    Verdict,
    Warmup,
)

#: Wait share of step time at or above which input is the main problem (TensorBoard: 20%).
HIGHLY_INPUT_BOUND_AT = 0.20
#: Wait share at or above which input costs noticeable time (TensorBoard: 5%).
MODERATELY_INPUT_BOUND_AT = 0.05


@dataclasses.dataclass(frozen=True)
class WarmupRule:
    """When step times count as settled, for automatic warm-up detection.

    Warm-up ends at the first step where the median step time of the last `window` steps is
    within `tolerance` (relative) of the median of the `window` steps before them, and never
    before `min_steps` steps (the first ones include tracing). After `max_steps` the warm-up
    ends anyway and is reported as not converged.
    """

    window: int = 5
    tolerance: float = 0.15
    min_steps: int = 3
    max_steps: int = 100

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_steps < 1 or self.max_steps < self.min_steps:
            raise ValueError(
                "`window >= 1`, `min_steps >= 1` and `max_steps >= min_steps` must hold, but got "
                f"(window={self.window}, min_steps={self.min_steps}, max_steps={self.max_steps})"
            )


def detect_warmup_end(step_times: Sequence[float], rule: WarmupRule) -> tuple[int, bool] | None:
    """Where warm-up ends in `step_times`, or None if it cannot be decided yet.

    Returns:
        `(n, converged)`: the first `n` steps are warm-up; `converged` is False when the rule's
        `max_steps` cut the warm-up short before step times settled.
    """
    last = min(len(step_times), rule.max_steps)
    first_candidate = max(rule.min_steps, 2 * rule.window)
    for end in range(first_candidate, last + 1):
        recent = statistics.median(step_times[end - rule.window : end])
        before = statistics.median(step_times[end - 2 * rule.window : end - rule.window])
        if abs(recent - before) <= rule.tolerance * before:
            # The earlier window may still hold slow steps (its median hides them): measure
            # from the recent window on, which is steady throughout.
            return max(rule.min_steps, end - rule.window), True
    if len(step_times) >= rule.max_steps:
        return rule.max_steps, False
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) with linear interpolation, as numpy's default."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def step_time_stats(step_times: Sequence[float]) -> StepTimeStats:
    return StepTimeStats(
        mean_s=statistics.fmean(step_times),
        p50_s=percentile(step_times, 50),
        p90_s=percentile(step_times, 90),
        p99_s=percentile(step_times, 99),
        min_s=min(step_times),
        max_s=max(step_times),
    )


def summarise_phase(
    phase: Phase,
    records: Sequence[StepRecord],
    time_to_first_batch_s: float,
    warmup_converged: bool,
    epochs_crossed: int,
) -> PhaseResult:
    """Steady-state figures over the records not flagged as warm-up.

    Raises:
        ValueError: no measured (non-warm-up) step.
    """
    warm = [r for r in records if r.warmup]
    measured = [r for r in records if not r.warmup]
    if not measured:
        raise ValueError(
            f"phase {phase.value} has no measured step after {len(warm)} warm-up steps"
        )
    wait = math.fsum(r.wait_s for r in measured)
    compute = math.fsum(r.compute_s for r in measured)
    # The window runs from the first measured step's request to the last step's end.
    duration = measured[-1].start_s + measured[-1].step_s - measured[0].start_s
    examples = sum(r.examples for r in measured)
    return PhaseResult(
        phase=phase,
        steps=len(measured),
        examples=examples,
        duration_s=duration,
        examples_per_sec=_rate(examples, duration),
        steps_per_sec=_rate(len(measured), duration),
        wait_s=wait,
        compute_s=compute,
        input_wait_fraction=wait_fraction(wait, compute),
        step_time=step_time_stats([r.step_s for r in measured]),
        warmup=Warmup(
            time_to_first_batch_s=time_to_first_batch_s,
            steps=len(warm),
            duration_s=math.fsum(r.step_s for r in warm),
            converged=warmup_converged,
        ),
        epochs_crossed=epochs_crossed,
        records=list(records),
    )


def wait_fraction(wait_s: float, compute_s: float) -> float:
    """`wait / (wait + compute)`; 0 when no time was recorded at all."""
    total = wait_s + compute_s
    return wait_s / total if total > 0 else 0.0


def classify(input_wait_fraction: float) -> Verdict:
    """The verdict for a wait share, on TensorBoard's scale (20% and 5%)."""
    if input_wait_fraction >= HIGHLY_INPUT_BOUND_AT:
        return Verdict.HIGHLY_INPUT_BOUND
    if input_wait_fraction >= MODERATELY_INPUT_BOUND_AT:
        return Verdict.MODERATELY_INPUT_BOUND
    return Verdict.COMPUTE_BOUND


def speedup_if_input_free(
    end_to_end: PhaseResult, compute_only: PhaseResult | None
) -> float | None:
    """How many times faster training would run if input cost nothing (compute-only ceiling)."""
    if compute_only is None or end_to_end.examples_per_sec <= 0:
        return None
    return compute_only.examples_per_sec / end_to_end.examples_per_sec


#: Compute slowdown above which input work is said to compete with training for the CPU.
CONTENTION_AT = 1.25


def compute_slowdown(end_to_end: PhaseResult, compute_only: PhaseResult | None) -> float | None:
    """How many times longer a step computes end to end than on a cached batch.

    Well above 1, the input pipeline's threads compete with training for CPU cores or memory
    bandwidth: time the wait fraction alone does not show.
    """
    if compute_only is None or compute_only.compute_s <= 0 or end_to_end.steps == 0:
        return None
    per_step = end_to_end.compute_s / end_to_end.steps
    return per_step / (compute_only.compute_s / compute_only.steps)


def advise(
    verdict: Verdict,
    end_to_end: PhaseResult,
    pipeline_only: PhaseResult | None,
    compute_only: PhaseResult | None,
    knobs: Mapping[str, Any],
) -> str:
    """One or two sentences of advice that follow from the measured numbers."""
    return _main_advice(verdict, end_to_end, pipeline_only, compute_only, knobs) + _contention(
        end_to_end, compute_only
    )


def _main_advice(
    verdict: Verdict,
    end_to_end: PhaseResult,
    pipeline_only: PhaseResult | None,
    compute_only: PhaseResult | None,
    knobs: Mapping[str, Any],
) -> str:
    wait_pct = f"{end_to_end.input_wait_fraction:.0%}"
    if verdict is Verdict.COMPUTE_BOUND:
        return (
            f"Input is not the bottleneck (steps wait {wait_pct} of the time): speed now comes "
            "from the model side, e.g. a larger batch_size or mixed precision."
        )
    hint = _knob_hint(knobs)
    if pipeline_only is None or compute_only is None:
        return f"Steps wait for input {wait_pct} of the time: make the input pipeline faster.{hint}"
    supply, demand = pipeline_only.examples_per_sec, compute_only.examples_per_sec
    if supply < demand:
        return (
            f"The pipeline alone delivers {supply:,.0f} examples/s but the model could consume "
            f"{demand:,.0f}: speed up the input (parallel map and reads, prefetch, caching "
            f"decoded data); `tfperf tune` searches these knobs.{hint}"
        )
    return (
        f"The pipeline alone keeps up ({supply:,.0f} vs {demand:,.0f} examples/s needed) yet "
        f"steps wait {wait_pct} of the time: input and training are not overlapping or compete "
        f"for the same CPU cores; add prefetch, or lower map parallelism.{hint}"
    )


def _contention(end_to_end: PhaseResult, compute_only: PhaseResult | None) -> str:
    slowdown = compute_slowdown(end_to_end, compute_only)
    if slowdown is None or slowdown < CONTENTION_AT:
        return ""
    return (
        f" Steps also compute {slowdown:.1f}x slower than on a cached batch: input work "
        "competes with training for the CPU, so cheaper input (cache decoded data, fewer "
        "threads) would speed up training too."
    )


def _knob_hint(knobs: Mapping[str, Any]) -> str:
    if knobs.get("prefetch") == 0:
        return " Start with prefetch: it is 0, so input never overlaps compute."
    if knobs.get("num_parallel_calls") == 1:
        return " Start with num_parallel_calls: it is 1, so the map runs on a single core."
    return ""


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


# Stages -----------------------------------------------------------------------------------

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


def stage_advice(report: StageReport) -> str:
    """What to change at the limiting stage, or that every stage keeps up; "" if none is named."""
    stage = report.bottleneck
    if stage is None or stage.added_s_per_example is None or stage.examples_per_sec is None:
        return ""
    added = f"{stage.added_s_per_example * 1000:.3g} ms"
    output = next(
        (s.examples_per_sec for s in reversed(report.stages) if s.examples_per_sec is not None),
        None,
    )
    consumption = report.consumption_examples_per_sec
    if consumption is not None and output is not None and output >= consumption:
        return (
            f"Every stage keeps up with the model ({output:,.0f} vs {consumption:,.0f} "
            f"examples/s); the costliest, {stage.label}, adds {added} per example."
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
        + stage_fix(stage)
    )


def stage_fix(stage: StageStat) -> str:
    """What usually speeds up a stage of this kind, given its arguments."""
    fixes = {
        StageKind.MAP: _map_fix,
        StageKind.READ: _read_fix,
        StageKind.INTERLEAVE: _interleave_fix,
        StageKind.SOURCE: _source_fix,
        StageKind.SHUFFLE: _shuffle_fix,
        StageKind.BATCH: _batch_fix,
    }
    if stage.kind in fixes:
        return fixes[stage.kind](stage)
    return _FIXES.get(stage.kind, _OTHER_FIX).format(**stage.parameters)


_CHEAPER_CALLS = (
    "make each call cheaper: vectorise it (batch first, then map over whole batches), "
    "cache() right after its expensive deterministic part (decoding, resizing) so only random "
    "augmentation runs every epoch, or do that part once offline and store the result."
)

_FIXES = {
    StageKind.FILTER: (
        "It drops examples after the work that produced them: filter as early as possible, "
        "before expensive maps, or drop those examples offline."
    ),
    StageKind.CACHE: (
        "Reading through the cache is slower than making its input: a cache is fast only once "
        "filled (after one full epoch); cache in memory (cache() without a file name) if the "
        "data fits, right after the expensive deterministic stages."
    ),
    StageKind.UNBATCH: (
        "Splitting batches into elements costs time per element: keep the data batched and "
        "map over whole batches."
    ),
    StageKind.SHARD: (
        "Sharding here reads everything and keeps 1 element in {num_shards}: shard the file "
        "names before reading, so each worker reads only its own files."
    ),
    StageKind.JOIN: (
        "It joins several inputs measured together: profile each input on its own to find the "
        "slow one."
    ),
}
_OTHER_FIX = (
    "Look at what this stage does per element; `tfperf tune` searches the parallelism knobs."
)


def _map_fix(stage: StageStat) -> str:
    calls = stage.parameters.get("num_parallel_calls")
    if calls is None or calls == 1:
        return (
            "Run it in parallel with `num_parallel_calls=tf.data.AUTOTUNE` (it makes one call "
            f"at a time now); if it still limits, {_CHEAPER_CALLS}"
        )
    if calls == -1:
        return f"It already runs in parallel (AUTOTUNE), so {_CHEAPER_CALLS}"
    return f"It runs {calls} calls at once: try AUTOTUNE, and {_CHEAPER_CALLS}"


def _read_fix(stage: StageStat) -> str:
    reads = stage.parameters.get("num_parallel_reads")
    if reads is None or reads == 1:
        return (
            "Read several files at once with `num_parallel_reads=tf.data.AUTOTUNE`, from at "
            "least as many files (shards) as cores."
        )
    return (
        f"It already reads {_shown(reads)} files at once: split the data into more, smaller "
        "shards, move it to faster storage, or cache() the records if they fit in memory."
    )


def _interleave_fix(stage: StageStat) -> str:
    calls = stage.parameters.get("num_parallel_calls")
    cycle = stage.parameters.get("cycle_length")
    if calls is None or calls == 1:
        return (
            "Read several inputs at once: raise cycle_length (now "
            f"{_shown(cycle) if cycle is not None else 'default'}) and set "
            "`num_parallel_calls=tf.data.AUTOTUNE`; with fewer files than cores, split the "
            "data into more shards."
        )
    return (
        f"It already reads {_shown(cycle) if cycle is not None else 'several'} inputs with "
        f"{_shown(calls)} parallel calls: more, smaller shards or faster storage help, or "
        "cache() the records if they fit in memory."
    )


def _source_fix(stage: StageStat) -> str:
    if stage.label.startswith("from_generator"):
        return (
            "A Python generator yields one element at a time and holds the GIL: move its work "
            "into TensorFlow ops (from_tensor_slices or a file reader, then a parallel map), or "
            "interleave several generators that each yield part of the data."
        )
    return (
        "The source itself is slow: store the data as files (TFRecord) read in parallel, or "
        "keep it in memory."
    )


def _shuffle_fix(stage: StageStat) -> str:
    size = stage.parameters.get("buffer_size")
    held = f"A buffer of {size:,} elements" if isinstance(size, int) else "A shuffle buffer"
    return (
        f"{held} costs time to fill and to copy through: use a smaller buffer_size and keep "
        "the order random by shuffling file names instead (list_files(shuffle=True) before "
        "the interleave)."
    )


def _batch_fix(stage: StageStat) -> str:
    if stage.parameters.get("num_parallel_calls") is None:
        return (
            "Batch in parallel with `batch(..., num_parallel_calls=tf.data.AUTOTUNE)`; smaller "
            "elements (crop, resize or cast before batching) also copy faster."
        )
    return (
        "Batching copies every element: make elements smaller before batching (crop, resize "
        "or cast earlier)."
    )


def _shown(value: int | bool | None) -> str:
    return "AUTOTUNE" if value == -1 else str(value)
