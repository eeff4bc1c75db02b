"""Structure edits on real pipelines: a cache added, a shuffle moved before a decode, a map
moved after its batch; each proposed or refused, applied in a trial, and written in a patch
that `patch -p0` applies and whose `make_dataset()` runs."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.frameworks.tensorflow.test_recording import stage_parameters, write
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.frameworks.tensorflow._build import build_dataset, raw_dataset
from tfperf.knobs import Knobs
from tfperf.pipeline import load_pipeline
from tfperf.sites import patch_for, unplaceable

pytestmark = pytest.mark.tf

DECODE = """
import tensorflow as tf


def decode(x):
    return tf.cast(tf.fill([8, 8, 3], x), tf.float32)


def make_dataset():
    ds = tf.data.Dataset.range(64){repeat}
    ds = ds.map(decode, num_parallel_calls=2)
    ds = ds.{middle}
    ds = ds.map({last})
    return ds.batch(8)


def make_train_step():
    return lambda batch: batch
"""

SHUFFLE, SCALE = "shuffle(16)", "lambda x: x / 255.0"
CACHE = "cache@pipeline.py:10.added"
MOVE = "shuffle@pipeline.py:10.before_map"
REORDER = "map@pipeline.py:12.after_batch"


def pipeline_file(folder: Path, middle: str = SHUFFLE, last: str = SCALE, repeat: str = "") -> Path:
    """The pipeline in a folder of its own (a file rewritten in place within one second, at
    one size, would be imported from its stale bytecode)."""
    source = DECODE.format(middle=middle, last=last, repeat=repeat)
    own = folder / f"p{len(list(folder.glob('p*')))}"
    own.mkdir()
    return write(own, "pipeline.py", source)


def edits_of(path: Path) -> set[str]:
    found = discover_sites(load_pipeline(path))
    return {site.name for site in found.sites if site.kind.value == "edit"}


def labels(path: Path, **sites: int) -> list[str]:
    dataset, _ = build_dataset(load_pipeline(path), Knobs(sites=sites))
    return [label for label, _ in stage_parameters(dataset)]


def patched_first_element(folder: Path, diff: str, tmp: Path):
    """Applies `diff` with `patch -p0` to a copy of `folder` and takes one element of the
    patched file's `make_dataset()`."""
    copy = tmp / "copy"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("copy", "__pycache__"))
    subprocess.run(["patch", "-p0"], input=diff.encode(), cwd=copy, check=True)
    spec = importlib.util.spec_from_file_location("patched_pipeline", copy / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return copy, next(iter(module.make_dataset()))


def test_each_edit_is_proposed_where_its_checks_pass(tmp_path: Path) -> None:
    assert edits_of(pipeline_file(tmp_path)) == {CACHE, MOVE, REORDER}


def test_no_cache_after_a_random_stage_and_none_over_an_infinite_dataset(tmp_path: Path) -> None:
    flip = "tf.image.random_flip_left_right"
    random = pipeline_file(tmp_path, middle=f"map({flip})", last=SCALE)
    found = edits_of(random)
    # The decode before the random flip may be cached; nothing at or after the flip.
    assert CACHE in found
    assert not {"cache@pipeline.py:11.added", "cache@pipeline.py:12.added"} & found

    endless = pipeline_file(tmp_path, repeat=".repeat()")
    dataset, recorder = raw_dataset(load_pipeline(endless), Knobs())
    assert recorder is not None
    assert "infinite or unknown" in recorder.edits.refused[CACHE]
    assert CACHE not in {site.name for site in recorder.discovery(dataset).sites}


def test_no_cache_when_the_cached_elements_exceed_the_ram_budget(tmp_path: Path) -> None:
    big = write(
        tmp_path,
        "pipeline.py",
        """
        import tensorflow as tf


        def make_dataset():
            ds = tf.data.Dataset.range(10**7)
            ds = ds.map(lambda i: tf.zeros([512, 512]), num_parallel_calls=2)
            return ds.batch(8)


        def make_train_step():
            return lambda batch: batch
        """,
    )
    _, recorder = raw_dataset(load_pipeline(big), Knobs())
    assert recorder is not None
    assert "more than the RAM budget" in recorder.edits.refused["cache@pipeline.py:6.added"]
    assert recorder.edits.sites == []


def test_no_shuffle_move_before_a_map_that_does_not_enlarge_and_no_reorder_of_a_reshape(
    tmp_path: Path,
) -> None:
    path = pipeline_file(tmp_path, middle="map(tf.reduce_sum)", last="lambda x: tf.reshape(x, [1])")
    write(path.parent, "pipeline.py", path.read_text().replace("ds.batch(8)", "ds.shuffle(4)"))
    found = edits_of(path)
    assert not any(name.startswith("shuffle@") for name in found)

    reshape = pipeline_file(tmp_path, last="lambda x: tf.reshape(x, [192])")
    assert REORDER not in edits_of(reshape)


def test_a_trial_applies_each_edit_to_the_measured_dataset(tmp_path: Path) -> None:
    path = pipeline_file(tmp_path)
    assert labels(path, **{CACHE: 1})[:4] == ["range", "map(decode)", "cache", "shuffle(16)"]
    assert labels(path, **{MOVE: 1})[:3] == ["range", "shuffle(16)", "map(decode)"]
    assert labels(path, **{REORDER: 1})[-2:] == ["batch(8)", "map(lambda)"]
    # A cache at the map wins over moving the shuffle before it, in the trial and the patch.
    both = labels(path, **{CACHE: 1, MOVE: 1})
    assert both[:4] == ["range", "map(decode)", "cache", "shuffle(16)"]


@pytest.mark.parametrize(
    ("name", "added", "removed"),
    [
        (CACHE, "ds = ds.map(decode, num_parallel_calls=2).cache()", None),
        (MOVE, "ds = ds.shuffle(16).map(decode, num_parallel_calls=2)", "ds = ds.shuffle(16)"),
        (REORDER, "return ds.batch(8).map(lambda x: x / 255.0)", "ds = ds.map(lambda x:"),
    ],
)
def test_the_patch_writes_the_edit_and_the_patched_file_runs(
    tmp_path: Path, name: str, added: str, removed: str | None
) -> None:
    path = pipeline_file(tmp_path)
    folder = path.parent
    found = discover_sites(load_pipeline(path))
    assert unplaceable(folder, found, script=False) == {}

    patch = patch_for(folder, found, {}, {"sites": {name: 1}}, script=False)

    assert f"+    {added}" in patch.diff
    if removed is not None:
        assert f"-    {removed}" in patch.diff
    assert [change.site.name for change in patch.written] == [name]
    copy, element = patched_first_element(folder, patch.diff, tmp_path)
    assert tuple(element.shape) == (8, 8, 8, 3)
    if name == REORDER:
        assert "# tfperf --reorder" in (copy / "pipeline.py").read_text()
    again = edits_of(copy / "pipeline.py")  # made once: not proposed again
    assert not any(each.endswith(name.rpartition(".")[2]) for each in again)


def test_a_swap_at_a_cached_map_is_left_out_of_the_patch(tmp_path: Path) -> None:
    path = pipeline_file(tmp_path)
    found = discover_sites(load_pipeline(path))

    patch = patch_for(path.parent, found, {}, {"sites": {CACHE: 1, MOVE: 1}}, script=False)

    assert [change.site.name for change in patch.written] == [CACHE]
    assert "shuffle(16).map" not in patch.diff


def test_a_moved_call_carries_the_patchs_other_edits_to_its_arguments(tmp_path: Path) -> None:
    path = pipeline_file(tmp_path)
    found = discover_sites(load_pipeline(path))
    names = {(site.method, site.argument, site.line): site.name for site in found.sites}
    parallel = names[("map", "num_parallel_calls", 10)]
    buffer = names[("shuffle", "buffer_size", 11)]

    patch = patch_for(
        path.parent, found, {}, {"sites": {MOVE: 1, parallel: -1, buffer: 32}}, script=False
    )

    assert "+    ds = ds.shuffle(32).map(decode, num_parallel_calls=tf.data.AUTOTUNE)" in patch.diff
    assert sorted(change.site.name for change in patch.written) == sorted([MOVE, parallel, buffer])
    _, element = patched_first_element(path.parent, patch.diff, tmp_path)
    assert tuple(element.shape) == (8, 8, 8, 3)
