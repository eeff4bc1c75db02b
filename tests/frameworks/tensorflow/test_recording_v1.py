"""A loader written with `tf.compat.v1.data`: its tunable calls are found and overridden."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frameworks.tensorflow.test_recording import stage_parameters, tfrecords, write, written
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.frameworks.tensorflow._build import build_dataset
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.pipeline import load_pipeline
from tfperf.results.discovery import ArgumentForm

pytestmark = pytest.mark.tf

V1 = """
import tensorflow as tf

v1 = tf.compat.v1.data


def parse(record):
    return tf.strings.length(record)


def make_dataset():
    files = v1.Dataset.from_tensor_slices({files!r})
    records = files.interleave(v1.TFRecordDataset, cycle_length=2, num_parallel_calls=2)
    ds = records.concatenate(v1.TFRecordDataset({files!r}, num_parallel_reads=2))
    ds = ds.shuffle(8).map(parse, num_parallel_calls=2)
    return ds.batch(4).prefetch(1)


def make_train_step():
    return lambda batch: batch
"""


def test_a_v1_loader_s_tunable_calls_are_all_found(tmp_path: Path) -> None:
    path = write(tmp_path, "loader.py", V1.format(files=tfrecords(tmp_path)))

    found = discover_sites(load_pipeline(path))

    assert {site.name: (site.value, site.form) for site in written(found)} == {
        "interleave@loader.py:12.cycle_length": (2, ArgumentForm.KEYWORD),
        "interleave@loader.py:12.num_parallel_calls": (2, ArgumentForm.KEYWORD),
        "TFRecordDataset@loader.py:13.num_parallel_reads": (2, ArgumentForm.KEYWORD),
        "shuffle@loader.py:14.buffer_size": (8, ArgumentForm.POSITIONAL),
        "map@loader.py:14.num_parallel_calls": (2, ArgumentForm.KEYWORD),
        "batch@loader.py:15.batch_size": (4, ArgumentForm.POSITIONAL),
        "prefetch@loader.py:15.buffer_size": (1, ArgumentForm.POSITIONAL),
    }


def test_overrides_reach_a_v1_loader_s_dataset(tmp_path: Path) -> None:
    pipeline = load_pipeline(write(tmp_path, "loader.py", V1.format(files=tfrecords(tmp_path))))
    knobs = Knobs().replace(
        **{
            "map@loader.py:14.num_parallel_calls": AUTOTUNE,
            "batch@loader.py:15.batch_size": 3,
            "TFRecordDataset@loader.py:13.num_parallel_reads": 1,
        }
    )

    dataset, _ = build_dataset(pipeline, knobs)

    stages = stage_parameters(dataset)
    assert ("map(parse)", {"num_parallel_calls": AUTOTUNE}) in stages
    assert ("batch(3)", {"batch_size": 3, "drop_remainder": False}) in stages
    assert [len(batch) for batch in dataset] == [3, 3, 3, 3]
