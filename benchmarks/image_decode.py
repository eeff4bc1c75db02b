"""Benchmark pipeline 1, CPU-bound map: JPEG images in TFRecord shards, decoded and augmented.

TFRecord shards -> parse -> decode JPEG -> random crop, flip, resize -> batches -> a small CNN.
Decoding and resizing cost far more CPU than the model's step, so the map is the bottleneck; on
two cores, parallel calls and overlapping input with compute are what can help.

BASELINE is how such scripts often start: one sequential map, shards read one at a time, no
prefetch. On first use the file writes its own data (about 40 MB) to `data/image_decode/`.

    tfperf profile benchmarks/image_decode.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

BASELINE = {
    "batch_size": 64,
    "shuffle_buffer": 512,
    "num_parallel_calls": 1,
    "cycle_length": 1,
    "prefetch": 0,
}
# This pipeline reads shards through `interleave` (cycle_length); num_parallel_reads is unused.
SEARCH_SPACE = {"num_parallel_reads": "AUTOTUNE"}

DATA_DIR = Path(__file__).resolve().parent / "data" / "image_decode"
SHARDS = 16
IMAGES_PER_SHARD = 96
IMAGE_SIZE = 256
CROP_SIZE = 224
MODEL_SIZE = 96
CLASSES = 10


def make_dataset(knobs):
    """TFRecord shards -> parse -> decode JPEG -> random crop, flip, resize -> batches."""
    files = tf.data.Dataset.from_tensor_slices(_ensure_data()).shuffle(SHARDS)
    # tf.data refuses num_parallel_calls above a fixed cycle_length, so both follow one knob.
    ds = files.interleave(
        tf.data.TFRecordDataset,
        cycle_length=knobs.cycle_length,
        num_parallel_calls=knobs.cycle_length,
    )
    ds = ds.shuffle(knobs.shuffle_buffer)
    ds = ds.map(_parse_and_augment, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.batch(knobs.batch_size, drop_remainder=True)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
    """A small CNN classifier; tfperf has already set the mixed-precision policy."""
    model = keras.Sequential(
        [
            keras.Input((MODEL_SIZE, MODEL_SIZE, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
            keras.layers.Conv2D(64, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES, dtype="float32"),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


_FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def _parse_and_augment(record):
    example = tf.io.parse_single_example(record, _FEATURES)
    image = tf.io.decode_jpeg(example["image"], channels=3)
    image = tf.image.random_crop(image, (CROP_SIZE, CROP_SIZE, 3))
    image = tf.image.random_flip_left_right(image)
    image = tf.image.resize(image, (MODEL_SIZE, MODEL_SIZE), antialias=True)
    image = tf.image.random_contrast(image, 0.8, 1.2)
    return image, example["label"]


def _ensure_data() -> list[str]:
    """The shard paths, writing them first if needed (into a temporary folder, then renamed)."""
    paths = [DATA_DIR / f"train-{i:02d}-of-{SHARDS:02d}.tfrecord" for i in range(SHARDS)]
    if not DATA_DIR.exists():
        partial = DATA_DIR.with_name(f"{DATA_DIR.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        rng = np.random.default_rng(0)
        for path in paths:
            _write_shard(partial / path.name, rng)
        partial.rename(DATA_DIR)
    return [str(path) for path in paths]


def _write_shard(path: Path, rng: np.random.Generator) -> None:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(IMAGES_PER_SHARD):
            label = int(rng.integers(CLASSES))
            # Smooth gradients plus noise compress like photos, not like static.
            ramp = np.linspace(0, 255, IMAGE_SIZE, dtype=np.float32)[None, :, None]
            pixels = ramp * rng.uniform(0.3, 1.0, (1, 1, 3)) + rng.normal(
                0, 12, (IMAGE_SIZE, IMAGE_SIZE, 3)
            )
            image = np.clip(pixels, 0, 255).astype(np.uint8)
            jpeg = tf.io.encode_jpeg(image, quality=90).numpy()
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                    }
                )
            )
            writer.write(example.SerializeToString())


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
