"""The `TuneResult` of a study: the winner by the input-only rule, against both references.

The re-measured medians decide. The best configuration that leaves training as written is
recommended unless a faster one that changes training beats it by more than the noise
(`tfperf.results.input_only_choice`); the limit and the proposals come from the model, and
`search_gain` says what the search added to the model's best estimate.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tfperf.errors import TfperfError
from tfperf.knobs import Knobs
from tfperf.measure import revise_limit
from tfperf.results import Limit
from tfperf.results.findings import introduced_hazards
from tfperf.results.tune import (
    Measurement,
    Reference,
    SearchGain,
    TuneResult,
    input_only_choice,
    recommend,
    speedup,
    training_changes,
)
from tfperf.study import (
    feasible_complete,
    files_kept,
    pareto_front,
    reference_trial,
    status_counts,
    stored_result,
)
from tfperf.study.records import TrialRecord
from tfperf.trials import Budgets
from tfperf.tuner._options import BUDGET_TRIPS, OverBudget, TuneOptions
from tfperf.tuner._references import References
from tfperf.tuner._remeasure import best_estimate
from tfperf.units import format_bytes

if TYPE_CHECKING:
    import optuna


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What the result says about the run itself rather than about its measurements."""

    pipeline: str
    study_name: str
    storage: str
    options: TuneOptions
    budgets: Budgets
    trials_this_run: int
    wall_s: float
    framework: str  # the tuned pipeline's (`tfperf.frameworks` name)


def tune_result(
    study: optuna.Study, measured: list[Measurement], references: References, facts: RunFacts
) -> TuneResult:
    """The result from the re-measured finalists and references.

    Raises:
        OverBudget: the baseline went over a memory budget in its trial and every
            re-measurement.
        TfperfError: the baseline failed in every re-measurement.
    """
    by_label = {m.label: m for m in measured}
    baseline = by_label.get(Reference.BASELINE.value)
    if baseline is None:
        if _baseline_over_budget(study):
            raise OverBudget(
                "the baseline configuration went over a memory budget in its trial and in "
                "every re-measurement (--ram-budget "
                f"{_shown(facts.budgets.ram_bytes)}, --gpu-memory-budget "
                f"{_shown(facts.budgets.gpu_memory_bytes)}), so nothing can be compared with "
                "it. Raise the budget above the baseline's peak (the report shows it), then "
                "run the same command again to resume."
            )
        raise TfperfError(
            "the baseline configuration failed in every re-measurement, so nothing can be "
            "compared with it; see the trial reasons with `tfperf report`."
        )
    autotune = by_label.get(Reference.AUTOTUNE.value)
    choice = input_only_choice(measured, baseline, facts.options.training_change_margin)
    best = choice.best
    vs_baseline = speedup(best, baseline)
    changes = training_changes(best, baseline)
    front = pareto_front(feasible_complete(study)) if len(study.directions) > 1 else []
    limit, best_limit = revised_limits(study, measured, references, best)
    kept = files_kept(study)
    return TuneResult(
        pipeline=facts.pipeline,
        study_name=facts.study_name,
        storage=facts.storage,
        objective=facts.options.objective,
        best=best,
        baseline=baseline,
        autotune=autotune,
        candidates=measured,
        speedup_vs_baseline=vs_baseline,
        speedup_vs_autotune=speedup(best, autotune) if autotune else None,
        recommendation=recommend(
            best, vs_baseline, changes, choice.input_only, choice.gain, choice.fastest, baseline
        ),
        changes_training=changes,
        pareto_trials=[t.number for t in front],
        trial_counts=status_counts(study),
        trials_this_run=facts.trials_this_run,
        wall_s=facts.wall_s,
        framework=facts.framework,
        ram_budget_bytes=facts.budgets.ram_bytes,
        gpu_memory_budget_bytes=facts.budgets.gpu_memory_bytes,
        limit=limit,
        tuned_over_limit=(
            best.median / best_limit.examples_per_sec
            if best_limit is not None and best_limit.examples_per_sec > 0
            else None
        ),
        best_limit=best_limit,
        estimates=references.estimates(study, by_label),
        input_only=choice.input_only,
        fastest=choice.fastest,
        gain_over_input_only=choice.gain,
        search_gain=_search_gain(best, best_estimate(measured)),
        hazards=_hazards(study, best, baseline),
        files_put_back=kept[0],
        files_created=kept[1],
    )


def _hazards(study: optuna.Study, best: Measurement, baseline: Measurement) -> list[str]:
    """What `best` changes in the data training sees, as its trial's stored findings said and
    the baseline's did not; none for a configuration no trial ran as it stands."""
    if best is baseline or best.trial_number is None or baseline.trial_number is None:
        return []
    trials = {trial.number: trial for trial in study.get_trials(deepcopy=False)}
    after, before = (
        stored_result(trials[n]) if n in trials else None
        for n in (best.trial_number, baseline.trial_number)
    )
    if after is None:
        return []
    return introduced_hazards(after.findings, before.findings if before is not None else [])


def revised_limits(
    study: optuna.Study,
    measured: list[Measurement],
    references: References,
    best: Measurement,
) -> tuple[Limit | None, Limit | None]:
    """The limit as written and under the recommendation's training setting, each raised to
    the fastest rate measured under its setting (`tfperf.measure.revise_limit`).

    A limit no configuration can exceed cannot sit below a configuration that was measured:
    every trial's figure and every re-measured median count, each against the limit of the
    training setting it ran with.
    """
    base, under_best = references.limit, references.limit_for(best.knobs)
    rates: list[tuple[str, float, Knobs | None]] = [
        (f"trial {trial.number}", trial.values[0], TrialRecord.from_trial(trial).knobs)
        for trial in feasible_complete(study)
        if trial.values
    ]
    rates += [(f"{m.label}, re-measured median", m.median, m.knobs) for m in measured]

    def revised(limit: Limit | None) -> Limit | None:
        if limit is None:
            return None
        same = {
            label: rate
            for label, rate, knobs in rates
            if knobs is not None and references.limit_for(knobs) == limit
        }
        return revise_limit(limit, same)

    return revised(base), revised(under_best)


def _baseline_over_budget(study: optuna.Study) -> bool:
    """Whether the baseline's trial ended over a memory budget."""
    number = reference_trial(study, Reference.BASELINE.value)
    if number is None:
        return False
    return TrialRecord.from_trial(study.trials[number]).status in BUDGET_TRIPS


def _shown(budget: int | None) -> str:
    return format_bytes(budget) if budget is not None else "not set"


def _search_gain(best: Measurement, estimate: Measurement | None) -> SearchGain | None:
    """`best` over the model's best estimate, both confirmed; None when `best` is it."""
    if estimate is None or estimate is best:
        return None
    return SearchGain(estimate.label, speedup(best, estimate))
