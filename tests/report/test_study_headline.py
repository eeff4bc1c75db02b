"""The study headline: the baseline's diagnosis, what the recommendation leaves, the limit."""

from __future__ import annotations

import dataclasses

import pytest

from tests.report.helpers import tune_result
from tests.reports import fake_profile, make_study
from tfperf.report import _study_headline as sh
from tfperf.report import _study_summary as ss
from tfperf.report._study_data import StudySnapshot, snapshot_study
from tfperf.results import Limit, LimitBound, LimitTerm
from tfperf.results.tune import Estimate, Reference, SearchGain, Speedup


@pytest.fixture(scope="module")
def snapshot() -> StudySnapshot:
    return snapshot_study(make_study(best_result=fake_profile()), "memory")


def test_the_headline_diagnoses_the_baseline_and_names_the_limit(snapshot):
    limit = Limit(
        examples_per_sec=2400.0,
        bound_by=LimitBound.SEQUENTIAL_STAGE,
        explanation="map(parse) runs on one core.",
        terms=[LimitTerm(LimitBound.SEQUENTIAL_STAGE, 2400.0, "1 / 0.42 ms", "map(parse)")],
    )
    snapshot = dataclasses.replace(snapshot, baseline_result=fake_profile())
    tune = tune_result(limit=limit, tuned_over_limit=2000 / 2400)
    line = sh.headline(snapshot, ss.summary(snapshot), tune)
    assert line.baseline == (
        "Your baseline: 67% of each step waiting for input; limiting stage map(parse); "
        "1,000 examples/s (highly input-bound)."
    )
    assert line.limit is not None
    assert line.limit.startswith("Limit of this pipeline on this machine: 2,400 examples/s")
    assert "best: trial 2 2,000; your baseline 1,000; everything AUTOTUNE 1,500" in line.limit
    assert line.limit.endswith("The recommendation reaches 83% of the limit.")
    assert line.recommendation is not None and "map(parse) still limits" in line.recommendation
    assert "tfperf tune" not in line.recommendation


def test_advice_inside_a_tune_report_does_not_send_the_reader_totune_result():
    advice = "speed up the input (parallel map); `tfperf tune` searches these knobs. Then more."
    assert sh.without_tune_advice(advice) == "speed up the input (parallel map). Then more."


def test_the_estimate_line_shows_the_pooled_estimate_beside_the_others():
    knobs = {"num_parallel_calls": 4, "private_threadpool_size": 4}
    estimate = Estimate(knobs, 3800.0, trial_number=2, measured_examples_per_sec=3420.0)
    pooled = Estimate(
        {**knobs, "private_threadpool_size": 1},
        3800.0,
        trial_number=3,
        measured_examples_per_sec=4180.0,
        kind=Reference.POOL,
    )
    line = sh.headline(
        snapshot_study(make_study(), "memory"),
        None,
        tune_result(estimates=[estimate, pooled]),
    ).estimate
    assert line == (
        "tfperf's estimate predicted 3,800 examples/s (trial 2); measured 3,420 (-10%). "
        "The same with its input on a pool of 1 core predicted 3,800 "
        "examples/s (trial 3); measured 4,180 (+10%)."
    )


def test_the_estimate_line_names_the_runner_up_setting_the_model_could_not_tell_apart():
    knobs = {"num_parallel_calls": 4, "batch_size": 128, "mixed_precision": "mixed_bfloat16"}
    changed = ["batch_size", "mixed_precision"]
    estimate = Estimate({**knobs, "batch_size": 64}, 3800.0, trial_number=2)
    second = Estimate(knobs, 5000.0, 3, 5100.0, changed, Reference.TRAINING)
    runner = Estimate({**knobs, "batch_size": 256}, 4400.0, 4, None, changed, Reference.RUNNER_UP)
    line = sh.headline(
        snapshot_study(make_study(), "memory"),
        None,
        tune_result(estimates=[estimate, second, runner]),
    ).estimate
    assert line is not None
    assert line.endswith(
        "The runner-up setting (batch_size 256, mixed_precision mixed_bfloat16), which the "
        "model could not tell from the second's, predicted 4,400 examples/s (trial 4); "
        "it was not measured."
    )


def test_the_estimate_line_ends_with_what_the_search_added_to_the_models_best_estimate():
    estimate = Estimate({"num_parallel_calls": 4}, 3800.0, 2, 3700.0)
    gain = SearchGain("estimate", Speedup(1.04, 0.06, False))
    line = sh.headline(
        snapshot_study(make_study(), "memory"),
        None,
        tune_result(estimates=[estimate], search_gain=gain),
    ).estimate
    assert line is not None
    assert line.endswith(
        "The search's answer: 1.04x ± 0.06 (within noise: not a measured gain) over "
        "estimate, both measured after the choice."
    )
