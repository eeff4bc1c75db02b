"""Step charts: the wait/compute timeline and the step-time histogram of a fake-clock profile."""

from __future__ import annotations

import pytest

from tests.reports import fake_profile
from tfperf.report import _step_charts as stc
from tfperf.report import _theme as theme
from tfperf.results import ProfileResult


@pytest.fixture(scope="module")
def result() -> ProfileResult:
    return fake_profile(gpu=True)


def test_step_timeline_splits_every_step(result):
    timeline = stc.step_timeline(result.end_to_end)
    assert timeline.steps == tuple(range(7))
    assert timeline.warmup_steps == 2
    assert timeline.wait_ms == pytest.approx((20.0,) * 7)
    assert timeline.compute_ms == pytest.approx((10.0,) * 7)


def test_timeline_figure_stacks_wait_over_compute(result):
    figure = stc.timeline_figure(stc.step_timeline(result.end_to_end))
    assert [trace.name for trace in figure.data] == ["waiting for input", "computing"]
    assert figure.layout.barmode == "stack"
    assert figure.layout.xaxis.title.text == "step"
    assert figure.layout.yaxis.title.text == "time per step (ms)"
    assert figure.data[0].marker.color == theme.WAIT


def test_timeline_caps_the_axis_near_p99_and_marks_what_runs_off(result):
    import dataclasses

    warmup, measured = result.end_to_end.records[:2], result.end_to_end.records[2:]
    records = [*warmup, *(measured * 20)]  # 100 measured steps of 30 ms
    # One 1.2 s stall among them, and the dataset restarting at the fourth step.
    records[4] = dataclasses.replace(records[4], wait_s=1.2)
    records = [dataclasses.replace(r, epoch=1 if i >= 3 else 0) for i, r in enumerate(records)]
    phase = dataclasses.replace(result.end_to_end, records=records)
    data = stc.step_timeline(phase)
    assert data.top_ms == pytest.approx(1.2 * 30.0)
    assert data.off_scale == (4,)
    assert data.epoch_starts == (3,)
    figure = stc.timeline_figure(data)
    assert tuple(figure.layout.yaxis.range) == pytest.approx((0, 36.0))
    names = [trace.name for trace in figure.data]
    assert names == [
        "waiting for input",
        "computing",
        "dataset restarts (new epoch)",
        "off the scale",
    ]
    assert figure.data[3].hovertext == ("step 4 · 1,210 ms in all: off the scale",)
    assert tuple(figure.data[2].x) == (2.5,)  # the restart is a point of its own trace
    assert figure.data[0].marker.pattern.shape == "/"  # readable in greyscale
    assert figure.data[0].hovertemplate == "step %{x} · waiting %{y:.1f} ms<extra></extra>"


def test_step_distribution_keeps_only_measured_steps(result):
    distribution = stc.step_distribution(result.end_to_end)
    assert distribution.step_ms == pytest.approx((30.0,) * 5)
    assert distribution.p50_ms == pytest.approx(30.0)


def test_distribution_figure_names_percentiles_in_the_legend(result):
    figure = stc.distribution_figure(stc.step_distribution(result.end_to_end))
    names = [trace.name for trace in figure.data]
    assert names[0] == "steps"
    assert [name.split()[0] for name in names[1:]] == ["p50", "p90", "p99"]
    assert figure.layout.xaxis.title.text == "step time (ms)"
