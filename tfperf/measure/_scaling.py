"""The scaling curve from profiles at 1, 2, 4, ... replicas: pure functions, no TensorFlow.

Each replica count is profiled in a process of its own (see `tfperf.cli._scaling`); here the
profiles become `ScalingPoint`s and the points a `ScalingCurve` whose answer is computed once,
in data: the largest count the input keeps up with, and the wait one count further. "Keeps up"
is tfperf's compute-bound verdict (wait share under 5%, TensorBoard's scale), so the curve and
the profile's own verdict never disagree on the same figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfperf.measure._analysis import MODERATELY_INPUT_BOUND_AT, classify
from tfperf.results import PhaseResult, ProfileResult, Verdict
from tfperf.results.scaling import (
    BatchScaling,
    ReplicaDevice,
    ScalingCurve,
    ScalingFailure,
    ScalingPoint,
)


def replica_counts(limit: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to `limit`, and `limit` itself when it is not a power of two.

    >>> replica_counts(6)
    (1, 2, 4, 6)
    """
    if limit < 1:
        raise ValueError(f"`limit >= 1` must hold, but got {limit}")
    counts = [1]
    while counts[-1] * 2 <= limit:
        counts.append(counts[-1] * 2)
    if counts[-1] != limit:
        counts.append(limit)
    return tuple(counts)


def scaling_point(replicas: int, result: ProfileResult, replicas_in_step: int) -> ScalingPoint:
    """The figures of one replica count, from the profile measured with that many devices.

    `replicas_in_step` is how many replicas the child's step really ran across (1 when it was
    not distributed).
    """
    e2e = result.end_to_end
    return ScalingPoint(
        replicas=replicas,
        replicas_in_step=replicas_in_step,
        global_batch=round(e2e.examples / e2e.steps) if e2e.steps else 0,
        examples_per_sec=e2e.examples_per_sec,
        input_wait_fraction=result.input_wait_fraction,
        compute_only_examples_per_sec=_rate(result.compute_only),
        pipeline_only_examples_per_sec=_rate(result.pipeline_only),
        keeps_up=classify(result.input_wait_fraction) is Verdict.COMPUTE_BOUND,
    )


def _rate(phase: PhaseResult | None) -> float | None:
    return phase.examples_per_sec if phase is not None else None


def scaling_curve(
    points: Sequence[ScalingPoint],
    *,
    device: ReplicaDevice,
    batch: BatchScaling,
    per_replica_batch: int | None,
    strategy: str,
    failures: Sequence[ScalingFailure] = (),
) -> ScalingCurve:
    """The curve of `points`, with its answer: up to which count the input keeps up.

    The answer reads the points in order of replicas: `feeds_replicas` is the last count
    before the first one that falls behind, so a noisy point after a failing one cannot turn
    the answer back into "keeps up".
    """
    ordered = sorted(points, key=lambda point: point.replicas)
    feeds: int | None = None
    behind: ScalingPoint | None = None
    for point in ordered:
        if not point.keeps_up:
            behind = point
            break
        feeds = point.replicas
    return ScalingCurve(
        points=ordered,
        device=device,
        batch=batch,
        per_replica_batch=per_replica_batch,
        strategy=strategy,
        keeps_up_below=MODERATELY_INPUT_BOUND_AT,
        feeds_replicas=feeds,
        next_replicas=behind.replicas if behind is not None else None,
        next_wait_fraction=behind.input_wait_fraction if behind is not None else None,
        failures=sorted(failures, key=lambda failure: failure.replicas),
    )
