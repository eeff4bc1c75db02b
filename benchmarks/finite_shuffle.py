"""Benchmark pipeline 7, restart-bound: a finite dataset behind a shuffle buffer that holds it all.

2,048 feature vectors -> a sequential map that costs ~1 ms an example (a blocking transform) ->
shuffle(2,048) -> batches of 64 -> prefetch -> a small MLP. The dataset is finite (no repeat), so
each epoch (32 steps) restarts it, and a restart waits for the whole shuffle buffer to refill
through the slow map: about 2 s during which the model waits, then 32 steps that barely wait.
This is the shape of many real loaders (finite TFRecord sets, `shuffle` before `fit`'s epoch
loop). `tfperf profile` measures the restart apart (`ProfileResult.restarts`: seconds per
restart, the `shuffle(2048)` stage that refills, the wait share between restarts and weighed
by the real epoch); the right fix is repeat() before shuffle (or a smaller buffer), which no
prefetch can replace.

    tfperf profile benchmarks/finite_shuffle.py
    tfperf profile benchmarks/finite_shuffle.py --epoch-steps 100000   # a larger real data set
"""

from __future__ import annotations

import time

import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 64, "shuffle_buffer": 2048, "num_parallel_calls": 1, "prefetch": 2}
# The data comes from memory: the reading knobs do nothing here.
SEARCH_SPACE = {"cycle_length": "AUTOTUNE", "num_parallel_reads": "AUTOTUNE"}

EXAMPLES = 2048
FEATURES = 32
#: Seconds the per-example transform blocks (a stand-in for a remote lookup or a decoder).
TRANSFORM_S = 0.001


def make_dataset(knobs):
    """Finite: in memory -> slow transform -> shuffle (holding the whole set) -> batches."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(EXAMPLES, FEATURES)).astype("float32")
    labels = (features.sum(axis=1, keepdims=True) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((features, labels))
    ds = ds.map(_transform, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.shuffle(knobs.shuffle_buffer).batch(knobs.batch_size)
    return ds.prefetch(knobs.prefetch) if knobs.prefetch else ds


def _blocking(x):
    time.sleep(TRANSFORM_S)
    return x


def _transform(x, y):
    x = tf.numpy_function(_blocking, [x], tf.float32, stateful=False)
    return tf.ensure_shape(x, [FEATURES]), y


def make_model(knobs):
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy")
    return model
