"""Profile charts: data functions by equality on a fake-clock profile, figures by structure."""

from __future__ import annotations

import pytest

from tests.reports import MIB, fake_profile, with_stages
from tfperf.report import _profile_charts as pc
from tfperf.report import _theme as theme
from tfperf.results import ProfileResult


@pytest.fixture(scope="module")
def result() -> ProfileResult:
    return fake_profile(gpu=True)


def test_verdict_banner_states_the_figures(result):
    banner = pc.verdict_banner(result)
    assert banner.level == "bad"
    assert banner.headline.startswith("Highly input-bound")
    assert banner.wait_fraction == pytest.approx(2 / 3)
    assert banner.speedup_if_input_free == pytest.approx(3.0)
    assert banner.examples_per_sec == pytest.approx(4 / 0.03)
    assert banner.advice == result.advice


def test_step_timeline_splits_every_step(result):
    timeline = pc.step_timeline(result.end_to_end)
    assert timeline.steps == tuple(range(7))
    assert timeline.warmup_steps == 2
    assert timeline.wait_ms == pytest.approx((20.0,) * 7)
    assert timeline.compute_ms == pytest.approx((10.0,) * 7)


def test_timeline_figure_stacks_wait_over_compute(result):
    figure = pc.timeline_figure(pc.step_timeline(result.end_to_end))
    assert [trace.name for trace in figure.data] == ["waiting for input", "computing"]
    assert figure.layout.barmode == "stack"
    assert figure.layout.xaxis.title.text == "step"
    assert figure.layout.yaxis.title.text == "time per step (ms)"
    assert figure.data[0].marker.color == theme.WAIT


def test_timeline_scales_to_measured_steps_when_warmup_dwarfs_them():
    data = pc.StepTimeline("end_to_end", (0, 1, 2), (900.0, 1.0, 1.0), (100.0, 9.0, 9.0), 1)
    figure = pc.timeline_figure(data)
    assert tuple(figure.layout.yaxis.range) == pytest.approx((0, 12.0))
    assert "off the scale" in figure.layout.annotations[-1].text


def test_step_distribution_keeps_only_measured_steps(result):
    distribution = pc.step_distribution(result.end_to_end)
    assert distribution.step_ms == pytest.approx((30.0,) * 5)
    assert distribution.p50_ms == pytest.approx(30.0)


def test_distribution_figure_names_percentiles_in_the_legend(result):
    figure = pc.distribution_figure(pc.step_distribution(result.end_to_end))
    names = [trace.name for trace in figure.data]
    assert names[0] == "steps"
    assert [name.split()[0] for name in names[1:]] == ["p50", "p90", "p99"]
    assert figure.layout.xaxis.title.text == "step time (ms)"


def test_throughputs_are_the_three_phases_in_order(result):
    data = pc.throughputs(result)
    assert data.labels == ("end to end", "pipeline only", "compute only (ceiling)")
    assert data.examples_per_sec == pytest.approx((4 / 0.03, 4 / 0.02, 4 / 0.01))
    figure = pc.throughput_figure(data)
    assert figure.layout.xaxis.title.text == "examples per second"
    assert list(figure.data[0].text)[2] == "400 examples/s"


def test_phase_spans_follow_the_phases(result):
    spans = pc.phase_spans(result)
    assert [span.label for span in spans] == ["end_to_end", "pipeline_only", "compute_only"]
    assert all(span.end_s > span.start_s for span in spans)
    assert spans[1].start_s >= spans[0].end_s


def test_memory_chart_has_host_and_gpu_series_in_mib(result):
    chart = pc.memory_chart(result)
    assert [line.name for line in chart.series] == [
        "host RAM (RSS, process tree)",
        "GPU 0 NVIDIA H100 80GB HBM3 memory",
    ]
    assert chart.series[1].values == (1024.0, 3072.0)
    assert chart.machine_total_mib == result.host_memory.total_bytes / MIB
    assert chart.gpu_note is None
    figure = pc.memory_figure(chart)
    assert figure.layout.yaxis.title.text == "memory (MiB)"
    assert [trace.name for trace in figure.data] == [line.name for line in chart.series]


def test_memory_chart_says_why_no_gpu_was_measured():
    chart = pc.memory_chart(fake_profile())
    assert len(chart.series) == 1
    assert chart.gpu_note is not None and chart.gpu_note.startswith("No GPU measured")


def test_cpu_figure_draws_the_all_cores_line(result):
    chart = pc.cpu_chart(result)
    assert chart.cpu_count == result.cpu.cpu_count
    figure = pc.cpu_figure(chart)
    assert figure.layout.title.text.startswith("CPU use over time")
    assert figure.layout.yaxis.title.text == "CPU (%)"
    lines = [shape for shape in figure.layout.shapes if shape.y0 == shape.y1]
    assert lines and lines[0].y0 == 100 * chart.cpu_count


def test_stage_waterfall_draws_stages_counted_in_examples():
    result = with_stages(fake_profile())
    data = pc.stage_waterfall(result)
    assert data == pc.StageWaterfall(
        labels=("1. interleave(TFRecordDataset)", "2. map(parse)", "3. batch(4)"),
        examples_per_sec=(5000.0, 200.0, 190.0),
        stage_indices=(1, 2, 3),
        bottleneck_index=2,
        consumption_examples_per_sec=400.0,
    )
    figure = pc.waterfall_figure(data)
    bars, line = figure.data
    assert list(bars.marker.color) == [theme.PIPELINE, theme.WAIT, theme.PIPELINE]
    assert list(bars.text)[1] == "200 (limiting)"
    assert line.name == "the model consumes (compute only)"
    assert set(line.y) == {400.0}
    assert figure.layout.yaxis.type == "log"
    assert figure.layout.yaxis.title.text == "examples/s (log scale)"
    assert pc.verdict_banner(result).limiting_stage == "map(parse)"


def test_no_waterfall_without_a_stage_analysis(result):
    assert pc.stage_waterfall(result) is None
    assert pc.verdict_banner(result).limiting_stage is None
