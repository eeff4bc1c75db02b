"""The scaling curve in words, as a terminal table and as a chart: examples/s and input wait
against the number of replicas.

The answer (up to which count the input keeps up) is computed in the record
(`tfperf.results.ScalingCurve`); here it becomes a sentence, a caveat about what the replicas
were, a table and a figure. The chart follows the report's pattern: `scaling_chart` returns a
frozen record of plain numbers (tested by equality), `scaling_figure` draws it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tfperf.report import _theme as theme
from tfperf.results.scaling import BatchScaling, ReplicaDevice, ScalingCurve, ScalingPoint

if TYPE_CHECKING:
    import plotly.graph_objects as go


def _replicas(count: int) -> str:
    return f"{count} replica{'s' * (count != 1)}"


def scaling_answer(curve: ScalingCurve) -> str:
    """The answer in one sentence: "Your pipeline feeds 2 replicas; at 4 they wait 48% ..."."""
    if not curve.points:
        return "No replica count could be measured, so there is no scaling curve."
    if curve.next_replicas is not None and curve.next_wait_fraction is not None:
        wait = f"{curve.next_wait_fraction:.0%} of each step"
        if curve.feeds_replicas is None:
            return (
                f"Your pipeline does not keep up even with {_replicas(curve.next_replicas)}: "
                f"{'it waits' if curve.next_replicas == 1 else 'they wait'} {wait}."
            )
        return (
            f"Your pipeline feeds {_replicas(curve.feeds_replicas)}; at {curve.next_replicas} "
            f"they wait {wait}."
        )
    top = curve.points[-1].replicas
    if len(curve.points) == 1:
        return f"Your pipeline feeds {_replicas(top)}, the only count measured."
    return (
        f"Your pipeline feeds all {top} replicas measured: the wait stays under "
        f"{curve.keeps_up_below:.0%} of each step at every count."
    )


def scaling_notes(curve: ScalingCurve, cpu_count: int | None = None) -> tuple[str, ...]:
    """What the points were: the devices, the batch, and any count that was not measured."""
    notes = [_device_note(curve, cpu_count), _batch_note(curve)]
    short = [point for point in curve.points if point.replicas_in_step != point.replicas]
    if short:
        ran = ", ".join(f"{p.replicas_in_step} of {p.replicas}" for p in short)
        notes.append(
            f"The train step ran on fewer replicas than laid out ({ran}): TensorFlow saw fewer "
            "devices than the count (on a GPU machine, a TensorFlow without CUDA sees no GPU) "
            "or the file built its own strategy, so those points show the input at the larger "
            "batch, not a data-parallel step."
        )
    notes.extend(
        f"{_replicas(failure.replicas)}: not measured ({failure.reason})."
        for failure in curve.failures
    )
    return tuple(notes)


@dataclasses.dataclass(frozen=True)
class ScalingSection:
    """What the report's scaling card shows besides the chart."""

    answer: str
    notes: tuple[str, ...]
    points: tuple[ScalingPoint, ...]


def scaling_section(curve: ScalingCurve, cpu_count: int | None = None) -> ScalingSection:
    return ScalingSection(
        scaling_answer(curve), scaling_notes(curve, cpu_count), tuple(curve.points)
    )


def _device_note(curve: ScalingCurve, cpu_count: int | None) -> str:
    strategy = f"`--strategy {curve.strategy}`"
    if curve.device is ReplicaDevice.GPU:
        return f"Each count ran {strategy} with one replica per GPU."
    cores = f"the same {cpu_count} CPU cores" if cpu_count else "the same CPU cores"
    return (
        f"Each count ran {strategy} over that many logical CPU devices, which share {cores}: "
        "the curve shows how the input scales with replicas, not a GPU speed-up."
    )


def _batch_note(curve: ScalingCurve) -> str:
    if curve.batch is BatchScaling.PER_REPLICA_FIXED:
        globals_ = ", ".join(str(point.global_batch) for point in curve.points)
        return (
            f"The per-replica batch stays at {curve.per_replica_batch} (the `batch_size` knob "
            f"times the replicas): global batches {globals_}, as data-parallel training scales."
        )
    return (
        "The file sets its batch in code (no `batch_size` knob reaches it), so the global batch "
        "stays as written and each replica gets its share of it."
    )


def render_scaling(curve: ScalingCurve, cpu_count: int | None = None) -> str:
    """The terminal section: a table of the points, the answer, then the notes."""
    header = (
        f"{'replicas':>10}{'global batch':>14}{'examples/s':>12}{'per replica':>13}"
        f"{'input wait':>12}{'compute-only':>14}"
    )
    rows = [
        f"{point.replicas:>10}{point.global_batch:>14}{point.examples_per_sec:>12,.0f}"
        f"{point.per_replica_examples_per_sec:>13,.0f}{point.input_wait_fraction:>12.1%}"
        f"{_rate(point.compute_only_examples_per_sec):>14}"
        for point in curve.points
    ]
    notes = [f"  {note}" for note in scaling_notes(curve, cpu_count)]
    return "\n".join(
        [
            "Scaling with replicas (--scaling):",
            header,
            *rows,
            f"  {scaling_answer(curve)}",
            *notes,
        ]
    )


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


@dataclasses.dataclass(frozen=True)
class ScalingChart:
    """The curve's numbers as drawn: x is the replica count, wait in percent of a step."""

    replicas: tuple[int, ...]
    examples_per_sec: tuple[float, ...]
    per_replica_examples_per_sec: tuple[float, ...]
    ceiling_examples_per_sec: tuple[float | None, ...]
    wait_percent: tuple[float, ...]
    keeps_up_below_percent: float
    answer: str


def scaling_chart(curve: ScalingCurve) -> ScalingChart:
    points = curve.points
    return ScalingChart(
        replicas=tuple(point.replicas for point in points),
        examples_per_sec=tuple(point.examples_per_sec for point in points),
        per_replica_examples_per_sec=tuple(point.per_replica_examples_per_sec for point in points),
        ceiling_examples_per_sec=tuple(point.compute_only_examples_per_sec for point in points),
        wait_percent=tuple(100 * point.input_wait_fraction for point in points),
        keeps_up_below_percent=100 * curve.keeps_up_below,
        answer=scaling_answer(curve),
    )


#: The wait axis ends at the first of these above the highest wait, so small waits stay visible.
_WAIT_AXIS_TOPS = (10.0, 25.0, 50.0, 100.0)


def scaling_figure(data: ScalingChart) -> go.Figure:
    """Examples/s on the left axis, input wait (% of a step) on the right, the threshold dotted."""
    import plotly.graph_objects as go

    figure = go.Figure()
    x = list(data.replicas)
    rates: list[tuple[str, tuple[float | None, ...], str, str]] = [
        ("examples/s, all replicas", data.examples_per_sec, theme.COMPUTE, "solid"),
        ("examples/s per replica", data.per_replica_examples_per_sec, theme.PIPELINE, "solid"),
    ]
    if any(value is not None for value in data.ceiling_examples_per_sec):
        rates.append(("compute-only ceiling", data.ceiling_examples_per_sec, theme.CEILING, "dash"))
    for name, values, colour, dash in rates:
        hover = f"%{{x}} replicas · {name}: %{{y:,.0f}}<extra></extra>"
        theme.add_line(figure, name, x, values, colour, dash, "lines+markers", hovertemplate=hover)
    theme.add_line(
        figure,
        "input wait, % of each step (right axis)",
        x,
        data.wait_percent,
        theme.WAIT,
        mode="lines+markers",
        yaxis="y2",
        marker={"symbol": "diamond", "size": 9},
        hovertext=[f"{value:.0f}% of each step waiting for input" for value in data.wait_percent],
        hovertemplate="%{x} replicas · %{hovertext}<extra></extra>",
    )
    figure.add_shape(
        type="line",
        xref="paper",
        x0=0,
        x1=1,
        yref="y2",
        y0=data.keeps_up_below_percent,
        y1=data.keeps_up_below_percent,
        line={"color": theme.HIGHLIGHT, "dash": "dot", "width": 2},
    )
    top_wait = max((*data.wait_percent, data.keeps_up_below_percent))
    top = next(limit for limit in _WAIT_AXIS_TOPS if top_wait <= limit or limit == 100)
    theme.apply_layout(
        figure,
        "Scaling: examples/s and input wait against replicas",
        "replicas",
        "examples per second",
        # Doubling counts sit evenly on a log axis.
        xaxis={"type": "log", "tickmode": "array", "tickvals": x, "ticktext": [str(v) for v in x]},
        yaxis={"rangemode": "tozero"},
        yaxis2={
            "overlaying": "y",
            "side": "right",
            "range": [0, top],
            "dtick": top / 5,
            "ticksuffix": "%",
            "showgrid": False,
        },
        margin={"l": 70, "r": 70, "t": 70, "b": 55},
    )
    # After apply_layout, which titles every y axis alike.
    threshold = f"{data.keeps_up_below_percent:g}%"
    figure.update_layout(yaxis2_title_text=f"input wait, % of step (dotted: {threshold})")
    return figure
