"""A trial whose loader yields other examples than its dataset's is refused, never ranked.

An `IterableDataset` that does not shard its stream by worker is read whole by every worker:
with N workers a pass holds N times the examples, all duplicates, and runs N times as fast.
The trial's profile says so (`LoaderReport.pass_check`, made by the torch framework's
checked pass); here such a trial is recorded as pruned, with that sentence as its reason, so
no search ranks it and no finalist re-measured under it counts: the sampler learns to avoid
it, as it does a configuration tf.data refuses, and the run of failures that stops a search
is not charged for it.

The file's own BASELINE is kept whatever it yields: it is what the user runs today, the figure
every other configuration is compared against (a baseline that duplicates understates their
speed-ups, never overstates them), and refusing it would leave nothing to compare with. That
it changes the data is said once, as a warning, so "keep your baseline" is never read as a
clean bill.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.trials import Budgets, TrialRequest
from tfperf.tuner._options import TrialRunner

logger = logging.getLogger("tfperf.tuner")

#: Said once when the file's own BASELINE changes the data (`%s`: the check's sentence).
BASELINE_WARNING = (
    "Your BASELINE changes the data: %s The study compares every configuration with it as it "
    "is, and refuses any other that changes the data; fix the dataset, then tune again."
)


def data_problem(outcome: TrialOutcome) -> str | None:
    """Why a finished trial cannot count: its pass changed the data; None when it can."""
    result = outcome.result
    if outcome.status is not TrialStatus.COMPLETE or result is None or result.loader is None:
        return None
    check = result.loader.pass_check
    return check.statement() if check is not None else None


def refused(outcome: TrialOutcome, problem: str) -> TrialOutcome:
    """`outcome` pruned for `problem`, its figures dropped (its cost kept)."""
    return dataclasses.replace(
        outcome, status=TrialStatus.PRUNED, result=None, reason=f"refused: {problem}"
    )


def refusing_changed_data(run: TrialRunner, baseline: Knobs) -> TrialRunner:
    """`run`, with every trial but the baseline's knobs refused when its data changed.

    Example:
        >>> runner = refusing_changed_data(run_trial, pipeline.baseline)  # doctest: +SKIP
    """

    warned = False

    def checked(
        request: TrialRequest,
        budgets: Budgets,
        *,
        on_progress: Callable[[Any], bool] | None = None,
    ) -> TrialOutcome:
        nonlocal warned
        outcome = run(request, budgets, on_progress=on_progress)
        problem = data_problem(outcome)
        if problem is None:
            return outcome
        if request.knobs != baseline:
            return refused(outcome, problem)
        if not warned:
            warned = True
            logger.warning(BASELINE_WARNING, problem)
        return outcome

    return checked
