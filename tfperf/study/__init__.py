"""What tfperf keeps in an Optuna study: storage, trial records, and many tuners on one study.

This is the only package that touches Optuna's internals (`study._storage`, `trial._trial_id`);
the tuner reads and writes a study through a `Ledger`, every trial attribute is a field of
`TrialRecord`, and every study attribute a field of `StudyRecord`.
"""

from __future__ import annotations

from tfperf.study._study import (
    Remeasurement,
    SourceChangedError,
    StudyMismatchError,
    await_references,
    claim_study,
    copy_constraints,
    directions,
    enqueue_references,
    feasible_complete,
    hardware_groups,
    load_trials_frame,
    pareto,
    pareto_front,
    record_outcome,
    reference_trial,
    running_twin,
    same_knobs,
    search_trials,
    status_counts,
    store_remeasurement,
    stored_remeasurement,
    stored_result,
    trials_frame,
)

__all__ = [
    "Remeasurement",
    "SourceChangedError",
    "StudyMismatchError",
    "await_references",
    "claim_study",
    "copy_constraints",
    "directions",
    "enqueue_references",
    "feasible_complete",
    "hardware_groups",
    "load_trials_frame",
    "pareto",
    "pareto_front",
    "record_outcome",
    "reference_trial",
    "running_twin",
    "same_knobs",
    "search_trials",
    "status_counts",
    "store_remeasurement",
    "stored_remeasurement",
    "stored_result",
    "trials_frame",
]
