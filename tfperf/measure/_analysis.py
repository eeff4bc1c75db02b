"""Pure functions that turn step records into figures, a verdict and advice.

(Which stage limits the pipeline is `_bottleneck`'s.)

No clock, no TensorFlow: everything here is computed from plain records, so tests assert exact
numbers. The verdict thresholds are those of TensorBoard's input-pipeline analyser, so the two
tools agree on the same run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from tfperf import findings
from tfperf.measure import _restarts as restarts

# The verdict's scale is the result's (`Verdict.of`); its lower bound serves the scaling runs.
from tfperf.results import MODERATELY_INPUT_BOUND_AT as MODERATELY_INPUT_BOUND_AT
from tfperf.results import (
    Phase,
    PhaseResult,
    ProfileResult,
    StepRecord,
    StepTimeStats,
    Verdict,
    Warmup,
)
from tfperf.results.stages import RestartCost


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
    return Verdict.of(input_wait_fraction)


def speedup_if_input_free(
    end_to_end: PhaseResult, compute_only: PhaseResult | None, restart: RestartCost | None = None
) -> float | None:
    """How many times faster training would run if input cost nothing (compute-only ceiling).

    Per example; with `restart`, end to end is the rate with one restart per real epoch.
    """
    rate = end_to_end.examples_per_sec if restart is None else restart.weighted_examples_per_sec
    ceiling = compute_ceiling(end_to_end, compute_only)
    if ceiling is None or rate <= 0:
        return None
    return ceiling / rate


def compute_ceiling(end_to_end: PhaseResult, compute_only: PhaseResult | None) -> float | None:
    """Examples/s the model reaches when input costs nothing; None without a compute-only phase.

    The compute-only replay's rate, but never below the rate at which the same batches
    computed end to end (examples over compute time, the wait left out): free input cannot make
    the model slower than it already ran beside the pipeline. A replay slower than that was
    disturbed (a busier machine, a short window's outliers), and taken as it is it would make
    the figures contradict each other: a high wait share next to "input costs nothing".
    """
    if compute_only is None:
        return None
    if end_to_end.compute_s <= 0 or end_to_end.examples <= 0:
        return compute_only.examples_per_sec
    return max(compute_only.examples_per_sec, end_to_end.examples / end_to_end.compute_s)


#: Compute slowdown above which input work is said to compete with training (the findings').
CONTENTION_AT = findings.CONTENTION_AT


def compute_slowdown(end_to_end: PhaseResult, compute_only: PhaseResult | None) -> float | None:
    """How many times longer an example computes end to end than on replayed cached batches.

    Per example, not per step, so batches of varying size compare like with like. Well above
    1, the input pipeline's threads compete with training for CPU cores or memory bandwidth:
    time the wait fraction alone does not show.
    """
    if compute_only is None or compute_only.compute_s <= 0 or compute_only.examples <= 0:
        return None
    if end_to_end.examples <= 0:
        return None
    per_example = end_to_end.compute_s / end_to_end.examples
    return per_example / (compute_only.compute_s / compute_only.examples)


def attribute_restarts(result: ProfileResult) -> ProfileResult:
    """`result` with its restarts attributed to the stage measured late after a fresh start
    (its stage analysis's first-element times), its verdict anew and its findings made again.

    Unchanged when it has no restarts or no stage analysis.
    """
    if result.restarts is None or result.stages is None:
        return result
    cost = restarts.attribute(result.restarts, result.stages.stages)
    wait = restarts.verdict_wait(result.end_to_end, cost)
    attributed = dataclasses.replace(
        result, restarts=cost, verdict=classify(wait), input_wait_fraction=wait
    )
    return findings.conclude(attributed)


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0
