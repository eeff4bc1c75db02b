"""The resource charts of a profile: host and GPU memory, and CPU use, over time.

Data functions read a `ProfileResult` and return frozen records of plain numbers (tested by
equality); drawing functions turn a record into a plotly figure. Memory is in MiB, CPU in
percent of one core, time in seconds since the profile started.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfperf.report import _theme as theme
from tfperf.results import ProfileResult, TimedValue

if TYPE_CHECKING:
    import plotly.graph_objects as go

MIB = 1024**2


@dataclasses.dataclass(frozen=True)
class PhaseSpan:
    """When a phase ran, in seconds since the profile started."""

    label: str
    start_s: float
    end_s: float


def phase_spans(result: ProfileResult) -> tuple[PhaseSpan, ...]:
    spans = []
    for phase in result.phases():
        if phase.records:
            last = phase.records[-1]
            start = phase.records[0].start_s
            spans.append(PhaseSpan(phase.phase.value, start, last.start_s + last.step_s))
    return tuple(spans)


@dataclasses.dataclass(frozen=True)
class TimeSeries:
    """One named line: seconds since the start, and values in the chart's unit."""

    name: str
    t_s: tuple[float, ...]
    values: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class MemoryChart:
    """Host RSS and each GPU's memory in MiB over time, and the limits to draw."""

    series: tuple[TimeSeries, ...]
    machine_total_mib: float | None
    spans: tuple[PhaseSpan, ...]
    gpu_note: str | None


def memory_chart(result: ProfileResult) -> MemoryChart:
    series = []
    total = None
    if result.host_memory is not None:
        memory = result.host_memory
        series.append(_series("host RAM (RSS, process tree)", memory.samples, MIB))
        total = memory.total_bytes / MIB
    for gpu in result.gpus:
        series.append(_series(f"GPU {gpu.index} {gpu.name} memory", gpu.memory_samples, MIB))
    note = None if result.gpus else f"No GPU measured: {result.gpu_unavailable_reason or 'none'}."
    return MemoryChart(tuple(series), total, phase_spans(result), note)


def memory_figure(data: MemoryChart) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    for index, line in enumerate(data.series):
        theme.add_line(
            figure,
            line.name,
            line.t_s,
            line.values,
            theme.series_colour(index),
            hovertemplate=f"{line.name} · %{{x:.1f}} s · %{{y:,.0f}} MiB<extra></extra>",
        )
    _shade_phases(figure, data.spans)
    return theme.apply_layout(figure, "Memory over time", "time since start (s)", "memory (MiB)")


@dataclasses.dataclass(frozen=True)
class CpuChart:
    """CPU use of the process tree over time; 100% is one busy core."""

    series: TimeSeries | None
    cpu_count: int
    spans: tuple[PhaseSpan, ...]


def cpu_chart(result: ProfileResult) -> CpuChart:
    if result.cpu is None:
        return CpuChart(None, result.environment.cpu_count, phase_spans(result))
    line = _series("CPU (process tree)", result.cpu.samples, 1)
    return CpuChart(line, result.cpu.cpu_count, phase_spans(result))


def cpu_figure(data: CpuChart) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    if data.series is not None:
        theme.add_line(
            figure,
            data.series.name,
            data.series.t_s,
            data.series.values,
            theme.COMPUTE,
            hovertemplate="%{x:.1f} s · CPU %{y:.0f}%<extra></extra>",
        )
    figure.add_hline(
        y=data.cpu_count * 100,
        line_dash="dash",
        line_color=theme.HIGHLIGHT,
        annotation_text=f"all {data.cpu_count} cores",
        annotation_position="bottom right",
    )
    _shade_phases(figure, data.spans)
    return theme.apply_layout(
        figure,
        "CPU use over time (100% = one core)",
        "time since start (s)",
        "CPU (%)",
        # Headroom above the all-cores line keeps the phase names clear of its label.
        yaxis={"range": [0, data.cpu_count * 100 * 1.15]},
    )


def _series(name: str, samples: Sequence[TimedValue], divisor: float) -> TimeSeries:
    return TimeSeries(
        name=name,
        t_s=tuple(sample.t_s for sample in samples),
        values=tuple(sample.value / divisor for sample in samples),
    )


_PHASE_NAMES = {
    "end_to_end": "end to end",
    "pipeline_only": "pipeline only",
    "compute_only": "compute only",
}


def _shade_phases(figure: go.Figure, spans: tuple[PhaseSpan, ...]) -> None:
    # Alternate light bands so a reader sees which phase a memory or CPU figure belongs to.
    for index, span in enumerate(spans):
        figure.add_vrect(
            x0=span.start_s,
            x1=span.end_s,
            fillcolor="#888888",
            opacity=0.08 if index % 2 == 0 else 0.16,
            line_width=0,
            annotation_text=_PHASE_NAMES.get(span.label, span.label),
            annotation_position="top left",
        )
