"""Text alternatives of the report's charts: a sentence, and the figure's data as a table.

A screen reader, a text-only mail client or a reader who wants the numbers gets what the chart
shows without the picture. Built from the figure itself, so every chart has one and it cannot
drift from what is drawn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: Rows of the data table; a longer figure (hundreds of steps) lists the first ones and says so.
MAX_ROWS = 60


@dataclasses.dataclass(frozen=True)
class TextAlternative:
    """What a chart shows, in words (`sentence`) and as a table (`columns`, `rows`)."""

    sentence: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    omitted: int  # rows left out after `MAX_ROWS`


def text_alternative(figure: go.Figure) -> TextAlternative:
    """The sentence and table of one figure: its title, then each trace's points."""
    layout = figure.layout
    title = layout.title.text or "Chart"
    x_title = (layout.xaxis.title.text if layout.xaxis else None) or "x"
    y_title = (layout.yaxis.title.text if layout.yaxis else None) or "value"
    parts: list[str] = []
    rows: list[tuple[str, ...]] = []
    for trace in figure.data:
        name = trace.name or trace.type
        if trace.type == "parcoords":
            parts.append(f"{name}: {_parcoords_rows(trace, rows)} lines")
            continue
        xs, ys = _column(trace, "x"), _column(trace, "y")
        if not xs and not ys:
            continue
        if trace.type == "histogram":
            values = [float(v) for v in xs if v is not None]
            parts.append(f"{name}: {len(values)} values{_range(values)}")
            rows.extend((name, _number(v), "") for v in values)
            continue
        labels = list(getattr(trace, "hovertext", None) or getattr(trace, "text", None) or [])
        numbers = [v for v in (ys if trace.orientation != "h" else xs) if v is not None]
        parts.append(f"{name}: {len(numbers)} points{_range(numbers)}")
        for index, (x, y) in enumerate(zip(xs or [None] * len(ys), ys, strict=False)):
            note = str(labels[index]) if index < len(labels) and labels[index] else ""
            rows.append((name, _number(x), _number(y) if not note else f"{_number(y)} ({note})"))
    kept = tuple(rows[:MAX_ROWS])
    return TextAlternative(
        sentence=f"{title}. " + "; ".join(parts) + "." if parts else f"{title}: no data.",
        columns=("series", x_title, y_title),
        rows=kept,
        omitted=len(rows) - len(kept),
    )


def _column(trace: Any, axis: str) -> list[Any]:
    values = getattr(trace, axis, None)
    return list(values) if values is not None else []


def _parcoords_rows(trace: Any, rows: list[tuple[str, ...]]) -> int:
    dimensions = list(trace.dimensions)
    count = len(dimensions[0].values) if dimensions else 0
    for line in range(count):
        text = ", ".join(f"{d.label}={_number(d.values[line])}" for d in dimensions)
        rows.append((f"line {line + 1}", text, ""))
    return count


def _range(values: Sequence[Any]) -> str:
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if not numbers:
        return ""
    return f", from {_number(min(numbers))} to {_number(max(numbers))}"


def _number(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)
