"""Benchmark pipeline 6, RAM-bound: a whole NumPy array in memory with a large shuffle buffer.

A uint8 image array loaded whole (np.load) -> from_tensor_slices -> random flip and crop,
scaled to float -> repeat -> shuffle(large buffer) -> batches -> a small CNN. Host RAM is the
constraint: the array, TensorFlow's copy of it, and the shuffle buffer, which holds float32
elements because it comes after the map (4x the bytes of the uint8 images), all live in RAM.
A larger shuffle buffer costs RAM and buys no speed; `tfperf tune` must stay within its RAM
budget (the benchmark sets one) while it speeds the map and the steps up. `repeat` comes
before `shuffle`, so the buffer is fed across epochs and never drains or refills.

BASELINE shuffles over half the data set, one map call at a time, no prefetch. On first use the
file writes its array (25,000 images of 64x64x3, about 300 MB) to `data/in_memory/`.

    tfperf profile benchmarks/in_memory.py
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

BASELINE = {
    "batch_size": 128,
    "shuffle_buffer": 12_500,
    "num_parallel_calls": 1,
    "prefetch": 0,
}
# The data comes from memory, not from files: the reading knobs do nothing here.
SEARCH_SPACE = {"cycle_length": "AUTOTUNE", "num_parallel_reads": "AUTOTUNE"}

DATA_DIR = Path(__file__).resolve().parent / "data" / "in_memory"
EXAMPLES = 25_000
IMAGE_SIZE = 64
PAD = 8
CLASSES = 10


def make_dataset(knobs):
    """The whole array in memory -> augment -> shuffle across epochs -> batches."""
    images, labels = _load()
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    ds = ds.map(_augment, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.repeat().shuffle(knobs.shuffle_buffer)
    ds = ds.batch(knobs.batch_size, drop_remainder=True)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
    """A small CNN."""
    model = keras.Sequential(
        [
            keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3)),
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


def _augment(image, label):
    # The usual small-image augmentation: pad, random crop back, random flip, scale to [0, 1].
    image = tf.image.resize_with_crop_or_pad(image, IMAGE_SIZE + PAD * 2, IMAGE_SIZE + PAD * 2)
    image = tf.image.random_crop(image, (IMAGE_SIZE, IMAGE_SIZE, 3))
    image = tf.image.random_flip_left_right(image)
    return tf.image.convert_image_dtype(image, tf.float32), label


def _load() -> tuple[np.ndarray, np.ndarray]:
    """The arrays, whole in RAM; written once (to temporary names, then renamed)."""
    images_path, labels_path = DATA_DIR / "images.npy", DATA_DIR / "labels.npy"
    if not images_path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        shape = (EXAMPLES, IMAGE_SIZE, IMAGE_SIZE, 3)
        for path, array in (
            (labels_path, rng.integers(0, CLASSES, EXAMPLES).astype(np.int64)),
            (images_path, rng.integers(0, 256, shape, dtype=np.uint8)),
        ):
            partial = path.with_name(f"{path.stem}.partial-{os.getpid()}.npy")
            np.save(partial, array)
            partial.replace(path)
    return np.load(images_path), np.load(labels_path)


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
