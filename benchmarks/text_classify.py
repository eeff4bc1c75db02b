"""Benchmark pipeline 4, text: raw lines -> `tf.strings` tokenisation -> `padded_batch` -> a CNN.

Text files -> lines -> lower-case, strip punctuation, split into words, hash words to ids ->
padded batches -> an embedding and a 1-D convolution. String ops run per line on the CPU, which
the model's step then competes with.

BASELINE reads the files one after another and tokenises one line at a time, no prefetch. On
first use the file writes its own text (8 files, about 30 MB) to `data/text_classify/`.

    tfperf profile benchmarks/text_classify.py
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
    "shuffle_buffer": 4096,
    "num_parallel_reads": 1,
    "num_parallel_calls": 1,
    "prefetch": 0,
}
# No interleave here: TextLineDataset reads files in parallel through num_parallel_reads.
SEARCH_SPACE = {"cycle_length": "AUTOTUNE"}

DATA_DIR = Path(__file__).resolve().parent / "data" / "text_classify"
FILES = 8
LINES_PER_FILE = 6_000
VOCABULARY = 5_000
BUCKETS = 10_000
MAX_WORDS = 128
CLASSES = 2


def make_dataset(knobs):
    """Lines from text files -> tokens -> padded batches of word ids."""
    ds = tf.data.TextLineDataset(_ensure_data(), num_parallel_reads=knobs.num_parallel_reads)
    ds = ds.shuffle(knobs.shuffle_buffer)
    ds = ds.map(_tokenise, num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.padded_batch(knobs.batch_size, padded_shapes=([MAX_WORDS], []), drop_remainder=True)
    if knobs.prefetch:
        ds = ds.prefetch(knobs.prefetch)
    return ds


def make_model(knobs):
    """Embedding -> a 1-D convolution -> max over time -> class logits."""
    model = keras.Sequential(
        [
            keras.Input((MAX_WORDS,), dtype="int64"),
            keras.layers.Embedding(BUCKETS, 32),
            keras.layers.Conv1D(32, 5, activation="relu"),
            keras.layers.GlobalMaxPooling1D(),
            keras.layers.Dense(CLASSES, dtype="float32"),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _tokenise(line):
    # Each line is "<label>\t<text>".
    fields = tf.strings.split(line, "\t", maxsplit=1)
    text = tf.strings.lower(fields[1])
    text = tf.strings.regex_replace(text, r"[^a-z0-9 ]", " ")
    words = tf.strings.split(text)[:MAX_WORDS]
    ids = tf.strings.to_hash_bucket_fast(words, BUCKETS)
    return ids, tf.strings.to_number(fields[0], tf.int64)


def _ensure_data() -> list[str]:
    """The text files, writing them first if needed (into a temporary folder, then renamed)."""
    names = [f"reviews-{i:02d}.txt" for i in range(FILES)]
    if not DATA_DIR.exists():
        partial = DATA_DIR.with_name(f"{DATA_DIR.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        rng = np.random.default_rng(0)
        words = _vocabulary(rng)
        for name in names:
            lines = (_line(rng, words) for _ in range(LINES_PER_FILE))
            (partial / name).write_text("".join(lines), encoding="utf-8")
        partial.rename(DATA_DIR)
    return [str(DATA_DIR / name) for name in names]


def _vocabulary(rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 10, VOCABULARY)
    return np.array(["".join(rng.choice(letters, n)) for n in lengths])


def _line(rng: np.random.Generator, words: np.ndarray) -> str:
    # Word frequencies follow Zipf's law, as in natural text; lengths vary from 10 to 200 words.
    count = int(rng.integers(10, 200))
    ids = np.minimum(rng.zipf(1.2, count) - 1, VOCABULARY - 1)
    tokens = [w.capitalize() if rng.random() < 0.1 else w for w in words[ids]]
    text = " ".join(tokens).replace(" ", ", ", 1) + "."
    return f"{int(rng.integers(CLASSES))}\t{text}\n"


if __name__ == "__main__":
    import tfperf

    knobs = tfperf.Knobs.from_mapping(BASELINE)
    make_model(knobs).fit(make_dataset(knobs), epochs=1)
