"""`tfperf offload`'s answer in words, as a table, and as a chart (data function + drawing).

Everything reads a saved `OffloadResult`, so `render_offload_text` and `render_offload_html`
work on a machine without TensorFlow.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tfperf.offload import Binding, OffloadResult
from tfperf.report import _theme as theme
from tfperf.units import format_bytes

if TYPE_CHECKING:
    import plotly.graph_objects as go


_BINDS = {
    Binding.MODEL: "the model: one worker already delivers more than it consumes",
    Binding.WORKERS: "the workers: each one adds about {per_worker} examples/s",
    Binding.TRAINER: "the trainer: reading through the service tops out at {ceiling} "
    "examples/s (decompressing and copying batches), below the model's rate; more workers "
    "do not help. Try compression NONE on a fast network, or a larger batch",
    Binding.NETWORK: "the network: {gbps:g} Gbit/s carries {network} examples/s at "
    "{size} a batch, below the model's rate; more workers do not help",
}


def _rate(value: float | None) -> str:
    return "\u2013" if value is None else f"{value:,.0f}"


def offload_answer(result: OffloadResult) -> str:
    """The one sentence that answers: how many workers of how many cores, and what binds."""
    if result.workers_needed is None or result.binds is None:
        return (
            "No answer: the verify through the local service did not finish"
            + (f" ({result.fault})" if result.fault else "")
            + "."
        )
    reason = _BINDS[result.binds].format(
        per_worker=_rate((result.per_worker_examples_per_sec or 0) * (result.efficiency or 1)),
        ceiling=_rate(result.trainer_ceiling_examples_per_sec),
        gbps=result.network_gbps or 0,
        network=_rate(result.network_ceiling_examples_per_sec),
        size=format_bytes(result.bytes_per_batch_compressed),
    )
    return (
        f"{result.workers_needed} tf.data service worker(s) of {result.cores_per_worker} "
        f"core(s) feed the model at {_rate(result.model_examples_per_sec)} examples/s. "
        f"What binds: {reason}."
    )


def offload_rows(result: OffloadResult) -> list[tuple[str, str]]:
    """The figures behind the answer, as (label, value) rows."""
    rows = [
        ("pipeline cut after", result.cut),
        ("model consumes", f"{_rate(result.model_examples_per_sec)} examples/s"),
        ("cores per worker", str(result.cores_per_worker)),
        (
            "predicted per worker (pinned)",
            f"{_rate(result.predicted_per_worker_examples_per_sec)} examples/s",
        ),
        (
            "measured per worker (service)",
            f"{_rate(result.per_worker_examples_per_sec)} examples/s",
        ),
        ("efficiency η", "\u2013" if result.efficiency is None else f"{result.efficiency:.2f}"),
        (
            "workers needed",
            "\u2013" if result.workers_needed is None else str(result.workers_needed),
        ),
        (
            "bytes per batch",
            f"{format_bytes(result.bytes_per_batch_raw)} raw, "
            f"{format_bytes(result.bytes_per_batch_compressed)} compressed",
        ),
    ]
    rows += [
        (f"trainer ceiling ({c.compression})", f"{_rate(c.examples_per_sec)} examples/s")
        for c in result.ceilings
    ]
    if result.network_gbps is not None:
        rows.append(
            (
                f"network ceiling ({result.network_gbps:g} Gbit/s)",
                f"{_rate(result.network_ceiling_examples_per_sec)} examples/s",
            )
        )
    return rows


def render_offload_text(result: OffloadResult) -> str:
    """The terminal summary: the answer, the figures, the measurements."""
    width = max(len(label) for label, _ in offload_rows(result))
    lines = [f"tfperf offload: {Path(result.pipeline).name}", "", offload_answer(result), ""]
    lines += [f"  {label:<{width}}  {value}" for label, value in offload_rows(result)]
    lines += ["", "  pinned cores   examples/s"]
    lines += [f"  {r.cores:>12}   {_rate(r.examples_per_sec)}" for r in result.core_rates]
    lines += ["", "  service workers   examples/s"]
    lines += [f"  {p.workers:>15}   {_rate(p.examples_per_sec)}" for p in result.verify]
    if result.fault:
        lines += ["", f"Stopped early: {result.fault}"]
    return "\n".join(lines)


class OffloadChart(NamedTuple):
    """The chart's data: measured rates by workers, the fit, and the model's rate."""

    workers: tuple[int, ...]
    measured: tuple[float, ...]
    fitted: tuple[float, ...]
    predicted: tuple[float, ...]
    model_examples_per_sec: float
    trainer_ceiling: float | None


def offload_chart(result: OffloadResult) -> OffloadChart:
    """Rates for 1..max(K, workers needed) workers: measured, fitted and predicted."""
    last = max([p.workers for p in result.verify] + [result.workers_needed or 1])
    workers = tuple(range(1, last + 1))
    per_worker = result.per_worker_examples_per_sec or 0.0
    efficiency = result.efficiency or 1.0
    measured = {p.workers: p.examples_per_sec for p in result.verify}
    return OffloadChart(
        workers=tuple(k for k in workers if k in measured),
        measured=tuple(measured[k] for k in workers if k in measured),
        fitted=tuple(k * per_worker * (1.0 if k == 1 else efficiency) for k in workers),
        predicted=tuple(k * result.predicted_per_worker_examples_per_sec for k in workers),
        model_examples_per_sec=result.model_examples_per_sec,
        trainer_ceiling=result.trainer_ceiling_examples_per_sec,
    )


def offload_figure(data: OffloadChart) -> go.Figure:
    """Examples/s against workers: measured, fitted, predicted; the model and ceiling lines."""
    import plotly.graph_objects as go

    figure = go.Figure()
    x = list(range(1, len(data.fitted) + 1))
    theme.add_line(figure, "predicted (pinned cores)", x, data.predicted, theme.PIPELINE, "dot")
    theme.add_line(figure, "fitted (per worker x η)", x, data.fitted, theme.COMPUTE, "dash")
    figure.add_scatter(
        x=list(data.workers),
        y=list(data.measured),
        mode="markers",
        name="measured through the local service",
        marker={"color": theme.COMPUTE, "size": 10},
    )
    lines = [("model consumes", data.model_examples_per_sec, theme.CEILING)]
    if data.trainer_ceiling is not None:
        lines.append(("trainer ceiling", data.trainer_ceiling, theme.HIGHLIGHT))
    for name, value, colour in lines:
        theme.add_line(figure, name, [x[0], x[-1]], [value, value], colour, "dashdot")
    return theme.apply_layout(
        figure, "Examples/s the service delivers, by workers", "workers", "examples/s"
    )


def render_offload_html(result: OffloadResult) -> str:
    """The offload report: the answer, the figures as a table, the chart."""
    from tfperf.report._html import Charts, _render

    charts = Charts()
    chart = charts.add("offload", offload_figure(offload_chart(result)))
    return _render(
        "offload.html.j2",
        charts,
        title=f"tfperf offload: {Path(result.pipeline).name}",
        answer=offload_answer(result),
        rows=offload_rows(result),
        offload_chart=chart,
        fault=result.fault,
    )
