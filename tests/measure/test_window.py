"""A phase's window: at least ten times the batches the pipeline's prefetch buffers hold."""

from __future__ import annotations

import pytest

from tfperf.frameworks.tensorflow._chain import recover_chain
from tfperf.measure._window import BUFFER_MULTIPLE, buffered_batches, window_steps

tf = pytest.importorskip("tensorflow")


def _stages(dataset):
    return recover_chain(dataset).stages


def test_a_batch_prefetch_buffer_raises_the_steps_to_ten_times_its_depth():
    dataset = tf.data.Dataset.range(64).batch(4).prefetch(8)
    assert buffered_batches(_stages(dataset)) == 8
    assert window_steps(25, _stages(dataset)) == 8 * BUFFER_MULTIPLE
    assert window_steps(200, _stages(dataset)) == 200  # already long enough


def test_buffers_add_up_and_autotune_counts_as_one_batch():
    dataset = tf.data.Dataset.range(64).batch(4).prefetch(2).prefetch(tf.data.AUTOTUNE)
    assert buffered_batches(_stages(dataset)) == 3


def test_an_example_buffer_ahead_of_the_batch_and_no_prefetch_count_nothing():
    examples_ahead = tf.data.Dataset.range(64).prefetch(100).batch(4)
    assert buffered_batches(_stages(examples_ahead)) == 0
    assert window_steps(5, _stages(tf.data.Dataset.range(64).batch(4))) == 5
