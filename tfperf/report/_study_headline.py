"""The headline of a study report: the baseline's diagnosis, what the recommendation leaves,
and the limit of the pipeline on this machine, one line each.

Data only (a frozen record of strings, tested by equality); the template shows it first.
"""

from __future__ import annotations

import dataclasses
import re

from tfperf.findings import answer, named_limiting
from tfperf.report._study_data import StudySnapshot
from tfperf.report._study_summary import Summary, TrialFigure, trial_figures
from tfperf.results import Limit, ProfileResult, Verdict
from tfperf.results.tune import Estimate, TuneResult

_VERDICT_WORDS = {
    Verdict.HIGHLY_INPUT_BOUND: "highly input-bound",
    Verdict.MODERATELY_INPUT_BOUND: "moderately input-bound",
    Verdict.COMPUTE_BOUND: "compute-bound: input keeps up",
}
# Clauses of the profile's advice that send the reader to `tfperf tune`: inside a tune report
# they already did.
_TUNE_CLAUSE = re.compile(r"[;:,]?\s*`tfperf tune` [^.;]*[.;]?")


@dataclasses.dataclass(frozen=True)
class Headline:
    """The study's answer in one line each: the baseline, the recommendation, the limit."""

    baseline: str | None
    recommendation: str | None
    limit: str | None
    estimate: str | None  # tfperf's predicted best configuration, predicted vs measured


def headline(snapshot: StudySnapshot, found: Summary | None, tune: TuneResult | None) -> Headline:
    figures = trial_figures(snapshot)
    baseline_row = snapshot.baseline_row
    baseline_rate = figures.get(baseline_row.number) if baseline_row is not None else None
    limit = tune.limit if tune is not None else None
    return Headline(
        baseline=_diagnosis("Your baseline", snapshot.baseline_result, baseline_rate, limit),
        recommendation=_recommended(snapshot, found, figures, limit),
        limit=_limit_line(limit, found, tune),
        estimate=_estimate_line(tune),
    )


def _diagnosis(
    who: str, result: ProfileResult | None, figure: TrialFigure | None, limit: Limit | None
) -> str | None:
    if result is None:
        return None
    rate = f"{figure.examples_per_sec:,.0f} examples/s" if figure is not None else None
    parts = [f"{who}: {result.input_wait_fraction:.0%} of each step waiting for input"]
    stage = limiting_stage(result, limit)
    if stage:
        parts.append(f"limiting stage {stage}")
    if rate:
        parts.append(rate)
    return "; ".join(parts) + f" ({_VERDICT_WORDS[result.verdict]})."


def limiting_stage(result: ProfileResult, limit: Limit | None) -> str | None:
    """The profile's limiting stage (as its findings name it), else the stage that binds the
    tuner's limit, if a stage does; None when the pipeline keeps up with the model."""
    if result.stages is not None:
        stage = named_limiting(result)
        return stage.label if stage is not None else None
    binding = min(limit.terms, key=lambda t: t.examples_per_sec) if limit and limit.terms else None
    return binding.stage_label if binding is not None else None


def _recommended(
    snapshot: StudySnapshot,
    found: Summary | None,
    figures: dict[int, TrialFigure],
    limit: Limit | None,
) -> str | None:
    result = snapshot.best_result
    if (
        found is None
        or result is None
        or snapshot.best_trial == getattr(snapshot.baseline_row, "number", None)
    ):
        return None
    ratio = f", {found.vs_baseline.ratio:.2f}x the baseline" if found.vs_baseline else ""
    text = (
        f"The recommendation (trial {snapshot.best_trial}{ratio}) leaves "
        f"{result.input_wait_fraction:.0%} of each step waiting: {_VERDICT_WORDS[result.verdict]}"
    )
    stage = limiting_stage(result, limit)
    if result.verdict is not Verdict.COMPUTE_BOUND:
        if stage:
            text += f"; {stage} still limits"
        first = answer(result, 1)
        if not first:
            return text + "."
        return text + f". Next: {without_tune_advice(first[0].sentence)}"
    return text + "."


def without_tune_advice(text: str) -> str:
    """The profile's advice without its pointer to `tfperf tune`, for a page that ran it."""
    return _TUNE_CLAUSE.sub(".", text).replace("..", ".").strip()


def _limit_line(limit: Limit | None, found: Summary | None, tune: TuneResult | None) -> str | None:
    if limit is None:
        return None
    text = (
        f"Limit of this pipeline on this machine: {limit.examples_per_sec:,.0f} examples/s, "
        f"{limit.bound_words}. {limit.explanation}"
    )
    if found is not None:
        shown = "; ".join(f"{row.label} {row.median:,.0f}" for row in found.rows[:3])
        text += f" Measured: {shown}."
    best_limit = tune.best_limit if tune is not None else None
    if best_limit is not None and best_limit != limit:
        text += (
            f" Under the recommendation's training setting the limit is "
            f"{best_limit.examples_per_sec:,.0f} examples/s, {best_limit.bound_words}."
        )
    if tune is not None and tune.tuned_over_limit is not None:
        text += f" The recommendation reaches {tune.tuned_over_limit:.0%} of the limit."
    return text


def _estimate_line(tune: TuneResult | None) -> str | None:
    if tune is None or not tune.estimates:
        return None
    text = " ".join(_estimate_text(e.kind.words.headline_for(e), e) for e in tune.estimates)
    if tune.search_gain is not None:
        text += f" The search's answer: {tune.search_gain.describe()}."
    return text


def _estimate_text(label: str, estimate: Estimate) -> str:
    text = f"{label} predicted {estimate.predicted_examples_per_sec:,.0f} examples/s"
    if estimate.trial_number is not None:
        text += f" (trial {estimate.trial_number})"
    if estimate.measured_examples_per_sec is None or estimate.error is None:
        return text + "; it was not measured."
    return text + (f"; measured {estimate.measured_examples_per_sec:,.0f} ({estimate.error:+.0%}).")
