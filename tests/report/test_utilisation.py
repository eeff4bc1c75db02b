"""The accelerator's utilisation in words: the same sentences for the terminal and the page."""

from __future__ import annotations

import markupsafe

from tests.fakes.clock import FakeClock, PrefetchedData
from tfperf.measure._profiler import profile
from tfperf.measure.emulated import EmulatedStep
from tfperf.report import render_profile_html, render_summary
from tfperf.report._utilisation import utilisation_text, utilisation_words
from tfperf.results import ProfileResult, Utilisation


def measured(step: object, clock: FakeClock, speedup: float | None = None) -> ProfileResult:
    result = profile(
        PrefetchedData(clock, 0.005),
        step,  # type: ignore[arg-type]
        steps=20,
        warmup=2,
        clock=clock,
        probes=[],
        sync=lambda outputs: None,
    )
    result.utilisation = Utilisation.of(result, speedup)
    return result


def test_an_emulated_step_reads_as_emulated_with_its_threshold():
    clock = FakeClock()
    result = measured(EmulatedStep(0.001, sleep=clock.advance), clock)
    text = utilisation_text(result)
    assert text.startswith("Compute emulated (--step-time): each step slept 1 ms")
    assert (
        "Emulated step of 1 ms: waits 80% of each step, utilisation 20% (below the 90% bar)."
        in (text)
    )
    assert (
        "The input alone delivers a batch every 5 ms, so it keeps a step of 4.5 ms or longer at "
        "least 90% busy" in text
    )
    assert "rough guide" not in text
    assert text in render_summary(result)


def test_a_faster_accelerator_is_labelled_a_prediction():
    clock = FakeClock()
    result = measured(lambda batch: clock.advance(0.02), clock, speedup=8)
    words = utilisation_words(result)
    assert words is not None
    assert words.points[0].startswith("The model's step of 20 ms (compute only): waits 0%")
    assert words.points[1].startswith("Predicted for a step 8x faster (2.5 ms): waits 50%")
    assert "A prediction, not a measurement" in words.points[1]
    html = render_profile_html(result)
    assert all(str(markupsafe.escape(point)) in html for point in words.points)


def test_a_measurement_the_model_misses_is_called_a_rough_guide():
    clock = FakeClock()
    result = measured(EmulatedStep(0.001, sleep=clock.advance), clock)
    result.input_wait_fraction = 0.1
    result.utilisation = Utilisation.of(result)
    assert "take the step above, and any prediction, as a rough guide" in utilisation_text(result)


def test_a_profile_of_a_real_step_without_the_flags_says_nothing():
    clock = FakeClock()
    result = profile(
        PrefetchedData(clock, 0.005),
        lambda batch: clock.advance(0.02),
        steps=5,
        warmup=0,
        clock=clock,
        probes=[],
        sync=lambda outputs: None,
    )
    assert utilisation_text(result) == ""
    assert "MLPerf Storage" not in render_summary(result)
