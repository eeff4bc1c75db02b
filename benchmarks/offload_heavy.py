"""Benchmark pipeline for `tfperf offload`: a CPU-heavy map, a model that costs nothing.

Each example is a 96x96 image made from its index and pushed through repeated resizes and
contrast changes: about a millisecond of one core's work per example, all in TensorFlow ops,
so a tf.data service worker can run it. The train step returns its batch: the emulated model
is as fast as the host can hand it batches, so the answer is the workers the input needs.

    tfperf offload benchmarks/offload_heavy.py
"""

from __future__ import annotations

import tensorflow as tf

BASELINE = {"batch_size": 32, "num_parallel_calls": "AUTOTUNE", "prefetch": 2}

SIDE = 96
ROUNDS = 6


def _heavy(index):
    image = tf.random.stateless_uniform([SIDE, SIDE, 3], seed=tf.stack([index, 0]))
    for _ in range(ROUNDS):
        image = tf.image.resize(image, [SIDE + 8, SIDE + 8])
        image = tf.image.adjust_contrast(tf.image.resize(image, [SIDE, SIDE]), 1.05)
    return image, index % 10


def make_dataset(knobs):
    ds = tf.data.Dataset.range(10**9).map(_heavy, num_parallel_calls=knobs.num_parallel_calls)
    return ds.batch(knobs.batch_size).prefetch(knobs.prefetch)


def make_train_step(knobs):
    def step(batch):
        return batch[1]

    return step
