"""Structure edits: a prefetch tfperf may add after an interleave that feeds a map."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frameworks.tensorflow.test_recording import stage_parameters, tfrecords, write
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.frameworks.tensorflow._build import build_dataset
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.pipeline import load_pipeline
from tfperf.sites import patch_for

pytestmark = pytest.mark.tf

INTERLEAVE_THEN_MAP = """
import tensorflow as tf


def make_dataset():
    files = tf.data.Dataset.from_tensor_slices({files!r})
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2)
    ds = ds.{after}
    return ds.batch(2)


def make_train_step():
    return lambda batch: batch
"""

PARSE = "map(tf.strings.length, num_parallel_calls=2)"
NAME = "prefetch@pipeline.py:6.buffer_size"


def pipeline_file(folder: Path, after: str = PARSE) -> Path:
    source = INTERLEAVE_THEN_MAP.format(files=tfrecords(folder), after=after)
    return write(folder, "pipeline.py", source)


def test_an_interleave_feeding_a_map_gets_a_prefetch_site_after_it(tmp_path: Path) -> None:
    found = discover_sites(load_pipeline(pipeline_file(tmp_path)))

    added = {site.name: site for site in found.sites if site.calls == 0}
    edit = "map@pipeline.py:7.after_batch"  # the map could run on batches (--reorder)
    assert sorted(added) == [edit, "prefetch@pipeline.py:4.buffer_size", NAME]
    site = added[NAME]
    assert (site.value, site.line, site.end_line, site.end_col) == (0, 6, 6, 66)


def test_an_interleave_feeding_no_map_gets_none(tmp_path: Path) -> None:
    found = discover_sites(load_pipeline(pipeline_file(tmp_path, after="shuffle(4)")))

    assert NAME not in {site.name for site in found.sites}


def test_an_override_puts_the_prefetch_between_the_interleave_and_the_map(
    tmp_path: Path,
) -> None:
    pipeline = load_pipeline(pipeline_file(tmp_path))

    dataset, _ = build_dataset(pipeline, Knobs(sites={NAME: 3}))

    labels = [label for label, _ in stage_parameters(dataset)]
    read = labels.index("interleave(TFRecordDataset)")
    assert labels[read + 1 : read + 3] == ["prefetch(3)", "map(string_length_v2)"]
    assert sum(len(batch) for batch in dataset) == 6


def test_the_patch_appends_the_prefetch_to_the_interleave_call(tmp_path: Path) -> None:
    path = pipeline_file(tmp_path)
    found = discover_sites(load_pipeline(path))

    patch = patch_for(tmp_path, found, {}, {"sites": {NAME: AUTOTUNE}}, script=False)

    assert (
        "+    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2)"
        ".prefetch(tf.data.AUTOTUNE)" in patch.diff
    )
    assert [change.describe() for change in patch.written] == [
        f"{NAME}: prefetch(AUTOTUNE) added after the interleave at pipeline.py:6"
    ]
    ((file, content),) = patch.files
    (tmp_path / file).write_bytes(content)
    again = discover_sites(load_pipeline(path))
    assert [s.calls for s in again.sites if s.name == NAME] == [1]
