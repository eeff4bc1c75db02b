"""Stage recovery on pipelines built the ways real loaders build them."""

from __future__ import annotations

import pytest

from tfperf.frameworks.tensorflow._chain import recover_chain
from tfperf.results.stages import StageKind

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf


def _labels(dataset) -> list[str]:
    return [stage.label for stage in recover_chain(dataset).stages]


def test_a_tf_compat_v1_pipeline_has_its_real_stage_names():
    def parse(x):
        return x * 2

    ds = tf.compat.v1.data.Dataset.range(64).shuffle(16)
    ds = ds.map(parse, num_parallel_calls=2).batch(8).prefetch(1)
    chain = recover_chain(ds)
    assert [s.label for s in chain.stages] == [
        "range",
        "shuffle(16)",
        "map(parse)",
        "batch(8)",
        "prefetch(1)",
    ]
    assert "dataset_v1_adapter" not in {s.class_name.lower() for s in chain.stages}
    assert chain.stages[2].parameters["num_parallel_calls"] == 2


def test_group_by_window_is_a_stage_with_its_key_reduce_and_inner_batch():
    def by_parity(x):
        return x % 2

    def reduce_window(key, window):
        return window.batch(4)

    ds = tf.data.Dataset.range(64).map(lambda x: x + 1)
    ds = ds.group_by_window(by_parity, reduce_window, window_size=4).prefetch(2)
    chain = recover_chain(ds)
    assert [s.label for s in chain.stages] == [
        "range",
        "map(lambda)",
        "group_by_window(by_parity, reduce_window: batch)",
        "prefetch(2)",
    ]
    assert chain.stages[2].kind is StageKind.BATCH


def test_bucket_by_sequence_length_reads_as_itself():
    ds = tf.data.Dataset.range(64).map(lambda x: tf.fill([x % 7 + 1], x))
    ds = ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 5], [4, 4, 4])
    assert _labels(ds)[-1] == "bucket_by_sequence_length(padded_batch)"


def test_scan_window_and_flat_map_are_stages_naming_their_work():
    def running_sum(state, x):
        return state + x, x

    ds = tf.data.Dataset.range(64).scan(tf.constant(0, tf.int64), running_sum)
    ds = ds.window(4).flat_map(lambda window: window.batch(4))
    assert _labels(ds) == ["range", "scan(running_sum)", "window(4)", "flat_map(lambda: batch)"]


def test_a_stage_whose_function_runs_python_is_marked_at_any_depth():
    def plain(x):
        return x + 1

    def direct(x):
        return tf.numpy_function(lambda v: v, [x], tf.int64, stateful=False)

    @tf.function
    def helper(x):
        return tf.py_function(lambda v: v, [x], tf.int64)

    def nested(x):
        return helper(x)

    ds = tf.data.Dataset.range(8).map(plain).map(direct).filter(lambda x: x >= 0).map(nested)
    stages = recover_chain(ds).stages
    assert [(s.label, s.calls_python) for s in stages] == [
        ("range", False),
        ("map(plain)", False),
        ("map(direct)", True),
        ("filter(lambda)", False),
        ("map(nested)", True),
    ]


def test_a_stage_drawing_anew_at_each_call_is_marked_and_one_seeded_by_a_constant_is_not():
    import keras

    flip = keras.layers.RandomFlip("horizontal")
    generator = tf.random.Generator.from_seed(1)

    def stateful(x):
        return x + tf.random.uniform(())

    def from_generator(x):
        return x + generator.uniform(())

    def seeded(x):
        return x + tf.random.stateless_uniform((), seed=(1, 2))

    def augment(x):
        return flip(x, training=True)

    ds = tf.data.Dataset.from_tensor_slices(tf.zeros((4, 2, 2, 1)))
    ds = ds.map(stateful).map(from_generator).map(seeded).map(augment)
    marked = {stage.label: bool(stage.draws_random) for stage in recover_chain(ds).stages}
    assert marked == {
        "from_tensor_slices": False,
        "map(stateful)": True,
        "map(from_generator)": True,
        "map(seeded)": False,
        "map(augment)": True,  # Keras advances its seed generator's variable at each call
    }
