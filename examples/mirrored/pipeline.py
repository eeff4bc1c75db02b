"""Data-parallel training under `tf.distribute.MirroredStrategy`, on any machine.

The data is generated in memory (no download). `make_dataset` takes a `tf.distribute.InputContext`,
so tfperf distributes it with `strategy.distribute_datasets_from_function`: each input pipeline
batches per replica, `input_context.get_per_replica_batch_size(knobs.batch_size)`, and
`batch_size` stays the global batch of one step. Try, with two logical CPU devices as replicas:

    tfperf profile examples/mirrored/pipeline.py --cpu-replicas 2
    tfperf tune examples/mirrored/pipeline.py --cpu-replicas 2 --trials 4

and `--cpu-replicas 1` for one replica. On a machine with GPUs, `--strategy mirrored` puts one
replica on each GPU. See docs/multi-device.md.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 64, "shuffle_buffer": 512, "num_parallel_calls": 1, "prefetch": 0}

# cycle_length and num_parallel_reads are not used here: fixed rather than searched.
SEARCH_SPACE = {"cycle_length": "AUTOTUNE", "num_parallel_reads": "AUTOTUNE"}

EXAMPLES = 2048
SIZE = 32
CLASSES = 10


def make_strategy():
    """The strategy this file trains under when no --strategy or --cpu-replicas is given."""
    return tf.distribute.MirroredStrategy()


def make_dataset(knobs, input_context=None):
    """Generated images -> augment -> batches of one replica's share of the global batch."""
    batch = knobs.batch_size
    ds = tf.data.Dataset.from_tensor_slices(_data())
    if input_context is not None:
        batch = input_context.get_per_replica_batch_size(knobs.batch_size)
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = ds.shuffle(knobs.shuffle_buffer).repeat()
    ds = ds.map(_augment, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.batch(batch, drop_remainder=True)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
    """A small CNN; tfperf builds it inside the strategy's scope."""
    model = keras.Sequential(
        [
            keras.Input((SIZE, SIZE, 3)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _data():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(EXAMPLES, SIZE, SIZE, 3), dtype=np.uint8)
    labels = rng.integers(0, CLASSES, size=(EXAMPLES,), dtype=np.int64)
    return images, labels


def _augment(image, label):
    """Per-example work the input pipeline must do for every replica."""
    image = tf.image.convert_image_dtype(image, tf.float32)
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.2)
    image = tf.image.random_contrast(image, 0.8, 1.2)
    return tf.clip_by_value(image, 0.0, 1.0), label
