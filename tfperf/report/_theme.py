"""Colours and chart layout shared by every HTML report figure.

Colours are the Okabe-Ito palette, chosen because its hues stay distinct under the common
colour-vision deficiencies; every chart also names its series in a legend or label, so no
meaning rests on colour alone. Continuous scales use viridis for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: Okabe-Ito colours, by the role they play in tfperf's charts.
WAIT = "#D55E00"  # vermillion: time a step spends waiting for input
COMPUTE = "#0072B2"  # blue: time a step spends computing
PIPELINE = "#E69F00"  # orange: the input pipeline alone
CEILING = "#009E73"  # bluish green: the compute-only ceiling
BASELINE = "#999999"  # grey: the user's own configuration
AUTOTUNE = "#56B4E9"  # sky blue: tf.data's AUTOTUNE
BEST = "#009E73"  # bluish green: tfperf's recommendation
HIGHLIGHT = "#CC79A7"  # reddish purple: budgets and limits drawn across a chart
NEUTRAL = "#000000"

#: For series without a fixed role (several GPUs, several hosts), in order.
SERIES = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

CONTINUOUS_SCALE = "Viridis"


def series_colour(index: int) -> str:
    return SERIES[index % len(SERIES)]


def apply_layout(
    figure: go.Figure, title: str, x_title: str, y_title: str, **extra: Any
) -> go.Figure:
    """Gives a figure tfperf's title, axis titles (with units), fonts and margins."""
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "xanchor": "left"},
        "template": "plotly_white",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
        "margin": {"l": 70, "r": 20, "t": 70, "b": 55},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1},
        "height": 360,
    }
    layout.update(extra)
    figure.update_layout(**layout)
    figure.update_xaxes(title_text=x_title)
    figure.update_yaxes(title_text=y_title)
    return figure


def add_line(
    figure: go.Figure,
    name: str,
    x: Sequence[Any],
    y: Sequence[Any],
    colour: str,
    dash: str | None = None,
    mode: str = "lines",
    **extra: Any,
) -> None:
    """Adds a line named `name` in `colour`, dashed as `dash`; `extra` goes to `add_scatter`."""
    line = {"color": colour, "dash": dash}
    figure.add_scatter(x=list(x), y=list(y), mode=mode, name=name, line=line, **extra)


def bar_figure(
    labels: Sequence[str],
    values: Sequence[float],
    title: str,
    x_title: str,
    layout: dict[str, Any],
    **bar: Any,
) -> go.Figure:
    """Horizontal bars, the first label on top, no legend; `layout` goes to `apply_layout` and
    `bar` to `go.Bar`."""
    import plotly.graph_objects as go

    figure = go.Figure(go.Bar(y=list(labels), x=list(values), orientation="h", **bar))
    shown = {"showlegend": False, "yaxis": {"autorange": "reversed"}, **layout}
    return apply_layout(figure, title, x_title, "", **shown)
