"""Benchmark pipeline 3, many small files: thousands of small GZIP TFRecord shards via interleave.

File names -> interleave(TFRecordDataset(GZIP)) -> shuffle -> batch -> parse features -> an MLP.
Each file holds a few records, so opening files, starting a GZIP stream per file and inflating
it dominate: `cycle_length` (files open at once) and the parallel reads across them are the
knobs that matter, then overlap with the model's step.

BASELINE reads one file after another (`TFRecordDataset(files)` reads sequentially unless told
otherwise). On first use the file writes its own data (2,000 files, about 25 MB) to
`data/small_files/`.

    tfperf profile benchmarks/small_files.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

BASELINE = {
    "batch_size": 128,
    "shuffle_buffer": 2048,
    "cycle_length": 1,
    "num_parallel_reads": 1,
    "num_parallel_calls": 1,
    "prefetch": 0,
}

DATA_DIR = Path(__file__).resolve().parent / "data" / "small_files"
FILES = 2000
RECORDS_PER_FILE = 16
FEATURES = 256
CLASSES = 10


def make_dataset(knobs):
    """GZIP shards read through interleave -> shuffle -> batch -> parse a batch at a time."""
    files = tf.data.Dataset.from_tensor_slices(_ensure_data()).shuffle(FILES)
    ds = files.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type="GZIP"),
        cycle_length=knobs.cycle_length,
        num_parallel_calls=_reads(knobs),
    )
    ds = ds.shuffle(knobs.shuffle_buffer)
    ds = ds.batch(knobs.batch_size, drop_remainder=True)
    ds = ds.map(_parse, num_parallel_calls=knobs.num_parallel_calls)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
    """A small MLP on the parsed feature vectors."""
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(CLASSES, dtype="float32"),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _reads(knobs) -> int:
    # tf.data refuses num_parallel_calls above the cycle length, and an AUTOTUNE cycle length
    # is the number of cores: read at most that many files at once.
    cycle = knobs.cycle_length if knobs.cycle_length > 0 else len(os.sched_getaffinity(0))
    if knobs.num_parallel_reads > 0:
        return min(knobs.num_parallel_reads, cycle)
    return knobs.num_parallel_reads


_SPEC = {
    "features": tf.io.FixedLenFeature([FEATURES], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def _parse(records):
    example = tf.io.parse_example(records, _SPEC)
    return example["features"], example["label"]


def _ensure_data() -> list[str]:
    """The file paths, writing them first if needed (into a temporary folder, then renamed)."""
    names = [f"part-{i:05d}.tfrecord.gz" for i in range(FILES)]
    if not DATA_DIR.exists():
        partial = DATA_DIR.with_name(f"{DATA_DIR.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        rng = np.random.default_rng(0)
        options = tf.io.TFRecordOptions(compression_type="GZIP")
        for name in names:
            with tf.io.TFRecordWriter(str(partial / name), options) as writer:
                for _ in range(RECORDS_PER_FILE):
                    writer.write(_example(rng))
        partial.rename(DATA_DIR)
    return [str(DATA_DIR / name) for name in names]


def _example(rng: np.random.Generator) -> bytes:
    # Features quantised to a few levels compress about 3:1, like real sensor or log features.
    features = np.round(rng.normal(size=FEATURES), 1).astype(np.float32)
    label = int(rng.integers(CLASSES))
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "features": tf.train.Feature(float_list=tf.train.FloatList(value=features)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
        )
    )
    return example.SerializeToString()


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
