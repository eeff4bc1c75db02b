"""The report's sections on tfperf's pipeline model: the estimate, and the input-only rule.

Pure functions of a `BenchRecord`, like the rest of `benchmarks.render`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from benchmarks.record import BenchRecord, Figure, ModelFigures, PipelineRecord, TrainingChoice
from tfperf.results.tune import TRAINING_CHANGE_MARGIN

__all__ = [
    "duration",
    "model_section",
    "restart_section",
    "share",
    "table",
    "training_section",
]


def model_section(record: BenchRecord) -> str:
    rows = []
    for pipeline in record.pipelines:
        model = pipeline.tuning.model
        if model is None:
            rows.append([pipeline.name, "no model", "n/a", "n/a", "n/a", "n/a"])
            continue
        rows.append(
            _estimate_row(
                pipeline.name,
                "input only",
                (model.predicted, model.measured, model.trial),
                model.explanation,
            )
        )
        if model.second_predicted is not None:
            changes = ", ".join(model.second_changes)
            second = (model.second_predicted, model.second_measured, model.second_trial)
            rows.append(_estimate_row(pipeline.name, f"training changed: {changes}", second, ""))
        if model.pooled_pool is not None:
            predicted = model.pooled_predicted or model.second_predicted or model.predicted
            pooled = (predicted, model.pooled_measured, model.pooled_trial)
            kind = f"the same, input on a pool of {model.pooled_pool}"
            rows.append(_estimate_row(pipeline.name, kind, pooled, ""))
        if model.runner_up_predicted is not None:
            runner = (model.runner_up_predicted, model.runner_up_measured, model.runner_up_trial)
            kind = f"the same under the runner-up: {', '.join(model.runner_up_setting)}"
            rows.append(_estimate_row(pipeline.name, kind, runner, ""))
    estimates = table(
        "## The model's estimates\n\ntfperf's estimate is the configuration its pipeline model "
        "predicts best, measured as the study's third trial; where the model alone, timed "
        "under the batch sizes and precisions the search may choose (and the shuffle buffer "
        "a restarting dataset refills), predicts a training setting faster beyond the noise, "
        "a second estimate under that setting is the fourth. The last of them runs again with "
        "the input's computing stages on the cores it spends at the predicted rate and a "
        "prefetch of 2 (a pool the model prices only by the cores it holds: its prediction is "
        "the estimate's it varies, held to what that many cores of input deliver, so its "
        "measured figure beside that one's shows what the pool did). Where another training "
        "setting is predicted within the model's error of the second's, that runner-up is "
        "measured next, in the same shape. Predicted vs measured "
        "shows the model's error. Measured is the re-measured median (for the model's best "
        "estimate, the one confirmed beside the tuned configuration; the trial's figure when "
        "it was not a finalist).",
        [
            "pipeline",
            "estimate",
            "predicted",
            "measured",
            "measured/predicted",
            "what binds the limit",
        ],
        rows,
    )
    return estimates + "\n\n" + _search_gains(record)


def _search_gains(record: BenchRecord) -> str:
    """Per pipeline, the tuned configuration over the model's best estimate, both measured
    again side by side after the choice (tfperf's confirmation)."""
    intro = (
        "What the search added to the model's best estimate: the tuned configuration over it, "
        "both measured again side by side after tfperf chose (so neither figure is the "
        "luckiest of several medians, and the machine's drift falls on both alike)."
    )
    return _per_pipeline([intro], record, lambda p: _search_gain_line(p.tuning.model))


def _per_pipeline(
    intro: Sequence[str], record: BenchRecord, line: Callable[[PipelineRecord], str]
) -> str:
    """`intro`'s paragraphs, then a bullet per pipeline: its name and `line` of it."""
    lines = [*intro, ""]
    lines += [f"- **{pipeline.name}**: {line(pipeline)}" for pipeline in record.pipelines]
    return "\n".join(lines)


def _search_gain_line(model: ModelFigures | None) -> str:
    if model is None or model.trial is None:
        return "no estimate was measured."
    if model.search_gain is None or model.search_gain_estimate is None:
        return "the answer is the model's own estimate."
    gain, spread = model.search_gain, model.search_gain_spread or 0.0
    text = f"{gain:.2f}x ± {gain * spread:.2f} over {model.search_gain_estimate}"
    if not model.search_gain_significant:
        text += ", within the noise: the search found nothing the estimate had not"
    return text + "."


def _estimate_row(
    name: str,
    kind: str,
    figures: tuple[float | None, float | None, int | None],
    explanation: str,
) -> list[str]:
    predicted, measured, trial = figures
    where = f" (trial {trial + 1})" if trial is not None else " (not measured)"
    return [
        name,
        kind,
        f"{predicted:,.0f}" if predicted is not None else "n/a",
        (f"{measured:,.0f}" if measured is not None else "n/a") + where,
        share(measured, predicted),
        explanation,
    ]


def training_section(record: BenchRecord) -> str:
    intro = [
        "## Does the recommendation change training?",
        "",
        "The input-only rule: tfperf recommends the best configuration that leaves training as "
        "written (batch size, shuffle buffer, precision) unless one that changes training "
        f"beats it by at least {TRAINING_CHANGE_MARGIN:g}x, beyond the noise; then both are "
        "shown.",
    ]
    return _per_pipeline(intro, record, _training_line)


def _training_line(pipeline: PipelineRecord) -> str:
    tuning = pipeline.tuning
    choice = tuning.training
    changes = ", ".join(tuning.changes_training)
    if choice is None:
        return f"changes {changes}." if changes else "no."
    gain = (
        f"{choice.gain_words} ± {choice.gain * (choice.spread or 0):.2f}"
        if choice.gain is not None
        else "n/a"
    )
    if changes:
        return (
            f"yes, {changes}: {tuning.best_label} beats the best input-only configuration "
            f"({choice.input_only}) by {gain}, beyond the noise and the "
            f"{TRAINING_CHANGE_MARGIN:g}x margin.{_passed_over(choice)}"
        )
    if choice.fastest is not None:
        return (
            f"no: {choice.fastest} changes training and is faster by {gain}, "
            f"{choice.kept_because}, "
            f"so the input-only {choice.input_only} is recommended."
        )
    return "no: the fastest configuration leaves training as written."


def _passed_over(choice: TrainingChoice) -> str:
    """The faster configuration passed over for changing training more, if any."""
    if choice.passed_over is None:
        return ""
    ratio = (
        f", {choice.passed_over_gain:.2f}x the recommendation's reported figure"
        if choice.passed_over_gain is not None
        else ""
    )
    return (
        f" {choice.passed_over} (the fastest when the choice was made{ratio}) changes training "
        "more, within the noise: the smaller change is recommended."
    )


def restart_section(record: BenchRecord) -> str:
    """The cost of dataset restarts, for pipelines whose baseline crossed one; empty if none."""
    rows = []
    for pipeline in record.pipelines:
        rows += [
            _restart_row(pipeline.name, figure)
            for figure in (pipeline.baseline, pipeline.tuned)
            if figure.restart_s
        ]
    if not rows:
        return ""
    return table(
        "## Restart cost\n\nA finite dataset restarts every epoch, and the first step after a "
        "restart waits for the pipeline to fill again. tfperf measures that apart from the "
        "steady wait and weighs it by the real epoch (the dataset's cardinality), not by how "
        "often the short profile window restarted.",
        ["pipeline", "configuration", "s per restart", "refilling stage", "epoch", "wait/epoch"],
        rows,
    )


def _restart_row(name: str, figure: Figure) -> list[str]:
    seconds = statistics.median(figure.restart_s)
    wait = statistics.median(figure.weighted_wait) if figure.weighted_wait else None
    return [
        name,
        figure.label,
        f"{seconds:.2f} (median of {len(figure.restart_s)})",
        f"`{figure.restart_stage}`" if figure.restart_stage else "n/a",
        f"{figure.epoch_steps} steps" if figure.epoch_steps else "n/a",
        f"{wait:.0%}" if wait is not None else "n/a",
    ]


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table under `title`."""
    lines = [title, "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def duration(seconds: float | None) -> str:
    """Seconds below two minutes, else minutes; "n/a" for None."""
    if seconds is None:
        return "n/a"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def share(value: float | None, whole: float | None) -> str:
    """`value / whole` as a percentage; "n/a" without both."""
    if value is None or not whole or whole <= 0:
        return "n/a"
    return f"{value / whole:.0%}"
