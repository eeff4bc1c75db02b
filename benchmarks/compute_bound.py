"""Benchmark pipeline 5, compute-bound: cheap input, a heavy model.

In-memory feature vectors -> shuffle -> batch -> a wide MLP (about 30 MFLOP per example for a
training step). Input costs next to nothing, so input knobs cannot help; what can is a larger
batch (fewer, more efficient matrix products) and `mixed_bfloat16` on a CPU that computes
bfloat16 natively (AVX512-BF16 or AMX), which `tfperf tune` only searches on such a CPU.

BASELINE is a small batch in float32, as many scripts start. The data (16 MB) is generated in
memory; nothing is written to disk.

    tfperf profile benchmarks/compute_bound.py
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

BASELINE = {
    "batch_size": 32,
    "shuffle_buffer": 1024,
    "num_parallel_calls": 1,
    "prefetch": 0,
}
# No map function reads anything here: these knobs have nothing to change.
SEARCH_SPACE = {"cycle_length": "AUTOTUNE", "num_parallel_reads": "AUTOTUNE"}

EXAMPLES = 4096
FEATURES = 1024
WIDTH = 1536
DEPTH = 4
CLASSES = 10


def make_dataset(knobs):
    """In-memory features -> light augmentation -> batches."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(EXAMPLES, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, EXAMPLES)
    ds = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(knobs.shuffle_buffer)
    ds = ds.map(_jitter, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.batch(knobs.batch_size, drop_remainder=True)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
    """A deep, wide MLP: the training step is the bottleneck."""
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            *[keras.layers.Dense(WIDTH, activation="relu") for _ in range(DEPTH)],
            keras.layers.Dense(CLASSES, dtype="float32"),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _jitter(features, label):
    return features + tf.random.normal((FEATURES,), stddev=0.01), label


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
