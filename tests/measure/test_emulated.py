"""The emulated accelerator step on a fake clock: the wait it measures, exactly.

The input is a fake with ideal prefetch: batch i is ready `interval` seconds after batch i - 1,
counted from the start of the pass, whatever the step does meanwhile (a sleeping step costs the
input no CPU). Issue 47's figures follow exactly: a batch every 5 ms waits 0.8 of a 1 ms step
and nothing of a 20 ms one.
"""

from __future__ import annotations

import pytest

from tests.fakes.clock import FakeClock, PrefetchedData
from tfperf.measure._profiler import profile
from tfperf.measure.emulated import EmulatedStep
from tfperf.results import ProfileResult


def emulated_profile(clock: FakeClock, interval_s: float, step_s: float) -> ProfileResult:
    return profile(
        PrefetchedData(clock, interval_s),
        EmulatedStep(step_s, sleep=clock.advance),
        steps=20,
        warmup=2,
        clock=clock,
        probes=[],
        sync=lambda outputs: pytest.fail("an emulated step has nothing to sync"),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_the_step_sleeps_its_time_and_syncs_nothing():
    slept: list[float] = []
    step = EmulatedStep(0.005, sleep=slept.append)
    assert step("batch") is None
    step.sync(None)
    assert slept == [0.005]


@pytest.mark.parametrize("seconds", [0.0, -0.001, float("inf")])
def test_a_step_time_must_be_positive(seconds):
    with pytest.raises(ValueError, match="0 < seconds < inf"):
        EmulatedStep(seconds)


def test_a_batch_every_5_ms_waits_four_fifths_of_a_1_ms_step(clock):
    result = emulated_profile(clock, interval_s=0.005, step_s=0.001)
    assert result.emulated_step_s == 0.001
    assert result.input_wait_fraction == pytest.approx(0.8)
    assert result.end_to_end.compute_s / result.end_to_end.steps == pytest.approx(0.001)
    assert result.compute_only is not None
    assert result.compute_only.compute_s / result.compute_only.steps == pytest.approx(0.001)


def test_a_batch_every_5_ms_keeps_a_20_ms_step_busy(clock):
    result = emulated_profile(clock, interval_s=0.005, step_s=0.020)
    assert result.input_wait_fraction == pytest.approx(0.0)
    assert result.end_to_end.examples_per_sec == pytest.approx(8 / 0.020)


def test_a_step_time_replaces_the_train_step(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr("tfperf.measure._emulated.time.sleep", slept.append)
    result = profile(
        [[1.0] * 4] * 3,
        lambda batch: pytest.fail("the emulated step replaces the train step"),
        steps=2,
        warmup=0,
        probes=[],
        measure_pipeline=False,
        step_time_s=0.002,
    )
    assert result.emulated_step_s == 0.002
    assert slept and set(slept) == {0.002}


def test_without_a_step_time_nothing_is_emulated(clock):
    result = profile(
        PrefetchedData(clock, 0.005),
        lambda batch: clock.advance(0.001),
        steps=5,
        warmup=0,
        clock=clock,
        probes=[],
        sync=lambda outputs: None,
    )
    assert result.emulated_step_s is None
