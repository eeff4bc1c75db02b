"""Speed-ups with their noise, and the TuneResult JSON round trip."""

from __future__ import annotations

import pytest

from tfperf.results import Measurement, Objective, Speedup, TuneResult, speedup


def measured(label, values, knobs=None):
    return Measurement(label, None, knobs or {"batch_size": 64}, values, 1 << 30, None)


def test_median_and_spread():
    m = measured("a", [90.0, 100.0, 120.0])
    assert m.median == 100.0
    assert m.spread == pytest.approx(0.15)  # half of (120 - 90) over 100
    assert measured("b", [50.0]).spread == 0.0


def test_gain_beyond_noise_is_significant():
    result = speedup(measured("new", [200.0, 210.0, 190.0]), measured("old", [100.0, 102.0, 98.0]))
    assert result.ratio == pytest.approx(2.0)
    assert result.spread == pytest.approx(0.07)
    assert result.significant
    assert result.describe() == "2.00x ± 0.14"


def test_gain_within_noise_is_not_a_gain():
    result = speedup(measured("new", [104.0, 130.0, 80.0]), measured("old", [100.0, 101.0, 99.0]))
    assert result.ratio == pytest.approx(1.04)
    assert not result.significant
    assert "within noise: not a measured gain" in result.describe()


def test_round_trip():
    best, base = measured("trial 3", [200.0, 190.0]), measured("baseline", [100.0, 98.0])
    result = TuneResult(
        pipeline="p.py",
        study_name="p",
        storage="sqlite:///x.db",
        objective=Objective.THROUGHPUT,
        best=best,
        baseline=base,
        autotune=None,
        candidates=[best, base],
        speedup_vs_baseline=speedup(best, base),
        speedup_vs_autotune=None,
        recommendation="Use it.",
        changes_training=[],
        pareto_trials=[],
        trial_counts={"complete": 5},
        trials_this_run=5,
        wall_s=12.5,
        ram_budget_bytes=1 << 30,
        gpu_memory_budget_bytes=None,
    )
    again = TuneResult.from_dict(result.to_dict())
    assert again == result
    assert isinstance(again.speedup_vs_baseline, Speedup)
