"""The terminal summary of a `TuneResult`: the winner, both references, and how to apply it."""

from __future__ import annotations

from tfperf.knobs import KNOBS
from tfperf.knobs.declare import turned_on_checks
from tfperf.report._kept import kept_words
from tfperf.report._snippets import baseline_snippet, code_snippet
from tfperf.report._study_data import flat_knobs
from tfperf.report._words import knob_value
from tfperf.results.tune import Estimate, Measurement, TuneResult, keeps_baseline, speedup
from tfperf.units import format_bytes


def render_tune_summary(
    result: TuneResult, dashboard_url: str | None = None, *, reads_knobs: bool = True
) -> str:
    """The summary; `reads_knobs`: the pipeline file reads its knobs, so the answer is applied
    as a BASELINE to paste (code that reads none gets a patch of its own calls instead, from
    `tfperf/cli/sites.py`)."""
    sections = [
        _headline(result),
        _limit(result),
        f"Recommendation: {result.recommendation}",
        _changes(result),
        _apply(result) if reads_knobs else "",
        kept_words(result.pipeline, result.files_put_back, result.files_created),
        _footer(result, dashboard_url),
    ]
    return "\n\n".join(section for section in sections if section)


def format_measurement(measurement: Measurement) -> str:
    gpu = measurement.peak_gpu_bytes
    after = " measured after it was chosen" if measurement.confirmed else ""
    return (
        f"{measurement.median:,.1f} examples/s (median of {len(measurement.windows)}{after}, "
        f"{_spread(measurement)}), peak RAM {format_bytes(measurement.peak_rss_bytes)}"
        + (f", peak GPU memory {format_bytes(gpu)}" if gpu is not None else "")
        + _over_budget(measurement)
    )


def _spread(measurement: Measurement) -> str:
    if not measurement.spread_known:
        return "spread unknown: one run"
    return f"±{measurement.spread:.1%}"


def _over_budget(measurement: Measurement) -> str:
    """What stopping a repeat over a memory budget meant for this configuration."""
    count = measurement.over_budget
    if not count:
        return ""
    repeats = "1 repeat" if count == 1 else f"{count} repeats"
    shown = f"; {repeats} stopped over the memory budget"
    return shown if measurement.label == "baseline" else f"{shown}, so it is not recommended"


def _headline(result: TuneResult) -> str:
    lines = [f"Best: {result.best.label}: {format_measurement(result.best)}"]
    if result.best.label != result.baseline.label:  # else "Best: baseline: ..." said it
        lines.append(f"  baseline: {format_measurement(result.baseline)}")
    if result.autotune is not None and result.best.label != result.autotune.label:
        lines.append(f"  AUTOTUNE: {format_measurement(result.autotune)}")
    lines.append(f"  speed-up over baseline: {result.speedup_vs_baseline.describe()}")
    if result.speedup_vs_autotune is not None:
        lines.append(f"  speed-up over AUTOTUNE: {result.speedup_vs_autotune.describe()}")
    if result.pareto_trials:
        lines.append(
            "  Pareto front (no trial is both faster and lighter on RAM): trials "
            + ", ".join(str(n) for n in result.pareto_trials)
        )
    others = [m for m in result.candidates if m is not result.best and m.label.startswith("trial")]
    for other in others:
        lines.append(f"  also re-measured: {other.label}: {format_measurement(other)}")
    return "\n".join(lines)


def _limit(result: TuneResult) -> str:
    """The limit, how close the answer came, and the estimate predicted vs measured."""
    limit = result.limit
    if limit is None:
        return ""
    other = result.best_limit if result.best_limit not in (None, limit) else None
    written = " as written" if other is not None else ""
    lines = [f"Limit: {limit.examples_per_sec:,.0f} examples/s{written}, {limit.bound_words}"]
    if other is not None:
        lines[0] += (
            f"; {other.examples_per_sec:,.0f} examples/s under the "
            f"recommendation's training setting, {other.bound_words}"
        )
    if result.tuned_over_limit is not None:
        lines[0] += f"; the recommendation reaches {result.tuned_over_limit:.0%} of it"
    elif result.changes_training:
        lines[0] += "; no limit was measured under the recommendation's training setting"
    lines.append(f"  {limit.explanation}")
    for estimate in result.estimates:
        label = estimate.kind.words.summary_for(estimate)
        lines.append(f"  {label}{_estimate_figures(estimate)}")
    if result.search_gain is not None:
        lines.append(f"  the search's answer: {result.search_gain.describe()}")
    if result.fastest is not None and result.gain_over_input_only is not None:
        lines.append(
            f"  fastest in the search, not recommended: {_passed_over(result, result.fastest)}"
        )
    return "\n".join(lines)


def _passed_over(result: TuneResult, fastest: Measurement) -> str:
    """Why the fastest configuration is not the recommendation."""
    if not result.changes_training and result.gain_over_input_only is not None:
        return f"{fastest.label} changes training for {result.gain_over_input_only.describe()}"
    return (
        f"{fastest.label} changes training more than {result.best.label}, for "
        f"{speedup(fastest, result.best).describe()} over it"
    )


def _estimate_figures(estimate: Estimate) -> str:
    measured = estimate.measured_examples_per_sec
    trial = f" (trial {estimate.trial_number})" if estimate.trial_number is not None else ""
    predicted = f"predicted {estimate.predicted_examples_per_sec:,.0f}"
    if measured is not None:
        shown = f"{predicted}, measured {measured:,.0f} examples/s"
    elif estimate.trial_number is None:
        shown = f"{predicted} examples/s, not run: queued beyond the --trials budget"
    else:
        shown = f"{predicted} examples/s, not measured: its trial ended without a figure"
    changed = ", ".join(estimate.changes_training)
    changes = f", changes {changed}" if changed else ""
    return f"{trial}: {shown}{changes}"


def _changes(result: TuneResult) -> str:
    warnings = training_warnings(result.best, result.baseline, result.changes_training)
    lines = [f"Warning: {text}" for text in warnings]
    if not keeps_baseline(result.best, result.speedup_vs_baseline):
        checks = turned_on_checks(result.baseline.knobs, result.best.knobs)
        lines += [f"Check: {text}" for text in (*checks, *result.hazards)]
    return "\n".join(lines)


def _apply(result: TuneResult) -> str:
    if keeps_baseline(result.best, result.speedup_vs_baseline):
        return ""
    return (
        "Apply it: paste as BASELINE in the pipeline file:\n"
        f"{_indent(baseline_snippet(result.best.knobs.to_dict(), result.framework))}\n"
        "or, in code that does not read knobs, use these values:\n"
        f"{_indent(code_snippet(result.best.knobs.to_dict(), result.framework))}"
    )


def _footer(result: TuneResult, dashboard_url: str | None) -> str:
    counts = ", ".join(f"{status} {count}" for status, count in result.trial_counts.items())
    total = sum(result.trial_counts.values())
    lines = [
        f"Trials: {total} in the study ({counts}); {result.trials_this_run} this run; "
        f"wall time {result.wall_s / 60:.1f} min.",
        f"Study {result.study_name!r} in {result.storage}.",
    ]
    if dashboard_url:
        lines.append(f"Browse it: optuna-dashboard {dashboard_url}")
    return "\n".join(lines)


def training_warnings(best: Measurement, baseline: Measurement, changes: list[str]) -> list[str]:
    """A sentence for each of `changes` (`tfperf.results.training_changes`): what to check.

    The HTML report and the terminal summary show the same sentences.
    """
    notes = {knob.name: knob.training_note for knob in KNOBS if knob.training_note}
    site = (
        "The winner changes {name} ({old} → {new}), a batch size or shuffle buffer in your "
        "code: this alters training, not only speed. Check accuracy before adopting it."
    )
    before, after = flat_knobs(baseline.knobs), flat_knobs(best.knobs)
    return [
        notes.get(name, site).format(
            name=name, old=knob_value(before.get(name), name), new=knob_value(after.get(name), name)
        )
        for name in changes
    ]


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
