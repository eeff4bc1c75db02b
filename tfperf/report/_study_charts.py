"""The trial charts of a study report (history, RAM trade-off) and the hosts that ran trials.

Data functions read a `StudySnapshot` and return frozen records of plain values (tested by
equality); drawing functions turn a record into a plotly figure (tested by structure).
Throughput is in examples per second, memory in MiB. Knob charts are in `_knob_charts`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tfperf.report import _theme as theme
from tfperf.report._study_data import StudySnapshot, TrialRow
from tfperf.report._study_summary import TrialFigure, trial_figures
from tfperf.report._words import knob_value
from tfperf.results.tune import Reference
from tfperf.study import pareto

if TYPE_CHECKING:
    import plotly.graph_objects as go

MIB = 1024**2


@dataclasses.dataclass(frozen=True)
class Point:
    """One trial as a chart draws it: where, how, and what its hover text says."""

    number: int
    examples_per_sec: float  # the re-measured median, the single run, or a pruned trial's rate
    error: float  # half the range of its runs (0 for one run)
    kind: str  # "baseline", "AUTOTUNE", "search", "over budget" or "pruned"
    hover: str  # "trial 7 · 1,732 examples/s (one run) · batch_size=64 · ..."


@dataclasses.dataclass(frozen=True)
class History:
    """Each trial in order (re-measured medians where there are), and the best so far."""

    points: tuple[Point, ...]
    best_numbers: tuple[int, ...]
    best_so_far: tuple[float, ...]
    recommended: int | None  # the trial the report recommends: where the best line ends


def history(snapshot: StudySnapshot) -> History:
    figures, shown = trial_figures(snapshot), hover_knobs(snapshot)
    points, best_numbers, best_values = [], [], []
    best = 0.0
    for row in snapshot.trials:
        point = trial_point(row, figures.get(row.number), shown)
        if point is None:
            continue
        points.append(point)
        if row.feasible:
            best = max(best, point.examples_per_sec)
        if best:
            best_numbers.append(row.number)
            best_values.append(best)
    return History(tuple(points), tuple(best_numbers), tuple(best_values), snapshot.best_trial)


def hover_knobs(snapshot: StudySnapshot) -> frozenset[str]:
    """The knobs a trial's hover names: those its pipeline uses.

    A pipeline that reads `knobs` uses every knob (each trial names them all, as tuned). A
    plain file tuned through its call sites (a zero-change study) never reads the code knobs
    (batch_size, num_parallel_calls, ...): its call sites carry those values. It is shown its
    sites and the knobs tfperf applies itself (tf.data options, precision) that some trial
    moved off their declared default; the rest were never applied.
    """
    from tfperf.knobs import KNOBS
    from tfperf.knobs.declare import Applier

    rows = [row for row in snapshot.trials if row.knobs]
    names = {name for row in rows for name in row.flat_knobs}
    if not any(row.knobs.get("sites") for row in rows):
        return frozenset(names)

    def used(name: str) -> bool:
        if name not in KNOBS.names():
            return True  # a call site
        knob = KNOBS[name]
        moved = any(row.flat_knobs.get(name, knob.default) != knob.default for row in rows)
        return knob.applied_by is not Applier.CODE and moved

    return frozenset(name for name in names if used(name))


def trial_point(
    row: TrialRow, figure: TrialFigure | None, shown: frozenset[str] | None = None
) -> Point | None:
    """A completed trial at its one figure, a pruned or over-budget one at the rate it reached
    before it was stopped; None for a trial with neither (failed, or stopped before any rate).

    The hover names the knobs in `shown` (`hover_knobs`); all of the trial's when None.
    """
    if figure is not None:
        rate, error = figure.examples_per_sec, (figure.high - figure.low) / 2
        how = (
            f"median of {figure.runs} re-measured runs ± {error:,.0f}"
            if figure.remeasured
            else "one run"
        )
    elif row.reached_examples_per_sec is not None:
        # Stopped before it finished: the rate it had reached, one run, drawn apart.
        rate, error = row.reached_examples_per_sec, 0.0
        how = f"{row.stopped_as}: the rate it reached in one run"
    else:
        return None
    knobs = " · ".join(
        f"{name}={knob_value(value)}"
        for name, value in row.flat_knobs.items()
        if shown is None or name in shown
    )
    hover = f"trial {row.number} · {rate:,.0f} examples/s ({how})"
    return Point(row.number, rate, error, _kind(row), f"{hover} · {knobs}" if knobs else hover)


def _kind(row: TrialRow) -> str:
    if row.state == "PRUNED":
        return "pruned"
    if not row.feasible:
        return "over budget"
    if row.reference == Reference.BASELINE:
        return "baseline"
    if row.reference == Reference.AUTOTUNE:
        return "AUTOTUNE"
    return "search"


_KIND_STYLE = {
    "search": (theme.COMPUTE, "circle"),
    "baseline": (theme.BASELINE, "square"),
    "AUTOTUNE": (theme.AUTOTUNE, "diamond"),
    "over budget": (theme.WAIT, "x"),
    "pruned": (theme.WAIT, "x-open"),
}


def history_figure(data: History) -> go.Figure:
    figure = _point_traces(data.points, [float(point.number) for point in data.points])
    theme.add_line(
        figure,
        "best so far",
        data.best_numbers,
        data.best_so_far,
        theme.BEST,
        line_shape="hv",
        line_width=3,
        hovertemplate="best so far after trial %{x}: %{y:,.0f} examples/s<extra></extra>",
    )
    top = max(data.points, key=lambda point: point.examples_per_sec, default=None)
    if data.recommended is not None and top is not None and top.number != data.recommended:
        figure.add_annotation(
            x=data.recommended,
            y=next(p.examples_per_sec for p in data.points if p.number == data.recommended),
            text="recommended",
            showarrow=True,
            arrowhead=2,
        )
    return theme.apply_layout(
        figure,
        "Optimisation history: each trial and the best so far",
        "trial",
        "examples/s",
        # Trial numbers are integers: no tick at 2.5.
        xaxis={"tickformat": "d", "dtick": max(1, len(data.points) // 10)},
    )


def _point_traces(points: tuple[Point, ...], xs: list[float]) -> go.Figure:
    """One marker trace per kind of trial, with error bars where a trial was re-measured."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for kind, (colour, symbol) in _KIND_STYLE.items():
        picked = [i for i, point in enumerate(points) if point.kind == kind]
        if not picked:
            continue
        errors = [points[i].error for i in picked]
        figure.add_scatter(
            x=[xs[i] for i in picked],
            y=[points[i].examples_per_sec for i in picked],
            hovertext=[points[i].hover for i in picked],
            hovertemplate="%{hovertext}<extra></extra>",
            error_y={"type": "data", "array": errors, "visible": any(errors)},
            mode="markers",
            name=f"trial ({kind})" if kind != "search" else "trial",
            marker={"color": colour, "symbol": symbol, "size": 9},
        )
    return figure


@dataclasses.dataclass(frozen=True)
class RamTradeoff:
    """Examples/s against peak host RAM (MiB), the Pareto front, and the RAM budget."""

    points: tuple[Point, ...]
    peak_rss_mib: tuple[float, ...]
    front_numbers: tuple[int, ...]
    front_examples_per_sec: tuple[float, ...]
    front_peak_rss_mib: tuple[float, ...]
    budget_mib: float | None


def ram_tradeoff(snapshot: StudySnapshot) -> RamTradeoff:
    """Every trial the history draws that has a peak RAM, over budget and pruned ones too; the
    front only from feasible completed trials."""
    figures, shown = trial_figures(snapshot), hover_knobs(snapshot)
    drawn: list[tuple[Point, float]] = []
    for row in snapshot.trials:
        point, peak = trial_point(row, figures.get(row.number), shown), _peak_rss(row, figures)
        if point is not None and peak:
            drawn.append((point, peak / MIB))
    feasible = [row for row in snapshot.trials if row.feasible and row.number in figures]
    front = _pareto([row for row in feasible if _peak_rss(row, figures)], figures)
    return RamTradeoff(
        points=tuple(point for point, _ in drawn),
        peak_rss_mib=tuple(mib for _, mib in drawn),
        front_numbers=tuple(row.number for row in front),
        front_examples_per_sec=tuple(figures[row.number].examples_per_sec for row in front),
        front_peak_rss_mib=tuple((_peak_rss(row, figures) or 0) / MIB for row in front),
        budget_mib=snapshot.ram_budget_bytes / MIB if snapshot.ram_budget_bytes else None,
    )


def _peak_rss(row: TrialRow, figures: dict[int, TrialFigure]) -> int | None:
    """The peak RAM the report shows for a trial: its figure's, else the one its run recorded."""
    figure = figures.get(row.number)
    return figure.peak_rss_bytes if figure is not None else row.peak_rss_bytes


def _pareto(rows: list[TrialRow], figures: dict[int, TrialFigure]) -> list[TrialRow]:
    """The Pareto front of `rows` (`tfperf.study.pareto`), by increasing peak RAM."""

    def key(row: TrialRow) -> tuple[float, float]:
        figure = figures[row.number]
        return (figure.examples_per_sec, float(figure.peak_rss_bytes or 0))

    return sorted(pareto(rows, key), key=lambda row: key(row)[1])


#: What "Pareto front" means, on hover wherever the report uses the term.
PARETO_EXPLAINED = (
    "Pareto front: the trials no other trial beats on both counts, faster and using less RAM. "
    "Any trial off the front is worse than one on it; along the front, more speed costs RAM."
)

#: Under this relative spread, an axis drawn to fit its data would magnify noise: it starts at 0.
FLAT_SPREAD = 0.05


def ram_figure(data: RamTradeoff) -> go.Figure:
    figure = _point_traces(data.points, list(data.peak_rss_mib))
    theme.add_line(
        figure,
        "Pareto front",
        data.front_peak_rss_mib,
        data.front_examples_per_sec,
        theme.BEST,
        mode="lines+markers",
        line_shape="hv",
        line_width=2,
        marker={"size": 11, "symbol": "circle-open", "color": theme.BEST},
        hovertemplate=(
            "Pareto front: %{y:,.0f} examples/s at %{x:,.0f} MiB<br>"
            "no other trial is both faster and lighter on RAM<extra></extra>"
        ),
    )
    peak = max(data.peak_rss_mib, default=0.0)
    if data.budget_mib is not None and data.budget_mib > 2 * peak > 0:
        # Drawing a far-off budget would squeeze every trial against the left edge.
        figure.add_annotation(
            x=1,
            y=1,
            xref="paper",
            yref="paper",
            text=f"RAM budget {data.budget_mib:,.0f} MiB: far above every trial →",
            showarrow=False,
            xanchor="right",
            font={"color": theme.HIGHLIGHT},
        )
    elif data.budget_mib is not None:
        figure.add_vline(
            x=data.budget_mib,
            line_dash="dash",
            line_color=theme.HIGHLIGHT,
            annotation_text=f"RAM budget {data.budget_mib:,.0f} MiB",
            annotation_position="top left",
        )
    extra: dict[str, Any] = {}
    if flat(data.peak_rss_mib):
        # RAM 837.4-839 MiB drawn edge to edge would look like a trade-off; it is noise.
        extra["xaxis"] = {"rangemode": "tozero"}
    return theme.apply_layout(
        figure,
        "Throughput against peak host RAM, with the Pareto front",
        "peak host RAM (MiB)",
        "examples/s",
        **extra,
    )


def flat(values: tuple[float, ...]) -> bool:
    """Whether `values` spread less than `FLAT_SPREAD` of their largest."""
    top = max(values, default=0.0)
    return top > 0 and (top - min(values)) / top < FLAT_SPREAD


@dataclasses.dataclass(frozen=True)
class HostGroup:
    """The trials one host ran; `hardware` differs between groups when a study mixes machines."""

    host: str
    hardware: str | None
    trials: int
    best_examples_per_sec: float | None


def host_groups(snapshot: StudySnapshot) -> tuple[HostGroup, ...]:
    groups: dict[str, list[TrialRow]] = {}
    for row in snapshot.trials:
        groups.setdefault(row.host or "unknown", []).append(row)
    return tuple(
        HostGroup(
            host=host,
            hardware=next((row.hardware for row in rows if row.hardware), None),
            trials=len(rows),
            best_examples_per_sec=max(
                (row.examples_per_sec for row in rows if row.feasible and row.examples_per_sec),
                default=None,
            ),
        )
        for host, rows in sorted(groups.items())
    )


def mixed_hardware(groups: tuple[HostGroup, ...]) -> bool:
    return len({group.hardware for group in groups if group.hardware}) > 1
