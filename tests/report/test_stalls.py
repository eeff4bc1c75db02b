"""Idle stalls: long waits for input during which the process tree barely used the CPU."""

from __future__ import annotations

import dataclasses

import pytest

from tests.reports import fake_profile
from tfperf.report import _stalls as st
from tfperf.report import _step_charts as stc
from tfperf.results import CpuUsage, PhaseResult, StepRecord, TimedValue

STALL_S = 1.2


def _phase_and_cpu(stall_cpu: dict[int, float]) -> tuple[PhaseResult, CpuUsage]:
    """2 warm-up and 200 measured steps of 20 ms waiting + 10 ms computing; the steps in
    `stall_cpu` (and warm-up step 1) wait 1.2 s instead, with the CPU at the given percent
    during the wait; 100% (one busy core) at every other time, sampled every 50 ms."""
    records, busy_windows = [], []
    t = 0.0
    for index in range(202):
        wait = STALL_S if index in stall_cpu or index == 1 else 0.02
        records.append(StepRecord(t, wait, 0.01, 4, 0, index < 2))
        if index in stall_cpu:
            busy_windows.append((t, t + wait, stall_cpu[index]))
        t += wait + 0.01
    samples = []
    for k in range(1, int(t / 0.05) + 1):
        at = k * 0.05
        value = next((cpu for a, b, cpu in busy_windows if a < at <= b), 100.0)
        if records[1].start_s < at <= records[1].start_s + STALL_S:
            value = 0.0  # the warm-up stall is idle too, but warm-up is not judged
        samples.append(TimedValue(at, value))
    phase = dataclasses.replace(fake_profile().end_to_end, records=records)
    return phase, CpuUsage(100.0, 150.0, 4, samples)


def test_a_long_wait_with_the_cpu_idle_is_an_idle_stall_and_a_busy_one_is_not():
    phase, cpu = _phase_and_cpu({5: 2.0, 9: 150.0})
    stalls = st.idle_stalls(phase, cpu)
    assert stalls == (
        st.IdleStall(
            step=5,
            wait_ms=pytest.approx(1200.0),
            typical_wait_ms=pytest.approx(20.0),
            cpu_percent=pytest.approx(2.0),
            typical_cpu_percent=pytest.approx(100.0),
        ),
    )
    assert (
        stalls[0]
        .describe()
        .startswith("step 5 · waited 1,200 ms (typical 20.0 ms) with the CPU idle: 2% of one core")
    )


def test_no_cpu_samples_no_judgement():
    phase, _ = _phase_and_cpu({5: 2.0})
    assert st.idle_stalls(phase, None) == ()


def test_the_timeline_marks_idle_stalls_with_hover_text_saying_so():
    phase, cpu = _phase_and_cpu({5: 2.0, 9: 150.0})
    data = stc.step_timeline(phase, cpu)
    assert [stall.step for stall in data.idle_stalls] == [5]
    figure = stc.timeline_figure(data)
    marks = [trace for trace in figure.data if trace.name == "stall with the CPU idle"]
    assert len(marks) == 1
    assert list(marks[0].x) == [5]
    assert marks[0].y[0] <= data.top_ms  # drawn on the capped axis, not off it
    assert "with the CPU idle" in marks[0].hovertext[0]
    assert "blocked, not computing" in marks[0].hovertext[0]
    assert stc.step_timeline(phase).idle_stalls == ()
