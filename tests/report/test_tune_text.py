"""The terminal summary of a tuning run (`tfperf/report/_tune_text.py`)."""

from __future__ import annotations

import dataclasses

from tests.report.helpers import measured
from tfperf.report._tune_text import format_measurement


def test_a_configuration_a_memory_budget_stopped_says_so_and_why_it_is_not_recommended():
    over = dataclasses.replace(measured("trial 4", [2000.0, 2100.0]), over_budget=2)
    assert format_measurement(over).endswith(
        "; 2 repeats stopped over the memory budget, so it is not recommended"
    )
    baseline = dataclasses.replace(measured("baseline", [1000.0]), over_budget=1)
    assert format_measurement(baseline).endswith("; 1 repeat stopped over the memory budget")
    assert "budget" not in format_measurement(measured("trial 5", [1500.0]))


def test_a_measurement_of_one_run_says_its_spread_is_unknown():
    text = format_measurement(measured("trial 2", [1500.0]))
    assert "spread unknown: one run" in text
    assert "±0.0%" not in text
    assert "±" in format_measurement(measured("trial 3", [1500.0, 1520.0]))
