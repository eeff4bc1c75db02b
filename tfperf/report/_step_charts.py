"""The step charts of a profile: every step's wait/compute split, and the step-time histogram.

Data functions read a `PhaseResult` and return frozen records of plain numbers (tested by
equality); drawing functions turn a record into a plotly figure. Times are in milliseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfperf.report import _theme as theme
from tfperf.report._stalls import IdleStall, idle_stalls
from tfperf.results import CpuUsage, PhaseResult

if TYPE_CHECKING:
    import plotly.graph_objects as go


@dataclasses.dataclass(frozen=True)
class StepTimeline:
    """Per step of one phase, the milliseconds spent waiting and computing.

    `top_ms` caps the y-axis near the 99th percentile of the measured steps when a few stalls
    would otherwise flatten the typical split; `off_scale` lists the steps drawn cut off;
    `idle_stalls` the steps that waited far above typical while the CPU was idle.
    """

    phase: str
    steps: tuple[int, ...]
    wait_ms: tuple[float, ...]
    compute_ms: tuple[float, ...]
    warmup_steps: int
    epoch_starts: tuple[int, ...] = ()  # steps that read the first batch of a new epoch
    top_ms: float | None = None
    off_scale: tuple[int, ...] = ()
    idle_stalls: tuple[IdleStall, ...] = ()


def step_timeline(phase: PhaseResult, cpu: CpuUsage | None = None) -> StepTimeline:
    """The phase's steps; with the profile's CPU samples, its stalls with the CPU idle too."""
    records = phase.records
    wait = tuple(record.wait_s * 1000 for record in records)
    compute = tuple(record.compute_s * 1000 for record in records)
    totals = [w + c for w, c in zip(wait, compute, strict=True)]
    warmup = sum(record.warmup for record in records)
    top = _typical_top(totals, warmup)
    return StepTimeline(
        phase=phase.phase.value,
        steps=tuple(range(len(records))),
        wait_ms=wait,
        compute_ms=compute,
        warmup_steps=warmup,
        epoch_starts=tuple(
            i for i in range(1, len(records)) if records[i].epoch != records[i - 1].epoch
        ),
        top_ms=top,
        off_scale=() if top is None else tuple(i for i, t in enumerate(totals) if t > top),
        idle_stalls=idle_stalls(phase, cpu),
    )


def _typical_top(totals: list[float], warmup: int) -> float | None:
    """A y-axis top near the measured steps' p99, when some step runs far above it."""
    measured = sorted(totals[warmup:]) or sorted(totals)
    if not measured:
        return None
    p99 = measured[min(len(measured) - 1, round(0.99 * (len(measured) - 1)))]
    if p99 <= 0 or max(totals) <= 1.5 * p99:
        return None
    return 1.2 * p99


def timeline_figure(data: StepTimeline) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    # Waiting is hatched as well as coloured, so the split reads in greyscale too.
    figure.add_bar(
        x=data.steps,
        y=data.wait_ms,
        name="waiting for input",
        marker={"color": theme.WAIT, "pattern": {"shape": "/", "fgcolor": "#ffffff"}},
        hovertemplate="step %{x} · waiting %{y:.1f} ms<extra></extra>",
    )
    figure.add_bar(
        x=data.steps,
        y=data.compute_ms,
        name="computing",
        marker_color=theme.COMPUTE,
        hovertemplate="step %{x} · computing %{y:.1f} ms<extra></extra>",
    )
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
    for step in data.epoch_starts:
        figure.add_vline(x=step - 0.5, line_dash="dot", line_color=theme.NEUTRAL)
    if data.epoch_starts:
        # One point per restart at the foot of its line: the legend entry, and the restarts'
        # data in the chart's table (a trace of no points would say there were none).
        figure.add_scatter(
            x=[step - 0.5 for step in data.epoch_starts],
            y=[0.0] * len(data.epoch_starts),
            mode="markers",
            name="dataset restarts (new epoch)",
            marker={"symbol": "line-ns-open", "color": theme.NEUTRAL, "size": 10},
            hovertemplate="restart before step %{x:.0f}<extra></extra>",
        )
    extra = {}
    if data.top_ms is not None:
        extra["yaxis"] = {"range": [0, data.top_ms]}
        totals = [w + c for w, c in zip(data.wait_ms, data.compute_ms, strict=True)]
        figure.add_scatter(
            x=list(data.off_scale),
            y=[data.top_ms * 0.97] * len(data.off_scale),
            mode="markers",
            marker={"symbol": "triangle-up", "color": theme.NEUTRAL, "size": 10},
            name="off the scale",
            hovertext=[
                f"step {i} · {totals[i]:,.0f} ms in all: off the scale" for i in data.off_scale
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        )
    _mark_idle_stalls(figure, data)
    return theme.apply_layout(
        figure,
        "Every step, end to end: time waiting for input vs computing",
        "step",
        "time per step (ms)",
        barmode="stack",
        bargap=0.05 if len(data.steps) < 300 else 0,
        **extra,
    )


def _mark_idle_stalls(figure: go.Figure, data: StepTimeline) -> None:
    """An hourglass above each stall during which the CPU was idle, its hover saying so."""
    if not data.idle_stalls:
        return
    tops = [w + c for w, c in zip(data.wait_ms, data.compute_ms, strict=True)]
    if data.top_ms is not None:
        tops = [min(top, data.top_ms * 0.9) for top in tops]
    figure.add_scatter(
        x=[stall.step for stall in data.idle_stalls],
        y=[tops[stall.step] for stall in data.idle_stalls],
        mode="markers",
        marker={"symbol": "hourglass", "color": theme.HIGHLIGHT, "size": 12},
        name="stall with the CPU idle",
        hovertext=[stall.describe() for stall in data.idle_stalls],
        hovertemplate="%{hovertext}<extra></extra>",
    )


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
    low, high = _percentile(data.step_ms, 0.01), _percentile(data.step_ms, 0.99)
    bins: dict[str, float] = {}
    if high > low:
        # Bins from the p1-p99 range: one stall must not make every typical step one bar.
        size = (high - low) / 30
        bins = {"start": low - size, "end": high + size, "size": size}
    figure.add_histogram(
        x=data.step_ms,
        name="steps",
        marker_color=theme.COMPUTE,
        xbins=bins or None,
        nbinsx=None if bins else 40,
        hovertemplate="%{y} steps took %{x} ms<extra></extra>",
    )
    outside = sum(1 for v in data.step_ms if bins and not bins["start"] <= v <= bins["end"])
    if outside:
        figure.add_annotation(
            x=1,
            y=1,
            xref="paper",
            yref="paper",
            xanchor="right",
            showarrow=False,
            text=f"{outside} step{'s' if outside != 1 else ''} outside the p1-p99 range not drawn",
        )
    for label, value, dash in (
        ("p50", data.p50_ms, "solid"),
        ("p90", data.p90_ms, "dash"),
        ("p99", data.p99_ms, "dot"),
    ):
        figure.add_vline(x=value, line_dash=dash, line_color=theme.NEUTRAL)
        # Percentiles are often close together: name them in the legend, not on the lines.
        theme.add_line(figure, f"{label} {value:.3g} ms", [None], [None], theme.NEUTRAL, dash)
    return theme.apply_layout(
        figure, "Step time distribution (measured steps)", "step time (ms)", "steps"
    )


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
