"""The training probe: the model alone, timed under other batch sizes and precisions."""

from __future__ import annotations

import logging

from tfperf.frameworks.tensorflow import probe_training
from tfperf.knobs import Knobs
from tfperf.pipeline import load_pipeline

SOURCE = """
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 8}

def make_dataset(knobs):
    if knobs.batch_size == 64:
        raise ValueError("no batch of 64 here")
    features = np.zeros((64, 4), "float32")
    labels = np.zeros((64, 1), "float32")
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(knobs.batch_size)

def make_model(knobs):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""


def test_each_setting_is_timed_on_a_batch_built_under_it(write_pipeline, caplog):
    pipeline = load_pipeline(write_pipeline(SOURCE))
    settings = [
        {"batch_size": 16, "mixed_precision": "float32"},
        {"batch_size": 64, "mixed_precision": "float32"},  # its dataset raises: left out
        {"batch_size": 8, "mixed_precision": "mixed_bfloat16"},
    ]
    with caplog.at_level(logging.WARNING):
        rates = probe_training(pipeline, Knobs(batch_size=8), settings, seconds=0.05)

    assert [(r.batch_size, r.mixed_precision) for r in rates] == [
        (16, "float32"),
        (8, "mixed_bfloat16"),
    ]
    assert all(r.examples_per_sec > 0 and r.steps >= 3 for r in rates)
    # Each probe's own time, its build and trace with it: more than its timed steps.
    assert all(r.duration_s is not None and r.duration_s > 0.05 for r in rates)
    assert "batch_size': 64" in caplog.text
    import keras

    assert keras.mixed_precision.global_policy().name == "float32"  # the policy is restored


def test_the_faster_of_a_settings_windows_counts_with_its_own_cpu_time():
    from tfperf.measure.training import Window, fastest_window

    slowed = Window(steps=10, wall_s=0.5, cpu_s=1.2)  # something else ran meanwhile
    clean = Window(steps=14, wall_s=0.4, cpu_s=0.7)
    assert fastest_window([slowed, clean]) == clean
    assert fastest_window([clean, slowed]) == clean
    assert fastest_window([Window(3, 0.0, 0.0), slowed]) == slowed  # no time: no rate
