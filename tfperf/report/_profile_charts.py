"""The charts of a profile report: for each, a data function and a drawing function.

A data function reads a `ProfileResult` and returns a small frozen record of plain numbers; a
drawing function turns that record into a plotly figure. Tests compare the records by equality
and the figures by structure, and `tfperf report` re-draws a saved result without TensorFlow.
Times are shown in milliseconds, memory in MiB, throughput in examples per second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfperf.report import _theme as theme
from tfperf.results import PhaseResult, ProfileResult, TimedValue, Verdict

if TYPE_CHECKING:
    import plotly.graph_objects as go

MIB = 1024**2


@dataclasses.dataclass(frozen=True)
class VerdictBanner:
    """The answer at the top of a profile: how input-bound, and what is at stake."""

    level: str  # "bad", "warn" or "ok": the banner's colour, also spelled out in `headline`
    headline: str
    wait_fraction: float
    examples_per_sec: float
    speedup_if_input_free: float | None
    compute_slowdown: float | None
    advice: str
    limiting_stage: str | None  # the stage analysis's bottleneck, when it ran


_BANNERS = {
    Verdict.HIGHLY_INPUT_BOUND: ("bad", "Highly input-bound: the model waits for data"),
    Verdict.MODERATELY_INPUT_BOUND: ("warn", "Moderately input-bound: the model sometimes waits"),
    Verdict.COMPUTE_BOUND: ("ok", "Compute-bound: the input pipeline keeps up"),
}


def verdict_banner(result: ProfileResult) -> VerdictBanner:
    level, headline = _BANNERS[result.verdict]
    return VerdictBanner(
        level=level,
        headline=headline,
        wait_fraction=result.input_wait_fraction,
        examples_per_sec=result.end_to_end.examples_per_sec,
        speedup_if_input_free=result.speedup_if_input_free,
        compute_slowdown=result.compute_slowdown,
        advice=result.advice,
        limiting_stage=_limiting_stage(result),
    )


def _limiting_stage(result: ProfileResult) -> str | None:
    stage = result.stages.bottleneck if result.stages is not None else None
    return stage.label if stage is not None else None


@dataclasses.dataclass(frozen=True)
class StepTimeline:
    """Per step of one phase, the milliseconds spent waiting and computing."""

    phase: str
    steps: tuple[int, ...]
    wait_ms: tuple[float, ...]
    compute_ms: tuple[float, ...]
    warmup_steps: int


def step_timeline(phase: PhaseResult) -> StepTimeline:
    records = phase.records
    return StepTimeline(
        phase=phase.phase.value,
        steps=tuple(range(len(records))),
        wait_ms=tuple(record.wait_s * 1000 for record in records),
        compute_ms=tuple(record.compute_s * 1000 for record in records),
        warmup_steps=sum(record.warmup for record in records),
    )


def timeline_figure(data: StepTimeline) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    figure.add_bar(x=data.steps, y=data.wait_ms, name="waiting for input", marker_color=theme.WAIT)
    figure.add_bar(x=data.steps, y=data.compute_ms, name="computing", marker_color=theme.COMPUTE)
    if data.warmup_steps:
        figure.add_vrect(
            x0=-0.5,
            x1=data.warmup_steps - 0.5,
            fillcolor="#bbbbbb",
            opacity=0.25,
            line_width=0,
            annotation_text="warm-up (excluded)",
            annotation_position="top left",
        )
    extra = {}
    top = _steady_top(data)
    if top is not None:
        # The first steps (graph tracing, filling buffers) can take 10-100x a steady step:
        # scale to the measured steps so their split stays readable, and say what is cut off.
        extra["yaxis"] = {"range": [0, top]}
        figure.add_annotation(
            x=data.steps[-1],
            y=top,
            text="warm-up steps run off the scale",
            showarrow=False,
            xanchor="right",
            yanchor="top",
            yshift=-16,
        )
    return theme.apply_layout(
        figure,
        "Every step, end to end: time waiting for input vs computing",
        "step",
        "time per step (ms)",
        barmode="stack",
        bargap=0.05 if len(data.steps) < 300 else 0,
        **extra,
    )


def _steady_top(data: StepTimeline) -> float | None:
    """A y-axis top that fits the measured steps, when warm-up steps would dwarf them."""
    totals = [wait + compute for wait, compute in zip(data.wait_ms, data.compute_ms, strict=True)]
    measured = totals[data.warmup_steps :]
    if not measured or max(totals) <= 1.5 * max(measured):
        return None
    return 1.2 * max(measured)


@dataclasses.dataclass(frozen=True)
class StepDistribution:
    """Measured (post-warm-up) step times of one phase, with their percentiles, in ms."""

    step_ms: tuple[float, ...]
    p50_ms: float
    p90_ms: float
    p99_ms: float


def step_distribution(phase: PhaseResult) -> StepDistribution:
    times = phase.step_time
    return StepDistribution(
        step_ms=tuple(record.step_s * 1000 for record in phase.records if not record.warmup),
        p50_ms=times.p50_s * 1000,
        p90_ms=times.p90_s * 1000,
        p99_ms=times.p99_s * 1000,
    )


def distribution_figure(data: StepDistribution) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    figure.add_histogram(x=data.step_ms, name="steps", marker_color=theme.COMPUTE, nbinsx=40)
    for label, value, dash in (
        ("p50", data.p50_ms, "solid"),
        ("p90", data.p90_ms, "dash"),
        ("p99", data.p99_ms, "dot"),
    ):
        figure.add_vline(x=value, line_dash=dash, line_color=theme.NEUTRAL)
        # Percentiles are often close together: name them in the legend, not on the lines.
        figure.add_scatter(
            x=[None],
            y=[None],
            mode="lines",
            name=f"{label} {value:.3g} ms",
            line={"dash": dash, "color": theme.NEUTRAL},
        )
    return theme.apply_layout(
        figure, "Step time distribution (measured steps)", "step time (ms)", "steps"
    )


@dataclasses.dataclass(frozen=True)
class Throughputs:
    """Examples per second of each measured phase, in the order they are drawn."""

    labels: tuple[str, ...]
    examples_per_sec: tuple[float, ...]
    colours: tuple[str, ...]


def throughputs(result: ProfileResult) -> Throughputs:
    rows = [("end to end", result.end_to_end, theme.COMPUTE)]
    if result.pipeline_only is not None:
        rows.append(("pipeline only", result.pipeline_only, theme.PIPELINE))
    if result.compute_only is not None:
        rows.append(("compute only (ceiling)", result.compute_only, theme.CEILING))
    return Throughputs(
        labels=tuple(label for label, _, _ in rows),
        examples_per_sec=tuple(phase.examples_per_sec for _, phase, _ in rows),
        colours=tuple(colour for _, _, colour in rows),
    )


def throughput_figure(data: Throughputs) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure(
        go.Bar(
            y=list(data.labels),
            x=list(data.examples_per_sec),
            orientation="h",
            marker_color=list(data.colours),
            text=[f"{value:,.0f} examples/s" for value in data.examples_per_sec],
            textposition="auto",
            name="throughput",
        )
    )
    return theme.apply_layout(
        figure,
        "Throughput: training end to end, the pipeline alone, the model alone",
        "examples per second",
        "",
        showlegend=False,
        yaxis={"autorange": "reversed"},
        height=260,
    )


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
        figure.add_scatter(
            x=line.t_s,
            y=line.values,
            mode="lines",
            name=line.name,
            line_color=theme.series_colour(index),
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
        figure.add_scatter(
            x=data.series.t_s,
            y=data.series.values,
            mode="lines",
            name=data.series.name,
            line_color=theme.COMPUTE,
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


@dataclasses.dataclass(frozen=True)
class StageWaterfall:
    """Examples/s of the pipeline cut after each stage, and the model's rate to compare with.

    Stages whose elements are not examples (file names) have no examples/s: they are listed
    in the table but not drawn.
    """

    labels: tuple[str, ...]
    examples_per_sec: tuple[float, ...]
    stage_indices: tuple[int, ...]
    bottleneck_index: int | None
    consumption_examples_per_sec: float | None


def stage_waterfall(result: ProfileResult) -> StageWaterfall | None:
    report = result.stages
    if report is None:
        return None
    drawn = [stage for stage in report.stages if stage.examples_per_sec]
    return StageWaterfall(
        labels=tuple(f"{stage.index}. {stage.label}" for stage in drawn),
        examples_per_sec=tuple(stage.examples_per_sec or 0.0 for stage in drawn),
        stage_indices=tuple(stage.index for stage in drawn),
        bottleneck_index=report.bottleneck_index,
        consumption_examples_per_sec=report.consumption_examples_per_sec,
    )


def waterfall_figure(data: StageWaterfall) -> go.Figure:
    import plotly.graph_objects as go

    limiting = [index == data.bottleneck_index for index in data.stage_indices]
    figure = go.Figure(
        go.Bar(
            x=list(data.labels),
            y=list(data.examples_per_sec),
            marker_color=[theme.WAIT if flag else theme.PIPELINE for flag in limiting],
            text=[
                f"{rate:,.0f}" + (" (limiting)" if flag else "")
                for rate, flag in zip(data.examples_per_sec, limiting, strict=True)
            ],
            textposition="outside",
            name="pipeline cut after this stage",
        )
    )
    rate = data.consumption_examples_per_sec
    if rate:
        # A line trace, not add_hline: plotly misplaces a shape's label on a log axis.
        figure.add_scatter(
            x=list(data.labels),
            y=[rate] * len(data.labels),
            mode="lines+text",
            text=[""] * (len(data.labels) - 1) + [f"the model consumes {rate:,.0f}/s"],
            textposition="top left",
            line={"dash": "dash", "color": theme.CEILING, "width": 3},
            name="the model consumes (compute only)",
        )
    return theme.apply_layout(
        figure,
        "Stage by stage: examples/s of the pipeline cut after each stage",
        "stage, in data-flow order",
        "examples/s (log scale)",
        yaxis={"type": "log"},
        showlegend=False,
    )
