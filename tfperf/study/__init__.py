"""What tfperf keeps in an Optuna study: storage, trial records, and many tuners on one study.

This is the only package that touches Optuna's internals (`study._storage`, `trial._trial_id`);
the tuner reads and writes a study through a `Ledger`, every trial attribute is a field of
`TrialRecord`, and every study attribute a field of `StudyRecord`.
"""

from __future__ import annotations

from tfperf.study._records import DUPLICATE_ROLE, LOCK_ROLE, TrialRecord, TrialRole
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
    source_changed,
    status_counts,
    store_remeasurement,
    stored_remeasurement,
    stored_result,
    trials_frame,
)
from tfperf.study._study_record import RemeasureCover, StudyRecord, read_study, write_study

__all__ = [
    "DUPLICATE_ROLE",
    "LOCK_ROLE",
    "RemeasureCover",
    "Remeasurement",
    "SourceChangedError",
    "StudyMismatchError",
    "StudyRecord",
    "TrialRecord",
    "TrialRole",
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
    "read_study",
    "record_outcome",
    "reference_trial",
    "running_twin",
    "same_knobs",
    "search_trials",
    "source_changed",
    "status_counts",
    "store_remeasurement",
    "stored_remeasurement",
    "stored_result",
    "trials_frame",
    "write_study",
]
