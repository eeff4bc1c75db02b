"""The training settings the model weighs: the probe's settings, the training estimate, the
limit under each setting, and the trial that measures it."""

from __future__ import annotations

import dataclasses
import json
import math

import optuna
import pytest

from tests.deadlines import HANG_S
from tests.fakes.trials import fake_result
from tests.tuner.test_guide import MACHINE, ModelRunner, _stat, with_model
from tfperf.knobs import Choices, Fixed, Knobs
from tfperf.measure import InputCpu, stage_report, with_added_costs
from tfperf.pipeline import load_pipeline
from tfperf.results import CpuUsage, LimitBound, TimedValue, TrainingRate
from tfperf.results.stages import EpochSource, RestartCost, StageKind
from tfperf.results.tune import Reference, TuneResult
from tfperf.tuner import TuneInterrupted, TuneOptions, Tuner
from tfperf.tuner._guide import Guide, make_guide
from tfperf.tuner._training import limit_for, training_settings

SPACE = {
    "batch_size": Choices((16, 32, 64, 128)),
    "mixed_precision": Choices(("float32", "mixed_bfloat16")),
}
GUIDABLE = ["num_parallel_calls", "private_threadpool_size", "prefetch"]


def _rate(batch: int, precision: str, rate: float) -> TrainingRate:
    return TrainingRate(batch, precision, rate, None, steps=5)


def test_the_probe_covers_every_batch_and_precision_but_the_baselines_own_larger_first():
    settings = training_settings(Knobs(batch_size=32), SPACE)

    # A smaller batch too: the search may choose it (image_decode's winner in a benchmark run
    # was batch 32 in bf16 from a baseline of 64, and no limit could be stated for it).
    assert [(s["batch_size"], s["mixed_precision"]) for s in settings] == [
        (128, "float32"),
        (128, "mixed_bfloat16"),
        (64, "float32"),
        (64, "mixed_bfloat16"),
        (32, "mixed_bfloat16"),
        (16, "float32"),
        (16, "mixed_bfloat16"),
    ]


def test_nothing_is_probed_when_training_is_fixed():
    fixed = {"batch_size": Fixed(32), "mixed_precision": Fixed("float32")}
    assert training_settings(Knobs(batch_size=32), fixed) == ()


def test_a_plain_files_batch_lives_at_its_call_site_so_only_precision_is_probed():
    plain = Knobs(batch_size=32, sites={"batch@p.py:9.batch_size": 64})
    settings = training_settings(plain, SPACE)
    assert [s["batch_size"] for s in settings] == [32]


def _baseline_result(rates, restarts=None):
    baseline = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)
    result = with_model(fake_result(baseline, 0.01))  # compute-only 9,000 examples/s
    return baseline, dataclasses.replace(result, training_rates=rates, restarts=restarts)


def test_a_setting_that_lifts_the_limit_beyond_noise_is_the_second_estimate():
    baseline, result = _baseline_result([_rate(128, "mixed_bfloat16", 30000.0)])
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE)
    assert guide is not None

    second = guide.estimate_of(Reference.TRAINING)
    assert second is not None
    assert second.changes_training == ["batch_size", "mixed_precision"]
    assert second.knobs.batch_size == 128
    assert second.knobs.mixed_precision == "mixed_bfloat16"
    # Little's law at the new target: 30,000 examples/s x the 2 ms the read adds per example.
    assert second.knobs.num_parallel_calls == math.ceil(30000 * 2.0e-3)
    assert second.predicted_examples_per_sec == pytest.approx(30000.0)
    assert guide.estimate.knobs.batch_size == 32  # the first estimate keeps training
    [setting] = guide.setting_limits
    assert setting.limit.examples_per_sec == pytest.approx(30000.0)
    assert setting.limit.bound_by is LimitBound.COMPUTE
    assert Guide.from_dict(json.loads(json.dumps(guide.to_dict()))) == guide


@pytest.mark.parametrize(
    ("nearer_rate", "proposed"),
    [
        # 29,000 is within 5% of 30,000 in both views: the model cannot tell the two apart,
        # and batch 64 changes training less (one doubling and bf16, not two and bf16).
        (29000.0, 64),
        # 27,000 is 10% below: the faster setting is proposed.
        (27000.0, 128),
    ],
)
def test_of_settings_within_the_models_error_the_one_nearest_the_baseline_is_proposed(
    nearer_rate: float, proposed: int
):
    rates = [_rate(128, "mixed_bfloat16", 30000.0), _rate(64, "mixed_bfloat16", nearer_rate)]
    baseline, result = _baseline_result(rates)
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE)
    assert guide is not None

    second = guide.estimate_of(Reference.TRAINING)
    assert second is not None
    assert second.knobs.batch_size == proposed
    assert second.knobs.mixed_precision == "mixed_bfloat16"
    assert sorted(s.batch_size for s in guide.setting_limits) == [64, 128]


@pytest.mark.parametrize(
    ("larger_rate", "runner_up"),
    [
        # 27,000 is 10% below 30,000: within the model's error, so the study measures it too.
        (27000.0, 128),
        # 24,000 is 20% below: the model tells the two apart, and nothing more is measured.
        (24000.0, None),
    ],
)
def test_the_next_larger_batch_within_the_models_error_is_the_runner_up(
    larger_rate: float, runner_up: int | None
):
    rates = [
        _rate(64, "mixed_bfloat16", 30000.0),
        _rate(128, "mixed_bfloat16", larger_rate),
        # Nearer in rate, but smaller: what fewer steps save is what the model cannot see.
        _rate(16, "mixed_bfloat16", 29000.0),
        _rate(128, "float32", 29000.0),  # another precision: the runner-up varies the batch
    ]
    baseline, result = _baseline_result(rates)
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE)
    assert guide is not None and guide.estimate_of(Reference.TRAINING) is not None
    assert guide.estimate_of(Reference.TRAINING).knobs.batch_size == 64

    runner = guide.estimate_of(Reference.RUNNER_UP)
    if runner_up is None:
        assert runner is None
        return
    assert runner is not None
    assert runner.knobs.batch_size == runner_up
    assert runner.knobs.mixed_precision == "mixed_bfloat16"
    assert runner.changes_training == ["batch_size", "mixed_precision"]
    assert runner.predicted_examples_per_sec == pytest.approx(larger_rate)
    # Its threads are sized by the model under its own setting: 27,000/s x the 2 ms read.
    assert runner.knobs.num_parallel_calls == math.ceil(larger_rate * 2.0e-3)
    assert Guide.from_dict(json.loads(json.dumps(guide.to_dict()))) == guide


def test_a_setting_that_changes_only_precision_is_nearer_than_one_that_quadruples_the_batch():
    rates = [_rate(128, "float32", 30000.0), _rate(32, "mixed_bfloat16", 29500.0)]
    baseline, result = _baseline_result(rates)
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE)
    assert guide is not None and guide.estimate_of(Reference.TRAINING) is not None

    assert guide.estimate_of(Reference.TRAINING).changes_training == ["mixed_precision"]


def test_a_setting_within_noise_is_not_proposed_but_its_limit_is_kept():
    baseline, result = _baseline_result([_rate(64, "float32", 9500.0)])
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE)
    assert guide is not None

    assert guide.estimate_of(Reference.TRAINING) is None
    assert [s.batch_size for s in guide.setting_limits] == [64]


def test_a_faster_step_is_proposed_when_input_and_training_would_take_turns():
    # The input's CPU (0.4 ms per example) binds both settings at 2 cores ÷ 0.4 ms = 5,000/s,
    # so the overlapping view predicts no gain; taking turns, the model alone at 30,000/s
    # instead of 9,000 lifts 1/(1/5,000 + 1/C) from 3,214 to 4,286 examples/s (1.33x).
    baseline, result = _baseline_result([_rate(128, "mixed_bfloat16", 30000.0)])
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE, InputCpu(0.4e-3, 5000.0))
    assert guide is not None

    [setting] = guide.setting_limits
    assert setting.limit.bound_by is LimitBound.CPU and guide.limit.bound_by is LimitBound.CPU
    assert setting.limit.examples_per_sec == pytest.approx(guide.limit.examples_per_sec)
    assert guide.estimate.predicted_examples_per_sec == pytest.approx(5000.0)
    second = guide.estimate_of(Reference.TRAINING)
    assert second is not None and second.changes_training == ["batch_size", "mixed_precision"]
    assert second.predicted_examples_per_sec == pytest.approx(5000.0)  # the model's own view


def test_a_step_barely_faster_is_not_proposed_in_either_view():
    baseline, result = _baseline_result([_rate(128, "mixed_bfloat16", 9500.0)])
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE, InputCpu(0.4e-3, 5000.0))
    assert guide is not None and guide.estimate_of(Reference.TRAINING) is None


def _restarts(seconds_per_restart: float) -> RestartCost:
    return RestartCost(
        restarts=2,
        seconds_per_restart=seconds_per_restart,
        stage="shuffle(2048)",
        stage_kind=None,
        steady_wait_s_per_step=0.0,
        steady_wait_fraction=0.0,
        weighted_wait_fraction=0.5,
        window_wait_share=0.5,
        epoch_steps=64,
        epoch_source=EpochSource.GIVEN,
        weighted_examples_per_sec=1.0,
    )


def test_restarts_cut_the_prediction_and_the_shuffle_buffer_is_kept_as_large_as_affordable():
    baseline, result = _baseline_result([], _restarts(1.0))
    baseline = baseline.replace(shuffle_buffer=2048)
    assert result.pipeline_only is not None
    epoch = 64 * 32
    refill = 1.0 * result.pipeline_only.examples_per_sec  # examples per restart
    space = {"shuffle_buffer": Choices((256, 512, 1024, 2048, 4096))}
    guide = make_guide(result, MACHINE, baseline, space, GUIDABLE)
    assert guide is not None

    assert guide.estimate.predicted_examples_per_sec == pytest.approx(
        9000.0 * epoch / (epoch + refill)
    )
    share = {v: epoch / (epoch + refill * v / 2048) for v in (256, 512, 1024, 2048, 4096)}
    affordable = max(v for v, s in share.items() if s >= 0.95 * max(share.values()))
    second = guide.estimate_of(Reference.TRAINING)
    assert second is not None and second.changes_training == ["shuffle_buffer"]
    assert second.knobs.shuffle_buffer == affordable
    assert second.predicted_examples_per_sec == pytest.approx(9000.0 * share[affordable])


def test_a_cheap_refill_keeps_the_baselines_shuffle_buffer_rather_than_a_larger_one():
    """Every buffer within 5% of the best: the baseline's own stays, not the largest (in a
    bench small_files' training estimate doubled its buffer for nothing and ran 75% of its
    prediction)."""
    baseline, result = _baseline_result([_rate(128, "mixed_bfloat16", 30000.0)], _restarts(1e-4))
    baseline = baseline.replace(shuffle_buffer=2048)
    space = {**SPACE, "shuffle_buffer": Choices((256, 512, 1024, 2048, 4096))}
    guide = make_guide(result, MACHINE, baseline, space, GUIDABLE)

    assert guide is not None and guide.estimate_of(Reference.TRAINING) is not None
    assert guide.estimate_of(Reference.TRAINING).knobs.shuffle_buffer == 2048
    assert guide.estimate_of(Reference.TRAINING).changes_training == [
        "batch_size",
        "mixed_precision",
    ]


def test_the_limit_follows_the_training_setting_a_configuration_runs():
    baseline, result = _baseline_result([_rate(128, "mixed_bfloat16", 30000.0)])
    guide = make_guide(result, MACHINE, baseline, SPACE, GUIDABLE)
    assert guide is not None
    base, limits = guide.limit, guide.setting_limits

    assert limit_for({"batch_size": 32}, baseline, base, limits) is base
    probed = limit_for(
        {"batch_size": 128, "mixed_precision": "mixed_bfloat16"}, baseline, base, limits
    )
    assert probed is not None and probed.examples_per_sec == pytest.approx(30000.0)
    assert limit_for({"batch_size": 64}, baseline, base, limits) is None  # never probed
    site = "batch@p.py:9.batch_size"
    plain = baseline.replace(sites={site: 32})
    assert limit_for({site: 64}, plain, base, limits) is None


TRAINING_SOURCE = """
BASELINE = {"batch_size": 8, "num_parallel_calls": 1, "prefetch": 0}
SEARCH_SPACE = {"batch_size": [8, 16], "shuffle_buffer": 1024,
                "mixed_precision": ["float32", "mixed_bfloat16"]}
def make_dataset(knobs): pass
def make_train_step(knobs): pass
"""


class TrainingRunner(ModelRunner):
    """The model runner, whose baseline trial also answers the training probe: the model alone
    runs 9,000 examples/s at batch 8 in float32, `gain` times that per doubling and in bf16."""

    gain = 2.0

    def __call__(self, request, budgets, *, on_progress=None):
        outcome = super().__call__(request, budgets, on_progress=on_progress)
        if request.training and outcome.result is not None:
            rates = [
                _rate(s["batch_size"], s["mixed_precision"], self._model_alone(s))
                for s in request.training
            ]
            outcome = dataclasses.replace(
                outcome, result=dataclasses.replace(outcome.result, training_rates=rates)
            )
        return outcome

    def _model_alone(self, setting):
        steps = math.log2(setting["batch_size"] / 8) + (setting["mixed_precision"] != "float32")
        return 9000.0 * self.gain**steps


def test_the_training_estimate_is_the_fourth_trial_and_reaches_the_json(write_pipeline, tmp_path):
    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    runner = TrainingRunner()
    options = TuneOptions(
        trials=5, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=2, finalists=2
    )
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    probed = [(s["batch_size"], s["mixed_precision"]) for s in runner.requests[0].training]
    assert probed == [(16, "float32"), (16, "mixed_bfloat16"), (8, "mixed_bfloat16")]
    assert all(not r.training for r in runner.requests[1:])
    fourth = runner.requests[3].knobs
    assert (fourth.batch_size, fourth.mixed_precision.value) == (16, "mixed_bfloat16")
    assert fourth.num_parallel_calls == math.ceil(36000 * 2.0e-3)
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert saved.estimate_of(Reference.TRAINING) is not None
    assert saved.estimate_of(Reference.TRAINING).trial_number == 3
    assert saved.estimate_of(Reference.TRAINING).changes_training == [
        "batch_size",
        "mixed_precision",
    ]
    assert saved.estimate_of(Reference.TRAINING).measured_examples_per_sec is not None
    from tfperf.report import render_tune_summary

    text = render_tune_summary(result)
    assert "its estimate with training changed (trial 3): predicted 36,000" in text
    assert "changes batch_size, mixed_precision" in text
    best = result.best.knobs
    if (best.batch_size, best.mixed_precision) == (8, "float32"):
        assert saved.best_limit == saved.limit
    else:
        assert saved.best_limit is not None
        assert saved.tuned_over_limit == pytest.approx(
            result.best.median / saved.best_limit.examples_per_sec
        )


class NearTieRunner(TrainingRunner):
    """The training runner, whose model alone runs batch 8 in bf16 at 35,000 examples/s:
    within 5% of batch 16 in bf16 (36,000), so the smaller change is the training estimate and
    batch 16, within the model's error of it, the runner-up."""

    def _model_alone(self, setting):
        if (setting["batch_size"], setting["mixed_precision"]) == (8, "mixed_bfloat16"):
            return 35000.0
        return super()._model_alone(setting)


def test_the_runner_up_is_measured_after_the_second_estimate_and_reaches_the_json(
    write_pipeline, tmp_path
):
    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    runner = NearTieRunner()
    options = TuneOptions(
        trials=6, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=2, finalists=2
    )
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    # The read blocks, so no pooled estimate: the runner-up follows the training estimate.
    second, runner_up = runner.requests[3].knobs, runner.requests[4].knobs
    assert (second.batch_size, second.mixed_precision.value) == (8, "mixed_bfloat16")
    assert (runner_up.batch_size, runner_up.mixed_precision.value) == (16, "mixed_bfloat16")
    assert runner_up.num_parallel_calls == math.ceil(36000 * 2.0e-3)
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert saved.estimate_of(Reference.POOL) is None
    assert saved.estimate_of(Reference.RUNNER_UP) is not None
    assert saved.estimate_of(Reference.RUNNER_UP).trial_number == 4
    assert saved.estimate_of(Reference.RUNNER_UP).changes_training == [
        "batch_size",
        "mixed_precision",
    ]
    assert saved.estimate_of(Reference.RUNNER_UP).measured_examples_per_sec is not None
    assert any(m.label == "estimate-runner-up" for m in result.candidates)
    from tfperf.report import render_tune_summary

    text = render_tune_summary(result)
    assert (
        "its estimate under the runner-up setting (batch_size=16, mixed_precision=mixed_bfloat16)"
        " (trial 4): predicted 36,000" in text
    )


def test_the_models_best_estimate_is_confirmed_beside_the_choice_and_weighed_against_it(
    write_pipeline, tmp_path
):
    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    options = TuneOptions(
        trials=6, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=2, finalists=2
    )
    result = Tuner(pipeline, options, runner=NearTieRunner(), machine=MACHINE).run()

    # A searched trial is chosen; of the estimates the runner-up re-measured fastest.
    by_label = {m.label: m for m in result.candidates}
    assert result.best.label.startswith("trial ")
    runner_up = by_label["estimate-runner-up"]
    assert len(runner_up.confirmed) == 2 and len(result.best.confirmed) == 2
    assert by_label["estimate-training"].confirmed == []  # neither chosen nor the model's best
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert saved.search_gain is not None
    assert saved.search_gain.estimate == "estimate-runner-up"
    assert saved.search_gain.gain.ratio == pytest.approx(result.best.median / runner_up.median)
    from tfperf.report import render_tune_summary

    gain = saved.search_gain.gain
    assert (
        f"the search's answer: {gain.ratio:.2f}x ± {gain.ratio * gain.spread:.2f} over "
        "estimate-runner-up, both measured after the choice" in render_tune_summary(result)
    )


class RefitRunner(TrainingRunner):
    """The training runner, with a baseline whose slow read burns 0.4 ms CPU per example (the
    CPU roofline, 5,000 examples/s, binds every setting) and later trials whose pipeline-only
    phase spends 9% of a core: 0.05 ms per example at the estimate's 1,800 examples/s. The
    model alone gains 1.1x per step (10,890 examples/s at batch 16 in bf16): too little to
    propose at the first fit even were input and training to take turns (1/(1/5,000 + 1/C):
    1.07x)."""

    gain = 1.1

    def __call__(self, request, budgets, *, on_progress=None):
        outcome = super().__call__(request, budgets, on_progress=on_progress)
        result = outcome.result
        if result is None:
            return outcome
        if request.analyse_stages:
            stats = [
                _stat(0, StageKind.SOURCE, "range", 10e-6, 10e-6),
                _stat(1, StageKind.MAP, "map(fetch)", 2.01e-3, 0.4e-3, {"num_parallel_calls": 1}),
            ]
            stages = stage_report(
                with_added_costs(stats),
                None,
                seconds_per_stage=1,
                warmup_s=0,
                duration_s=1,
                note=None,
            )
            return dataclasses.replace(outcome, result=dataclasses.replace(result, stages=stages))
        phase = result.pipeline_only
        assert phase is not None
        start, last = phase.records[0].start_s, phase.records[-1]
        samples = [TimedValue(start, 9.0), TimedValue(last.start_s + last.step_s, 9.0)]
        cpu = CpuUsage(9.0, 9.0, 2, samples)
        return dataclasses.replace(outcome, result=dataclasses.replace(result, cpu=cpu))


def test_the_cpu_measured_nearer_the_limit_refits_the_model_and_queues_the_training_estimate(
    write_pipeline, tmp_path
):
    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    runner = RefitRunner()
    options = TuneOptions(
        trials=5, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=1, finalists=1
    )
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    # The first fit: 2 cores ÷ 0.4 ms binds every setting, so no training estimate yet.
    assert result.estimate_of(Reference.ESTIMATE) is not None
    assert result.estimate_of(Reference.ESTIMATE).predicted_examples_per_sec == pytest.approx(
        5000.0
    )
    # After the estimate ran: 2 cores ÷ its 0.05 ms no longer binds; bf16 at batch 16 (the
    # model alone at 10,890 examples/s, 1.21x) is the fourth trial.
    fourth = runner.requests[3].knobs
    assert (fourth.batch_size, fourth.mixed_precision.value) == (16, "mixed_bfloat16")
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert (
        saved.estimate_of(Reference.TRAINING) is not None
        and saved.estimate_of(Reference.TRAINING).trial_number == 3
    )
    assert saved.estimate_of(Reference.TRAINING).predicted_examples_per_sec == pytest.approx(
        10890.0
    )
    assert saved.limit is not None and saved.limit.bound_by is LimitBound.COMPUTE
    assert saved.limit.examples_per_sec == pytest.approx(9000.0)


class SteepRefitRunner(RefitRunner):
    """The refit runner with a model alone that doubles per step (36,000 examples/s at batch
    16 in bf16): the first fit already proposes it (taking turns with the 5,000 examples/s
    roofline, 1.37x), with the blocking fetch sized for twice that roofline."""

    gain = 2.0


def test_the_training_estimate_sizes_its_blocking_stage_from_the_refit_roofline(
    write_pipeline, tmp_path
):
    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    runner = SteepRefitRunner()
    options = TuneOptions(
        trials=4, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=1, finalists=1
    )
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    # At the first fit the fetch would get ceil(2 x 5,000 x 2 ms) = 20 threads; the
    # estimate's 0.05 ms per example lifts the roofline past the model alone, so the fourth
    # trial feeds 36,000 examples/s: ceil(36,000 x 2 ms) = 72.
    fourth = runner.requests[3].knobs
    assert (fourth.batch_size, fourth.mixed_precision.value) == (16, "mixed_bfloat16")
    assert fourth.num_parallel_calls == math.ceil(36000 * 2.0e-3)
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert (
        saved.estimate_of(Reference.TRAINING) is not None
        and saved.estimate_of(Reference.TRAINING).trial_number == 3
    )
    assert (
        saved.estimate_of(Reference.TRAINING).knobs.num_parallel_calls == fourth.num_parallel_calls
    )


class InterruptedEstimateRunner(SteepRefitRunner):
    """Ctrl-C while the third trial (the estimate) runs."""

    def __call__(self, request, budgets, *, on_progress=None):
        if len(self.requests) == 2:
            raise KeyboardInterrupt
        return super().__call__(request, budgets, on_progress=on_progress)


def test_an_interrupted_estimate_still_leaves_the_first_fits_training_estimate_queued(
    write_pipeline, tmp_path
):
    """Without the estimate's run there is nothing to refit: the first fit's training
    estimate is queued when the study is opened again (`References.resume`)."""
    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    runner = InterruptedEstimateRunner()
    options = TuneOptions(trials=5, storage=storage, seed=1, rounds=1, finalists=1)
    with pytest.raises(TuneInterrupted):
        Tuner(pipeline, options, runner=runner, machine=MACHINE).run()

    again = SteepRefitRunner()
    resumed = dataclasses.replace(options, trials=4)  # one more than the three ended
    result = Tuner(pipeline, resumed, runner=again, machine=MACHINE).run()

    first = again.requests[0].knobs
    assert (first.batch_size, first.mixed_precision.value) == (16, "mixed_bfloat16")
    assert first.num_parallel_calls == math.ceil(2 * 5000 * 2.0e-3)
    assert result.estimate_of(Reference.TRAINING) is not None


class EstimateHoldsRunner(TrainingRunner):
    """The training runner, which on the estimate's trial (the third) starts the second tuner
    and returns once it waits for that trial: it then holds the guide as it was before the
    estimate ran, as a tuner on another machine does."""

    def __init__(self, second, waiting):
        super().__init__()
        self.second, self.waiting = second, waiting

    def __call__(self, request, budgets, *, on_progress=None):
        if len(self.requests) == 2:
            self.second.start()
            assert self.waiting.wait(timeout=HANG_S), "the second tuner never waited"
        return super().__call__(request, budgets, on_progress=on_progress)


def test_two_tuners_on_one_sqlite_study_give_the_same_answer(write_pipeline, tmp_path):
    """The estimate is the last trial of the budget: its refit queues the later proposals
    beyond it, where they wait for a larger --trials. The tuner that did not refit re-measures
    (it takes the lock first); the other adopts its figures. Both report the study's guide,
    the proposal that never ran is no finalist, and it is said to be not run."""
    import threading

    from tfperf.report import render_tune_summary
    from tfperf.tuner import TuneListener

    pipeline = load_pipeline(write_pipeline(TRAINING_SOURCE))
    options = TuneOptions(
        trials=3, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=2, finalists=2
    )
    waiting = threading.Event()
    results = {}

    class Waits(TuneListener):
        def waiting(self, kind, trials, hosts):
            waiting.set()

    class LetsTheOtherMeasure(TuneListener):
        def trial_finished(self, number, outcome, best, baseline):
            if number == 2:  # refit done: the other tuner takes the lock and re-measures
                thread.join(timeout=HANG_S)

    second = Tuner(pipeline, options, Waits(), runner=TrainingRunner(), machine=MACHINE)
    thread = threading.Thread(target=lambda: results.setdefault("second", second.run()))
    runner = EstimateHoldsRunner(thread, waiting)
    first = Tuner(pipeline, options, LetsTheOtherMeasure(), runner=runner, machine=MACHINE)
    results["first"] = first.run()
    assert not thread.is_alive() and "second" in results
    answers = {name: render_tune_summary(result) for name, result in results.items()}
    assert results["first"].estimates == results["second"].estimates
    assert [m.label for m in results["first"].candidates] == [
        m.label for m in results["second"].candidates
    ]
    study = optuna.load_study(study_name="pipeline", storage=options.storage)
    assert [t.number for t in study.trials if t.state.name == "WAITING"] == [3]
    for name, text in answers.items():
        assert "measured not measured" not in text, name
        assert (
            "its estimate with training changed: predicted 36,000 examples/s, not run: queued "
            "beyond the --trials budget"
        ) in text, name
    assert "estimate-training" not in [m.label for m in results["first"].candidates]
