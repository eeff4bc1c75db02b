"""Verdict, advice, warm-up detection and statistics: pure functions, exact figures."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.measure import _analysis as analysis
from tfperf.results import Phase, StepRecord, Verdict


@pytest.mark.parametrize(
    ("fraction", "verdict"),
    [
        (0.0, Verdict.COMPUTE_BOUND),
        (0.0499, Verdict.COMPUTE_BOUND),
        (0.05, Verdict.MODERATELY_INPUT_BOUND),
        (0.1999, Verdict.MODERATELY_INPUT_BOUND),
        (0.20, Verdict.HIGHLY_INPUT_BOUND),
        (0.9, Verdict.HIGHLY_INPUT_BOUND),
    ],
)
def test_classify_uses_tensorboard_thresholds(fraction, verdict):
    assert analysis.classify(fraction) is verdict


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy(q):
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4, 0.15]
    assert analysis.percentile(values, q) == pytest.approx(np.percentile(values, q))


def test_wait_fraction():
    assert analysis.wait_fraction(1.0, 3.0) == 0.25
    assert analysis.wait_fraction(0.0, 0.0) == 0.0


def test_warmup_not_decided_while_times_drift():
    rule = analysis.WarmupRule(window=3, tolerance=0.1, min_steps=2, max_steps=50)
    assert analysis.detect_warmup_end([1.0, 0.8, 0.6, 0.4, 0.3, 0.2], rule) is None


def test_warmup_ends_where_the_steady_window_starts():
    rule = analysis.WarmupRule(window=3, tolerance=0.1, min_steps=2, max_steps=50)
    times = [1.0, 0.5, 0.25, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    # Windows [2:5] and [5:8] agree first; measurement starts with the later one.
    assert analysis.detect_warmup_end(times, rule) == (5, True)


def test_warmup_cap_reports_not_converged():
    rule = analysis.WarmupRule(window=2, tolerance=0.01, min_steps=1, max_steps=6)
    alternating = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert analysis.detect_warmup_end(alternating, rule) == (6, False)


def test_warmup_rule_rejects_inconsistent_bounds():
    with pytest.raises(ValueError, match="max_steps >= min_steps"):
        analysis.WarmupRule(min_steps=10, max_steps=5)


def _phase(phase, examples_per_step, wait, compute, steps=4):
    records = [
        StepRecord(
            start_s=i * (wait + compute),
            wait_s=wait,
            compute_s=compute,
            examples=examples_per_step,
            epoch=0,
            warmup=False,
        )
        for i in range(steps)
    ]
    return analysis.summarise_phase(phase, records, 0.1, True, 0)


def test_summarise_phase_exact():
    result = _phase(Phase.END_TO_END, 10, wait=0.01, compute=0.04)
    assert result.examples_per_sec == pytest.approx(200.0)
    assert result.input_wait_fraction == pytest.approx(0.2)
    assert result.step_time.mean_s == pytest.approx(0.05)


def test_summarise_phase_without_measured_steps_raises():
    record = StepRecord(start_s=0, wait_s=1, compute_s=1, examples=1, epoch=0, warmup=True)
    with pytest.raises(ValueError, match="no measured step"):
        analysis.summarise_phase(Phase.END_TO_END, [record], 1.0, True, 0)


def test_speedup_if_input_free():
    e2e = _phase(Phase.END_TO_END, 10, wait=0.03, compute=0.02)
    compute = _phase(Phase.COMPUTE_ONLY, 10, wait=0.0, compute=0.02)
    assert analysis.speedup_if_input_free(e2e, compute) == pytest.approx(2.5)
    assert analysis.speedup_if_input_free(e2e, None) is None


def test_compute_slowdown():
    e2e = _phase(Phase.END_TO_END, 10, wait=0.001, compute=0.03)
    compute = _phase(Phase.COMPUTE_ONLY, 10, wait=0.0, compute=0.02)
    assert analysis.compute_slowdown(e2e, compute) == pytest.approx(1.5)
    assert analysis.compute_slowdown(compute, compute) == pytest.approx(1.0)
