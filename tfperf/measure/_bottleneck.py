"""Which stage limits an input pipeline, and what usually speeds a stage of its kind up.

Pure functions on measured `StageStat`s (the pipeline cut after each stage and run alone):
what each stage adds per example, the costliest stage, the first that falls short of the
model's consumption, and advice in words. No clock, no TensorFlow: tests assert exact figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfperf.results.stages import StageKind, StageReport, StageStat

#: Stages that pass elements on without per-example work: any time they seem to add is noise
#: (or overlap), so they are never named as the limiting stage.
NO_WORK_KINDS = frozenset({StageKind.PREFETCH, StageKind.REPEAT, StageKind.TAKE, StageKind.SKIP})


def with_added_costs(stages: Sequence[StageStat]) -> list[StageStat]:
    """Copies of `stages` with what each adds per example to the stage before it.

    A stage's rate is that of the pipeline cut after it, so `1 / examples_per_sec` is the time
    per example of everything up to it; the difference from the previous stage measured in
    examples is what this stage adds (the whole time for the first such stage). The same
    holds for CPU seconds per example.
    """
    result = []
    time_before = cpu_before = 0.0
    for stage in stages:
        rate, cpu = stage.examples_per_sec, stage.cpu_s_per_example
        if rate is None or rate <= 0:
            result.append(
                dataclasses.replace(stage, added_s_per_example=None, added_cpu_s_per_example=None)
            )
            continue
        added_cpu = None if cpu is None else cpu - cpu_before
        result.append(
            dataclasses.replace(
                stage, added_s_per_example=1 / rate - time_before, added_cpu_s_per_example=added_cpu
            )
        )
        time_before, cpu_before = 1 / rate, cpu if cpu is not None else cpu_before
    return result


def find_bottleneck(stages: Sequence[StageStat]) -> int | None:
    """Index of the stage that adds the most time per example; None if none adds any.

    Stages without an added time (not counted in examples, or not measured) and stages that do
    no per-example work (`NO_WORK_KINDS`) are not candidates; a tie goes to the earlier stage.
    """
    candidates = [
        stage
        for stage in stages
        if stage.added_s_per_example is not None and stage.kind not in NO_WORK_KINDS
    ]
    if not candidates:
        return None
    worst = max(candidates, key=lambda stage: stage.added_s_per_example or 0.0)
    return worst.index if (worst.added_s_per_example or 0.0) > 0 else None


def falls_short(stages: Sequence[StageStat], consumption: float | None) -> int | None:
    """Index of the first stage whose cut pipeline delivers fewer examples/s than `consumption`."""
    if consumption is None:
        return None
    for stage in stages:
        if stage.examples_per_sec is not None and stage.examples_per_sec < consumption:
            return stage.index
    return None


def stage_report(
    stages: Sequence[StageStat],
    consumption: float | None,
    *,
    seconds_per_stage: float,
    warmup_s: float,
    duration_s: float,
    note: str | None,
) -> StageReport:
    """The report on measured stages (added costs already set): bottleneck, shortfall, advice."""
    report = StageReport(
        stages=list(stages),
        bottleneck_index=find_bottleneck(stages),
        falls_short_index=falls_short(stages, consumption),
        consumption_examples_per_sec=consumption,
        seconds_per_stage=seconds_per_stage,
        warmup_s=warmup_s,
        duration_s=duration_s,
        note=note,
        advice="",
    )
    report.advice = stage_advice(report)
    return report


#: The last cut of the stage analysis is the whole pipeline alone, which the pipeline-only
#: phase measured too; a cut this much slower than that phase was disturbed (a busier machine
#: while it ran), and the stage it names may be noise. Well above the few percent two windows
#: of one pipeline differ by, since restarts also fall differently on the two.
DISTURBED_SHARE = 0.25


def checked_against(report: StageReport, pipeline_only: float | None) -> StageReport:
    """`report`, saying so where its last cut ran slower than the pipeline-only phase beyond
    `DISTURBED_SHARE`: the same pipeline measured twice, so its figures were disturbed and the
    stage it names limiting may be noise (tfperf cannot tell)."""
    output = next(
        (s.examples_per_sec for s in reversed(report.stages) if s.examples_per_sec is not None),
        None,
    )
    if output is None or not pipeline_only or output >= (1 - DISTURBED_SHARE) * pipeline_only:
        return report
    note = (
        f"the last cut ran {output:,.0f} examples/s, {1 - output / pipeline_only:.0%} below the "
        f"pipeline-only phase's {pipeline_only:,.0f} for the same pipeline: the stage figures "
        "were disturbed (a busier machine), so tfperf cannot tell which stage limits; profile "
        "again on a quieter machine"
    )
    advice = f"The stage figures were disturbed ({note.split(':', 1)[0]}); read them with care. "
    return dataclasses.replace(
        report,
        note=f"{report.note}; {note}" if report.note else note,
        advice=advice + report.advice if report.advice else "",
    )


def stage_advice(report: StageReport) -> str:
    """What to change at the limiting stage, or that the pipeline keeps up; "" if none is named."""
    stage = report.bottleneck
    if stage is None or stage.added_s_per_example is None or stage.examples_per_sec is None:
        return ""
    added = f"{stage.added_s_per_example * 1000:.3g} ms"
    output = next(
        (s.examples_per_sec for s in reversed(report.stages) if s.examples_per_sec is not None),
        None,
    )
    consumption = report.consumption_examples_per_sec
    if report.keeps_up and consumption is not None and output is not None:
        # No stage is named limiting here, so this never sits beside a limiting stage; a wait
        # end to end then has a cause no single stage explains, and the sentence says which.
        return (
            f"Run alone, the pipeline delivers what the model consumes ({output:,.0f} vs "
            f"{consumption:,.0f} examples/s), so no single stage limits it; any wait for input "
            "end to end comes from running beside the model (the two share the cores) or from "
            f"restarts. The costliest stage, {stage.label}, adds {added} per example."
        )
    before = next(
        (
            s.examples_per_sec
            for s in reversed(report.stages[: stage.index])
            if s.examples_per_sec is not None
        ),
        None,
    )
    rates = f"{stage.examples_per_sec:,.0f} examples/s after it"
    if before is not None:
        rates = f"{before:,.0f} examples/s before it, {rates}"
    return (
        f"The limiting stage is {stage.label}: it adds {added} per example ({rates}). "
        + stage_fix(stage)
    )


def stage_fix(stage: StageStat) -> str:
    """What usually speeds up a stage of this kind, given its arguments."""
    fixes = {
        StageKind.MAP: _map_fix,
        StageKind.READ: _read_fix,
        StageKind.INTERLEAVE: _interleave_fix,
        StageKind.SOURCE: _source_fix,
        StageKind.SHUFFLE: _shuffle_fix,
        StageKind.BATCH: _batch_fix,
    }
    if stage.kind in fixes:
        fix = fixes[stage.kind](stage)
    else:
        fix = _FIXES.get(stage.kind, _OTHER_FIX).format(**stage.parameters)
    # A generator's own advice already names the lock.
    if not stage.calls_python or stage.label.startswith("from_generator"):
        return fix
    return f"{fix} {_PYTHON_FIX}"


#: A stage whose function runs Python (tf.numpy_function, tf.py_function): its threads share
#: one interpreter lock, so past a few dozen threads each one adds wake-ups and hand-offs,
#: not speed; the lock is per process, so splitting the input over processes lifts it
#: (docs/limit.md, "A stage that calls Python").
_PYTHON_FIX = (
    "Its function calls Python (tf.numpy_function or tf.py_function): every call takes "
    "Python's global interpreter lock to start and again after any wait inside, so its threads "
    "queue for one lock and past a few dozen they add hand-offs, not speed. Do more per call "
    "(batch first and handle a whole batch in one call; for remote reads, one request for many "
    "objects), or use TensorFlow ops that need no Python (tf.io.read_file, a TFRecordDataset, "
    "tf.io.gfile's filesystems)."
)


_CHEAPER_CALLS = (
    "make each call cheaper: vectorise it (batch first, then map over whole batches), "
    "cache() right after its expensive deterministic part (decoding, resizing) so only random "
    "augmentation runs every epoch, or do that part once offline and store the result."
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


def _map_fix(stage: StageStat) -> str:
    calls = stage.parameters.get("num_parallel_calls")
    if calls is None or calls == 1:
        return (
            "Run it in parallel with `num_parallel_calls=tf.data.AUTOTUNE` (it makes one call "
            f"at a time now); if it still limits, {_CHEAPER_CALLS}"
        )
    if calls == -1:
        return f"It already runs in parallel (AUTOTUNE), so {_CHEAPER_CALLS}"
    return f"It runs {calls} calls at once: try AUTOTUNE, and {_CHEAPER_CALLS}"


def _read_fix(stage: StageStat) -> str:
    reads = stage.parameters.get("num_parallel_reads")
    if reads is None or reads == 1:
        return (
            "Read several files at once with `num_parallel_reads=tf.data.AUTOTUNE`, from at "
            "least as many files (shards) as cores."
        )
    return (
        f"It already reads {_shown(reads)} files at once: split the data into more, smaller "
        "shards, move it to faster storage, or cache() the records if they fit in memory."
    )


def _interleave_fix(stage: StageStat) -> str:
    calls = stage.parameters.get("num_parallel_calls")
    cycle = stage.parameters.get("cycle_length")
    if calls is None or calls == 1:
        return (
            "Read several inputs at once: raise cycle_length (now "
            f"{_shown(cycle) if cycle is not None else 'default'}) and set "
            "`num_parallel_calls=tf.data.AUTOTUNE`; with fewer files than cores, split the "
            "data into more shards."
        )
    return (
        f"It already reads {_shown(cycle) if cycle is not None else 'several'} inputs with "
        f"{_shown(calls)} parallel calls: more, smaller shards or faster storage help, or "
        "cache() the records if they fit in memory."
    )


def _source_fix(stage: StageStat) -> str:
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


def _shuffle_fix(stage: StageStat) -> str:
    size = stage.parameters.get("buffer_size")
    held = f"A buffer of {size:,} elements" if isinstance(size, int) else "A shuffle buffer"
    return (
        f"{held} costs time to fill and to copy through: use a smaller buffer_size and keep "
        "the order random by shuffling file names instead (list_files(shuffle=True) before "
        "the interleave)."
    )


def _batch_fix(stage: StageStat) -> str:
    if stage.parameters.get("num_parallel_calls") is None:
        return (
            "Batch in parallel with `batch(..., num_parallel_calls=tf.data.AUTOTUNE)`; smaller "
            "elements (crop, resize or cast before batching) also copy faster."
        )
    return (
        "Batching copies every element: make elements smaller before batching (crop, resize "
        "or cast earlier)."
    )


def _shown(value: int | bool | None) -> str:
    return "AUTOTUNE" if value == -1 else str(value)
