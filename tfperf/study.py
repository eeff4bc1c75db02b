"""What tfperf keeps in an Optuna study, and how it reads it back.

Budgets are Optuna constraints (`ram_bytes_over_budget`, `gpu_bytes_over_budget`: the figure
minus the budget, feasible when <= 0), so the sampler learns where the limits bind. Each trial
also carries, as user attributes: the knobs measured (`knobs`), how it ended (`status`,
a `TrialStatus` value, and `reason`), the peak memory it reached, the machine that ran it
(`worker`), and on success the full `ProfileResult` JSON (`result`), so reports need no re-run.
The study itself records which pipeline it tunes, so a study name reused for another pipeline,
or a study created by another tool, is refused with a clear message.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import psutil

from tfperf.errors import TfperfError
from tfperf.knobs import Knobs
from tfperf.trial import TrialOutcome, TrialStatus
from tfperf.tune_result import Objective

if TYPE_CHECKING:
    import optuna
    import pandas as pd

#: Study attribute naming the pipeline file a study tunes.
PIPELINE_ATTR = "tfperf_pipeline"
OBJECTIVE_ATTR = "tfperf_objective"
REFERENCES_ATTR = "tfperf_references_enqueued"
REMEASURE_ATTR = "tfperf_remeasure"

BASELINE, AUTOTUNE_REF = "baseline", "autotune"


class StudyMismatchError(TfperfError):
    """The study named belongs to another pipeline, another objective, or another tool."""


def directions(objective: Objective) -> list[Literal["maximize", "minimize"]]:
    if objective is Objective.THROUGHPUT_RAM:
        return ["maximize", "minimize"]
    return ["maximize"]


def claim_study(study: optuna.Study, pipeline_name: str, objective: Objective, shown: str) -> None:
    """Marks a new study as this pipeline's, or checks an existing one is.

    Args:
        shown: the storage and study as the user may see them (password masked).
    """
    owner = study.user_attrs.get(PIPELINE_ATTR)
    if owner is None and study.trials:
        raise StudyMismatchError(
            f"study {study.study_name!r} in {shown} has {len(study.trials)} trials but was not "
            "created by tfperf; pick a new name with --study."
        )
    if owner is not None and owner != pipeline_name:
        raise StudyMismatchError(
            f"study {study.study_name!r} in {shown} tunes {owner}, not {pipeline_name}; use "
            "--study to give this pipeline its own study."
        )
    recorded = study.user_attrs.get(OBJECTIVE_ATTR)
    if recorded is not None and recorded != objective.value:
        raise StudyMismatchError(
            f"study {study.study_name!r} was created with --objective {recorded}, not "
            f"{objective.value}; resume it with --objective {recorded} or use another --study."
        )
    if owner is None:
        study.set_user_attr(PIPELINE_ATTR, pipeline_name)
        study.set_user_attr(OBJECTIVE_ATTR, objective.value)


def enqueue_references(
    study: optuna.Study, references: dict[str, tuple[Knobs, dict[str, Any]]]
) -> bool:
    """Enqueues the reference trials (label -> knobs, Optuna params) once per study.

    Returns:
        True if they were enqueued now, False if the study already had them.
    """
    if study.user_attrs.get(REFERENCES_ATTR):
        return False
    for label, (knobs, params) in references.items():
        study.enqueue_trial(params, user_attrs={"reference": label, "knobs": knobs.to_dict()})
    study.set_user_attr(REFERENCES_ATTR, True)
    return True


def worker_identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def fail_orphans(study: optuna.Study) -> list[int]:
    """Fails RUNNING trials whose tuner process on this host is gone (killed, power loss).

    Trials running on other hosts are left to Optuna's heartbeat. Returns the numbers failed.
    """
    import optuna

    host = socket.gethostname()
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker") or {}
        if worker.get("host") != host or psutil.pid_exists(int(worker.get("pid", -1))):
            continue
        storage = study._storage
        storage.set_trial_user_attr(trial._trial_id, "status", "interrupted")
        storage.set_trial_user_attr(
            trial._trial_id, "reason", "orphaned: the tuner running it stopped before it ended"
        )
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        failed.append(trial.number)
    return failed


def record_outcome(
    trial: optuna.trial.Trial, outcome: TrialOutcome, budgets: Sequence[int | None]
) -> None:
    """Stores a trial's outcome as user attributes and its budgets as constraints.

    Constraint values are `figure - budget` (feasible when <= 0); without a budget, 0.
    """
    ram_budget, gpu_budget = budgets
    ram = float(outcome.peak_rss_bytes - ram_budget) if ram_budget else 0.0
    gpu = float((outcome.peak_gpu_bytes or 0) - gpu_budget) if gpu_budget else 0.0
    trial.set_constraint("ram_bytes_over_budget", ram)
    trial.set_constraint("gpu_bytes_over_budget", gpu)
    trial.set_user_attr("status", outcome.status.value)
    trial.set_user_attr("reason", outcome.reason)
    trial.set_user_attr("peak_rss_bytes", outcome.peak_rss_bytes)
    trial.set_user_attr("peak_gpu_bytes", outcome.peak_gpu_bytes)
    trial.set_user_attr("wall_s", round(outcome.wall_s, 3))
    if outcome.result is not None:
        trial.set_user_attr("result", outcome.result.to_json(indent=None))


def copy_constraints(source: optuna.trial.FrozenTrial, target: optuna.trial.Trial) -> None:
    for key, value in source.constraints.items():
        target.set_constraint(key, value)


@contextlib.contextmanager
def heartbeat(study: optuna.Study, trial: optuna.trial.Trial) -> Iterator[None]:
    """Beats for `trial` while the block runs, when the storage has heartbeats enabled.

    Optuna beats only inside `Study.optimize`; tfperf drives trials with ask and tell, so it
    beats itself. Other tuners sharing the storage then fail this trial if this process dies.
    """
    storage: Any = study._storage  # RDBStorage implements Optuna's BaseHeartbeat
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    if not interval:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while True:
            storage.record_heartbeat(trial._trial_id)
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name="tfperf-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def feasible_complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials that finished a full measurement within every budget."""
    import optuna

    return [
        trial
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if trial.user_attrs.get("status") == TrialStatus.COMPLETE.value
        and all(value <= 0 for value in trial.constraints.values())
    ]


def pareto_front(trials: Sequence[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """Trials no other trial beats on both throughput (higher) and peak RAM (lower)."""

    def dominated(a: optuna.trial.FrozenTrial) -> bool:
        return any(
            b.values[0] >= a.values[0] and b.values[1] <= a.values[1] and b.values != a.values
            for b in trials
        )

    return sorted((t for t in trials if not dominated(t)), key=lambda t: -t.values[0])


def status_counts(study: optuna.Study) -> dict[str, int]:
    """Trials by tfperf status (complete, failed, ram-budget, ...) or Optuna state (waiting)."""
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        status = trial.user_attrs.get("status") or trial.state.name.lower()
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: number, state, status, reason, examples/s, peak RAM, and every knob."""
    import pandas as pd

    rows = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        row: dict[str, Any] = {
            "number": trial.number,
            "state": trial.state.name,
            "status": attrs.get("status"),
            "reference": attrs.get("reference"),
            "examples_per_sec": trial.values[0] if trial.values else None,
            "peak_rss_bytes": attrs.get("peak_rss_bytes"),
            "peak_gpu_bytes": attrs.get("peak_gpu_bytes"),
            "wall_s": attrs.get("wall_s"),
            "reason": attrs.get("reason"),
            "host": (attrs.get("worker") or {}).get("host"),
        }
        row.update({f"knob_{k}": v for k, v in (attrs.get("knobs") or {}).items()})
        rows.append(row)
    frame: pd.DataFrame = pd.DataFrame(rows)
    return frame


def load_trials_frame(storage: str, study_name: str) -> pd.DataFrame:
    """The trials of a stored study as a DataFrame (see `trials_frame`).

    Example:
        >>> tfperf.trials_frame("sqlite:///studies/p.db", "p")  # doctest: +SKIP
    """
    import optuna

    from tfperf.storage import open_storage

    return trials_frame(optuna.load_study(study_name=study_name, storage=open_storage(storage)))


def stored_result(trial: optuna.trial.FrozenTrial) -> Any:
    """The trial's `ProfileResult`, or None when it did not complete."""
    from tfperf.result import ProfileResult

    text = trial.user_attrs.get("result")
    return ProfileResult.from_dict(json.loads(text)) if text else None
