"""Verdict, advice, warm-up detection and statistics: pure functions, exact figures."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.measure import _analysis as analysis
from tfperf.results import Phase, StageKind, StageStat, StageUnit, StepRecord, Verdict


@pytest.mark.parametrize(
    ("fraction", "verdict"),
    [
        (0.0, Verdict.COMPUTE_BOUND),
        (0.0499, Verdict.COMPUTE_BOUND),
        (0.05, Verdict.MODERATELY_INPUT_BOUND),
        (0.1999, Verdict.MODERATELY_INPUT_BOUND),
        (0.20, Verdict.HIGHLY_INPUT_BOUND),
        (0.9, Verdict.HIGHLY_INPUT_BOUND),
    ],
)
def test_classify_uses_tensorboard_thresholds(fraction, verdict):
    assert analysis.classify(fraction) is verdict


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy(q):
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4, 0.15]
    assert analysis.percentile(values, q) == pytest.approx(np.percentile(values, q))


def test_wait_fraction():
    assert analysis.wait_fraction(1.0, 3.0) == 0.25
    assert analysis.wait_fraction(0.0, 0.0) == 0.0


def test_warmup_not_decided_while_times_drift():
    rule = analysis.WarmupRule(window=3, tolerance=0.1, min_steps=2, max_steps=50)
    assert analysis.detect_warmup_end([1.0, 0.8, 0.6, 0.4, 0.3, 0.2], rule) is None


def test_warmup_ends_where_the_steady_window_starts():
    rule = analysis.WarmupRule(window=3, tolerance=0.1, min_steps=2, max_steps=50)
    times = [1.0, 0.5, 0.25, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    # Windows [2:5] and [5:8] agree first; measurement starts with the later one.
    assert analysis.detect_warmup_end(times, rule) == (5, True)


def test_warmup_cap_reports_not_converged():
    rule = analysis.WarmupRule(window=2, tolerance=0.01, min_steps=1, max_steps=6)
    alternating = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert analysis.detect_warmup_end(alternating, rule) == (6, False)


def test_warmup_rule_rejects_inconsistent_bounds():
    with pytest.raises(ValueError, match="max_steps >= min_steps"):
        analysis.WarmupRule(min_steps=10, max_steps=5)


def _phase(phase, examples_per_step, wait, compute, steps=4):
    records = [
        StepRecord(
            start_s=i * (wait + compute),
            wait_s=wait,
            compute_s=compute,
            examples=examples_per_step,
            epoch=0,
            warmup=False,
        )
        for i in range(steps)
    ]
    return analysis.summarise_phase(phase, records, 0.1, True, 0)


def test_summarise_phase_exact():
    result = _phase(Phase.END_TO_END, 10, wait=0.01, compute=0.04)
    assert result.examples_per_sec == pytest.approx(200.0)
    assert result.input_wait_fraction == pytest.approx(0.2)
    assert result.step_time.mean_s == pytest.approx(0.05)


def test_summarise_phase_without_measured_steps_raises():
    record = StepRecord(start_s=0, wait_s=1, compute_s=1, examples=1, epoch=0, warmup=True)
    with pytest.raises(ValueError, match="no measured step"):
        analysis.summarise_phase(Phase.END_TO_END, [record], 1.0, True, 0)


def test_advice_when_the_pipeline_cannot_keep_up():
    e2e = _phase(Phase.END_TO_END, 10, wait=0.03, compute=0.02)
    pipeline = _phase(Phase.PIPELINE_ONLY, 10, wait=0.03, compute=0.0)  # 333/s
    compute = _phase(Phase.COMPUTE_ONLY, 10, wait=0.0, compute=0.02)  # 500/s
    advice = analysis.advise(Verdict.HIGHLY_INPUT_BOUND, e2e, pipeline, compute, {"prefetch": 0})
    assert "delivers 333 examples/s but the model could consume 500" in advice
    assert "prefetch" in advice and "it is 0" in advice


def test_advice_when_the_pipeline_keeps_up_alone():
    e2e = _phase(Phase.END_TO_END, 10, wait=0.02, compute=0.02)
    pipeline = _phase(Phase.PIPELINE_ONLY, 10, wait=0.01, compute=0.0)  # 1000/s
    compute = _phase(Phase.COMPUTE_ONLY, 10, wait=0.0, compute=0.02)  # 500/s
    advice = analysis.advise(Verdict.HIGHLY_INPUT_BOUND, e2e, pipeline, compute, {})
    assert "keeps up (1,000 vs 500 examples/s needed)" in advice
    assert "compete" in advice


def test_speedup_if_input_free():
    e2e = _phase(Phase.END_TO_END, 10, wait=0.03, compute=0.02)
    compute = _phase(Phase.COMPUTE_ONLY, 10, wait=0.0, compute=0.02)
    assert analysis.speedup_if_input_free(e2e, compute) == pytest.approx(2.5)
    assert analysis.speedup_if_input_free(e2e, None) is None


def test_compute_slowdown_and_contention_advice():
    e2e = _phase(Phase.END_TO_END, 10, wait=0.001, compute=0.03)
    compute = _phase(Phase.COMPUTE_ONLY, 10, wait=0.0, compute=0.02)
    assert analysis.compute_slowdown(e2e, compute) == pytest.approx(1.5)
    advice = analysis.advise(Verdict.COMPUTE_BOUND, e2e, None, compute, {})
    assert "compute 1.5x slower than on a cached batch" in advice
    quiet = analysis.advise(Verdict.COMPUTE_BOUND, compute, None, compute, {})
    assert "cached batch" not in quiet


# Stages ----------------------------------------------------------------------------------


def _stage(index, kind, label, rate, cpu=None, parameters=None, unit=StageUnit.EXAMPLE):
    return StageStat(
        index=index,
        kind=kind,
        label=label,
        location=None,
        parameters=parameters or {},
        unit=unit,
        elements_per_sec=rate,
        examples_per_sec=None if unit is StageUnit.INPUT else rate,
        cpu_s_per_element=cpu,
        cpu_s_per_example=None if unit is StageUnit.INPUT else cpu,
        added_s_per_example=None,
        added_cpu_s_per_example=None,
        elements=100,
        duration_s=0.5,
    )


def _quickstart_like(map_parameters):
    return analysis.with_added_costs(
        [
            _stage(0, StageKind.SOURCE, "from_tensor_slices", 50_000.0, unit=StageUnit.INPUT),
            _stage(1, StageKind.INTERLEAVE, "interleave(TFRecordDataset)", 40_000.0, 0.0000125),
            _stage(2, StageKind.SHUFFLE, "shuffle(1000)", 40_000.0, 0.0000125),
            _stage(3, StageKind.MAP, "map(parse)", 2_000.0, 0.0005, map_parameters),
            _stage(4, StageKind.BATCH, "batch(64)", 2_000.0, 0.0005, unit=StageUnit.BATCH),
            _stage(5, StageKind.PREFETCH, "prefetch(2)", 1_000.0, 0.0005, unit=StageUnit.BATCH),
        ]
    )


def test_added_costs_are_differences_from_the_previous_stage_counted_in_examples():
    stages = _quickstart_like({"num_parallel_calls": 1})
    added = [stage.added_s_per_example for stage in stages]
    assert added[0] is None  # file names are not examples
    assert added[1:] == pytest.approx([1 / 40_000, 0.0, 1 / 2_000 - 1 / 40_000, 0.0, 1 / 2_000])
    cpu = [stage.added_cpu_s_per_example for stage in stages]
    assert cpu[0] is None
    assert cpu[1:] == pytest.approx([0.0000125, 0.0, 0.0004875, 0.0, 0.0])


def test_the_bottleneck_is_the_stage_adding_most_time_but_never_a_prefetch():
    stages = _quickstart_like({"num_parallel_calls": 1})
    # The prefetch "adds" 0.5 ms (as much as the map): noise, since it does no work.
    assert analysis.find_bottleneck(stages) == 3


def test_no_bottleneck_without_a_stage_measured_in_examples():
    stages = [_stage(0, StageKind.SOURCE, "from_tensor_slices", 10.0, unit=StageUnit.INPUT)]
    assert analysis.find_bottleneck(analysis.with_added_costs(stages)) is None


def test_falls_short_names_the_first_stage_below_the_consumption_rate():
    stages = _quickstart_like({})
    assert analysis.falls_short(stages, 30_000.0) == 3
    assert analysis.falls_short(stages, 50_000.0) == 1
    assert analysis.falls_short(stages, 500.0) is None
    assert analysis.falls_short(stages, None) is None


def _report(map_parameters, consumption=13_500.0):
    return analysis.stage_report(
        _quickstart_like(map_parameters),
        consumption,
        seconds_per_stage=0.5,
        warmup_s=0.2,
        duration_s=4.0,
        note=None,
    )


def test_stage_advice_for_a_sequential_map():
    report = _report({"num_parallel_calls": 1})
    assert (report.bottleneck_index, report.falls_short_index) == (3, 3)
    assert report.advice == (
        "The limiting stage is map(parse): it adds 0.475 ms per example (40,000 examples/s "
        "before it, 2,000 examples/s after it). Run it in parallel with "
        "`num_parallel_calls=tf.data.AUTOTUNE` (it makes one call at a time now); if it still "
        "limits, make each call cheaper: vectorise it (batch first, then map over whole "
        "batches), cache() right after its expensive deterministic part (decoding, resizing) "
        "so only random augmentation runs every epoch, or do that part once offline and store "
        "the result."
    )


def test_stage_advice_for_a_map_already_on_autotune():
    advice = _report({"num_parallel_calls": -1}).advice
    assert advice.endswith(
        "after it). It already runs in parallel (AUTOTUNE), so make each call cheaper: "
        "vectorise it (batch first, then map over whole batches), cache() right after its "
        "expensive deterministic part (decoding, resizing) so only random augmentation runs "
        "every epoch, or do that part once offline and store the result."
    )


def test_stage_advice_when_every_stage_keeps_up():
    assert _report({}, consumption=800.0).advice == (
        "Every stage keeps up with the model (1,000 vs 800 examples/s); the costliest, "
        "map(parse), adds 0.475 ms per example."
    )


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
            "It already reads AUTOTUNE files at once: split the data into more, smaller shards, "
            "move it to faster storage, or cache() the records if they fit in memory.",
        ),
        (
            StageKind.SHUFFLE,
            "shuffle(100000)",
            {"buffer_size": 100_000},
            "A buffer of 100,000 elements costs time to fill and to copy through: use a smaller "
            "buffer_size and keep the order random by shuffling file names instead "
            "(list_files(shuffle=True) before the interleave).",
        ),
        (
            StageKind.BATCH,
            "batch(64)",
            {"batch_size": 64},
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
    assert analysis.stage_fix(_stage(1, kind, label, 100.0, parameters=parameters)) == fix
