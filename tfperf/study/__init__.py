"""What tfperf keeps in an Optuna study: storage, trial records, and many tuners on one study.

This is the only package that touches Optuna's internals (`study._storage`, `trial._trial_id`);
the tuner reads and writes a study through a `Ledger`, every trial attribute is a field of
`TrialRecord`, and every study attribute a field of `StudyRecord`.
"""

from __future__ import annotations

from tfperf.study._prices import Prices, Pricing, prices
from tfperf.study._study import (
    SourceChangedError,
    StudyMismatchError,
    await_references,
    claim_study,
    directions,
    enqueue_references,
    feasible_complete,
    files_kept,
    hardware_groups,
    load_trials_frame,
    pareto,
    pareto_front,
    reference_trial,
    search_trials,
    status_counts,
    stored_result,
)

__all__ = [
    "Prices",
    "Pricing",
    "SourceChangedError",
    "StudyMismatchError",
    "await_references",
    "claim_study",
    "directions",
    "enqueue_references",
    "feasible_complete",
    "files_kept",
    "hardware_groups",
    "load_trials_frame",
    "pareto",
    "pareto_front",
    "prices",
    "reference_trial",
    "search_trials",
    "status_counts",
    "stored_result",
]
