"""The model's guide to the search: thread ranges, widening, the estimate as a reference."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import optuna
import pytest

from tests.fakes.trials import FakeRunner, fake_result
from tests.pipelines import TUNER_SOURCE
from tfperf.hardware import Machine
from tfperf.knobs import AUTOTUNE, Choices, Fixed, IntRange, Knobs
from tfperf.measure import stage_report, with_added_costs
from tfperf.pipeline import load_pipeline
from tfperf.results import LimitBound, TrialOutcome, TrialStatus
from tfperf.results.stages import StageKind, StageStat, StageUnit
from tfperf.results.tune import Estimate, Reference, TuneResult
from tfperf.tuner import TuneOptions, Tuner
from tfperf.tuner._guide import (
    Guide,
    guided_ranges,
    knob_drives_interleave,
    literal_cycles,
    make_guide,
    thread_range,
    widen,
)
from tfperf.tuner._proposers import pool_estimate, prefetch_depth, unordered
from tfperf.tuner._search import GUIDED_SUFFIX, suggest_knobs

MACHINE = Machine(
    cpu_count=2, total_ram_bytes=8 << 30, available_ram_bytes=6 << 30, gpu_names=(), cpu_bf16=False
)


def _stat(index, kind, label, seconds, cpu, parameters=None):
    return StageStat(
        index=index,
        kind=kind,
        label=label,
        location=None,
        parameters=parameters or {},
        unit=StageUnit.EXAMPLE,
        elements_per_sec=1 / seconds,
        examples_per_sec=1 / seconds,
        cpu_s_per_element=cpu,
        cpu_s_per_example=cpu,
        added_s_per_example=None,
        added_cpu_s_per_example=None,
        elements=1000,
        duration_s=1.0,
    )


def remote_stages(fetch_parameters):
    """range -> map(fetch): a 2 ms blocking read per example on one thread."""
    stats = [
        _stat(0, StageKind.SOURCE, "range", 10e-6, 10e-6),
        _stat(1, StageKind.MAP, "map(fetch)", 2.01e-3, 30e-6, fetch_parameters),
    ]
    return stage_report(
        with_added_costs(stats), None, seconds_per_stage=1, warmup_s=0, duration_s=1, note=None
    )


def with_model(result, compute_rate=9000.0):
    """`result` with the remote-storage stages and a compute-only phase at `compute_rate`."""
    assert result.compute_only is not None
    compute = dataclasses.replace(result.compute_only, examples_per_sec=compute_rate)
    return dataclasses.replace(
        result, stages=remote_stages({"num_parallel_calls": 1}), compute_only=compute, cpu=None
    )


def parse_stages():
    """range -> map(parse): a parse computing 0.3 ms per example on one thread."""
    stats = [
        _stat(0, StageKind.SOURCE, "range", 10e-6, 10e-6),
        _stat(1, StageKind.MAP, "map(parse)", 0.31e-3, 0.31e-3, {"num_parallel_calls": 1}),
    ]
    return stage_report(
        with_added_costs(stats), None, seconds_per_stage=1, warmup_s=0, duration_s=1, note=None
    )


def with_parse(result, compute_rate=9000.0):
    """`result` with a computing parse and a compute-only phase at `compute_rate`."""
    return dataclasses.replace(with_model(result, compute_rate), stages=parse_stages())


def test_thread_range_brackets_the_models_count():
    assert thread_range(18) == IntRange(14, 32, log=True)
    assert thread_range(1) == IntRange(1, 2, log=True)


def test_a_range_widens_when_the_best_sits_on_its_edge():
    current = IntRange(14, 32, log=True)
    assert widen(current, 32) == IntRange(14, 64, log=True)
    assert widen(current, 14) == IntRange(7, 32, log=True)
    assert widen(current, 20) == current
    assert widen(current, AUTOTUNE) == current


def _guide():
    baseline = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)
    guide = make_guide(
        with_model(fake_result(baseline, 0.01)),
        MACHINE,
        baseline,
        {},
        ["num_parallel_calls", "private_threadpool_size", "prefetch"],
    )
    assert guide is not None
    return guide


def test_the_guide_sizes_the_blocking_map_and_the_pool_by_littles_law():
    guide = _guide()

    assert guide.limit.bound_by is LimitBound.COMPUTE
    assert guide.threads == {"num_parallel_calls": 18, "private_threadpool_size": 18}
    assert guide.estimate.knobs.num_parallel_calls == 18
    assert guide.estimate.knobs.private_threadpool_size == 18
    # The fetch blocks: the deepest prefetch of the default space (0, 1, 2, 4, 8, AUTOTUNE).
    assert guide.estimate.knobs.prefetch == 8
    assert guide.estimate.knobs.batch_size == 32  # training as written
    assert guide.estimate.predicted_examples_per_sec == pytest.approx(9000.0)
    assert Guide.from_dict(json.loads(json.dumps(guide.to_dict()))) == guide


def test_a_map_left_sequential_by_its_knob_is_sized_in_the_estimate():
    """`num_parallel_calls` None (the knob's "one at a time"): the stage records no argument,
    yet the estimate runs the fetch on as many calls as one written with `num_parallel_calls=1`
    gets, so it delivers the rate it predicts."""
    baseline = Knobs(batch_size=32, num_parallel_calls=None, prefetch=0)
    result = dataclasses.replace(with_model(fake_result(baseline, 0.01)), stages=remote_stages({}))
    guide = make_guide(result, MACHINE, baseline, {}, _GUIDABLE)

    assert guide is not None
    assert guide.estimate.knobs.num_parallel_calls == 18
    assert guide.estimate.knobs.private_threadpool_size == 18
    assert guide.estimate.predicted_examples_per_sec == pytest.approx(9000.0)
    assert guide.threads == _guide().threads


def test_the_estimate_buffers_deepest_only_behind_a_blocking_stage():
    space = Choices((0, 1, 2, 4, AUTOTUNE))
    assert prefetch_depth(space, blocks=True) == 4
    assert prefetch_depth(IntRange(1, 6), blocks=True) == 6
    assert prefetch_depth(space, blocks=False) == AUTOTUNE
    assert prefetch_depth(None, blocks=False) == AUTOTUNE


def test_the_estimate_runs_its_parallel_stages_unordered_where_the_search_may():
    baseline = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)
    result = with_model(fake_result(baseline, 0.01))
    guidable = ["num_parallel_calls", "private_threadpool_size"]
    free = {"deterministic": Choices((None, False))}
    guide = make_guide(result, MACHINE, baseline, free, guidable)
    assert guide is not None and guide.estimate.knobs.deterministic is False
    # Fixed by the user (`--fix deterministic=None`), or left out of the space: as written.
    for space in ({"deterministic": Fixed(None)}, {}):
        guide = make_guide(result, MACHINE, baseline, space, guidable)
        assert guide is not None and guide.estimate.knobs.deterministic is None


def test_only_a_sized_parallel_stage_makes_the_estimate_unordered():
    free = Choices((None, False))
    assert unordered(free, {"num_parallel_calls": 18})
    assert not unordered(free, {"num_parallel_calls": 1})
    # A pool alone orders nothing: only a parallel stage hands out elements.
    assert not unordered(free, {"private_threadpool_size": 18})
    assert not unordered(Choices((None, True)), {"num_parallel_calls": 18})


_GUIDABLE = ["num_parallel_calls", "private_threadpool_size", "prefetch"]
_FREE = {"prefetch": Choices((0, 1, 2, 4, 8, AUTOTUNE))}


def test_a_computing_pipeline_also_runs_its_estimate_on_the_cores_its_input_spends():
    baseline = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)
    result = with_parse(fake_result(baseline, 0.01))
    guide = make_guide(result, MACHINE, baseline, _FREE, _GUIDABLE)

    assert guide is not None and guide.estimate_of(Reference.TRAINING) is None
    # The parse computes: its calls and the pool are what the 2 cores hold, AUTOTUNE's prefetch.
    assert guide.estimate.knobs.private_threadpool_size == 4
    assert guide.estimate.knobs.prefetch == AUTOTUNE
    pooled = guide.estimate_of(Reference.POOL)
    assert pooled is not None
    # The step's CPU was not sampled, so the roofline is the input's alone (2 cores ÷ 0.31 ms
    # = 6,452/s): at that rate it spends both cores, and a pool of 2 delivers the prediction.
    assert pooled.knobs == guide.estimate.knobs.replace(private_threadpool_size=2, prefetch=2)
    assert pooled.predicted_examples_per_sec == pytest.approx(2 / 0.31e-3)
    assert pooled.predicted_examples_per_sec == guide.estimate.predicted_examples_per_sec
    assert Guide.from_dict(json.loads(json.dumps(guide.to_dict()))) == guide


@pytest.mark.parametrize(
    ("input_cpu", "pool", "predicted"),
    [
        # 3,690/s x 0.25 ms = 0.92 cores: a pool of 1, which holds the input to 4,000/s.
        (0.25e-3, 1, 3690.0),
        # 3,690/s x 0.29 ms = 1.07 cores: one core holds the input to 1 ÷ 0.29 ms = 3,448/s,
        # 93% of the prediction, within the model's error: a pool of 1 at that cap.
        (0.29e-3, 1, 1 / 0.29e-3),
        # 3,690/s x 0.4 ms = 1.48 cores: one core would hold it to 68%. In the bench at
        # b5a6b1b a pool of 1 ran image_decode (1.52 cores of input) at 1,548 examples/s
        # against its 1-core cap of 1,603: a pool of 2, which delivers the prediction.
        (0.4e-3, 2, 3690.0),
    ],
)
def test_the_pooled_estimate_holds_the_input_to_its_pools_cores(input_cpu, pool, predicted):
    model = dataclasses.replace(
        _parse_model(), predicted_examples_per_sec=3690.0, input_cpu_s_per_example=input_cpu
    )
    base = Estimate(
        knobs={"private_threadpool_size": 4, "prefetch": AUTOTUNE},
        predicted_examples_per_sec=3690.0,
    )

    pooled = pool_estimate(base, model, _FREE)

    assert pooled is not None
    assert pooled.knobs == Knobs(private_threadpool_size=pool, prefetch=2)
    assert pooled.predicted_examples_per_sec == pytest.approx(predicted)


def test_no_pooled_estimate_behind_a_blocking_stage_or_where_the_pool_is_not_tfperfs():
    # The fetch waits on its pool's threads: confining them to the cores left would starve it.
    assert _guide().estimate_of(Reference.POOL) is None
    baseline = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)
    result = with_parse(fake_result(baseline, 0.01))
    fixed = {**_FREE, "private_threadpool_size": Fixed(None)}
    guide = make_guide(result, MACHINE, baseline, fixed, ["num_parallel_calls"])
    assert guide is not None and guide.estimate_of(Reference.POOL) is None
    # A prefetch the search may not choose: the pooled estimate would leave the space.
    depths = {"prefetch": Choices((0, 8))}
    guide = make_guide(result, MACHINE, baseline, depths, _GUIDABLE)
    assert guide is not None and guide.estimate_of(Reference.POOL) is None


def test_the_pooled_estimate_is_none_where_the_last_estimate_already_runs_so():
    guide = make_guide(
        with_parse(fake_result(Knobs(batch_size=32), 0.01)),
        MACHINE,
        Knobs(batch_size=32),
        _FREE,
        _GUIDABLE,
    )
    assert guide is not None and guide.estimate_of(Reference.POOL) is not None
    model = _parse_model()
    assert pool_estimate(guide.estimate_of(Reference.POOL), model, _FREE) is None


def _parse_model():
    from tfperf.measure import model_from_profile

    model = model_from_profile(with_parse(fake_result(Knobs(batch_size=32), 0.01)), 2)
    assert model is not None
    return model


def test_guided_ranges_follow_the_best_trial():
    guide = _guide()
    assert guided_ranges(guide, None)["num_parallel_calls"] == IntRange(14, 32, log=True)
    best = Knobs(num_parallel_calls=32, private_threadpool_size=20)
    ranges = guided_ranges(guide, best)
    assert ranges["num_parallel_calls"] == IntRange(14, 64, log=True)
    assert ranges["private_threadpool_size"] == IntRange(14, 32, log=True)


@pytest.mark.parametrize(("cycle", "cores", "cap"), [(2, 2, 2), (AUTOTUNE, 3, 3)])
def test_a_fixed_cycle_length_caps_an_interleaves_parallelism(cycle, cores, cap):
    """A number caps at itself; AUTOTUNE at the cores (tf.data's value at iterator creation)."""
    baseline = Knobs(cycle_length=cycle, num_parallel_calls=1)
    machine = dataclasses.replace(MACHINE, cpu_count=cores)
    stats = [
        _stat(0, StageKind.SOURCE, "list_files", 10e-6, 10e-6),
        _stat(
            1,
            StageKind.INTERLEAVE,
            "interleave(read)",
            2.01e-3,
            30e-6,
            {"cycle_length": cycle, "num_parallel_calls": 1},
        ),
    ]
    report = stage_report(
        with_added_costs(stats), None, seconds_per_stage=1, warmup_s=0, duration_s=1, note=None
    )
    result = dataclasses.replace(with_model(fake_result(baseline, 0.01)), stages=report)
    guide = make_guide(
        result, machine, baseline, {"cycle_length": Fixed(cycle)}, ["num_parallel_calls"]
    )

    assert guide is not None and guide.knob_interleave
    assert guide.threads == {"num_parallel_calls": cap}
    assert guide.cycle_caps == {"num_parallel_calls": cap}
    ranges = guided_ranges(guide, Knobs(num_parallel_calls=cap))
    assert ranges["num_parallel_calls"].high == cap


def _interleave(parameters):
    return [_stat(0, StageKind.INTERLEAVE, "interleave(read)", 1e-3, 1e-4, parameters)]


def test_the_knob_drives_an_interleave_only_when_the_profile_shows_it():
    # image_decode passes its cycle_length knob to both interleave arguments, and its baseline
    # has both knobs at 1: the value 1 cannot tell which knob set the calls.
    same = Knobs(cycle_length=1, num_parallel_calls=1)
    assert not knob_drives_interleave(_interleave({"num_parallel_calls": 1}), same)
    # Calls at the knob's 2, cycle 4: the knob sets them, so 8 > 4 is refused unmeasured.
    apart = Knobs(cycle_length=4, num_parallel_calls=2)
    assert knob_drives_interleave(_interleave({"num_parallel_calls": 2}), apart)
    assert not knob_drives_interleave(_interleave({"num_parallel_calls": 4}), apart)
    assert not knob_drives_interleave(_interleave({}), apart)


def test_guided_ranges_change_bounds_within_one_optuna_study():
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))
    for generation in (IntRange(14, 32, log=True), IntRange(14, 64, log=True)):
        for _ in range(3):
            trial = study.ask()
            space = {"num_parallel_calls": Choices((1, 2, AUTOTUNE))}
            knobs = suggest_knobs(trial, space, Knobs(), {"num_parallel_calls": generation})
            assert generation.low <= knobs.num_parallel_calls <= generation.high
            study.tell(trial, float(knobs.num_parallel_calls))
    assert {f"num_parallel_calls{GUIDED_SUFFIX}"} == set(study.trials[-1].params)


class ModelRunner(FakeRunner):
    """The fake runner, with the remote-storage stage analysis on the baseline trial."""

    def __call__(self, request, budgets, *, on_progress=None):
        outcome = super().__call__(request, budgets, on_progress=on_progress)
        if request.analyse_stages and outcome.result is not None:
            outcome = dataclasses.replace(outcome, result=with_model(outcome.result))
        return outcome


def test_the_estimate_is_the_third_trial_and_the_limit_reaches_the_json(write_pipeline, tmp_path):
    pipeline = load_pipeline(write_pipeline(TUNER_SOURCE))
    runner = ModelRunner()
    options = TuneOptions(
        trials=6, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=2, finalists=2
    )
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    assert [r.analyse_stages for r in runner.requests[:3]] == [True, False, False]
    assert runner.requests[2].knobs.num_parallel_calls == 18
    guided = [r.knobs.num_parallel_calls for r in runner.requests[3:6]]
    assert all(14 <= value <= 64 for value in guided), guided
    assert (
        result.estimate_of(Reference.ESTIMATE) is not None
        and result.estimate_of(Reference.ESTIMATE).trial_number == 2
    )
    assert result.estimate_of(Reference.ESTIMATE).measured_examples_per_sec is not None
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert saved.limit is not None and saved.limit.bound_by is LimitBound.COMPUTE
    assert saved.limit.examples_per_sec == pytest.approx(9000.0)
    assert saved.tuned_over_limit == pytest.approx(result.best.median / 9000.0)
    assert any(m.label == "estimate" for m in result.candidates)


def test_the_references_knobs_are_recorded_as_params_so_tpe_starts_from_them(
    write_pipeline, tmp_path
):
    pipeline = load_pipeline(write_pipeline(TUNER_SOURCE))
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    options = TuneOptions(trials=4, storage=storage, seed=1, rounds=1, finalists=1)
    Tuner(pipeline, options, runner=ModelRunner(), machine=MACHINE).run()

    trials = optuna.load_study(study_name=pipeline.name, storage=storage).trials
    baseline, autotune, estimate = (t.params for t in trials[:3])
    assert baseline["prefetch"] == pipeline.baseline.prefetch
    # AUTOTUNE lies outside the integer range TPE samples: that param is left out.
    assert autotune["prefetch"] == AUTOTUNE and "num_parallel_calls" not in autotune
    assert estimate["num_parallel_calls" + GUIDED_SUFFIX] == 18
    assert estimate["private_threadpool_size" + GUIDED_SUFFIX] == 18
    assert estimate["prefetch"] == 8


def test_the_tune_summary_prints_the_limit_and_the_estimate(write_pipeline, tmp_path):
    from tfperf.report import render_tune_summary

    pipeline = load_pipeline(write_pipeline(TUNER_SOURCE))
    options = TuneOptions(
        trials=4, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=1, finalists=1
    )
    result = Tuner(pipeline, options, runner=ModelRunner(), machine=MACHINE).run()
    text = render_tune_summary(result)

    assert "Limit: 9,000 examples/s, bound by compute" in text
    assert "tfperf's estimate (trial 2): predicted 9,000, measured" in text


def test_a_guided_search_refines_from_the_references_instead_of_sampling_at_random(
    write_pipeline, tmp_path
):
    pipeline = load_pipeline(write_pipeline(TUNER_SOURCE))
    options = TuneOptions(
        trials=4, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=1, finalists=1
    )
    guided = Tuner(pipeline, options, runner=ModelRunner(), machine=MACHINE)
    guided.run()
    unguided = Tuner(pipeline, options, runner=FakeRunner(), machine=MACHINE)

    # Baseline, AUTOTUNE and the estimate are TPE's start; without a model it samples 8 first.
    assert guided.references.guide is not None
    assert guided._sampler(4)._n_startup_trials == 3
    assert unguided._sampler(4)._n_startup_trials == 8


class ParseRunner(FakeRunner):
    """The fake runner, with a computing parse's stage analysis on the baseline trial."""

    def __call__(self, request, budgets, *, on_progress=None):
        outcome = super().__call__(request, budgets, on_progress=on_progress)
        if request.analyse_stages and outcome.result is not None:
            outcome = dataclasses.replace(outcome, result=with_parse(outcome.result))
        return outcome


def test_the_pooled_estimate_follows_the_estimate_and_reaches_the_json(write_pipeline, tmp_path):
    from tfperf.report import render_tune_summary

    pipeline = load_pipeline(write_pipeline(TUNER_SOURCE))
    runner = ParseRunner()
    options = TuneOptions(
        trials=5, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=2, finalists=2
    )
    tuner = Tuner(pipeline, options, runner=runner, machine=MACHINE)
    result = tuner.run()

    estimate, pooled = runner.requests[2].knobs, runner.requests[3].knobs
    assert (estimate.private_threadpool_size, estimate.prefetch) == (4, AUTOTUNE)
    assert (pooled.private_threadpool_size, pooled.prefetch) == (2, 2)
    assert pooled.replace(private_threadpool_size=4, prefetch=AUTOTUNE) == estimate
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert (
        saved.estimate_of(Reference.POOL) is not None
        and saved.estimate_of(Reference.POOL).trial_number == 3
    )
    assert saved.estimate_of(Reference.POOL).measured_examples_per_sec is not None
    assert any(m.label == "estimate-pool" for m in result.candidates)
    assert "its estimate on the cores its input spends (trial 3): predicted" in (
        render_tune_summary(result)
    )
    # The four references (no training setting was probed) start TPE; a fresh tuner on the
    # study finds the same four.
    assert tuner._sampler(5)._n_startup_trials == 4
    again = Tuner(pipeline, options, runner=ParseRunner(), machine=MACHINE)
    again.open_study()
    assert set(again.references.knobs) == {"baseline", "autotune", "estimate", "estimate-pool"}


def test_a_guide_stored_with_four_estimate_fields_reads_as_the_guide_made_now():
    """A study's guide stored by the release that kept each estimate in a field of its own
    (here the estimate and the pooled one, from this same profile) reads as the list, and
    equals the guide the proposers make from that profile now."""
    stored = json.loads(
        (Path(__file__).parent.parent / "stored" / "guide-four-estimate-fields.json").read_text()
    )
    assert "estimates" not in stored and stored["pool_estimate"] is not None

    old = Guide.from_dict(stored)

    assert [e.kind for e in old.estimates] == [Reference.ESTIMATE, Reference.POOL]
    assert old.estimate.knobs.to_dict() == stored["estimate"]["knobs"]
    assert old.estimate_of(Reference.POOL).knobs.to_dict() == stored["pool_estimate"]["knobs"]
    baseline = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)
    now = make_guide(with_parse(fake_result(baseline, 0.01)), MACHINE, baseline, _FREE, _GUIDABLE)
    assert now == old


# --- a cycle_length written in the file (issue 45) -------------------------------------------


def _literal_interleave(result, cycle=2):
    """`result` with a 2 ms blocking interleave whose calls follow the knob, in a cycle of
    `cycle` written in the file, and a compute-only phase at 9,000/s."""
    stats = [
        _stat(0, StageKind.SOURCE, "range", 10e-6, 10e-6),
        _stat(
            1,
            StageKind.INTERLEAVE,
            "interleave(read)",
            2.01e-3,
            30e-6,
            {"cycle_length": cycle, "num_parallel_calls": 1},
        ),
    ]
    stages = stage_report(
        with_added_costs(stats), None, seconds_per_stage=1, warmup_s=0, duration_s=1, note=None
    )
    return dataclasses.replace(with_model(result), stages=stages)


def test_a_cycle_length_written_in_the_file_is_read_from_the_baseline_graph():
    stats = _literal_interleave(fake_result(Knobs(num_parallel_calls=1), 0.01)).stages.stages
    assert literal_cycles(stats, Knobs(num_parallel_calls=1)) == {"num_parallel_calls": 2}
    # The knob's own value in the cycle: tfperf cannot tell it from a literal, and caps nothing.
    assert literal_cycles(stats, Knobs(num_parallel_calls=1, cycle_length=2)) == {}
    # Calls not at the knob's value: the knob does not drive this interleave.
    assert literal_cycles(stats, Knobs(num_parallel_calls=3)) == {}


class RefusingRunner(FakeRunner):
    """The literal-cycle stage analysis on the baseline; as tf.data, it refuses calls above 2."""

    def __call__(self, request, budgets, *, on_progress=None):
        calls = request.knobs.num_parallel_calls
        if calls != AUTOTUNE and calls > 2:
            self.requests.append(request)
            reason = "tf.data refused this configuration"
            return TrialOutcome(TrialStatus.PRUNED, None, reason, 0, None, 1.0)
        outcome = super().__call__(request, budgets, on_progress=on_progress)
        if request.analyse_stages and outcome.result is not None:
            outcome = dataclasses.replace(outcome, result=_literal_interleave(outcome.result))
        return outcome


def test_a_literal_cycle_length_caps_the_proposals_and_loses_no_trial(write_pipeline, tmp_path):
    # The cycle_length knob is fixed at 1 but the file writes 2: the file's 2 bounds the calls.
    fixed = '"mixed_precision": "float32", "cycle_length": 1}'
    source = TUNER_SOURCE.replace('"mixed_precision": "float32"}', fixed)
    pipeline = load_pipeline(write_pipeline(source))
    runner = RefusingRunner()
    options = TuneOptions(
        trials=4,
        storage=f"sqlite:///{tmp_path / 'study.db'}",
        seed=1,
        rounds=1,
        finalists=1,
        max_consecutive_failures=1,
    )
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    estimate = result.estimate_of(Reference.ESTIMATE)
    assert estimate is not None and estimate.knobs.num_parallel_calls == 2
    ran = [r.knobs.num_parallel_calls for r in runner.requests]
    assert all(calls == AUTOTUNE or calls <= 2 for calls in ran), ran
    assert 2 in ran  # the estimate ran: the fixed knob's 1 did not refuse it
    assert result.trial_counts.get("failed", 0) == 0
