"""The knob charts of a study report: which knobs matter, and each trial's values across them.

Data functions read a `StudySnapshot` and return frozen records of plain values (tested by
equality); drawing functions turn a record into a plotly figure.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any

from tfperf.knobs import AUTOTUNE, Knobs, format_value
from tfperf.report import _theme as theme
from tfperf.report._study_data import StudySnapshot, site_names
from tfperf.report._words import UNSET

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: Fewer complete trials than this rank knobs by noise: the report says so instead.
MIN_TRIALS_TO_RANK = 10


@dataclasses.dataclass(frozen=True)
class Importances:
    """How much each knob explains of the throughput (PED-ANOVA), largest first."""

    names: tuple[str, ...]
    values: tuple[float, ...]
    note: str | None


def importances(snapshot: StudySnapshot) -> Importances:
    """The ranking, or none with a note when the study is too small or the values all tie."""
    ranked = sorted(snapshot.importances.items(), key=lambda item: -item[1])
    complete = sum(1 for row in snapshot.trials if row.state == "COMPLETE")
    note = snapshot.importance_note
    if ranked and complete < MIN_TRIALS_TO_RANK:
        note = (
            f"too few trials to rank knobs: {complete} completed, a ranking needs about "
            f"{MIN_TRIALS_TO_RANK}"
        )
    elif len(ranked) > 1 and max(v for _, v in ranked) - min(v for _, v in ranked) < 0.01:
        note = "too few trials to rank knobs: every knob explains the same share"
    if note != snapshot.importance_note:
        ranked = []
    return Importances(
        tuple(name for name, _ in ranked),
        tuple(value for _, value in ranked),
        note,
    )


def importance_figure(data: Importances) -> go.Figure:
    return theme.bar_figure(
        data.names,
        data.values,
        "Which knobs matter: share of throughput variation explained",
        "importance (share, PED-ANOVA)",
        {"height": max(220, 40 + 34 * len(data.names))},
        marker_color=theme.COMPUTE,
        text=[f"{value:.0%}" for value in data.values],
        textposition="auto",
        name="importance",
        hovertemplate="%{y}: explains %{x:.0%} of the variation<extra></extra>",
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


#: Text metrics of the chart's 13 px labels, in px: an average character's width and a
#: line's height. Estimates, so that the layout is planned without measuring text.
LABEL_CHAR_PX = 7.5
LABEL_LINE_PX = 18
#: The narrowest plot the names must fit: the chart is hidden on screens under 640 px
#: (report.css), and a 641 px screen leaves this much inside the page's and card's padding.
NARROW_PLOT_PX = 535
#: Tilts for names too long to sit side by side, gentlest first, in degrees (plotly: negative
#: is up); the gentlest that keeps neighbours a line apart is used.
TILTS = (-30, -45, -60, -90)


@dataclasses.dataclass(frozen=True)
class LabelLayout:
    """Where the axis names of a parallel-coordinates chart go, so that none overlaps another
    or runs off the plot: their text, tilt, and the room above and beside the axes."""

    names: tuple[str, ...]  # one per axis, examples/s last
    angle: int  # degrees from horizontal; 0 when every name fits between its neighbours
    top: int  # px above the axes, for the names
    left: int
    right: int  # px, for the last name and the colour bar


def axis_name(label: str) -> str:
    """An axis's name on the chart: a call site's file without its folders, else the knob.

    "map@pipelines/train.py:118.num_parallel_calls" -> "map@train.py:118.num_parallel_calls";
    the table and the hover text keep the full name.
    """
    method, at, place = label.partition("@")
    return f"{method}@{place.rsplit('/', 1)[-1]}" if at else label


def label_layout(data: ParallelView) -> LabelLayout:
    names = (*(axis_name(axis.label) for axis in data.axes), "examples/s")
    widths = [LABEL_CHAR_PX * len(name) for name in names]
    # The first axis's tick text (AUTOTUNE, ...) is drawn left of it, in the left margin.
    first = data.axes[0].tick_text if data.axes else None
    left = max(60, round(LABEL_CHAR_PX * max(map(len, first or ("",)))) + 16)
    right = 90
    # Axes are spread evenly across the plot; a horizontal name is centred on its axis.
    spacing = (NARROW_PLOT_PX - left - right) / max(1, len(names) - 1)
    fits = all((a + b) / 2 < spacing - LABEL_CHAR_PX for a, b in itertools.pairwise(widths))
    fits = fits and widths[0] / 2 <= left and widths[-1] / 2 <= right
    if fits:
        return LabelLayout(names, 0, LABEL_LINE_PX + 20, left, right)

    # Tilted, each name starts at its axis and rises to the right: neighbours are parallel,
    # `spacing * sin(tilt)` apart, and the room above is the longest name's rise.
    def apart(tilt: int) -> bool:
        return spacing * math.sin(math.radians(-tilt)) >= LABEL_LINE_PX

    tilt = next((tilt for tilt in TILTS if apart(tilt)), TILTS[-1])
    top = round(max(widths) * math.sin(math.radians(-tilt)) + LABEL_LINE_PX + 20)
    right = max(right, round(widths[-1] * math.cos(math.radians(tilt))) + 10)
    return LabelLayout(names, tilt, top, left, right)


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
        tuple(UNSET if v is None else format_value(v) for v in ordered),
    )


def _category_key(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool) and value != AUTOTUNE:
        return (0, float(value), "")
    return (1, 0.0, format_value(value))


def parallel_figure(data: ParallelView) -> go.Figure:
    import plotly.graph_objects as go

    labels = label_layout(data)
    dimensions = []
    for axis, name in zip(data.axes, labels.names, strict=False):
        dimension: dict[str, Any] = {"label": name, "values": list(axis.values)}
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
            labelangle=labels.angle,
            labelside="top",
        )
    )
    return theme.apply_layout(
        figure,
        "Knob values of every feasible trial, coloured by examples/s",
        "",
        "",
        margin={"l": labels.left, "r": labels.right, "t": labels.top, "b": 30},
        height=330 + labels.top,
        # report.js keeps these margins on every screen: the title it moves out of the plot
        # does not free the room the axis names need.
        meta={"keep_margin": True},
    )
