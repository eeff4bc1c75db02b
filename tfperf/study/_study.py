"""What tfperf keeps in an Optuna study, and how it reads it back.

Budgets are Optuna constraints (`ram_bytes_over_budget`, `gpu_bytes_over_budget`: the figure
minus the budget, feasible when <= 0), so the sampler learns where the limits bind. The study
records which pipeline it tunes, so a study name reused for another pipeline, or a study
created by another tool, is refused with a clear message.

Trial user attributes are the fields of `TrialRecord` (`tfperf.study._records`), study user
attributes those of `StudyRecord` (`tfperf.study._study_record`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tfperf.errors import TfperfError
from tfperf.hardware import describe_hardware
from tfperf.knobs import Knobs
from tfperf.results import ProfileResult, TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement, Objective
from tfperf.study._cluster import counted
from tfperf.study._records import TrialRecord
from tfperf.study._study_record import RemeasureCover, StudyRecord, read_study, write_study

if TYPE_CHECKING:
    import optuna
    import pandas as pd

T = TypeVar("T")


class StudyMismatchError(TfperfError):
    """The study named belongs to another pipeline, another objective, or another tool."""


class SourceChangedError(StudyMismatchError):
    """The pipeline's files changed since the study began: trials before and after the edit
    would be compared as one pipeline."""


def directions(objective: Objective) -> list[Literal["maximize", "minimize"]]:
    if objective is Objective.THROUGHPUT_RAM:
        return ["maximize", "minimize"]
    return ["maximize"]


def claim_study(
    study: optuna.Study,
    pipeline_name: str,
    objective: Objective,
    shown: str,
    source: str | None = None,
    step_time_s: float | None = None,
) -> None:
    """Marks a new study as this pipeline's, or checks an existing one is.

    Args:
        shown: the storage and study as the user may see them (password masked).
        source: the digest of the pipeline's files now (`tfperf.pipeline.source_digest`); a
            study that began with other files is refused, one without a digest takes this.
        step_time_s: the emulated step the trials run against (`--step-time`), None for the
            pipeline's own: a study measured against another step is refused, since its rates
            answer another question.

    Raises:
        StudyMismatchError: the study is another pipeline's, objective's or tool's.
        SourceChangedError: the pipeline's files changed since the study began.
    """
    stored = read_study(study)
    owner = stored.pipeline
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
    recorded = stored.objective
    if recorded is not None and recorded is not objective:
        raise StudyMismatchError(
            f"study {study.study_name!r} was created with --objective {recorded.value}, not "
            f"{objective.value}; resume it with --objective {recorded.value} or use another "
            "--study."
        )
    if owner is not None and stored.step_time_s != step_time_s:
        raise StudyMismatchError(
            f"study {study.study_name!r} was measured against {_step_words(stored.step_time_s)}, "
            f"not {_step_words(step_time_s)}: its rates answer another question. Resume it "
            f"with {_step_flag(stored.step_time_s)}, or use another --study."
        )
    if source is not None and stored.source is not None and stored.source != source:
        raise SourceChangedError(source_changed(pipeline_name, study, shown))
    if owner is None:
        record = StudyRecord(
            pipeline=pipeline_name, objective=objective, source=source, step_time_s=step_time_s
        )
        write_study(study, record)
    elif stored.source is None and source is not None:
        write_study(study, StudyRecord(source=source))


def source_changed(pipeline_name: str, study: optuna.Study, shown: str, when: str = "") -> str:
    """The message for a pipeline whose files changed since its study began.

    Args:
        shown: the storage and study as the user may see them (password masked).
        when: words that place the change, such as "while trial 4 ran".
    """
    finished = sum(trial.state.is_finished() for trial in search_trials(study))
    place = f" ({when})" if when else ""
    return (
        f"{pipeline_name} (or a file of its own it reads) changed since its study began{place}: "
        f"the {finished} finished trials of {shown} measured the code as it was, and trials of "
        "the edited code would be compared with them as one pipeline. Start a new study with "
        "--study NAME to tune the file as it is now, or put the file back as it was to resume "
        "this one."
    )


def enqueue_references(
    study: optuna.Study, references: dict[str, tuple[Knobs, dict[str, Any]]]
) -> bool:
    """Enqueues the reference trials (label -> knobs, Optuna params) once per study.

    Returns:
        True if they were enqueued now, False if the study already had them.
    """
    if read_study(study).references_enqueued:
        return False
    for label, (knobs, params) in references.items():
        record = TrialRecord(knobs=knobs, reference=label)
        study.enqueue_trial(params, user_attrs=record.to_user_attrs())
    write_study(study, StudyRecord(references_enqueued=True))
    return True


def await_references(study: optuna.Study, wait_s: float, poll_s: float) -> None:
    """Waits until the tuner that created the study has queued the references.

    Creating a study and queueing its references are separate writes; a tuner that joins in
    between waits for them rather than queueing its own copies. A study of another tool is
    left to `claim_study` at once; if the creator died mid-way, this tuner queues them after
    `wait_s`.
    """
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        stored = read_study(study)
        if stored.references_enqueued:
            return
        if not stored.created_by_tfperf and study.get_trials(deepcopy=False):
            return
        time.sleep(poll_s)


def same_knobs(study: optuna.Study, knobs: Knobs, number: int) -> optuna.trial.FrozenTrial | None:
    """A feasible completed trial other than `number` that measured `knobs`."""
    for trial in feasible_complete(study):
        if trial.number != number and TrialRecord.from_trial(trial).knobs == knobs:
            return trial
    return None


def running_twin(study: optuna.Study, knobs: Knobs, number: int) -> optuna.trial.FrozenTrial | None:
    """The lowest-numbered trial measuring `knobs` on another tuner now, if below `number`."""
    import optuna

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in running:
        if trial.number < number and TrialRecord.from_trial(trial).knobs == knobs:
            return trial
    return None


def reference_trial(study: optuna.Study, label: str) -> int | None:
    """The trial that measured a reference: its completed run, else its first counted one."""
    runs = [
        t
        for t in counted(study.get_trials(deepcopy=False))
        if TrialRecord.from_trial(t).reference == label
    ]
    complete = [t for t in runs if t.state.name == "COMPLETE"]
    return (complete or runs)[0].number if runs else None


def record_outcome(
    trial: optuna.trial.Trial, outcome: TrialOutcome, budgets: Sequence[int | None]
) -> None:
    """Stores a trial's outcome as user attributes and its budgets as constraints.

    Constraint values are `figure - budget` (feasible when <= 0); without a budget, 0.
    """
    ram_budget, gpu_budget = budgets
    ram = float(outcome.peak_rss_bytes - ram_budget) if ram_budget else 0.0
    gpu = float((outcome.peak_gpu_bytes or 0) - gpu_budget) if gpu_budget else 0.0
    if outcome.status is TrialStatus.GPU_BUDGET:  # TF refused an allocation: over, figure or not
        gpu = max(gpu, 1.0)
    trial.set_constraint("ram_bytes_over_budget", ram)
    trial.set_constraint("gpu_bytes_over_budget", gpu)
    write_attrs(trial, TrialRecord.of_outcome(outcome))


def write_attrs(trial: optuna.trial.Trial, record: TrialRecord) -> None:
    """Stores the attributes `record` has on a trial this tuner holds."""
    for key, value in record.to_user_attrs().items():
        trial.set_user_attr(key, value)


def copy_constraints(source: optuna.trial.FrozenTrial, target: optuna.trial.Trial) -> None:
    for key, value in source.constraints.items():
        target.set_constraint(key, value)


def feasible_complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials that finished a full measurement within every budget."""
    import optuna

    return [
        trial
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if TrialRecord.from_trial(trial).complete
        and all(value <= 0 for value in trial.constraints.values())
    ]


def pareto_front(trials: Sequence[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """Trials no other trial beats on both throughput (higher) and peak RAM (lower)."""
    return pareto(trials, lambda trial: (trial.values[0], trial.values[1]))


def pareto(items: Sequence[T], key: Callable[[T], tuple[float, float]]) -> list[T]:
    """Items no other beats on both throughput (higher) and peak RAM (lower), fastest first.

    `key` gives an item's (throughput, peak RAM).
    """

    def dominated(a: T) -> bool:
        speed, ram = key(a)
        return any(key(b)[0] >= speed and key(b)[1] <= ram and key(b) != key(a) for b in items)

    return sorted((item for item in items if not dominated(item)), key=lambda i: -key(i)[0])


def search_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's trials without those that are not part of the search (locks, copies)."""
    trials = study.get_trials(deepcopy=False)
    return [trial for trial in trials if TrialRecord.from_trial(trial).searched]


@dataclasses.dataclass(frozen=True)
class Remeasurement:
    """The stored final re-measurement, and the state of the study it was made for."""

    measurements: list[Measurement]
    trials: int  # counted trials finished when it was measured
    lock_trial: int | None
    worker: dict[str, Any]


def store_remeasurement(study: optuna.Study, remeasurement: Remeasurement) -> None:
    """Saves the measurements first, then what they cover, which readers check first."""
    cover = RemeasureCover(remeasurement.trials, remeasurement.lock_trial, remeasurement.worker)
    write_study(study, StudyRecord(remeasured=remeasurement.measurements, remeasured_by=cover))


def stored_remeasurement(study: optuna.Study) -> Remeasurement | None:
    """The last re-measurement stored in the study, or None (or from an older tfperf)."""
    stored = read_study(study)
    cover, measured = stored.remeasured_by, stored.remeasured
    if cover is None or measured is None:
        return None
    return Remeasurement(measured, cover.trials, cover.lock_trial, cover.worker)


def hardware_groups(study: optuna.Study, *workers: dict[str, Any]) -> dict[str, list[str]]:
    """Hosts by hardware, over the study's trials and `workers`: one key when all alike."""
    groups: dict[str, set[str]] = {}
    records = [TrialRecord.from_trial(trial).worker for trial in search_trials(study)]
    for worker in [*records, *workers]:
        if worker and "cpu_model" in worker:
            groups.setdefault(describe_hardware(worker), set()).add(str(worker.get("host")))
    return {hardware: sorted(hosts) for hardware, hosts in sorted(groups.items())}


def status_counts(study: optuna.Study) -> dict[str, int]:
    """Trials by tfperf status (complete, failed, ram-budget, ...) or Optuna state (waiting)."""
    counts: dict[str, int] = {}
    for trial in search_trials(study):
        stored = TrialRecord.from_trial(trial).status
        status = stored.value if stored is not None else trial.state.name.lower()
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per search trial: number, state, status, reason, examples/s, peak RAM, the
    host and its hardware, and every knob (`knob_<name>`).

    `hardware` is `tfperf.hardware.describe_hardware` of the trial's host: group or filter by
    it (or by `host`) to compare only timings taken on alike machines.
    """
    import pandas as pd

    rows = []
    for trial in search_trials(study):
        record = TrialRecord.from_trial(trial)
        worker = record.worker or {}
        row: dict[str, Any] = {
            "number": trial.number,
            "state": trial.state.name,
            "status": record.status.value if record.status is not None else None,
            "reference": record.reference,
            "examples_per_sec": trial.values[0] if trial.values else None,
            "peak_rss_bytes": record.peak_rss_bytes,
            "peak_gpu_bytes": record.peak_gpu_bytes,
            "wall_s": record.wall_s,
            "reason": record.reason,
            "lost": record.lost,
            "retry_of": record.retry_of,
            "duplicate_of": record.duplicate_of,
            "host": worker.get("host"),
            "hardware": describe_hardware(worker) if "cpu_model" in worker else None,
            "cpu_model": worker.get("cpu_model"),
            "cpu_count": worker.get("cpu_count"),
            "gpu_model": worker.get("gpu_model"),
            "tf_version": worker.get("tf_version"),
        }
        knobs = record.knobs.to_dict() if record.knobs is not None else {}
        row.update({f"knob_{k}": v for k, v in knobs.items()})
        rows.append(row)
    frame: pd.DataFrame = pd.DataFrame(rows)
    return frame


def load_trials_frame(storage: str, study_name: str) -> pd.DataFrame:
    """The trials of a stored study as a DataFrame (see `trials_frame`).

    Example:
        >>> tfperf.trials_frame("sqlite:///studies/p.db", "p")  # doctest: +SKIP
    """
    import optuna

    from tfperf.study._storage import open_storage

    return trials_frame(optuna.load_study(study_name=study_name, storage=open_storage(storage)))


def stored_result(trial: optuna.trial.FrozenTrial) -> ProfileResult | None:
    """The trial's `ProfileResult`, or None when it did not complete."""
    return TrialRecord.from_trial(trial).profile()


def files_kept(study: optuna.Study) -> tuple[list[str], list[str]]:
    """The user's files the study's trials changed, each put back, and those they created
    (`tfperf.kept`), once each in the order first met. A file one trial created and a later
    one changed was created, not the user's."""
    put_back: dict[str, None] = {}
    created: dict[str, None] = {}
    for trial in study.get_trials(deepcopy=False):
        result = stored_result(trial)
        if result is not None:
            put_back.update(dict.fromkeys(result.files_put_back))
            created.update(dict.fromkeys(result.files_created))
    return [path for path in put_back if path not in created], list(created)


def _step_words(step_time_s: float | None) -> str:
    if step_time_s is None:
        return "the pipeline's own step"
    return f"an emulated step of {step_time_s * 1000:g} ms"


def _step_flag(step_time_s: float | None) -> str:
    return "no --step-time" if step_time_s is None else f"--step-time {step_time_s * 1000:g}ms"
