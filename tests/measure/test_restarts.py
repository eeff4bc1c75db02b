"""The cost of a finite dataset's restarts: measured apart, weighed by a real epoch."""

from __future__ import annotations

import pytest

from tests.fakes.clock import FakeClock, TimedData, timed_step
from tests.fakes.stages import first_element_stat
from tfperf.frameworks.tensorflow import profile_pipeline
from tfperf.measure._analysis import summarise_phase
from tfperf.measure._profiler import profile
from tfperf.measure._restarts import (
    EpochInfo,
    attribute,
    never_steady,
    observed_epoch_steps,
    restart_advice,
    restart_cost,
    restart_indices,
)
from tfperf.pipeline import load_pipeline
from tfperf.results import Phase, ProfileResult, StepRecord, Verdict
from tfperf.results.stages import EpochSource, StageKind

# 4 steps an epoch; the first step of each later epoch waits 1 s for a shuffle buffer.
WAITS = [1.0, 0.001, 0.001, 0.001]


def _records(epochs: int, warmup: int = 1) -> list[StepRecord]:
    records, start = [], 0.0
    for epoch in range(epochs):
        for wait in WAITS:
            records.append(StepRecord(start, wait, 0.01, 8, epoch, len(records) < warmup))
            start += wait + 0.01
    return records


def _phase(epochs: int):
    return summarise_phase(Phase.END_TO_END, _records(epochs), 0.0, True, epochs - 1)


def test_restart_steps_are_the_first_of_each_later_epoch():
    records = _records(3)
    assert restart_indices(records) == [4, 8]
    assert observed_epoch_steps(records) == 4
    assert observed_epoch_steps(records[:4]) is None


def test_restart_cost_is_exact_and_weighed_by_the_real_epoch():
    shuffle = EpochInfo(
        steps=1000, source=EpochSource.GIVEN, stage="shuffle(640)", stage_kind=StageKind.SHUFFLE
    )
    cost = restart_cost(_phase(3), shuffle)
    assert cost is not None
    assert cost.restarts == 2
    assert cost.seconds_per_restart == pytest.approx(0.999)
    assert cost.steady_wait_s_per_step == pytest.approx(0.001)
    assert cost.steady_wait_fraction == pytest.approx(0.001 / 0.011)
    weighted = 0.001 + 0.999 / 1000
    assert cost.weighted_wait_fraction == pytest.approx(weighted / (weighted + 0.01))
    assert cost.window_wait_share == pytest.approx(2.0 / 2.009)  # 9 steady waits of 1 ms
    assert (cost.epoch_steps, cost.epoch_source, cost.stage) == (
        1000,
        EpochSource.GIVEN,
        "shuffle(640)",
    )
    assert cost.weighted_examples_per_sec == pytest.approx(8 / (weighted + 0.01))


def test_without_an_epoch_length_one_observed_pass_counts():
    cost = restart_cost(_phase(3))
    assert cost is not None
    assert (cost.epoch_steps, cost.epoch_source) == (4, EpochSource.OBSERVED)


def test_no_restart_in_the_measured_steps_is_no_restart_cost():
    assert restart_cost(_phase(1)) is None


def test_restart_stall_in_a_short_window_is_not_input_bound_over_a_real_epoch():
    clock = FakeClock()
    data = TimedData(clock, WAITS)
    step = timed_step(clock, 0.01)
    stage = EpochInfo(steps=None, stage="shuffle(640)", stage_kind=StageKind.SHUFFLE)
    window = profile(data, step, steps=10, warmup=1, clock=clock, probes=[], epoch=stage)
    # Weighed by the window's own epoch (4 steps), the stall dominates: the verdict follows
    # the wait between restarts (1 ms of 11 ms, ~9%), never the restarts repeat() removes,
    # and the advice is about restarts, never "add prefetch".
    assert window.verdict is Verdict.MODERATELY_INPUT_BOUND
    assert window.input_wait_fraction == pytest.approx(0.001 / 0.011)
    assert window.restarts is not None and window.restarts.epoch_source is EpochSource.OBSERVED
    assert "each restart of the dataset costs 0.999 s while shuffle(640) refills" in window.advice
    assert "repeat()" in window.advice and "steps_per_epoch" in window.advice
    assert "add prefetch" not in window.advice

    clock = FakeClock()
    data, step = TimedData(clock, WAITS), timed_step(clock, 0.01)
    real = EpochInfo(
        steps=5000, source=EpochSource.GIVEN, stage="shuffle(640)", stage_kind=StageKind.SHUFFLE
    )
    epoch = profile(data, step, steps=10, warmup=1, clock=clock, probes=[], epoch=real)
    assert epoch.end_to_end.input_wait_fraction > 0.9  # the raw window: all restart
    assert epoch.verdict is Verdict.MODERATELY_INPUT_BOUND  # 0.001 s wait of 0.011 s, ~9%
    assert epoch.input_wait_fraction == pytest.approx(epoch.restarts.weighted_wait_fraction)
    assert "restarted 2 times in this window (0.999 s each while shuffle(640)" in epoch.advice
    assert "over a real epoch of 5,000 steps (--epoch-steps)" in epoch.advice


# 128 records through a sequential map of 2 ms each into a shuffle buffer holding them all:
# every restart stalls ~0.26 s while the buffer refills; between restarts the prefetched
# batches are ready at once and each 50 ms step barely waits.
FINITE_SHUFFLE = """
import time
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 16, "shuffle_buffer": 128, "prefetch": 2}

def _slow(x):
    time.sleep(0.002)
    return x

def make_dataset(knobs):
    x = np.zeros((128, 4), "float32")
    ds = tf.data.Dataset.from_tensor_slices(x)
    ds = ds.map(lambda a: tf.ensure_shape(tf.numpy_function(_slow, [a], tf.float32), [4]))
    return ds.shuffle(knobs.shuffle_buffer).batch(knobs.batch_size).prefetch(knobs.prefetch)

def make_train_step(knobs):
    def step(batch):
        time.sleep(0.05)
    return step
"""


@pytest.mark.tf
def test_finite_shuffle_pipeline_is_judged_by_its_real_epoch(write_pipeline):
    pipeline = load_pipeline(write_pipeline(FINITE_SHUFFLE))
    result = profile_pipeline(pipeline, steps=10, warmup=1, epoch_steps=10_000)
    cost = result.restarts
    assert cost is not None
    assert cost.restarts >= 1
    assert (cost.stage, cost.stage_kind) == ("shuffle(128)", StageKind.SHUFFLE)
    assert (cost.epoch_steps, cost.epoch_source) == (10_000, EpochSource.GIVEN)
    # The window is dominated by the refills; a real epoch of 10,000 steps is not.
    assert result.end_to_end.input_wait_fraction > 0.2
    assert result.verdict is Verdict.COMPUTE_BOUND
    assert "restarted" in result.advice and "shuffle(128)" in result.advice


@pytest.mark.tf
def test_cardinality_is_the_real_epoch_when_none_is_given(write_pipeline):
    pipeline = load_pipeline(write_pipeline(FINITE_SHUFFLE))
    result = profile_pipeline(pipeline, steps=10, warmup=1)
    assert result.restarts is not None
    assert (result.restarts.epoch_steps, result.restarts.epoch_source) == (
        8,
        EpochSource.CARDINALITY,
    )
    # 8 steps an epoch: the refill dominates training too, and the advice says what to do;
    # between restarts the prefetched batches keep up, so it is not called input-bound.
    assert result.verdict is Verdict.COMPUTE_BOUND
    assert "refills its buffer" in result.advice and "add prefetch" not in result.advice


# Four file names, shuffled, decoded on one thread at 0.2 s each, in batches of 2: a fresh
# start waits 0.4 s for its first batch, all of it the decode's.
FOUR_FILES = [
    first_element_stat(0, StageKind.SOURCE, "list_files", 0.001, 4000.0),
    first_element_stat(1, StageKind.SHUFFLE, "shuffle(256)", 0.002, 4000.0, {"buffer_size": 256}),
    first_element_stat(2, StageKind.MAP, "map(decode)", 0.202, 5.0),
    first_element_stat(3, StageKind.BATCH, "batch(2)", 0.402, 2.5, {"batch_size": 2}),
    first_element_stat(4, StageKind.PREFETCH, "prefetch(1)", 0.403, 2.5, {"buffer_size": 1}),
]


def _restart_only() -> ProfileResult:
    """Each restart waits 1 s; between restarts steps wait 0.1 ms of 10 ms."""
    clock = FakeClock()
    data = TimedData(clock, [1.0, 0.0001, 0.0001, 0.0001])
    return profile(data, timed_step(clock, 0.01), steps=10, warmup=1, clock=clock, probes=[])


def test_a_restart_is_attributed_to_the_stage_measured_late_not_to_the_shuffle():
    shuffle = EpochInfo(steps=2, stage="shuffle(256)", stage_kind=StageKind.SHUFFLE)
    cost = restart_cost(_phase(3), shuffle)
    assert cost is not None and cost.stage == "shuffle(256)" and not cost.measured
    measured = attribute(cost, FOUR_FILES)
    assert (measured.stage, measured.stage_kind) == ("map(decode)", StageKind.MAP)
    # The decode's own 0.2 s, and the second element the batch waited for at its rate.
    assert measured.stage_own_s == pytest.approx(0.4)
    assert measured.measured and measured.stage_sequential
    advice = restart_advice(measured)
    assert "while map(decode) is late with its first elements" in advice
    assert "Give map(decode) num_parallel_calls=tf.data.AUTOTUNE" in advice
    assert "refills" not in advice and "Prefetch does not help" not in advice


def test_a_restart_only_wait_is_not_called_input_bound():
    result = _restart_only()
    assert result.restarts is not None and result.restarts.dominates
    assert result.verdict is Verdict.COMPUTE_BOUND
    assert result.input_wait_fraction == pytest.approx(0.0001 / 0.0101)
    assert "almost all of it at restarts" in result.advice and "repeat()" in result.advice


def test_an_epoch_that_never_settles_is_told_from_a_buffer_refilling():
    def records(waits):
        return [
            StepRecord(0.0, w, 0.01, 8, i // len(waits), False)
            for i in range(12)
            for w in [waits[i % len(waits)]]
        ]

    ramp = records([0.5, 0.4, 0.3, 0.05, 0.04, 0.03])
    refill = records([0.5, 0.001, 0.001, 0.001, 0.001, 0.001])
    assert never_steady(ramp, 6) and not never_steady(refill, 6)
    assert never_steady(refill[:2], 2)  # two steps an epoch: no steady part at all


# Four files, shuffled by name, decoded on one thread (30 ms each), in batches of 2: an epoch
# is two steps, and every restart waits for the decode, never for the shuffle of four names.
FOUR_FILE_EPOCH = """
import time
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 2}

def _decode(name):
    time.sleep(0.03)
    return np.zeros((8,), "float32")

def decode(name):
    return tf.ensure_shape(tf.numpy_function(_decode, [name], tf.float32), [8])

def make_dataset(knobs):
    names = tf.data.Dataset.from_tensor_slices(["a.jpg", "b.jpg", "c.jpg", "d.jpg"])
    return names.shuffle(256).map(decode).batch(knobs.batch_size).prefetch(1)

def make_train_step(knobs):
    def step(batch):
        time.sleep(0.005)
    return step
"""


@pytest.mark.tf
def test_a_four_file_epoch_is_attributed_to_its_slow_decode(write_pipeline):
    pipeline = load_pipeline(write_pipeline(FOUR_FILE_EPOCH))
    result = profile_pipeline(pipeline, steps=6, warmup=1, analyse_stages=True, stage_seconds=0.2)
    cost = result.restarts
    assert cost is not None and cost.measured
    assert (cost.stage, cost.stage_kind) == ("map(decode)", StageKind.MAP)
    assert cost.stage_sequential
    assert "map(decode)" in result.advice and "num_parallel_calls" in result.advice
    assert "shuffle(256) refills" not in result.advice
