"""What speeds up a stage of its kind, said only where the pipeline around it allows."""

from __future__ import annotations

import dataclasses

import pytest

from tests.fakes.stages import first_element_stat
from tfperf.findings._facts import PipelineFacts
from tfperf.findings._stage_fixes import stage_fix
from tfperf.results.stages import AutotuneChoice, AutotuneReadout, StageKind, StageStat, StageUnit

#: No stage analysis around the stage and no AUTOTUNE read-out: the arguments alone.
NO_FACTS = PipelineFacts.from_parts([])


def _stage(index, kind, label, rate, parameters=None, unit=StageUnit.EXAMPLE) -> StageStat:
    stage = first_element_stat(index, kind, label, 0.01, rate, parameters)
    return dataclasses.replace(stage, unit=unit)


@pytest.mark.parametrize(
    ("kind", "label", "parameters", "fix"),
    [
        (
            StageKind.INTERLEAVE,
            "interleave(TFRecordDataset)",
            {"cycle_length": 1, "num_parallel_calls": 1},
            "Read several inputs at once: raise cycle_length (now 1) and set "
            "`num_parallel_calls=tf.data.AUTOTUNE`; with fewer files than cores, split the data "
            "into more shards.",
        ),
        (
            StageKind.READ,
            "TFRecordDataset",
            {"num_parallel_reads": -1},
            "It already reads several files at once: split the data into more, smaller shards, "
            "move it to faster storage, or cache() the records if they fit in memory.",
        ),
        (
            StageKind.SHUFFLE,
            "shuffle(100000)",
            {"buffer_size": 100_000},
            "A buffer of 100,000 elements costs time to fill and to copy through: use a smaller "
            "buffer_size; a smaller buffer mixes less, so check the order stays random enough.",
        ),
        (
            StageKind.BATCH,
            "batch(64)",
            {"batch_size": 64, "num_parallel_calls": 1},
            "Batch in parallel with `batch(..., num_parallel_calls=tf.data.AUTOTUNE)`; smaller "
            "elements (crop, resize or cast before batching) also copy faster.",
        ),
        (
            StageKind.SHARD,
            "shard(4)",
            {"num_shards": 4, "index": 0},
            "Sharding here reads everything and keeps 1 element in 4: shard the file names "
            "before reading, so each worker reads only its own files.",
        ),
        (
            StageKind.SOURCE,
            "from_generator(read_rows)",
            {},
            "A Python generator yields one element at a time and holds the GIL: move its work "
            "into TensorFlow ops (from_tensor_slices or a file reader, then a parallel map), or "
            "interleave several generators that each yield part of the data.",
        ),
    ],
)
def test_stage_fix_by_kind(kind, label, parameters, fix):
    assert stage_fix(_stage(1, kind, label, 100.0, parameters=parameters), NO_FACTS) == fix


def test_a_stage_that_calls_python_is_told_its_threads_share_the_lock():
    stage = _stage(1, StageKind.MAP, "map(fetch)", 500.0, parameters={"num_parallel_calls": 8})
    plain = stage_fix(stage, NO_FACTS)
    assert "global interpreter lock" not in plain

    fix = stage_fix(dataclasses.replace(stage, calls_python=True), NO_FACTS)
    assert fix.startswith(plain + " Its function calls Python (tf.numpy_function")
    assert "one request for many objects" in fix


def _map(index: int, unit: StageUnit = StageUnit.EXAMPLE, **parameters) -> StageStat:
    return _stage(index, StageKind.MAP, "map(augment)", 100.0, parameters, unit)


def test_a_map_on_batches_is_not_told_to_batch_first():
    on_batches = _map(2, StageUnit.BATCH, num_parallel_calls=-1)
    batch = _stage(1, StageKind.BATCH, "batch(128)", 100.0, {"batch_size": 128})
    fix = stage_fix(on_batches, PipelineFacts.from_parts([batch, on_batches]))
    assert "batch first" not in fix and "vectorise" not in fix
    single = _map(1, num_parallel_calls=-1)
    assert "batch first" in stage_fix(single, PipelineFacts.from_parts([single]))


def test_a_map_before_a_cache_is_not_told_to_cache():
    decode = _map(1, num_parallel_calls=-1)
    cache = _stage(2, StageKind.CACHE, "cache()", 100.0)
    fix = stage_fix(decode, PipelineFacts.from_parts([decode, cache]))
    assert "cache()" not in fix


def test_the_thread_count_said_is_the_one_autotune_chose():
    written_without = _map(1)
    readout = AutotuneReadout(
        [AutotuneChoice(1, "map(augment)", "ParallelMapV2", "parallelism", None, 2, True)]
    )
    fix = stage_fix(written_without, PipelineFacts.from_parts([written_without], readout))
    assert fix.startswith("It runs 2 calls at once (AUTOTUNE chose 2)")
    assert "one call at a time" not in fix
    # Read, with no choice for this map: it ran sequentially.
    empty = AutotuneReadout([])
    fix = stage_fix(written_without, PipelineFacts.from_parts([written_without], empty))
    assert "one call at a time" in fix
    # Not read at all: tfperf says it cannot tell rather than guess one thread.
    assert "choices were not read" in stage_fix(written_without, NO_FACTS)


def test_file_names_are_shuffled_only_where_the_pipeline_reads_files():
    shuffle = _stage(1, StageKind.SHUFFLE, "shuffle(2048)", 100.0, {"buffer_size": 2048})
    alone = stage_fix(shuffle, PipelineFacts.from_parts([shuffle]))
    assert "file names" not in alone and "list_files" not in alone and "interleave" not in alone
    reader = _stage(0, StageKind.READ, "TFRecordDataset", 100.0)
    assert "file names" in stage_fix(shuffle, PipelineFacts.from_parts([reader, shuffle]))
