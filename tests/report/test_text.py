"""The terminal summary: the stage table and AUTOTUNE's choices, on a saved-style result."""

from __future__ import annotations

import dataclasses

from tests.fakes.clock import FakeClock, TimedData, timed_step
from tfperf.findings import conclude
from tfperf.measure import _bottleneck as bottleneck
from tfperf.measure._profiler import profile
from tfperf.probes import HostProbe
from tfperf.report import render_summary
from tfperf.results import ProfileResult
from tfperf.results.stages import (
    AutotuneChoice,
    AutotuneReadout,
    BatchShape,
    DatasetOptions,
    EpochSource,
    LoaderReport,
    RestartCost,
    RestartEvidence,
    StageKind,
    StageStat,
    StageUnit,
)


def _result() -> ProfileResult:
    clock = FakeClock()
    return profile(
        TimedData(clock, [0.02] * 6, batch=4),
        timed_step(clock, 0.01),
        steps=4,
        warmup=1,
        clock=clock,
        probes=[HostProbe()],
        pipeline="demo.py",
        knobs={"batch_size": 4},
    )


def _stage(index, kind, label, rate, cpu, unit=StageUnit.EXAMPLE, location=None, note=None):
    return StageStat(
        index=index,
        kind=kind,
        label=label,
        location=location,
        parameters={},
        unit=unit,
        elements_per_sec=rate,
        examples_per_sec=None if unit is StageUnit.INPUT else rate,
        cpu_s_per_element=cpu,
        cpu_s_per_example=None if unit is StageUnit.INPUT else cpu,
        added_s_per_example=None,
        added_cpu_s_per_example=None,
        elements=100,
        duration_s=0.5,
        note=note,
    )


def test_stage_table_marks_the_limiting_stage_and_the_models_rate():
    stages = bottleneck.with_added_costs(
        [
            _stage(0, StageKind.SOURCE, "from_tensor_slices", 50_000.0, None, StageUnit.INPUT),
            _stage(1, StageKind.READ, "TFRecordDataset", 40_000.0, 0.000025),
            _stage(2, StageKind.MAP, "map(parse)", 2_000.0, 0.0005, location="pipeline.py:9"),
            _stage(3, StageKind.BATCH, "batch(64)", 2_000.0, 0.0005, StageUnit.BATCH),
            _stage(
                4,
                StageKind.PREFETCH,
                "prefetch(2)",
                None,
                None,
                note="could not be measured: OSError",
            ),
        ]
    )
    report = bottleneck.stage_report(
        stages, 13_500.0, seconds_per_stage=0.5, warmup_s=0.2, duration_s=3.5, note=None
    )
    text = render_summary(conclude(dataclasses.replace(_result(), stages=report)))
    table = text[text.index("Stages") :].split("\n\n")[0].splitlines()
    assert table == [
        "Stages (the pipeline cut after each one, run alone for 0.5 s each; 3.5 s in all):",
        "   #  stage                                examples/s  CPU ms/example  adds ms/example",
        "   0  from_tensor_slices                     50,000.0  (inputs/s: its elements are not "
        "examples)",
        "   1  TFRecordDataset                        40,000.0           0.025            0.025",
        "   2  map(parse)                              2,000.0           0.500            0.475   "
        "<- limiting stage, pipeline.py:9; first below the model's rate",
        "   3  batch(64)                               2,000.0           0.500            0.000",
        "   4  prefetch(2)                        could not be measured: OSError",
        "      the model consumes (compute only)      13,500.0",
    ]


def test_autotune_choices_are_listed_and_an_unreadable_model_says_why():
    added = "Prefetch (added by tf.data)"
    choices = [
        AutotuneChoice(1, "interleave(f)", "Interleave", "cycle_length", "cycle_length", 1, False),
        AutotuneChoice(2, "map(parse)", "MapV2", "parallelism", "num_parallel_calls", 2, True),
        AutotuneChoice(None, added, "Prefetch", "buffer_size", None, 4, True),
    ]
    text = render_summary(dataclasses.replace(_result(), autotune=AutotuneReadout(choices)))
    assert (
        "AUTOTUNE chose (end of the end-to-end phase): interleave(f) cycle_length=1 (fixed "
        "at start); map(parse) num_parallel_calls=2; Prefetch (added by tf.data) "
        "buffer_size=4." in text
    )
    off = AutotuneReadout([], "tf.data autotuning is off for this dataset")
    text = render_summary(dataclasses.replace(_result(), autotune=off))
    assert "AUTOTUNE's choices: not read (tf.data autotuning is off for this dataset)." in text


def test_a_result_without_stages_or_autotune_shows_neither():
    text = render_summary(_result())
    assert "Stages (" not in text and "AUTOTUNE" not in text


def test_the_tune_summary_warns_of_every_change_to_training():
    """Global knobs and written call sites alike, by `training_changes`, as the HTML does."""
    from tfperf.report._tune_text import training_warnings
    from tfperf.results.tune import Measurement, training_changes

    site = "batch@data/input.py:7.batch_size"
    best = Measurement("trial 4", 4, {"batch_size": 64, "sites": {site: 128}}, [300.0], 1, None)
    base = Measurement("baseline", 0, {"batch_size": 32, "sites": {site: 32}}, [100.0], 1, None)
    changes = training_changes(best, base)
    assert changes == ["batch_size", site]
    assert training_warnings(best, base, changes) == [
        "The winner changes the batch size (32 → 64): the learning rate and convergence may "
        "need retuning. Check accuracy before adopting it.",
        f"The winner changes {site} (32 → 128), a batch size or shuffle buffer in your code: "
        "this alters training, not only speed. Check accuracy before adopting it.",
    ]


def _bare() -> ProfileResult:
    """A profile of fake data whose batches arrive at once and compute 10 ms each."""
    clock = FakeClock()
    return profile(
        TimedData(clock, [0.0] * 8, batch=4),
        timed_step(clock, 0.01),
        steps=4,
        warmup=1,
        clock=clock,
        probes=[],
        knobs={"deterministic": None, "private_threadpool_size": None},
    )


def test_a_compute_bound_ceiling_says_input_costs_nothing_not_a_slower_speed():
    result = dataclasses.replace(_bare(), speedup_if_input_free=0.91)
    text = render_summary(result)
    assert "0.91x as fast" not in text
    assert "Input costs training nothing measurable" in text
    assert "compute bounds it" in text
    faster = render_summary(dataclasses.replace(result, speedup_if_input_free=2.5))
    assert "If input were free, training would run 2.50x as fast" in faster


def test_options_the_pipeline_set_itself_show_their_effective_value():
    options = DatasetOptions(deterministic=False, private_threadpool_size=None, autotune=None)
    text = render_summary(dataclasses.replace(_bare(), dataset_options=options))
    assert "deterministic=False (set by the pipeline)" in text
    assert "private_threadpool_size=not set" in text
    assert "deterministic=None" not in text


def test_restarts_show_their_cost_the_stage_and_the_weighted_share():
    cost = RestartCost(
        restarts=2,
        seconds_per_restart=1.5,
        stage="shuffle(10000)",
        stage_kind=StageKind.SHUFFLE,
        steady_wait_s_per_step=0.0005,
        steady_wait_fraction=0.01,
        weighted_wait_fraction=0.012,
        window_wait_share=0.97,
        epoch_steps=20_000,
        epoch_source=EpochSource.CARDINALITY,
        weighted_examples_per_sec=900.0,
        evidence=RestartEvidence.ENOUGH,
    )
    text = render_summary(dataclasses.replace(_bare(), restarts=cost))
    assert (
        "Restarts: the finite dataset restarted 2 times in the window, each costing 1.5 s "
        "while shuffle(10000) fills again (97% of the window's wait)."
    ) in text
    assert "real epoch of 20,000 steps (the dataset's cardinality) 1.2%" in text


#: A DataLoader script's 2 passes in the window: too few to tell what a restart costs.
_LOADER_RESTARTS = RestartCost(
    restarts=2,
    seconds_per_restart=0.0554,
    stage="workers start",
    stage_kind=StageKind.WORKERS,
    steady_wait_s_per_step=0.0186,
    steady_wait_fraction=0.924,
    weighted_wait_fraction=0.927,
    window_wait_share=0.08,
    epoch_steps=64,
    epoch_source=EpochSource.OBSERVED,
    weighted_examples_per_sec=2_980.0,
    evidence=RestartEvidence.FEW_RESTARTS,
    would_tell="cannot tell what a restart costs from 2 restarts: profile with more --steps",
)


def test_restarts_too_few_to_tell_state_no_cost_beside_the_caution_that_says_so():
    # A DataLoader script's 2 passes: the caution says tfperf cannot tell what a restart
    # costs, so the figures above it state none either.
    cost = _LOADER_RESTARTS
    result = conclude(dataclasses.replace(_bare(), restarts=cost))
    text = render_summary(result)
    assert "too few or too scattered to tell what one costs" in text
    assert "55.4 ms" not in text and "real epoch of 64" not in text
    assert any(f.rule == "restarts" and "cannot tell" in f.text for f in result.findings)
    told = dataclasses.replace(cost, evidence=RestartEvidence.ENOUGH)
    assert told.waiting_on == " while the loader's workers start again"


def test_batches_of_several_shapes_are_listed_with_their_retracing():
    shapes = [
        BatchShape("(32, 5)", 4, 32, first_compute_s=0.3, typical_compute_s=0.004),
        BatchShape("(4, 5)", 32, 4, first_compute_s=0.2, typical_compute_s=0.001),
    ]
    text = render_summary(conclude(dataclasses.replace(_bare(), batch_shapes=shapes)))
    assert "Batches came in 2 shapes (32 examples x4, 4 examples x32)" in text
    # The first shape's first step is the step's first compile, which every run pays.
    assert "the first batch of 4 examples took 199 ms longer than the later ones" in text
    assert "compiles again for each new input shape" in text
    assert "Batches came in" not in render_summary(
        dataclasses.replace(_bare(), batch_shapes=shapes[:1])
    )


def test_a_baseline_winner_is_not_listed_twice_in_the_tune_summary():
    from tfperf.report._tune_text import _headline
    from tfperf.results.tune import Measurement, Objective, TuneResult, speedup

    base = Measurement("baseline", 0, {"batch_size": 32}, [100.0, 101.0], 1, None)
    tuned = Measurement("autotune", 1, {"batch_size": 32}, [99.0, 100.0], 1, None)
    result = TuneResult(
        pipeline="demo.py",
        study_name="demo",
        storage="sqlite://",
        objective=Objective.THROUGHPUT,
        best=base,
        baseline=base,
        autotune=tuned,
        candidates=[base, tuned],
        speedup_vs_baseline=speedup(base, base),
        speedup_vs_autotune=speedup(base, tuned),
        recommendation="keep the baseline",
        changes_training=[],
        pareto_trials=[],
        trial_counts={},
        trials_this_run=0,
        wall_s=1.0,
        ram_budget_bytes=None,
        gpu_memory_budget_bytes=None,
    )
    text = _headline(result)
    assert text.startswith("Best: baseline: 100.5 examples/s")
    assert "\n  baseline:" not in text
    assert "  AUTOTUNE: 99.5 examples/s" in text


def test_a_disturbed_compute_only_phase_is_named_not_read_as_a_speed():
    result = dataclasses.replace(_bare(), speedup_if_input_free=1.33, compute_slowdown=0.75)
    text = render_summary(conclude(result))
    assert "training would run 1.33x as fast" in text
    assert "took 1.33x as long per example as end to end" in text
    assert "compute-only phase was disturbed" in text
    assert "An example computes 0.75x" not in text
    normal = render_summary(dataclasses.replace(result, compute_slowdown=1.5))
    assert "An example computes 1.50x as long end to end" in normal


def test_keeping_the_baseline_hands_over_no_snippet_of_the_fastest_run():
    from tfperf.knobs import Knobs
    from tfperf.report._tune_text import _apply
    from tfperf.results.tune import Measurement, Objective, TuneResult, speedup

    base = Measurement("baseline", 0, Knobs(prefetch=0).to_dict(), [100.0, 140.0], 1, None)
    tuned = Measurement("autotune", 1, Knobs(prefetch=-1).to_dict(), [125.0, 130.0], 1, None)
    result = TuneResult(
        pipeline="demo.py",
        study_name="demo",
        storage="sqlite://",
        objective=Objective.THROUGHPUT,
        best=tuned,
        baseline=base,
        autotune=tuned,
        candidates=[base, tuned],
        speedup_vs_baseline=speedup(tuned, base),
        speedup_vs_autotune=None,
        recommendation="",
        changes_training=[],
        pareto_trials=[],
        trial_counts={},
        trials_this_run=0,
        wall_s=1.0,
        ram_budget_bytes=None,
        gpu_memory_budget_bytes=None,
    )
    assert not result.speedup_vs_baseline.significant
    assert _apply(result) == ""
    beaten = dataclasses.replace(base, examples_per_sec=[60.0, 61.0])
    gained = dataclasses.replace(
        result, baseline=beaten, speedup_vs_baseline=speedup(tuned, beaten)
    )
    assert "prefetch(tf.data.AUTOTUNE)" in _apply(gained)


def test_the_fastest_passed_over_says_why_it_is_not_the_recommendation():
    from tests.report.helpers import measured, tune_result
    from tfperf.report._tune_text import _passed_over
    from tfperf.results.tune import Speedup

    parallel = measured("trial 3", [2000.0, 2000.0], batch_size=32, num_parallel_calls=8)
    smaller = measured("trial 4", [4000.0, 4100.0], batch_size=128)
    larger = measured("trial 9", [4000.0, 4400.0], batch_size=128, shuffle_buffer=4096)

    within = dataclasses.replace(
        tune_result(gain_over_input_only=Speedup(1.02, 0.05, False)), best=parallel
    )
    assert _passed_over(within, larger) == (
        "trial 9 changes training for 1.02x ± 0.05 (within noise: not a measured gain)"
    )
    # Fastest in the runs that chose it; confirmed, it may be slower: the label says which.
    from tfperf.report._tune_text import _limit
    from tfperf.results import Limit, LimitBound

    limit = Limit(5000.0, LimitBound.COMPUTE, "the model's step", [], "")
    slower = dataclasses.replace(
        within, fastest=larger, limit=limit, gain_over_input_only=Speedup(0.77, 0.94, False)
    )
    assert "  fastest in the search, not recommended: trial 9 changes training for 0.77x" in (
        _limit(slower)
    )
    smaller_wins = dataclasses.replace(
        tune_result(gain_over_input_only=Speedup(2, 0.03, True)),
        best=smaller,
        changes_training=["batch_size"],
    )
    assert _passed_over(smaller_wins, larger) == (
        "trial 9 changes training more than trial 4, for 1.04x ± 0.06 (within noise: not a "
        "measured gain) over it"
    )


def test_end_to_end_above_the_pipeline_alone_beyond_the_noise_is_flagged():
    result = _result()
    assert result.pipeline_only is not None
    e2e = result.end_to_end.examples_per_sec
    for rate, flagged in ((e2e / 1.04, False), (e2e / 1.2, True)):
        alone = dataclasses.replace(result.pipeline_only, examples_per_sec=rate)
        text = render_summary(conclude(dataclasses.replace(result, pipeline_only=alone)))
        assert ("End to end ran 20% faster than the pipeline alone" in text) is flagged


def test_one_restarts_evidence_is_one_wait_not_a_range():
    from tfperf.findings._restart_words import restart_finding

    cost = dataclasses.replace(
        _LOADER_RESTARTS, restarts=1, stage=None, stage_kind=None, restart_waits_s=[0.116]
    )
    finding = restart_finding(cost, loader=LoaderReport(2, False))
    assert finding is not None and finding.evidence.spread == "a wait of 116 ms"


def test_shapes_of_one_example_count_are_listed_by_their_tensors():
    shapes = [
        BatchShape("(64, 199), (64,)", 46, 64, first_compute_s=0.5, typical_compute_s=0.005),
        BatchShape("(64, 195), (64,)", 23, 64, first_compute_s=0.006, typical_compute_s=0.005),
    ]
    text = render_summary(dataclasses.replace(_bare(), batch_shapes=shapes))
    assert "Batches came in 2 shapes ((64, 199), (64,) x46, (64, 195), (64,) x23)" in text


def test_a_loader_built_for_each_pass_is_told_to_be_built_once_not_to_keep_its_workers():
    from tfperf.findings._restart_words import _restart_fix

    for workers, persistent, asks in ((4, True, ""), (0, False, "num_workers > 0 and ")):
        loader = LoaderReport(workers, persistent, built_anew="train.py:19")
        fix = _restart_fix(_LOADER_RESTARTS, loader, 1)
        assert fix.startswith("The loop at train.py:19 builds a new DataLoader for each pass")
        assert f"build it once, before that loop, with {asks}persistent_workers=True" in fix
        assert ("whatever it is passed" in fix) is (workers > 0)
    kept = _restart_fix(_LOADER_RESTARTS, LoaderReport(4, True), 1)
    assert kept.startswith("Each pass of the DataLoader starts from empty: its kept workers")
