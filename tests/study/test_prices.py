"""A tune's later runs priced by its finished trials, less the work they will not repeat."""

from __future__ import annotations

import dataclasses
import datetime

import optuna
import pytest

from tests.reports import fake_profile, with_stages
from tfperf.results import ProfileResult, TrainingRate
from tfperf.study import prices
from tfperf.study._prices import priced


def _trial(took_s: float, result: ProfileResult | None) -> optuna.trial.FrozenTrial:
    attrs = {"status": "complete", "wall_s": took_s}
    if result is not None:
        attrs["result"] = result.to_json(indent=None)
    trial = optuna.trial.create_trial(value=1.0, user_attrs=attrs)
    trial.datetime_start = trial.datetime_complete - datetime.timedelta(seconds=took_s)
    return trial


def _phases(result: ProfileResult) -> tuple[float, float]:
    """(all three phases, the two a re-measurement does not measure), warm-ups included."""
    phases = [result.end_to_end, result.pipeline_only, result.compute_only]
    each = [phase.warmup.duration_s + phase.duration_s for phase in phases if phase is not None]
    return sum(each), sum(each[1:])


@pytest.fixture
def baseline() -> ProfileResult:
    """The baseline trial's result: the stage analysis and two training probes beside the
    phases, as the tuner's first trial measures."""
    probes = [
        TrainingRate(64, "float32", 900.0, None, steps=5, duration_s=1.5),
        TrainingRate(32, "mixed_float16", 700.0, None, steps=5, duration_s=2.0),
    ]
    return dataclasses.replace(with_stages(fake_profile()), training_rates=probes)


def test_the_baseline_trial_prices_a_search_trial_without_its_stage_analysis_and_probes(
    baseline,
):
    assert baseline.stages is not None
    once = baseline.stages.duration_s + 3.5
    _, unmeasured = _phases(baseline)
    search, rerun = priced(20.0, baseline)
    assert search == pytest.approx(20.0 - once)
    assert rerun == pytest.approx(20.0 - once - unmeasured)
    assert 0 < rerun < search < 20.0


def test_a_study_prices_by_the_median_and_each_finalist_by_its_own_trial(baseline):
    searched = fake_profile()
    _, unmeasured = _phases(searched)
    study = optuna.create_study(direction="maximize")
    assert prices(study) is None  # nothing completed: nothing to price by
    for took, result in ((20.0, baseline), (5.0, searched), (6.0, searched)):
        study.add_trial(_trial(took, result))
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))

    found = prices(study)

    assert found is not None
    assert found.trial_s == pytest.approx(6.0)  # the median of 20 - once, 5 and 6
    assert found.rerun_s == pytest.approx(6.0 - unmeasured)
    assert found.rerun_of(1) == pytest.approx(5.0 - unmeasured)
    assert found.rerun_of(None) == found.rerun_of(99) == found.rerun_s


def test_a_trial_without_a_profile_or_whose_parts_outlast_it_is_priced_whole(baseline):
    assert priced(9.0, None) == (9.0, 9.0)  # stopped, or over a budget: nothing to take off
    _, unmeasured = _phases(baseline)
    search, rerun = priced(0.5, baseline)  # clocks of another host: the parts do not fit
    assert search == 0.5
    assert rerun == (0.5 - unmeasured if unmeasured < 0.5 else 0.5)


def test_a_pricing_reads_each_trial_once_and_follows_the_study(baseline, monkeypatch):
    from tfperf.study import Pricing, _prices

    study = optuna.create_study(direction="maximize")
    pricing = Pricing()
    study.add_trial(_trial(20.0, baseline))
    study.add_trial(_trial(5.0, fake_profile()))
    assert pricing.of(study) == prices(study)
    read: list[float] = []
    monkeypatch.setattr(_prices, "priced", lambda took, profile: read.append(took) or (took, took))
    study.add_trial(_trial(6.0, None))
    found = pricing.of(study)
    assert read == [pytest.approx(6.0)]  # only the new trial: the others were priced before
    assert found is not None and found.rerun_of(2) == pytest.approx(6.0)
    assert set(found.rerun_by_trial) == {0, 1, 2}
