"""The stage analysis: real small pipelines with a known slow stage, and the measuring loop."""

from __future__ import annotations

import time

import pytest

from tests.fakes.clock import FakeClock
from tfperf.frameworks.tensorflow._stages import analyse_stages, measure_pulls
from tfperf.results.stages import StageKind, StageUnit

#: Short windows keep the file fast. A scheduling stall on a loaded machine adds its length to
#: one stage's window; the slow stages below cost more per example than a stall as long as the
#: window spreads over it, so the orderings asserted survive stalls shorter than the window.
FAST = {"seconds_per_stage": 0.3, "warmup_s": 0.05}


def _sleep_20ms(x):
    time.sleep(0.02)
    return x


@pytest.mark.tf
def test_a_slow_map_is_named_the_limiting_stage():
    tf = pytest.importorskip("tensorflow")

    def to_float(i):
        return tf.cast(i, tf.float32)

    def slow_decode(x):
        return tf.numpy_function(_sleep_20ms, [x], tf.float32, stateful=False)

    dataset = tf.data.Dataset.range(100_000).map(to_float).map(slow_decode).batch(4).prefetch(2)
    # The slow map runs ~50 examples/s; the fast one above it is driven an element at a time
    # from Python (its chunk is sized for the slow stage's rate), tens of thousands per second
    # on an idle machine and under 1,000 once when CI shared the cores with another suite.
    # 200/s keeps the slow stage 4x short and leaves the fast one room for a loaded host.
    report = analyse_stages(dataset, consumption_examples_per_sec=200.0, **FAST)

    assert [stage.label for stage in report.stages] == [
        "range",
        "map(to_float)",
        "map(slow_decode)",
        "batch(4)",
        "prefetch(2)",
    ]
    assert [stage.unit for stage in report.stages] == [StageUnit.EXAMPLE] * 3 + [
        StageUnit.BATCH
    ] * 2
    assert report.bottleneck is not None and report.bottleneck.label == "map(slow_decode)"
    slow, fast = report.stages[2], report.stages[1]
    assert slow.examples_per_sec is not None and fast.examples_per_sec is not None
    assert slow.examples_per_sec < fast.examples_per_sec  # the gap's size is load's to set
    assert report.falls_short_index == 2
    assert report.stages[3].elements_per_sec is not None  # batches/s ...
    assert report.stages[3].examples_per_sec is not None  # ... and examples/s, x4
    assert report.stages[2].location is not None
    assert report.stages[2].location.startswith("test_stages.py:")
    assert report.advice.startswith("The limiting stage is map(slow_decode): it adds ")
    assert all(stage.note is None for stage in report.stages)
    assert [stage.calls_python for stage in report.stages] == [False, False, True, False, False]
    assert "Its function calls Python (tf.numpy_function or tf.py_function)" in report.advice


@pytest.mark.tf
def test_a_slow_generator_source_is_named_the_limiting_stage():
    tf = pytest.importorskip("tensorflow")

    def generate():
        for number in range(100_000):
            time.sleep(0.01)
            yield number

    def double(x):
        return x * 2

    dataset = (
        tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec([], tf.int64))
        .map(double)
        .batch(4)
    )
    report = analyse_stages(dataset, **FAST)

    assert [stage.label for stage in report.stages] == [
        "from_generator(generate)",
        "map(double)",
        "batch(4)",
    ]
    assert report.bottleneck_index == 0
    assert report.stages[0].kind is StageKind.SOURCE
    assert report.falls_short_index is None  # no consumption rate given
    assert "A Python generator yields one element at a time" in report.advice
    # The generator's advice names the lock already; it is not said twice.
    assert report.stages[0].calls_python is True
    assert "Its function calls Python" not in report.advice


@pytest.mark.tf
def test_a_pipeline_that_joins_inputs_is_measured_as_one_stage_with_a_note():
    tf = pytest.importorskip("tensorflow")

    def add(a, b):
        return a + b

    left = tf.data.Dataset.range(1000)
    right = tf.data.Dataset.range(1000).map(lambda x: x * 3)
    dataset = tf.data.Dataset.zip((left, right)).map(add).batch(8)
    report = analyse_stages(dataset, **FAST)

    assert [stage.label for stage in report.stages] == ["zip(2 inputs)", "map(add)", "batch(8)"]
    assert report.stages[0].kind is StageKind.JOIN
    assert report.note is not None
    assert report.note.startswith("the pipeline joins 2 inputs at zip(2 inputs): everything up")
    assert all(stage.examples_per_sec for stage in report.stages)


@pytest.mark.tf
def test_file_names_feeding_an_interleave_are_inputs_not_examples(tmp_path):
    tf = pytest.importorskip("tensorflow")
    files = []
    for shard in range(2):
        path = str(tmp_path / f"part-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for number in range(200):
                writer.write(f"record {shard}-{number}".encode())
        files.append(path)
    dataset = (
        tf.data.Dataset.from_tensor_slices(files)
        .interleave(tf.data.TFRecordDataset, cycle_length=2)
        .map(tf.strings.length)
        .batch(8)
    )
    report = analyse_stages(dataset, **FAST)

    source, reader = report.stages[0], report.stages[1]
    assert (source.label, source.unit) == ("from_tensor_slices", StageUnit.INPUT)
    assert source.examples_per_sec is None and source.added_s_per_example is None
    assert source.elements_per_sec is not None and source.elements_per_sec > 0
    assert (reader.label, reader.unit) == ("interleave(TFRecordDataset)", StageUnit.EXAMPLE)
    assert reader.parameters == {"cycle_length": 2, "block_length": 1}
    assert reader.examples_per_sec is not None


@pytest.mark.tf
def test_elements_of_varying_shape_are_measured():
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.range(1000).map(lambda i: tf.fill([i % 5 + 1], i)).padded_batch(5)
    report = analyse_stages(dataset, **FAST)
    assert [stage.note for stage in report.stages] == [None, None, None]
    assert all(stage.examples_per_sec for stage in report.stages)


@pytest.mark.tf
def test_a_pipeline_that_yields_nothing_names_no_stage():
    tf = pytest.importorskip("tensorflow")
    report = analyse_stages(tf.data.Dataset.range(0).map(lambda x: x + 1).batch(2), **FAST)
    assert [stage.note for stage in report.stages] == ["the pipeline cut here yields nothing"] * 3
    assert [stage.examples_per_sec for stage in report.stages] == [None, None, None]
    assert report.bottleneck_index is None
    assert report.advice == ""


def test_measure_pulls_warms_up_then_measures_a_window():
    clock, cpu = FakeClock(0.0), FakeClock(0.0)

    def pulls():
        while True:
            clock.advance(0.125)
            cpu.advance(0.0625)
            yield 10, 20

    measured = measure_pulls(pulls(), seconds=0.5, warmup_s=0.25, clock=clock, cpu_clock=cpu)
    # Pulls end at 0.125 (first), 0.25 and 0.375 (warm-up); the window runs 0.375 -> 0.875.
    assert (measured.elements, measured.examples) == (40, 80)
    assert measured.duration_s == 0.5
    assert measured.cpu_s == 0.25
    assert measured.first_element_s == 0.125


def test_measure_pulls_takes_at_least_one_pull_slower_than_the_window():
    clock, cpu = FakeClock(0.0), FakeClock(0.0)

    def pulls():
        while True:
            clock.advance(2.0)
            yield 1, 4

    measured = measure_pulls(pulls(), seconds=0.5, warmup_s=0.0, clock=clock, cpu_clock=cpu)
    assert (measured.elements, measured.examples, measured.duration_s) == (1, 4, 2.0)


def test_analyse_stages_rejects_a_window_of_zero():
    with pytest.raises(ValueError, match=r"`seconds_per_stage > 0`.*seconds_per_stage=0"):
        analyse_stages(object(), seconds_per_stage=0)
