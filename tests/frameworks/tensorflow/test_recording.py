"""Call sites of unmodified pipelines: found in several styles, named, overridden, restored."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tfperf.errors import KnobError, PipelineRuntimeError
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.frameworks.tensorflow._build import build_dataset
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.pipeline import PipelineKind, load_pipeline
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery

pytestmark = pytest.mark.tf

FUNCTIONS = """
import numpy as np
import tensorflow as tf


def parse(x):
    return x * 2


def make_dataset():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(64))
    ds = ds.shuffle(32)
    ds = ds.map(parse, num_parallel_calls=2)
    ds = ds.map(lambda x: x + 1)
    ds = ds.batch(8)
    return ds.prefetch(1)


def make_train_step():
    return lambda batch: batch
"""

CLASS = """
import tensorflow as tf


class Loader:
    def __init__(self, files):
        self.files = files

    def records(self):
        return tf.data.TFRecordDataset(self.files, num_parallel_reads=2)

    def dataset(self):
        return self.records().batch(4, num_parallel_calls=2)


def make_dataset():
    return Loader({files!r}).dataset()


def make_train_step(knobs):
    return lambda batch: batch
"""

INTERLEAVED = """
import tensorflow as tf


def make_dataset():
    ds = tf.data.Dataset.range(4).interleave(
        lambda i: tf.data.Dataset.range(3).map(lambda y: y * i, num_parallel_calls=2),
        cycle_length=2,
    )
    validation = tf.data.Dataset.range(10).batch(5)  # built beside, never returned
    return ds.batch(2)


def make_train_step():
    return lambda batch: batch
"""


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def sites_of(path: Path) -> dict[str, tuple[int | None, ArgumentForm]]:
    """The sites of the calls written in the file (the prefetch tfperf may add is apart)."""
    return {
        site.name: (site.value, site.form) for site in written(discover_sites(load_pipeline(path)))
    }


def written(found: Discovery) -> tuple[CallSite, ...]:
    return tuple(site for site in found.sites if site.calls > 0)


def tfrecords(folder: Path, count: int = 2) -> list[str]:
    import tensorflow as tf

    files = []
    for index in range(count):
        path = str(folder / f"part-{index}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for record in range(3):
                writer.write(f"{index}-{record}".encode())
        files.append(path)
    return files


def stage_parameters(dataset) -> list[tuple[str, dict]]:
    from tfperf.frameworks.tensorflow._chain import recover_chain

    return [(stage.label, stage.parameters) for stage in recover_chain(dataset).stages]


def test_plain_functions_are_found_and_named_by_place(tmp_path):
    path = write(tmp_path, "pipeline.py", FUNCTIONS)
    assert load_pipeline(path).kind is PipelineKind.PLAIN
    assert sites_of(path) == {
        "shuffle@pipeline.py:11.buffer_size": (32, ArgumentForm.POSITIONAL),
        "map@pipeline.py:12.num_parallel_calls": (2, ArgumentForm.KEYWORD),
        "map@pipeline.py:13.num_parallel_calls": (None, ArgumentForm.ABSENT),
        "batch@pipeline.py:14.batch_size": (8, ArgumentForm.POSITIONAL),
        "prefetch@pipeline.py:15.buffer_size": (1, ArgumentForm.POSITIONAL),
    }


def test_sites_in_a_class_and_readers_of_several_files(tmp_path):
    path = write(tmp_path, "pipeline.py", CLASS.format(files=tfrecords(tmp_path)))
    assert sites_of(path) == {
        "TFRecordDataset@pipeline.py:9.num_parallel_reads": (2, ArgumentForm.KEYWORD),
        "batch@pipeline.py:12.batch_size": (4, ArgumentForm.POSITIONAL),
        "batch@pipeline.py:12.num_parallel_calls": (2, ArgumentForm.KEYWORD),
    }


def test_sites_in_a_helper_module_next_to_the_file(tmp_path):
    write(tmp_path, "input_helpers.py", "def batched(ds):\n    return ds.batch(16)\n")
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf
        import input_helpers

        def make_dataset():
            return input_helpers.batched(tf.data.Dataset.range(40))

        def make_train_step():
            return print
        """,
    )
    assert sites_of(path) == {"batch@input_helpers.py:2.batch_size": (16, ArgumentForm.POSITIONAL)}


def test_calls_in_a_traced_function_map_to_their_line_and_unused_datasets_are_left_out(
    tmp_path,
):
    found = discover_sites(load_pipeline(write(tmp_path, "pipeline.py", INTERLEAVED)))
    names = [site.name for site in written(found)]
    assert names == [
        "interleave@pipeline.py:5.cycle_length",
        "interleave@pipeline.py:5.num_parallel_calls",
        "map@pipeline.py:6.num_parallel_calls",
        "batch@pipeline.py:10.batch_size",
    ]
    inner = found.site("map@pipeline.py:6.num_parallel_calls")
    assert (inner.value, inner.col) == (2, None)  # AutoGraph maps lines, not columns


def test_a_library_call_is_not_tunable_and_says_why(tmp_path):
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import numpy as np
        import keras

        def make_dataset():
            return keras.utils.timeseries_dataset_from_array(
                np.arange(20), None, sequence_length=3, batch_size=4
            )

        def make_train_step():
            return print
        """,
    )
    found = discover_sites(load_pipeline(path))
    assert written(found) == ()
    batch = next(item for item in found.untunable if item.call.startswith("batch("))
    assert batch.call == "batch(batch_size=4)"
    assert batch.where.startswith("keras/src/utils/timeseries_dataset_utils.py:")
    assert batch.reached_from == "pipeline.py:5"
    assert batch.reason == (
        f"called inside keras/ (a library): tfperf rewrites only files in {tmp_path.name}/, "
        "next to the pipeline"
    )


def test_a_value_that_changes_between_calls_is_not_tunable(tmp_path):
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf

        def part(size):
            return tf.data.Dataset.range(20).batch(size)

        def make_dataset():
            return part(4).concatenate(part(5))

        def make_train_step():
            return print
        """,
    )
    found = discover_sites(load_pipeline(path))
    assert written(found) == ()
    (item,) = found.untunable
    assert item.where == "pipeline.py:4"
    assert "takes different values on different calls (4, 5)" in item.reason


def test_two_calls_alike_on_one_line_are_numbered(tmp_path):
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf

        def make_dataset():
            ds = tf.data.Dataset.range(8)
            return ds.map(abs, num_parallel_calls=2).map(abs, num_parallel_calls=3)

        def make_train_step():
            return print
        """,
    )
    assert sites_of(path) == {
        "map@pipeline.py:5#1.num_parallel_calls": (2, ArgumentForm.KEYWORD),
        "map@pipeline.py:5#2.num_parallel_calls": (3, ArgumentForm.KEYWORD),
    }


def test_overrides_change_the_built_dataset(tmp_path):
    pipeline = load_pipeline(write(tmp_path, "pipeline.py", FUNCTIONS))
    knobs = Knobs().replace(
        **{
            "shuffle@pipeline.py:11.buffer_size": 64,
            "map@pipeline.py:12.num_parallel_calls": AUTOTUNE,
            "map@pipeline.py:13.num_parallel_calls": 4,
            "batch@pipeline.py:14.batch_size": 16,
            "prefetch@pipeline.py:15.buffer_size": 3,
        }
    )
    dataset, found = build_dataset(pipeline, knobs)
    assert [parameters for _, parameters in stage_parameters(dataset)[1:]] == [
        {"buffer_size": 64, "reshuffle_each_iteration": True},
        {"num_parallel_calls": AUTOTUNE},
        {"num_parallel_calls": 4},
        {"batch_size": 16, "drop_remainder": False},
        {"buffer_size": 3},
    ]
    assert found is not None and found.values()["batch@pipeline.py:14.batch_size"] == 8


def test_reader_override_changes_its_parallel_reads(tmp_path):
    pipeline = load_pipeline(
        write(tmp_path, "pipeline.py", CLASS.format(files=tfrecords(tmp_path)))
    )
    knobs = Knobs().replace(**{"TFRecordDataset@pipeline.py:9.num_parallel_reads": 1})
    dataset, _ = build_dataset(pipeline, knobs)
    stages = dict(stage_parameters(dataset))
    assert stages["TFRecordDataset"] == {"num_parallel_reads": 1}


def test_an_override_for_no_call_names_the_sites_found(tmp_path):
    pipeline = load_pipeline(write(tmp_path, "pipeline.py", FUNCTIONS))
    knobs = Knobs().replace(**{"batch@pipeline.py:99.batch_size": 4})
    with pytest.raises(KnobError) as caught:
        build_dataset(pipeline, knobs)
    message = str(caught.value)
    assert message.startswith("pipeline.py: no call matches 'batch@pipeline.py:99.batch_size'")
    assert "Sites found: shuffle@pipeline.py:11.buffer_size, map@pipeline.py:12" in message


def test_tf_data_is_restored_even_when_the_build_raises(tmp_path):
    import tensorflow as tf

    before = (tf.data.Dataset.map, tf.data.Dataset.batch, tf.data.TFRecordDataset.__init__)
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf

        def make_dataset():
            tf.data.Dataset.range(3).batch(2)
            raise RuntimeError("no data today")

        def make_train_step():
            return print
        """,
    )
    with pytest.raises(PipelineRuntimeError, match=r"make_dataset\(\) raised RuntimeError"):
        discover_sites(load_pipeline(path))
    assert (tf.data.Dataset.map, tf.data.Dataset.batch, tf.data.TFRecordDataset.__init__) == before


def test_the_slow_stage_is_named_with_the_site_that_tunes_it(tmp_path):
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import time
        import tensorflow as tf

        def _slow(x):
            time.sleep(0.005)  # about a thousand times the cost of every other stage
            return x

        def make_dataset():
            ds = tf.data.Dataset.range(400).map(
                lambda x: tf.numpy_function(_slow, [x], tf.int64), num_parallel_calls=1
            )
            return ds.batch(4)

        def make_train_step():
            return print
        """,
    )
    slowest = discover_sites(load_pipeline(path), measure_stages=True).slowest
    assert slowest is not None
    assert (slowest.label, slowest.location) == ("map(lambda)", "pipeline.py:10")
    assert slowest.sites == ("map@pipeline.py:9.num_parallel_calls",)


def test_a_pipeline_without_a_final_prefetch_gets_a_site_for_one_where_it_is_handed_over(
    tmp_path,
):
    path = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf

        def make_dataset():
            return tf.data.Dataset.range(8).batch(2)

        def make_train_step():
            return print
        """,
    )
    found = discover_sites(load_pipeline(path))
    (added,) = [site for site in found.sites if site.calls == 0]
    assert (added.name, added.value, found.end) == (
        "prefetch@pipeline.py:3.buffer_size",
        0,
        "pipeline.py:3",
    )
    ended = path.read_text().replace(".batch(2)", ".batch(2).prefetch(1)")
    path.write_text(ended)
    assert all(site.calls > 0 for site in discover_sites(load_pipeline(path)).sites)


def test_an_override_of_the_added_prefetch_adds_it_at_the_end(tmp_path):
    from tfperf.frameworks.tensorflow import _tf
    from tfperf.frameworks.tensorflow._build import build_dataset
    from tfperf.knobs import AUTOTUNE, Knobs

    path = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf

        def make_dataset():
            return tf.data.Dataset.range(8).batch(2)

        def make_train_step():
            return print
        """,
    )
    pipeline = load_pipeline(path)
    knobs = Knobs(sites={"prefetch@pipeline.py:3.buffer_size": AUTOTUNE})
    dataset, _ = build_dataset(pipeline, knobs)
    assert _tf.method_of(dataset).name == "prefetch"
    assert [int(x[0]) for x in dataset] == [0, 2, 4, 6]
