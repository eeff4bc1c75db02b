"""Quick-start pipeline: JPEG images in sharded TFRecord files, decoded and augmented, into a CNN.

It is written the way many training scripts start out: one map call, no parallelism and no
prefetch (see BASELINE). On first use it writes its own data (about 15 MB) to `data/` next to
this file. Try:

    tfperf profile examples/quickstart/pipeline.py

It also runs on its own, without tfperf: `python examples/quickstart/pipeline.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

# What this script runs today: every stage sequential, nothing overlapped.
BASELINE = {
    "batch_size": 64,
    "shuffle_buffer": 1000,
    "num_parallel_calls": 1,
    "cycle_length": 1,
    "prefetch": 0,
}

# Batch sizes worth trying when tuning; num_parallel_reads is not used by this pipeline, so it
# is fixed rather than searched. The other knobs use tfperf's ranges.
SEARCH_SPACE = {"batch_size": [32, 64, 128], "num_parallel_reads": "AUTOTUNE"}

DATA_DIR = Path(__file__).resolve().parent / "data"
SHARDS = 8
IMAGES_PER_SHARD = 256
IMAGE_SIZE = 160
CROP_SIZE = 128
MODEL_SIZE = 64
CLASSES = 10


def make_dataset(knobs):
    """TFRecord shards -> parse -> decode JPEG -> random crop and flip -> batches."""
    files = tf.data.Dataset.from_tensor_slices(_ensure_data())
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
    image = tf.image.random_brightness(image, 20.0)
    return image, example["label"]


def _ensure_data() -> list[str]:
    """Writes the shards once; a half-written shard is never left under its final name."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    paths = [DATA_DIR / f"train-{i:02d}-of-{SHARDS:02d}.tfrecord" for i in range(SHARDS)]
    rng = np.random.default_rng(0)
    for path in paths:
        if not path.exists():
            _write_shard(path, rng)
    return [str(path) for path in paths]


def _write_shard(path: Path, rng: np.random.Generator) -> None:
    partial = path.with_suffix(f".partial-{os.getpid()}")
    with tf.io.TFRecordWriter(str(partial)) as writer:
        for _ in range(IMAGES_PER_SHARD):
            label = int(rng.integers(CLASSES))
            # Smooth gradients plus noise compress like photos, not like static.
            base = np.linspace(0, 255, IMAGE_SIZE, dtype=np.float32)[None, :, None]
            pixels = base * rng.uniform(0.3, 1.0, (1, 1, 3)) + rng.normal(
                0, 12, (IMAGE_SIZE,) * 2 + (3,)
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
    partial.replace(path)


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
