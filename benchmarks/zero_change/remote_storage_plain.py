"""`benchmarks/remote_storage.py` as code that has never heard of tfperf: its values written in
its tf.data calls, `make_dataset()` without knobs.

The same data, the same blocking 2-4 ms fetch per object, the same decode, batch and CNN, and
the values of remote_storage's BASELINE (shuffle 1024, one fetch at a time, batch 32, no
prefetch). `tfperf tune --write-patch` tunes the values it finds in these calls, and the
thread pool and prefetch it adds, and hands them back as a patch of this file; the benchmark's
zero-change row measures the patched file against this one (`benchmarks/zero_change.py`).

    tfperf tune benchmarks/zero_change/remote_storage_plain.py --write-patch
"""

import keras
import tensorflow as tf
from object_store import CLASSES, IMAGE_SIZE, OBJECTS, get_object


def make_dataset():
    """Keys -> blocking fetch per object -> decode -> batches."""
    keys = tf.data.Dataset.range(OBJECTS).shuffle(1024)
    ds = keys.map(fetch, num_parallel_calls=1)
    ds = ds.map(decode)
    return ds.batch(32, drop_remainder=True)


def make_model():
    """A small CNN; the fetches, not the model, set the pace."""
    model = keras.Sequential(
        [
            keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES, dtype="float32"),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def fetch(key):
    return tf.numpy_function(get_object, [key], tf.string, stateful=False)


def decode(blob):
    # Each object: one label byte, then the image's pixels.
    raw = tf.io.decode_raw(blob, tf.uint8)
    image = tf.reshape(raw[1:], (IMAGE_SIZE, IMAGE_SIZE, 3))
    return tf.cast(image, tf.float32), tf.cast(raw[0], tf.int64)
