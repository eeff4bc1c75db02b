"""The scaling curve's analysis: replica counts, points from profiles, and the answer in data."""

from __future__ import annotations

import pytest

from tests.fakes.trials import fake_result
from tfperf.knobs import Knobs
from tfperf.measure.scaling import replica_counts, scaling_curve, scaling_point
from tfperf.results.scaling import BatchScaling, ReplicaDevice, ScalingFailure, ScalingPoint


def point(replicas: int, wait: float, rate: float = 1000.0) -> ScalingPoint:
    return ScalingPoint(
        replicas=replicas,
        replicas_in_step=replicas,
        global_batch=32 * replicas,
        examples_per_sec=rate,
        input_wait_fraction=wait,
        compute_only_examples_per_sec=2 * rate,
        pipeline_only_examples_per_sec=None,
        keeps_up=wait < 0.05,
    )


def curve(*points: ScalingPoint, failures: tuple[ScalingFailure, ...] = ()):
    return scaling_curve(
        points,
        device=ReplicaDevice.CPU,
        batch=BatchScaling.PER_REPLICA_FIXED,
        per_replica_batch=32,
        strategy="mirrored",
        failures=failures,
    )


@pytest.mark.parametrize(
    ("limit", "counts"),
    [(1, (1,)), (2, (1, 2)), (4, (1, 2, 4)), (6, (1, 2, 4, 6)), (8, (1, 2, 4, 8))],
)
def test_replica_counts_double_up_to_the_limit(limit, counts):
    assert replica_counts(limit) == counts


def test_replica_counts_refuse_zero():
    with pytest.raises(ValueError, match="limit >= 1"):
        replica_counts(0)


def test_feeds_two_replicas_and_says_what_four_wait():
    found = curve(point(4, 0.48), point(1, 0.01), point(2, 0.03))
    assert [p.replicas for p in found.points] == [1, 2, 4]
    assert (found.feeds_replicas, found.next_replicas, found.next_wait_fraction) == (2, 4, 0.48)
    assert found.keeps_up_below == 0.05


def test_a_curve_that_never_saturates_has_no_next_count():
    found = curve(point(1, 0.0), point(2, 0.01), point(4, 0.049))
    assert (found.feeds_replicas, found.next_replicas, found.next_wait_fraction) == (4, None, None)


def test_saturating_at_one_replica():
    found = curve(point(1, 0.02), point(2, 0.3), point(4, 0.6))
    assert (found.feeds_replicas, found.next_replicas, found.next_wait_fraction) == (1, 2, 0.3)


def test_input_behind_already_at_one_replica_feeds_none():
    found = curve(point(1, 0.25), point(2, 0.5))
    assert (found.feeds_replicas, found.next_replicas, found.next_wait_fraction) == (None, 1, 0.25)


def test_a_noisy_point_after_falling_behind_does_not_restore_keeping_up():
    found = curve(point(1, 0.0), point(2, 0.2), point(4, 0.01))
    assert (found.feeds_replicas, found.next_replicas) == (1, 2)


def test_failures_are_kept_in_order_apart_from_the_points():
    failures = (ScalingFailure(4, "timeout: stopped"), ScalingFailure(2, "crashed: killed"))
    found = curve(point(1, 0.0), failures=failures)
    assert [f.replicas for f in found.failures] == [2, 4]
    assert found.feeds_replicas == 1


def test_a_point_from_a_profile():
    input_bound = fake_result(Knobs(batch_size=8), wait_s=0.03, compute_s=0.01)
    found = scaling_point(2, input_bound, replicas_in_step=2)
    assert found.replicas == 2 and found.replicas_in_step == 2
    assert found.global_batch == 8
    assert found.examples_per_sec == input_bound.end_to_end.examples_per_sec
    assert found.per_replica_examples_per_sec == pytest.approx(found.examples_per_sec / 2)
    assert found.input_wait_fraction == input_bound.input_wait_fraction
    assert found.input_wait_fraction > 0.5 and not found.keeps_up
    assert input_bound.compute_only is not None and input_bound.pipeline_only is not None
    assert found.compute_only_examples_per_sec == input_bound.compute_only.examples_per_sec
    assert found.pipeline_only_examples_per_sec == input_bound.pipeline_only.examples_per_sec
    fed = scaling_point(1, fake_result(Knobs(batch_size=8), wait_s=0.0), replicas_in_step=1)
    assert fed.keeps_up
