"""The limit held against the rates measured: no measured rate may exceed it.

`revise_limit` raises a limit to the fastest rate measured for a configuration of the
pipeline, and says which term erred; within the noise of one (`ModelPolicy.limit_noise`) it
says tfperf cannot tell whether the pipeline is already there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from tfperf.measure._limit import _explain, _python_caveat
from tfperf.measure._policy import POLICY
from tfperf.results import Limit, LimitBound, LimitTerm, ProfileResult

#: The label `measured_rates` gives the pipeline-alone rate: it bounds the input's terms only.
PIPELINE_ONLY = "pipeline only"
#: The label of the whole pipeline's rate in the stage analysis (its last cut, run alone): an
#: input-alone rate too, shown in the stage table, so it bounds the input's terms alike.
STAGE_ANALYSIS = "stage analysis"
_INPUT_ALONE = frozenset({PIPELINE_ONLY, STAGE_ANALYSIS})


def measured_rates(profile: ProfileResult) -> dict[str, float]:
    """The rates a profile measured for its configuration: end to end, and the input alone
    under `PIPELINE_ONLY` and `STAGE_ANALYSIS` (which `revise_limit` holds against the input's
    terms only)."""
    rates = {"end to end": profile.end_to_end.examples_per_sec}
    if profile.pipeline_only is not None:
        rates[PIPELINE_ONLY] = profile.pipeline_only.examples_per_sec
    last = profile.stages.stages[-1] if profile.stages and profile.stages.stages else None
    if last is not None and last.examples_per_sec is not None:
        rates[STAGE_ANALYSIS] = last.examples_per_sec
    return rates


def split_rates(measured: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """`measured` as (training rates, input-alone rates) for `revise_limit`."""
    training = {label: rate for label, rate in measured.items() if label not in _INPUT_ALONE}
    alone = {label: rate for label, rate in measured.items() if label in _INPUT_ALONE}
    return training, alone


def revise_limit(
    limit: Limit,
    measured: Mapping[str, float],
    input_measured: Mapping[str, float] | None = None,
) -> Limit:
    """`limit`, never below a rate measured for a configuration of the pipeline.

    Args:
        measured: what measured a training rate ("end to end", "trial 7") -> that rate. One
            above the limit proves the model low: the limit becomes that rate.
        input_measured: what measured the input alone ("pipeline only") -> that rate. It
            bounds only the input's own terms (a stage's, sequential or parallel): the input
            alone may run faster than the model's step or the cores it shares with the
            model let training go, and that is no contradiction. A term below it is replaced
            by it; where it stays above the limit, `Limit.input_alone_examples_per_sec`
            keeps it and the Limit line states it and why (`Limit.bound_words`).

    A revised limit is bound by MEASURED: its explanation names the term that erred and by how
    much, and the model's figure is kept in `model_examples_per_sec`, never shown beside the
    larger one. Within `ModelPolicy.limit_noise` of the limit, either way, tfperf cannot tell
    whether the pipeline is already at it, and the explanation says so.

    Example:
        >>> term = LimitTerm(LimitBound.CPU, 1000.0, "2 usable cores ÷ 2 ms CPU per example")
        >>> limit = Limit(1000.0, LimitBound.CPU, "The host's cores bound it.", [term])
        >>> revised = revise_limit(limit, {"end to end": 1200.0})
        >>> revised.examples_per_sec, revised.bound_by.value, revised.model_examples_per_sec
        (1200.0, 'measured', 1000.0)
    """
    model = limit.model_examples_per_sec or min(
        (t.examples_per_sec for t in limit.terms if t.bound_by is not LimitBound.MEASURED),
        default=limit.examples_per_sec,
    )
    current = limit
    for label, rate in _fastest(input_measured or {}):
        below = [
            t for t in limit.terms if t.bound_by in _INPUT_BOUNDS and t.examples_per_sec < rate
        ]
        if below:
            kept = [t for t in limit.terms if t not in below]
            terms = [*kept, LimitTerm(LimitBound.MEASURED, rate, f"measured: {label}")]
            current = _bound(limit, terms, model, min(below, key=lambda t: t.examples_per_sec))
    for label, rate in _fastest(measured):
        if rate > current.examples_per_sec:
            erring = min(
                (t for t in current.terms if t.bound_by is not LimitBound.MEASURED),
                key=lambda t: t.examples_per_sec,
                default=None,
            )
            current = dataclasses.replace(
                current,
                examples_per_sec=rate,
                bound_by=LimitBound.MEASURED,
                explanation=_revised(label, rate, model, erring),
                terms=[*current.terms, LimitTerm(LimitBound.MEASURED, rate, f"measured: {label}")],
                model_examples_per_sec=model,
                revised_by=label,
            )
    current = current if current.revised else _noted(current, measured)
    return _input_alone(current, input_measured)


def _input_alone(limit: Limit, input_measured: Mapping[str, float] | None) -> Limit:
    """`limit`, keeping the input-alone rate where it ran above it (`Limit.bound_words` says
    so): only a training limit (compute, cpu, a training rate measured) can be below it, since
    a stage's term below it was replaced by it. The pipeline-only phase's rate is the one
    kept where it ran above the limit, since the throughput table shows it; the stage
    analysis's only where it alone did. Without a new measurement, the rate kept is held
    against the limit as it now stands."""
    measured = input_measured or {}
    if not _fastest(measured):
        by, alone = limit.input_alone_by, limit.input_alone_examples_per_sec
    else:
        above = {label: rate for label, rate in measured.items() if rate > limit.examples_per_sec}
        shown = {PIPELINE_ONLY: above[PIPELINE_ONLY]} if PIPELINE_ONLY in above else above
        by, alone = next(iter(_fastest(shown)), (None, None))
    if alone is None or alone <= limit.examples_per_sec:
        by, alone = None, None
    return dataclasses.replace(limit, input_alone_examples_per_sec=alone, input_alone_by=by)


def _bound(limit: Limit, terms: list[LimitTerm], model: float, erring: LimitTerm) -> Limit:
    """`limit` with `terms` in place of its own: bound by the smallest of them."""
    binding = min(terms, key=lambda term: term.examples_per_sec)
    if binding.bound_by is not LimitBound.MEASURED:
        return dataclasses.replace(
            limit,
            examples_per_sec=binding.examples_per_sec,
            bound_by=binding.bound_by,
            explanation=_explain(binding) + _python_caveat(limit.python_stage),
            terms=terms,
        )
    label = binding.detail.removeprefix("measured: ")
    return dataclasses.replace(
        limit,
        examples_per_sec=binding.examples_per_sec,
        bound_by=LimitBound.MEASURED,
        explanation=_revised(label, binding.examples_per_sec, model, erring),
        terms=terms,
        model_examples_per_sec=model,
        revised_by=label,
    )


#: The terms that bound the input alone, which the pipeline-only rate may contradict.
_INPUT_BOUNDS = frozenset({LimitBound.SEQUENTIAL_STAGE, LimitBound.PARALLEL_STAGE})


def _fastest(rates: Mapping[str, float]) -> list[tuple[str, float]]:
    """The fastest usable rate of `rates` with its label, as a list of at most one."""
    usable = [(label, rate) for label, rate in rates.items() if rate > 0 and math.isfinite(rate)]
    return [max(usable, key=lambda item: item[1])] if usable else []


_AT_LIMIT = "The fastest rate measured"


def _noted(limit: Limit, measured: Mapping[str, float]) -> Limit:
    """`limit`, saying so where a measured rate is within the noise below it."""
    noise = POLICY.limit_noise
    for label, rate in _fastest(measured):
        if rate >= (1 - noise) * limit.examples_per_sec and _AT_LIMIT not in limit.explanation:
            return dataclasses.replace(
                limit,
                explanation=(
                    f"{limit.explanation} {_AT_LIMIT} ({label}, {rate:,.0f} examples/s) is "
                    f"within the noise of this limit ({noise:.0%}): tfperf cannot tell "
                    "whether the pipeline is already at it, so tuning may gain nothing "
                    "measurable."
                ),
            )
    return limit


def _revised(label: str, rate: float, model: float, term: LimitTerm | None) -> str:
    """Why the limit is a measured rate: which term the measurement contradicts."""
    erred = f"its {term.bound_by.value} term ({term.detail})" if term else "its terms"
    head = f"Revised to the measured {rate:,.0f} examples/s ({label})"
    if rate <= (1 + POLICY.limit_noise) * model:
        return (
            f"{head}: the model's limit ({model:,.0f}, from {erred}) is within the noise "
            f"({POLICY.limit_noise:.0%}) below it, so tfperf cannot tell whether the pipeline is "
            "already at its limit; tuning may gain nothing measurable."
        )
    return (
        f"{head}: a measured rate is one the pipeline reaches, and {erred} put the limit "
        f"{rate / model - 1:.0%} lower, so that term errs low on this pipeline and the limit "
        "is at least what was measured."
    )
