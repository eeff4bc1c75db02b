"""The answer and throughput charts of a profile report: the verdict, the three phases' rates,
and the stage-by-stage rates.

A data function reads a `ProfileResult` and returns a small frozen record of plain numbers; a
drawing function turns that record into a plotly figure. Tests compare the records by equality
and the figures by structure, and `tfperf report` re-draws a saved result without TensorFlow.
Throughput is in examples per second. The step charts are in `_step_charts`, memory and CPU
in `_resource_charts`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tfperf.findings import CONTENTION_AT, answer, named_limiting
from tfperf.report import _theme as theme
from tfperf.results import ProfileResult, Verdict
from tfperf.results.findings import Finding, Level

if TYPE_CHECKING:
    import plotly.graph_objects as go


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
    limiting_stage: str | None  # named by the `limiting-stage` finding, where one was made
    findings: tuple[Finding, ...] = ()  # what to do first: the short answer's findings


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
        findings=tuple(answer(result)),
    )


def _limiting_stage(result: ProfileResult) -> str | None:
    stage = named_limiting(result)
    return stage.label if stage is not None else None


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
    return theme.bar_figure(
        data.labels,
        data.examples_per_sec,
        "Throughput: training end to end, the pipeline alone, the model alone",
        "examples per second",
        {"height": 260},
        marker_color=list(data.colours),
        text=[f"{value:,.0f} examples/s" for value in data.examples_per_sec],
        textposition=list(label_positions(data.examples_per_sec)),
        insidetextanchor="end",
        cliponaxis=False,
        name="throughput",
        hovertemplate="%{y}: %{x:,.0f} examples/s<extra></extra>",
    )


#: A bar at least this share of the longest one holds its label inside, so the longest bar's
#: label never runs past the plot's right edge on a phone; a shorter bar's label goes after it,
#: where at least the remaining share of the width is free.
INSIDE_SHARE = 0.45


def label_positions(values: tuple[float, ...]) -> tuple[str, ...]:
    """Where each bar's label goes: "inside" a long bar, "outside" (after) a short one."""
    top = max(values, default=0.0)
    return tuple("inside" if top and value >= INSIDE_SHARE * top else "outside" for value in values)


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
        # The limiting stage a finding names: one rule with the table and text.
        bottleneck_index=limiting.index if (limiting := named_limiting(result)) else None,
        consumption_examples_per_sec=report.consumption_examples_per_sec,
    )


def waterfall_figure(data: StageWaterfall) -> go.Figure:
    """Horizontal bars on a log axis starting at a tenth of the slowest rate (no arbitrary
    floor), ticks only at 1-2-5 values, the model's rate as a labelled dashed line."""
    import math

    limiting = [index == data.bottleneck_index for index in data.stage_indices]
    rates = [r for r in (*data.examples_per_sec, data.consumption_examples_per_sec or 0) if r > 0]
    low = math.floor(math.log10(min(rates))) if rates else 0
    high = math.ceil(math.log10(max(rates) * 1.3)) if rates else 1
    ticks = [m * 10**e for e in range(low, high + 1) for m in (1, 2, 5)]
    rate = data.consumption_examples_per_sec
    layout = {
        "xaxis": {
            "type": "log",
            "range": [low, math.log10(max(rates) * 1.3) if rates else 1],
            "tickvals": ticks,
            "ticktext": [f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks],
        },
        "yaxis": {"autorange": "reversed", "automargin": True},
        "showlegend": bool(rate),
        "height": max(260, 90 + 36 * len(data.labels)),
    }
    figure = theme.bar_figure(
        data.labels,
        data.examples_per_sec,
        "Stage by stage: examples/s of the pipeline cut after each stage",
        "examples/s (log scale)",
        layout,
        marker_color=[theme.WAIT if flag else theme.PIPELINE for flag in limiting],
        text=[
            f"{rate:,.0f}" + (" (limiting)" if flag else "")
            for rate, flag in zip(data.examples_per_sec, limiting, strict=True)
        ],
        textposition="auto",
        name="pipeline cut after this stage",
        hovertemplate="%{y}: %{x:,.0f} examples/s<extra></extra>",
    )
    if rate:
        theme.add_line(
            figure,
            f"the model consumes {rate:,.0f}/s",
            [rate, rate],
            [data.labels[0], data.labels[-1]],
            theme.CEILING,
            "dash",
            line_width=3,
            hovertemplate=f"the model consumes {rate:,.0f} examples/s<extra></extra>",
        )
    return figure


def autotuned(result: ProfileResult) -> bool:
    """Whether any knob of the profile was on AUTOTUNE (-1)."""
    from tfperf.knobs import AUTOTUNE

    return any(value == AUTOTUNE for value in _values(result.knobs))


def _values(knobs: object) -> list[object]:
    if isinstance(knobs, dict):
        return [v for value in knobs.values() for v in _values(value)]
    return [knobs]


#: How `tfperf.measure` words a tf.data model it could not read for a reason it does not
#: know: the exception's own text follows, which is for a bug report, not for the page.
UNREADABLE_PREFIX = "tf.data's model could not be read:"

UNDER_STRATEGY = (
    "Not read: under a tf.distribute strategy the replicas read the dataset through "
    "iterators whose tf.data model TensorFlow does not expose, so AUTOTUNE's choices cannot "
    "be read. Profile without a strategy (--strategy default) to see them."
)
UNREADABLE = (
    "Not read: TensorFlow did not hand over this iterator's tf.data model, so AUTOTUNE's "
    "choices are unknown. The other figures of this profile are measured as usual."
)


def autotune_note(result: ProfileResult) -> str | None:
    """Why "What AUTOTUNE chose" lists nothing, in plain words; None when it lists choices.

    Never an exception's text: a model that could not be read is said so, and under a
    strategy the sentence says why and what to do instead.
    """
    readout = result.autotune
    if readout is None or readout.choices:
        return None
    reason = readout.unavailable_reason
    unknown = reason is not None and reason.startswith(UNREADABLE_PREFIX)
    if result.distribution is not None and (unknown or (reason is None and autotuned(result))):
        return UNDER_STRATEGY
    if unknown:
        return UNREADABLE
    if reason is None:
        if autotuned(result):
            return "tf.data's model of the running iterator named no value AUTOTUNE chose."
        return "No knob was on AUTOTUNE."
    sentence = reason[0].upper() + reason[1:]
    return sentence if sentence.endswith(".") else f"{sentence}."


def slowdown_reason(result: ProfileResult) -> str:
    """What a step computing slower end to end than on cached batches means here, as the
    `contention` finding says it; empty below `CONTENTION_AT`. The terminal and the page
    both give it."""
    slowdown = result.compute_slowdown
    if slowdown is None or slowdown < CONTENTION_AT:
        return ""
    found = next((f for f in result.findings if f.rule == "contention"), None)
    if found is not None and found.level is Level.NOTE:
        return "not input work competing for the CPU here; the findings say what tfperf can tell"
    return "input work competes with training for the CPU"
