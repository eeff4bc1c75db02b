"""Which stage limits a pipeline: pure functions, exact figures; its advice is a finding."""

from __future__ import annotations

import dataclasses

import pytest

from tests.reports import fake_profile
from tfperf.findings import conclude
from tfperf.measure import _bottleneck as bottleneck
from tfperf.results.stages import StageKind, StageStat, StageUnit


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
    return bottleneck.with_added_costs(
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


def test_a_stage_adding_a_share_within_the_noise_is_no_bottleneck():
    # A Keras script's stages after its cache(), the stages before it served by the cache (no
    # added time): the shuffle "added" 0.6% of the time per example of its cut, a difference
    # no two windows tell apart.
    def after_cache(shuffle_rate: float) -> list[StageStat]:
        stages = bottleneck.with_added_costs(
            [
                _stage(0, StageKind.MAP, "map(augment)", 4_000.0, 0.00036),
                _stage(1, StageKind.CACHE, "cache", 247_000.0, 0.000004),
                _stage(2, StageKind.SHUFFLE, "shuffle(1000)", shuffle_rate, 0.000004),
            ]
        )
        return [dataclasses.replace(stages[0], added_s_per_example=None), *stages[1:]]

    assert bottleneck.find_bottleneck(after_cache(245_500.0)) is None
    assert bottleneck.find_bottleneck(after_cache(200_000.0)) == 2  # 19% of its cut's time


def test_the_bottleneck_is_the_stage_adding_most_time_but_never_a_prefetch():
    stages = _quickstart_like({"num_parallel_calls": 1})
    # The prefetch "adds" 0.5 ms (as much as the map): noise, since it does no work.
    assert bottleneck.find_bottleneck(stages) == 3


def test_no_bottleneck_without_a_stage_measured_in_examples():
    stages = [_stage(0, StageKind.SOURCE, "from_tensor_slices", 10.0, unit=StageUnit.INPUT)]
    assert bottleneck.find_bottleneck(bottleneck.with_added_costs(stages)) is None


def test_falls_short_names_the_first_stage_below_the_consumption_rate():
    stages = _quickstart_like({})
    assert bottleneck.falls_short(stages, 30_000.0) == 3
    assert bottleneck.falls_short(stages, 50_000.0) == 1
    assert bottleneck.falls_short(stages, 500.0) is None
    assert bottleneck.falls_short(stages, None) is None


def _report(map_parameters, consumption=13_500.0):
    return bottleneck.stage_report(
        _quickstart_like(map_parameters),
        consumption,
        seconds_per_stage=0.5,
        warmup_s=0.2,
        duration_s=4.0,
        note=None,
    )


def _said(report):
    """The limiting-stage finding's sentence, as the profile's findings say it."""
    result = dataclasses.replace(fake_profile(), stages=report)
    (said,) = [f.sentence for f in conclude(result).findings if f.topic == "limiting-stage"]
    return said


def test_the_stage_report_leaves_its_advice_to_the_findings():
    report = _report({"num_parallel_calls": 1})
    assert (report.bottleneck_index, report.falls_short_index) == (3, 3)
    assert report.advice == ""
    assert _said(report) == (
        "The limiting stage is map(parse): it adds 0.475 ms per example (2,000 examples/s "
        "after it). Run it in parallel with `num_parallel_calls=tf.data.AUTOTUNE` (it makes one "
        "call at a time now); if it still limits, make each call cheaper: vectorise it (batch "
        "first, then map over whole batches), or cache() right after its expensive "
        "deterministic part (decoding, resizing) so only random augmentation runs every epoch, "
        "or do that work once offline and store the result."
    )


def test_a_map_already_on_autotune_is_told_to_make_each_call_cheaper():
    assert "It already runs in parallel (AUTOTUNE), so make each call cheaper" in _said(
        _report({"num_parallel_calls": -1})
    )


def test_when_every_stage_keeps_up_no_stage_is_named_limiting():
    report = _report({}, consumption=800.0)
    assert report.limiting is None and report.bottleneck is not None
    assert _said(report) == (
        "Run alone, the pipeline keeps up with the model; its costliest stage, map(parse), "
        "adds 0.475 ms per example."
    )
