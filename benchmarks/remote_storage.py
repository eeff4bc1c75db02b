"""Benchmark pipeline 2, latency-bound reads: records fetched one by one from slow object storage.

Object keys -> fetch each object (a blocking call that takes milliseconds, as a GET from cloud
object storage does) -> parse -> batches -> a small CNN. The CPU is mostly idle: each fetch
waits, so the useful number of fetches in flight is set by the latency, not by the core count.

The object store is simulated honestly: `_ObjectStore.get` blocks for the object's latency
(`time.sleep`, which releases the GIL like a socket read does), then returns the object's bytes
from a local file. Latencies are fixed per key (2-4 ms), so runs are repeatable.

BASELINE fetches one object at a time, as a first `map(fetch)` does; tf.data's AUTOTUNE runs
parallel calls on its shared thread pool, one thread per core. On first use the file writes its
own data (about 14 MB) to `data/remote_storage/`.

    tfperf profile benchmarks/remote_storage.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

BASELINE = {
    "batch_size": 32,
    "shuffle_buffer": 1024,
    "num_parallel_calls": 1,
    "prefetch": 0,
}
# Keys come from memory and no interleave reads files here: those knobs do nothing.
SEARCH_SPACE = {"cycle_length": "AUTOTUNE", "num_parallel_reads": "AUTOTUNE"}

DATA_DIR = Path(__file__).resolve().parent / "data" / "remote_storage"
OBJECTS = 4096
IMAGE_SIZE = 32
CLASSES = 10
LATENCY_S = (0.002, 0.004)  # per-object latency, uniform in this range


class _ObjectStore:
    """A stand-in for a cloud storage client: `get(key)` blocks for the latency, then returns."""

    def __init__(self, path: Path) -> None:
        self._blob = np.load(path, mmap_mode="r")
        rng = np.random.default_rng(1)
        self._latency = rng.uniform(*LATENCY_S, size=len(self._blob))

    def get(self, key: int) -> bytes:
        time.sleep(self._latency[key])
        return self._blob[key].tobytes()


_STORE: _ObjectStore | None = None


def make_dataset(knobs):
    """Keys -> blocking fetch per object -> decode -> batches."""
    keys = tf.data.Dataset.range(OBJECTS).shuffle(knobs.shuffle_buffer)
    ds = keys.map(_fetch, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.map(_decode)
    ds = ds.batch(knobs.batch_size, drop_remainder=True)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
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


def _fetch(key):
    return tf.numpy_function(_get_object, [key], tf.string, stateful=False)


def _get_object(key: np.int64) -> bytes:
    global _STORE
    if _STORE is None:
        _STORE = _ObjectStore(_ensure_data())
    return _STORE.get(int(key))


def _decode(blob):
    # Each object: one label byte, then the image's pixels.
    raw = tf.io.decode_raw(blob, tf.uint8)
    image = tf.reshape(raw[1:], (IMAGE_SIZE, IMAGE_SIZE, 3))
    return tf.cast(image, tf.float32), tf.cast(raw[0], tf.int64)


def _ensure_data() -> Path:
    """The objects, one row of bytes each; written once (to a temporary name, then renamed)."""
    path = DATA_DIR / "objects.npy"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        size = 1 + IMAGE_SIZE * IMAGE_SIZE * 3
        objects = rng.integers(0, 256, (OBJECTS, size), dtype=np.uint8)
        objects[:, 0] = rng.integers(0, CLASSES, OBJECTS)
        partial = DATA_DIR / f"objects.partial-{os.getpid()}.npy"
        np.save(partial, objects)
        partial.replace(path)
    return path


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
