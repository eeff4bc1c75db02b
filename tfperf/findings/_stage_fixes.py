"""What usually speeds up a tf.data stage of its kind, said only where it holds.

Each fix reads the pipeline's facts (`PipelineFacts`) before it speaks: a map that already runs
on batches is not told to batch first, a map AUTOTUNE runs on several threads is not said to
run on one, a shuffle in a pipeline that reads no files is not told to shuffle file names, and
nothing is moved across a `cache()`.
"""

from __future__ import annotations

from tfperf.findings._facts import PipelineFacts
from tfperf.results.stages import StageKind, StageStat


def stage_fix(stage: StageStat, facts: PipelineFacts) -> str:
    """What usually speeds up `stage`, given its arguments and the pipeline around it."""
    fixes = {
        StageKind.MAP: _map_fix,
        StageKind.READ: _read_fix,
        StageKind.INTERLEAVE: _interleave_fix,
        StageKind.SOURCE: _source_fix,
        StageKind.SHUFFLE: _shuffle_fix,
        StageKind.BATCH: _batch_fix,
    }
    if stage.kind in fixes:
        fix = fixes[stage.kind](stage, facts)
    else:
        fix = _FIXES.get(stage.kind, _OTHER_FIX).format(**stage.parameters)
    # A generator's own advice already names the lock.
    if not stage.calls_python or stage.label.startswith("from_generator"):
        return fix
    return f"{fix} {_python_fix(facts.on_batches(stage))}"


def _python_fix(on_batches: bool) -> str:
    """A stage whose function calls Python: its threads queue for one interpreter lock."""
    per_call = (
        "Do more per call (it already takes batches: handle more of each batch in one call; "
        if on_batches
        else "Do more per call (batch first and handle a whole batch in one call; "
    )
    return (
        "Its function calls Python (tf.numpy_function or tf.py_function): every call takes "
        "Python's global interpreter lock to start and again after any wait inside, so its "
        "threads queue for one lock and past a few dozen they add hand-offs, not speed. "
        + per_call
        + "for remote reads, one request for many objects), or use TensorFlow ops that need "
        "no Python (tf.io.read_file, a TFRecordDataset, tf.io.gfile's filesystems)."
    )


def _cheaper_calls(stage: StageStat, facts: PipelineFacts) -> str:
    """Ways to make each call cheaper that this stage's place in the pipeline allows."""
    ways = []
    if not facts.on_batches(stage):
        ways.append("vectorise it (batch first, then map over whole batches)")
    if not facts.cached_after(stage):
        ways.append(
            "cache() right after its expensive deterministic part (decoding, resizing) so only "
            "random augmentation runs every epoch"
        )
    ways.append("do that work once offline and store the result")
    return "make each call cheaper: " + ", or ".join(ways) + "."


def _map_fix(stage: StageStat, facts: PipelineFacts) -> str:
    threads = facts.threads(stage)
    written = stage.parameters.get("num_parallel_calls")
    cheaper = _cheaper_calls(stage, facts)
    if threads == 1:
        return (
            "Run it in parallel with `num_parallel_calls=tf.data.AUTOTUNE` (it makes one call "
            f"at a time now); if it still limits, {cheaper}"
        )
    if threads is None and written in (None, 0):
        return (
            "It is written without `num_parallel_calls`: set it to tf.data.AUTOTUNE (tf.data "
            f"may parallelise it already; its AUTOTUNE choices were not read). Then {cheaper}"
        )
    if threads is None:
        return f"It already runs in parallel (AUTOTUNE), so {cheaper}"
    how = "AUTOTUNE chose" if stage.index in facts.autotuned else "written as"
    return f"It runs {threads} calls at once ({how} {threads}): {cheaper}"


def _read_fix(stage: StageStat, facts: PipelineFacts) -> str:
    threads = facts.threads(stage)
    if threads == 1:
        return (
            "Read several files at once with `num_parallel_reads=tf.data.AUTOTUNE`, from at "
            "least as many files (shards) as cores."
        )
    reads = "several" if threads is None else str(threads)
    return (
        f"It already reads {reads} files at once: split the data into more, smaller shards, "
        "move it to faster storage, or cache() the records if they fit in memory."
    )


def _interleave_fix(stage: StageStat, facts: PipelineFacts) -> str:
    threads = facts.threads(stage)
    cycle = stage.parameters.get("cycle_length")
    if threads == 1:
        return (
            "Read several inputs at once: raise cycle_length (now "
            f"{_shown(cycle) if cycle is not None else 'default'}) and set "
            "`num_parallel_calls=tf.data.AUTOTUNE`; with fewer files than cores, split the "
            "data into more shards."
        )
    calls = "several" if threads is None else str(threads)
    return (
        f"It already reads {_shown(cycle) if cycle is not None else 'several'} inputs with "
        f"{calls} parallel calls: more, smaller shards or faster storage help, or cache() the "
        "records if they fit in memory."
    )


def _source_fix(stage: StageStat, facts: PipelineFacts) -> str:
    if stage.label.startswith("from_generator"):
        return (
            "A Python generator yields one element at a time and holds the GIL: move its work "
            "into TensorFlow ops (from_tensor_slices or a file reader, then a parallel map), or "
            "interleave several generators that each yield part of the data."
        )
    return (
        "The source itself is slow: store the data as files (TFRecord) read in parallel, or "
        "keep it in memory."
    )


def _shuffle_fix(stage: StageStat, facts: PipelineFacts) -> str:
    size = stage.parameters.get("buffer_size")
    held = f"A buffer of {size:,} elements" if isinstance(size, int) else "A shuffle buffer"
    fix = f"{held} costs time to fill and to copy through: use a smaller buffer_size"
    if facts.reads_files() and facts.cache_index is None:
        return f"{fix}, and keep the order random by shuffling the file names before reading."
    return f"{fix}; a smaller buffer mixes less, so check the order stays random enough."


def _batch_fix(stage: StageStat, facts: PipelineFacts) -> str:
    if facts.threads(stage) == 1:
        return (
            "Batch in parallel with `batch(..., num_parallel_calls=tf.data.AUTOTUNE)`; smaller "
            "elements (crop, resize or cast before batching) also copy faster."
        )
    return (
        "Batching copies every element: make elements smaller before batching (crop, resize "
        "or cast earlier)."
    )


_FIXES = {
    StageKind.FILTER: (
        "It drops examples after the work that produced them: filter as early as possible, "
        "before expensive maps, or drop those examples offline."
    ),
    StageKind.CACHE: (
        "Reading through the cache is slower than making its input: a cache is fast only once "
        "filled (after one full epoch); cache in memory (cache() without a file name) if the "
        "data fits, right after the expensive deterministic stages."
    ),
    StageKind.UNBATCH: (
        "Splitting batches into elements costs time per element: keep the data batched and "
        "map over whole batches."
    ),
    StageKind.SHARD: (
        "Sharding here reads everything and keeps 1 element in {num_shards}: shard the file "
        "names before reading, so each worker reads only its own files."
    ),
    StageKind.JOIN: (
        "It joins several inputs measured together: profile each input on its own to find the "
        "slow one."
    ),
}
_OTHER_FIX = (
    "Look at what this stage does per element; `tfperf tune` searches the parallelism knobs."
)


def _shown(value: int | bool | None) -> str:
    return "AUTOTUNE" if value == -1 else str(value)
