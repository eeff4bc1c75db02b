"""Resource charts: memory and CPU over time of a fake-clock profile."""

from __future__ import annotations

import pytest

from tests.reports import MIB, fake_profile
from tfperf.report import _resource_charts as rc
from tfperf.results import ProfileResult


@pytest.fixture(scope="module")
def result() -> ProfileResult:
    return fake_profile(gpu=True)


def test_phase_spans_follow_the_phases(result):
    spans = rc.phase_spans(result)
    assert [span.label for span in spans] == ["end_to_end", "pipeline_only", "compute_only"]
    assert all(span.end_s > span.start_s for span in spans)
    assert spans[1].start_s >= spans[0].end_s


def test_memory_chart_has_host_and_gpu_series_in_mib(result):
    chart = rc.memory_chart(result)
    assert [line.name for line in chart.series] == [
        "host RAM (RSS, process tree)",
        "GPU 0 NVIDIA H100 80GB HBM3 memory",
    ]
    assert chart.series[1].values == (1024.0, 3072.0)
    assert chart.machine_total_mib == result.host_memory.total_bytes / MIB
    assert chart.gpu_note is None
    figure = rc.memory_figure(chart)
    assert figure.layout.yaxis.title.text == "memory (MiB)"
    assert [trace.name for trace in figure.data] == [line.name for line in chart.series]


def test_memory_chart_says_why_no_gpu_was_measured():
    chart = rc.memory_chart(fake_profile())
    assert len(chart.series) == 1
    assert chart.gpu_note is not None and chart.gpu_note.startswith("No GPU measured")


def test_cpu_figure_draws_the_all_cores_line(result):
    chart = rc.cpu_chart(result)
    assert chart.cpu_count == result.cpu.cpu_count
    figure = rc.cpu_figure(chart)
    assert figure.layout.title.text.startswith("CPU use over time")
    assert figure.layout.yaxis.title.text == "CPU (%)"
    lines = [shape for shape in figure.layout.shapes if shape.y0 == shape.y1]
    assert lines and lines[0].y0 == 100 * chart.cpu_count
