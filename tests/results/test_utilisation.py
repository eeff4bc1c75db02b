"""The accelerator's utilisation: the model, the 90% rule, and the record's JSON."""

from __future__ import annotations

import json

import pytest

from tests.fakes.clock import FakeClock, PrefetchedData
from tfperf.measure._profiler import profile
from tfperf.measure.emulated import EmulatedStep
from tfperf.results import ProfileResult, Utilisation
from tfperf.results._utilisation import MLPERF_STORAGE_BAR, StepSource, wait_at


def emulated_profile(clock: FakeClock, interval_s: float, step_s: float) -> ProfileResult:
    step = EmulatedStep(step_s, sleep=clock.advance)
    return profile(
        PrefetchedData(clock, interval_s), step, steps=20, warmup=2, clock=clock, probes=[]
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.mark.parametrize(
    ("step", "interval", "wait"),
    [(0.001, 0.005, 0.8), (0.020, 0.005, 0.0), (0.005, 0.005, 0.0), (0.0045, 0.005, 0.1)],
)
def test_the_model_waits_for_what_the_input_takes_beyond_the_step(step, interval, wait):
    assert wait_at(step, interval) == pytest.approx(wait)


def test_the_shortest_step_at_the_bar_is_nine_tenths_of_the_batch_interval():
    step = Utilisation.min_step(0.005)
    assert step == pytest.approx(0.0045)
    assert 1 - wait_at(step, 0.005) == pytest.approx(MLPERF_STORAGE_BAR)
    assert 1 - wait_at(step * 0.99, 0.005) < MLPERF_STORAGE_BAR


def test_an_emulated_1_ms_step_is_measured_against_a_4_5_ms_threshold(clock):
    found = Utilisation.of(emulated_profile(clock, interval_s=0.005, step_s=0.001))
    assert found is not None
    assert found.input_interval_s == pytest.approx(0.005)
    assert found.min_step_s == pytest.approx(0.0045)
    point = found.measured
    assert point.source is StepSource.EMULATED and point.step_s == 0.001
    assert point.wait_fraction == pytest.approx(0.8)
    assert point.utilisation == pytest.approx(0.2) and not point.meets(found.bar)
    assert found.model_agrees and found.predicted is None


def test_a_20_ms_step_meets_the_bar(clock):
    found = Utilisation.of(emulated_profile(clock, interval_s=0.005, step_s=0.020))
    assert found is not None and found.measured.meets(found.bar)


def test_a_faster_accelerator_is_predicted_from_the_model_step(clock):
    # A real model: 20 ms a step on this host; on an accelerator 8x faster, 2.5 ms.
    result = profile(
        PrefetchedData(clock, 0.005),
        lambda batch: clock.advance(0.020),
        steps=20,
        warmup=2,
        clock=clock,
        probes=[],
        sync=lambda outputs: None,
    )
    found = Utilisation.of(result, speedup=8)
    assert found is not None
    assert found.measured.source is StepSource.MEASURED
    assert found.measured.step_s == pytest.approx(0.020) and found.measured.meets(found.bar)
    predicted = found.predicted
    assert predicted is not None and predicted.source is StepSource.PREDICTED
    assert predicted.step_s == pytest.approx(0.0025) and predicted.speedup == 8
    assert predicted.wait_fraction == pytest.approx(0.5)


def test_a_measurement_the_model_does_not_explain_is_flagged(clock):
    result = emulated_profile(clock, interval_s=0.005, step_s=0.001)
    result.input_wait_fraction = 0.1  # as if the input had kept up after all
    found = Utilisation.of(result)
    assert found is not None and not found.model_agrees


def test_a_speedup_is_refused_for_an_emulated_step(clock):
    result = emulated_profile(clock, interval_s=0.005, step_s=0.001)
    with pytest.raises(ValueError, match="give the faster step time instead"):
        Utilisation.of(result, speedup=4)


def test_without_the_pipeline_only_phase_there_is_no_utilisation(clock):
    result = emulated_profile(clock, interval_s=0.005, step_s=0.001)
    result.pipeline_only = None
    assert Utilisation.of(result) is None


def test_the_result_json_carries_the_emulated_step_and_utilisation(clock):
    result = emulated_profile(clock, interval_s=0.005, step_s=0.001)
    result.utilisation = Utilisation.of(result)
    data = json.loads(result.to_json())
    assert data["emulated_step_s"] == 0.001
    assert data["utilisation"]["min_step_s"] == pytest.approx(0.0045)
    assert data["utilisation"]["points"][0]["source"] == "emulated"
    again = ProfileResult.from_dict(data)
    assert again.utilisation == result.utilisation and again.emulated_step_s == 0.001


def test_a_result_written_before_the_fields_still_loads(clock):
    data = json.loads(emulated_profile(clock, interval_s=0.005, step_s=0.001).to_json())
    del data["emulated_step_s"], data["utilisation"]
    again = ProfileResult.from_dict(data)
    assert again.emulated_step_s is None and again.utilisation is None
