"""Batches of varying shape: kept one per shape, replayed in the proportions they came."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.fakes.clock import Batch, FakeClock
from tfperf.measure._batches import ShapeSampler, schedule, shape_of
from tfperf.measure._profiler import profile
from tfperf.results.stages import BatchShape


def test_schedule_keeps_the_proportions_in_every_cycle():
    picks = list(itertools.islice(schedule([5, 2, 1]), 16))
    assert [picks.count(i) for i in range(3)] == [10, 4, 2]
    assert list(itertools.islice(schedule([3, 1]), 4)) == [0, 0, 1, 0]


def test_schedule_refuses_an_empty_or_zero_weight():
    with pytest.raises(ValueError, match="every weight must be >= 1"):
        next(schedule([2, 0]))


def test_sampler_keeps_one_batch_per_shape_and_counts_steps():
    sampler = ShapeSampler()
    for size, seconds in [(32, 0.5), (4, 0.2), (32, 0.01), (32, 0.02), (4, 0.003)]:
        sampler.add(Batch(size), size, seconds)
    assert sampler.weights == [3, 2]
    assert [batch.shape for batch in sampler.batches()] == [(32, 3), (4, 3)]
    assert sampler.shapes() == [
        BatchShape("(32, 3)", 3, 32, 0.5, 0.015),
        BatchShape("(4, 3)", 2, 4, 0.2, 0.003),
    ]
    assert sum(shape.retrace_s for shape in sampler.shapes()) == pytest.approx(0.485 + 0.197)


def test_shapes_past_the_cap_are_stood_in_by_the_nearest_in_examples():
    sampler = ShapeSampler(max_shapes=2)
    for size in (32, 4, 30, 5, 31):
        sampler.add(Batch(size), size, 0.01)
    assert sampler.weights == [3, 2]  # 30 and 31 count as 32; 5 counts as 4


def test_shape_of_reads_every_leaf():
    assert shape_of((np.zeros((4, 7)), {"y": np.zeros((4,))})) == "(4, 7), (4,)"
    assert shape_of(3) == "()"


@pytest.mark.tf
def test_bucketed_compute_only_rate_matches_the_weighted_rate():
    import tensorflow as tf

    # 256 examples bucketed by parity: 4 batches of 32 (even) and 32 batches of 4 (odd).
    ds = tf.data.Dataset.from_tensor_slices(np.arange(256 * 5, dtype="float32").reshape(256, 5))
    ds = ds.enumerate().group_by_window(
        key_func=lambda i, x: i % 2,
        reduce_func=lambda key, window: window.batch(32),
        window_size_func=lambda key: tf.where(key == 0, tf.constant(32, tf.int64), 4),
    )
    ds = ds.map(lambda i, x: x)
    clock = FakeClock()

    def step(batch):  # 1 ms a step plus 0.1 ms an example, on the fake clock
        clock.advance(0.001 + 0.0001 * int(batch.shape[0]))

    result = profile(ds, step, steps=36, warmup=0, clock=clock, probes=[], measure_pipeline=False)
    weighted = (4 * 32 + 32 * 4) / (4 * (0.001 + 0.0032) + 32 * (0.001 + 0.0004))
    assert result.compute_only is not None
    assert result.compute_only.examples_per_sec == pytest.approx(weighted, rel=0.15)
    assert {(s.examples, s.steps) for s in result.batch_shapes} == {(32, 4), (4, 32)}
    # Input costs nothing on the fake clock: the ceiling is 1, not a batch-size artefact.
    assert result.speedup_if_input_free == pytest.approx(1.0, rel=0.15)
