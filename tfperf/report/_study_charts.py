"""The parts of a study report: for each, a data function and a drawing function.

Data functions read a `StudySnapshot` and return frozen records of plain values (tested by
equality); drawing functions turn a record into a plotly figure (tested by structure).
Throughput is in examples per second, memory in MiB.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tfperf.knobs import AUTOTUNE, Knobs, format_value
from tfperf.report import _theme as theme
from tfperf.report._snippets import baseline_snippet, tf_data_snippet
from tfperf.report._study_data import StudySnapshot, TrialRow, flat_knobs, site_names
from tfperf.report._tune_text import training_warnings
from tfperf.results import Measurement, Speedup, recommend, speedup, training_changes
from tfperf.sites import Patch, changes_between, make_patch
from tfperf.study import pareto

if TYPE_CHECKING:
    import plotly.graph_objects as go

MIB = 1024**2
_LABELS = {"baseline": "your baseline", "autotune": "everything AUTOTUNE"}


@dataclasses.dataclass(frozen=True)
class SummaryRow:
    """One configuration in the summary card."""

    label: str
    role: str  # "best", "baseline" or "autotune": how the row is styled
    trial: int | None
    median: float
    spread: float
    runs: int
    peak_rss_bytes: int


@dataclasses.dataclass(frozen=True)
class KnobChange:
    name: str
    baseline: str
    best: str
    changes_training: bool


@dataclasses.dataclass(frozen=True)
class Summary:
    """The answer of a study: what to use, how much faster, how sure, and what to check."""

    rows: tuple[SummaryRow, ...]
    vs_baseline: Speedup | None
    vs_autotune: Speedup | None
    recommendation: str
    changes: tuple[KnobChange, ...]
    warnings: tuple[str, ...]
    tf_data_code: str  # empty for code tuned at its call sites: it gets a patch instead
    baseline_code: str
    remeasured: bool
    patch: Patch | None = None  # for code tuned at its call sites, when its files are at hand
    patch_problem: str | None = None  # why there is no patch although sites changed


def summary(snapshot: StudySnapshot) -> Summary | None:
    """The summary card, or None when no configuration has completed yet."""
    measured = list(snapshot.measurements) or _single_runs(snapshot)
    by_label = {m.label: m for m in measured}
    best = max(measured, key=lambda m: m.median, default=None)
    baseline = by_label.get("baseline")
    if best is None:
        return None
    autotune = by_label.get("autotune")
    vs_baseline = speedup(best, baseline) if baseline else None
    changes = training_changes(best, baseline) if baseline else []
    return Summary(
        rows=tuple(
            _summary_row(m, role)
            for m, role in ((best, "best"), (baseline, "baseline"), (autotune, "autotune"))
            if m is not None and (role == "best" or m is not best)
        ),
        vs_baseline=vs_baseline,
        vs_autotune=speedup(best, autotune) if autotune else None,
        recommendation=_recommendation(best, vs_baseline, changes, snapshot.remeasured),
        changes=_changes(best, baseline, changes),
        warnings=tuple(training_warnings(best, baseline, changes) if baseline else ()),
        tf_data_code="" if best.knobs.get("sites") else tf_data_snippet(_all_knobs(best)),
        baseline_code="" if best.knobs.get("sites") else baseline_snippet(_all_knobs(best)),
        remeasured=snapshot.remeasured,
        **_patch(snapshot, best),
    )


def _patch(snapshot: StudySnapshot, best: Measurement) -> dict[str, Any]:
    """The best configuration's call-site values as a diff of the user's files."""
    chosen = best.knobs.get("sites") or {}
    if not chosen or snapshot.discovery is None or snapshot.code_root is None:
        return {}
    changes = changes_between(snapshot.discovery.sites, chosen)
    if not changes:
        return {}
    try:
        return {"patch": make_patch(snapshot.code_root, changes)}
    except OSError as error:
        return {"patch_problem": f"the pipeline's files cannot be read here ({error})"}


def _all_knobs(measurement: Measurement) -> dict[str, Any]:
    return Knobs.from_mapping(measurement.knobs).to_dict()


def _single_runs(snapshot: StudySnapshot) -> list[Measurement]:
    """Before re-measurement: the references and the best trial, one run each."""
    rows = [row for row in snapshot.trials if row.feasible and row.examples_per_sec]
    picks: dict[str, TrialRow] = {}
    for row in rows:
        if row.reference and row.reference not in picks:
            picks[row.reference] = row
    if rows:
        top = max(rows, key=lambda row: row.examples_per_sec or 0.0)
        if top.reference is None:
            picks[f"trial {top.number}"] = top
    return [
        Measurement(
            label=label,
            trial_number=row.number,
            knobs=row.knobs,
            examples_per_sec=[row.examples_per_sec or 0.0],
            peak_rss_bytes=row.peak_rss_bytes or 0,
            peak_gpu_bytes=row.peak_gpu_bytes,
        )
        for label, row in picks.items()
    ]


def _summary_row(measurement: Measurement, role: str) -> SummaryRow:
    label = _LABELS.get(measurement.label, measurement.label)
    if role == "best" and measurement.label not in _LABELS:
        label = f"best: {measurement.label}"
    return SummaryRow(
        label=label,
        role=role,
        trial=measurement.trial_number,
        median=measurement.median,
        spread=measurement.spread,
        runs=len(measurement.examples_per_sec),
        peak_rss_bytes=measurement.peak_rss_bytes,
    )


def _recommendation(
    best: Measurement, vs_baseline: Speedup | None, changes: list[str], remeasured: bool
) -> str:
    if vs_baseline is None:
        return (
            f"{best.label} is the fastest configuration measured, but the baseline has not "
            "completed, so there is nothing to compare it with yet."
        )
    text = recommend(best, vs_baseline, changes)
    if not remeasured:
        text += (
            " These are single runs, not yet re-measured side by side: finish the study "
            "(run the same `tfperf tune` command again) before trusting the ratio."
        )
    return text


def _changes(
    best: Measurement, baseline: Measurement | None, training: list[str]
) -> tuple[KnobChange, ...]:
    if baseline is None:
        return ()
    before, after = flat_knobs(baseline.knobs), flat_knobs(best.knobs)
    names = [*Knobs.names(), *sorted(set(after) - set(Knobs.names()))]
    return tuple(
        KnobChange(name, format_value(old), format_value(new), name in training)
        for name in names
        if (old := before.get(name)) != (new := after.get(name))
    )


@dataclasses.dataclass(frozen=True)
class History:
    """Examples/s of each completed trial in order, and the best feasible so far."""

    numbers: tuple[int, ...]
    examples_per_sec: tuple[float, ...]
    kinds: tuple[str, ...]  # "baseline", "AUTOTUNE", "search" or "over a budget"
    best_numbers: tuple[int, ...]
    best_so_far: tuple[float, ...]


def history(snapshot: StudySnapshot) -> History:
    numbers, values, kinds, best_numbers, best_values = [], [], [], [], []
    best = 0.0
    for row in snapshot.trials:
        if row.state != "COMPLETE":
            continue
        value = row.examples_per_sec or 0.0
        numbers.append(row.number)
        values.append(value)
        kinds.append(_kind(row))
        if row.feasible:
            best = max(best, value)
        if best:
            best_numbers.append(row.number)
            best_values.append(best)
    return History(
        tuple(numbers), tuple(values), tuple(kinds), tuple(best_numbers), tuple(best_values)
    )


def _kind(row: TrialRow) -> str:
    if not row.feasible:
        return "over a budget"
    if row.reference == "baseline":
        return "baseline"
    if row.reference == "autotune":
        return "AUTOTUNE"
    return "search"


_KIND_STYLE = {
    "search": (theme.COMPUTE, "circle"),
    "baseline": (theme.BASELINE, "square"),
    "AUTOTUNE": (theme.AUTOTUNE, "diamond"),
    "over a budget": (theme.WAIT, "x"),
}


def history_figure(data: History) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    for kind, (colour, symbol) in _KIND_STYLE.items():
        _add_markers(
            figure,
            [i for i, k in enumerate(data.kinds) if k == kind],
            (data.numbers, data.examples_per_sec, data.numbers),
            f"trial ({kind})" if kind != "search" else "trial",
            {"color": colour, "symbol": symbol},
        )
    figure.add_scatter(
        x=data.best_numbers,
        y=data.best_so_far,
        mode="lines",
        line_shape="hv",
        name="best so far",
        line={"color": theme.BEST, "width": 3},
    )
    return theme.apply_layout(
        figure, "Optimisation history: each trial and the best so far", "trial", "examples/s"
    )


def _add_markers(
    figure: go.Figure,
    picked: list[int],
    columns: tuple[tuple[float, ...], tuple[float, ...], tuple[int, ...]],
    name: str,
    marker: dict[str, str],
) -> None:
    """One marker trace of the rows `picked` from (x, y, trial number); none if none picked."""
    if not picked:
        return
    xs, ys, numbers = columns
    figure.add_scatter(
        x=[xs[i] for i in picked],
        y=[ys[i] for i in picked],
        text=[f"trial {numbers[i]}" for i in picked],
        mode="markers",
        name=name,
        marker={**marker, "size": 9},
    )


@dataclasses.dataclass(frozen=True)
class Importances:
    """How much each knob explains of the throughput (PED-ANOVA), largest first."""

    names: tuple[str, ...]
    values: tuple[float, ...]
    note: str | None


def importances(snapshot: StudySnapshot) -> Importances:
    ranked = sorted(snapshot.importances.items(), key=lambda item: -item[1])
    return Importances(
        tuple(name for name, _ in ranked),
        tuple(value for _, value in ranked),
        snapshot.importance_note,
    )


def importance_figure(data: Importances) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure(
        go.Bar(
            x=list(data.values),
            y=list(data.names),
            orientation="h",
            marker_color=theme.COMPUTE,
            text=[f"{value:.0%}" for value in data.values],
            textposition="auto",
            name="importance",
        )
    )
    return theme.apply_layout(
        figure,
        "Which knobs matter: share of throughput variation explained",
        "importance (share, PED-ANOVA)",
        "",
        showlegend=False,
        yaxis={"autorange": "reversed"},
        height=max(220, 40 + 34 * len(data.names)),
    )


@dataclasses.dataclass(frozen=True)
class Axis:
    """One vertical axis of the parallel-coordinates view; ticks name categorical values."""

    label: str
    values: tuple[float, ...]
    tick_values: tuple[float, ...] | None
    tick_text: tuple[str, ...] | None


@dataclasses.dataclass(frozen=True)
class ParallelView:
    """Feasible completed trials as lines across the knobs that varied, coloured by examples/s."""

    axes: tuple[Axis, ...]
    examples_per_sec: tuple[float, ...]


def parallel_view(snapshot: StudySnapshot) -> ParallelView:
    rows = [row for row in snapshot.trials if row.feasible and row.examples_per_sec]
    axes = []
    for name in (*Knobs.names(), *site_names(rows)):
        raw = [row.flat_knobs.get(name) for row in rows]
        if len({repr(value) for value in raw}) > 1:
            axes.append(_axis(name, raw))
    return ParallelView(tuple(axes), tuple(row.examples_per_sec or 0.0 for row in rows))


def _axis(name: str, raw: list[Any]) -> Axis:
    numeric = all(isinstance(v, int) and not isinstance(v, bool) and v != AUTOTUNE for v in raw)
    if numeric:
        return Axis(name, tuple(float(v) for v in raw), None, None)
    # Categories (AUTOTUNE, precision names, None) get evenly spaced positions, sorted with
    # numbers first so an axis such as num_parallel_calls still reads low to high.
    ordered = sorted({repr(v): v for v in raw}.values(), key=_category_key)
    position = {repr(v): float(i) for i, v in enumerate(ordered)}
    return Axis(
        name,
        tuple(position[repr(v)] for v in raw),
        tuple(position.values()),
        tuple("default" if v is None else format_value(v) for v in ordered),
    )


def _category_key(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool) and value != AUTOTUNE:
        return (0, float(value), "")
    return (1, 0.0, format_value(value))


def parallel_figure(data: ParallelView) -> go.Figure:
    import plotly.graph_objects as go

    dimensions = []
    for axis in data.axes:
        dimension: dict[str, Any] = {"label": axis.label, "values": list(axis.values)}
        if axis.tick_values is not None:
            dimension["tickvals"] = list(axis.tick_values)
            dimension["ticktext"] = list(axis.tick_text or ())
        dimensions.append(dimension)
    dimensions.append({"label": "examples/s", "values": list(data.examples_per_sec)})
    figure = go.Figure(
        go.Parcoords(
            dimensions=dimensions,
            line={
                "color": list(data.examples_per_sec),
                "colorscale": theme.CONTINUOUS_SCALE,
                "showscale": True,
                "colorbar": {"title": {"text": "examples/s"}},
            },
            name="trials",
        )
    )
    return theme.apply_layout(
        figure,
        "Knob values of every feasible trial, coloured by examples/s",
        "",
        "",
        margin={"l": 60, "r": 40, "t": 90, "b": 30},
        height=420,
    )


@dataclasses.dataclass(frozen=True)
class RamTradeoff:
    """Examples/s against peak host RAM (MiB), the Pareto front, and the RAM budget."""

    numbers: tuple[int, ...]
    examples_per_sec: tuple[float, ...]
    peak_rss_mib: tuple[float, ...]
    feasible: tuple[bool, ...]
    front_numbers: tuple[int, ...]
    front_examples_per_sec: tuple[float, ...]
    front_peak_rss_mib: tuple[float, ...]
    budget_mib: float | None


def ram_tradeoff(snapshot: StudySnapshot) -> RamTradeoff:
    rows = [row for row in snapshot.trials if row.state == "COMPLETE" and row.peak_rss_bytes]
    front = _pareto([row for row in rows if row.feasible])
    return RamTradeoff(
        numbers=tuple(row.number for row in rows),
        examples_per_sec=tuple(row.examples_per_sec or 0.0 for row in rows),
        peak_rss_mib=tuple((row.peak_rss_bytes or 0) / MIB for row in rows),
        feasible=tuple(row.feasible for row in rows),
        front_numbers=tuple(row.number for row in front),
        front_examples_per_sec=tuple(row.examples_per_sec or 0.0 for row in front),
        front_peak_rss_mib=tuple((row.peak_rss_bytes or 0) / MIB for row in front),
        budget_mib=snapshot.ram_budget_bytes / MIB if snapshot.ram_budget_bytes else None,
    )


def _pareto(rows: list[TrialRow]) -> list[TrialRow]:
    """The Pareto front of `rows` (`tfperf.study.pareto`), by increasing peak RAM."""

    def key(row: TrialRow) -> tuple[float, float]:
        return (row.examples_per_sec or 0.0, float(row.peak_rss_bytes or 0))

    return sorted(pareto(rows, key), key=lambda row: key(row)[1])


def ram_figure(data: RamTradeoff) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    for feasible, name, colour, symbol in (
        (True, "trial", theme.COMPUTE, "circle"),
        (False, "trial (over a budget)", theme.WAIT, "x"),
    ):
        _add_markers(
            figure,
            [i for i, ok in enumerate(data.feasible) if ok is feasible],
            (data.peak_rss_mib, data.examples_per_sec, data.numbers),
            name,
            {"color": colour, "symbol": symbol},
        )
    figure.add_scatter(
        x=data.front_peak_rss_mib,
        y=data.front_examples_per_sec,
        mode="lines+markers",
        line_shape="hv",
        name="Pareto front",
        line={"color": theme.BEST, "width": 2},
        marker={"size": 11, "symbol": "circle-open", "color": theme.BEST},
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
    return theme.apply_layout(
        figure,
        "Throughput against peak host RAM, with the Pareto front",
        "peak host RAM (MiB)",
        "examples/s",
    )


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
