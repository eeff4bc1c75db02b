"""A profile's time budget: each phase ends after its share, sized by the measured step time."""

from __future__ import annotations

import pytest

from tests.fakes.clock import FakeClock, TimedData, timed_step
from tfperf.cli.profile import budget_seconds
from tfperf.measure import Budget
from tfperf.measure._profiler import profile
from tfperf.report import render_profile_html, render_summary


def _slow_steps(budget_s: float | None):
    """Steps of 2 s (1.5 s waiting, 0.5 s computing), 340 asked per phase."""
    clock = FakeClock()
    return profile(
        TimedData(clock, [1.5] * 50),
        timed_step(clock, 0.5),
        steps=340,
        warmup=2,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        max_seconds=Budget(budget_s).phase_s,
    )


def test_a_phase_ends_after_its_share_of_the_budget_with_the_steps_measured_by_then():
    result = _slow_steps(120.0)
    phase = result.end_to_end
    # 30 s of the 120 s budget: 2 warm-up steps and 13 measured steps of 2 s each.
    assert (phase.warmup.steps, phase.steps) == (2, 13)
    assert phase.cut_by_budget and result.compute_only is not None
    assert result.compute_only.cut_by_budget


def test_without_a_budget_the_steps_asked_for_are_measured():
    phase = _slow_steps(None).end_to_end
    assert phase.steps == 340 and not phase.cut_by_budget


def test_the_summary_states_the_budget_and_what_it_cut():
    result = _slow_steps(120.0)
    result.budget_s = 120.0
    text = render_summary(result)
    assert "Budget: measured within 120 s (--budget; start-up not counted)" in text
    assert "The budget ended end to end after 13 steps, compute only after 58 steps," in text
    html = render_profile_html(result)
    assert "Measured within a budget of 120 s" in html
    assert "which ended this phase after 13 steps" in html


def test_warm_up_that_never_settles_ends_at_half_the_phase_budget():
    clock = FakeClock()
    waits = [0.5 + (i % 2) for i in range(200)]  # alternating: never within 15%
    result = profile(
        TimedData(clock, waits),
        timed_step(clock, 0.0),
        steps=100,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
        max_seconds=20.0,
    )
    warm = result.end_to_end.warmup
    assert not warm.converged and 10.0 <= warm.duration_s <= 11.5
    assert result.end_to_end.cut_by_budget


@pytest.mark.parametrize(("text", "seconds"), [("120", 120.0), ("90s", 90.0), ("5m", 300.0)])
def test_budget_reads_seconds_or_minutes(text, seconds):
    assert budget_seconds(text) == seconds
