"""A study read once into plain data, for the study report and `tfperf report`.

`snapshot_study` is the only place the report layer touches Optuna: it copies every trial's
figures and tfperf attributes (see `tfperf.study`) into a `StudySnapshot`, and the charts and
the page read only that. It needs Optuna and the storage's driver, never TensorFlow.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.knobs import KNOBS, Knobs
from tfperf.knobs.declare import Applier
from tfperf.results import ProfileResult, TrialStatus
from tfperf.results.discovery import Discovery
from tfperf.results.tune import (
    InputOnlyChoice,
    Measurement,
    Objective,
    Reference,
    input_only_choice,
)
from tfperf.study import StudyMismatchError, files_kept, search_trials, stored_result
from tfperf.study.records import StudyRecord, TrialRecord, read_study

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

#: Host fields that describe hardware and software, as opposed to which process ran a trial.
HARDWARE_FIELDS = ("cpu_model", "cpu_count", "gpu_model", "tf_version")

#: Knobs shown only when set: they apply under a strategy, on a GPU or through tf.data service
#: alone.
SITUATIONAL_KNOBS = frozenset(
    knob.name for knob in KNOBS.applied_by(Applier.STRATEGY, Applier.PROCESS, Applier.SERVICE)
)


@dataclasses.dataclass(frozen=True)
class TrialRow:
    """One trial as the report shows it. `examples_per_sec` is None unless it completed."""

    number: int
    state: str  # Optuna's state name: COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    status: str  # tfperf's `TrialStatus` value, or the state in lower case if tfperf set none
    reference: str | None
    examples_per_sec: float | None
    peak_rss_bytes: int | None
    peak_gpu_bytes: int | None
    wall_s: float | None
    feasible: bool
    host: str | None
    hardware: str | None
    knobs: dict[str, Any]
    reason: str | None
    duplicate_of: int | None
    # A trial stopped before it finished (pruned, or over a RAM or GPU budget): the last
    # examples/s it reported, the rate it reached before it was stopped.
    reached_examples_per_sec: float | None = None

    @property
    def flat_knobs(self) -> dict[str, Any]:
        return flat_knobs(self.knobs)

    @property
    def over_budget(self) -> bool:
        """Whether tfperf stopped the trial for using more RAM or GPU memory than allowed."""
        return self.status in _BUDGET_STATUSES

    @property
    def stopped_as(self) -> str:
        """How the table labels the rate a stopped trial reached: "pruned", "over budget"."""
        return "over budget" if self.over_budget else self.status


_BUDGET_STATUSES = (TrialStatus.RAM_BUDGET.value, TrialStatus.GPU_BUDGET.value)


@dataclasses.dataclass(frozen=True)
class StudySnapshot:
    """Everything a study report shows, copied out of the storage."""

    study_name: str
    storage: str  # with any password masked
    pipeline: str
    objective: str
    trials: tuple[TrialRow, ...]
    measurements: tuple[Measurement, ...]  # the final interleaved re-measurement; () if none
    importances: dict[str, float]
    importance_note: str | None
    ram_budget_bytes: int | None
    gpu_budget_bytes: int | None
    best_trial: int | None
    best_result: ProfileResult | None
    discovery: Discovery | None = None  # the call sites of a plain pipeline or a script
    code_root: Path | None = None  # the folder the discovery's files are relative to
    baseline_result: ProfileResult | None = None  # the baseline trial's stored profile
    # The user's files the trials changed (each put back) and created (`study.files_kept`).
    files_put_back: tuple[str, ...] = ()
    files_created: tuple[str, ...] = ()

    @property
    def baseline_row(self) -> TrialRow | None:
        return next((row for row in self.trials if row.reference == Reference.BASELINE), None)

    @property
    def remeasured(self) -> bool:
        return bool(self.measurements)

    def trial(self, number: int) -> TrialRow | None:
        return next((row for row in self.trials if row.number == number), None)


def load_snapshot(storage_url: str, study_name: str | None) -> StudySnapshot:
    """Opens a storage and snapshots one study (the only one, when `study_name` is None).

    Raises:
        StorageError: the storage cannot be opened (see `tfperf.study.open_storage`).
        StudyMismatchError: no such study, or several and none named.
    """

    from tfperf.study.storage import explain_storage_failure, mask_url

    shown = mask_url(storage_url)
    _require_file(storage_url, shown)
    try:
        return _snapshot(storage_url, study_name, shown)
    except Exception as error:
        # A damaged file fails while it is read; Optuna says "during the commit" of the
        # read's session, and the driver's error beneath says what happened.
        explained = explain_storage_failure(storage_url, error)
        if explained is None:
            raise
        raise explained from None


def _snapshot(storage_url: str, study_name: str | None, shown: str) -> StudySnapshot:
    import optuna

    from tfperf.study.storage import open_storage

    # Read-only: a report reads the study and must leave its file as it found it.
    storage = open_storage(storage_url, read_only=True)
    names = [summary.study_name for summary in optuna.get_all_study_summaries(storage)]
    if study_name is None:
        if len(names) != 1:
            listed = ", ".join(names) if names else "none"
            raise StudyMismatchError(
                f"{shown} holds {len(names)} studies ({listed}); name one with --study."
            )
        study_name = names[0]
    if study_name not in names:
        raise StudyMismatchError(
            f"no study named {study_name!r} in {shown}; studies there: "
            f"{', '.join(names) or 'none'}. Check --study (it defaults to the pipeline's name)."
        )
    study = optuna.load_study(study_name=study_name, storage=storage)
    if not read_study(study).created_by_tfperf:
        raise StudyMismatchError(
            f"study {study_name!r} in {shown} was not created by tfperf, so it has none of the "
            "figures a tfperf report shows; use optuna-dashboard for it."
        )
    return snapshot_study(study, shown)


def _require_file(url: str, shown: str) -> None:
    """Refuses a SQLite or journal path that does not exist: opening it would create it.

    A SQLite URL's path is percent-encoded (`train(v2).db` is `train%28v2%29.db` in the URL),
    so it is decoded the way SQLAlchemy decodes it before the disk is asked.
    """
    from urllib.parse import unquote

    from tfperf.study.storage import StorageError

    forms = {
        "sqlite:///": "sqlite:///relative/path.db or sqlite:////absolute/path.db",
        "journal://": "journal://relative/path.log or journal:///absolute/path.log",
    }
    for prefix, form in forms.items():
        if url.startswith(prefix):
            text = url[len(prefix) :]
            # Journal paths are written as they are; SQLite paths are URL-encoded and end at `?`.
            path = Path(unquote(text.split("?", 1)[0])) if prefix == "sqlite:///" else Path(text)
            if str(path) and not path.exists():
                raise StorageError(
                    f"no study storage at {path} (from {shown}): `tfperf tune` creates it. "
                    f"Check the path: {form}."
                )


def snapshot_study(study: optuna.Study, storage_shown: str) -> StudySnapshot:
    """Copies what the report needs out of a study (see the module docstring)."""
    searched = search_trials(study)  # without re-measurement locks and unrun copies
    trials = tuple(_row(trial) for trial in searched)
    stored = read_study(study)
    measurements = tuple(stored.remeasured or ())
    importances, note = _importances(study)
    frozen = {trial.number: trial for trial in searched}
    best = _best_trial(trials, measurements)
    baseline = next((row.number for row in trials if row.reference == Reference.BASELINE), None)
    put_back, created = files_kept(study)
    return StudySnapshot(
        study_name=study.study_name,
        storage=storage_shown,
        pipeline=stored.pipeline or study.study_name,
        objective=(stored.objective or Objective.THROUGHPUT).value,
        trials=trials,
        measurements=measurements,
        importances=importances,
        importance_note=note,
        ram_budget_bytes=_budget(
            frozen.values(), "ram_bytes_over_budget", lambda record: record.peak_rss_bytes
        ),
        gpu_budget_bytes=_budget(
            frozen.values(), "gpu_bytes_over_budget", lambda record: record.peak_gpu_bytes
        ),
        best_trial=best,
        best_result=stored_result(frozen[best]) if best is not None else None,
        baseline_result=stored_result(frozen[baseline]) if baseline is not None else None,
        files_put_back=tuple(put_back),
        files_created=tuple(created),
        **_discovery(stored),
    )


def _discovery(stored: StudyRecord) -> dict[str, Any]:
    if stored.discovery is None or stored.code_root is None:
        return {}
    return {"discovery": stored.discovery, "code_root": Path(stored.code_root)}


def _row(trial: optuna.trial.FrozenTrial) -> TrialRow:
    record = TrialRecord.from_trial(trial)
    worker = dict(record.worker or {})
    status = record.status.value if record.status is not None else trial.state.name.lower()
    complete = trial.state.name == "COMPLETE" and record.complete
    return TrialRow(
        number=trial.number,
        state=trial.state.name,
        status=status,
        reference=record.reference,
        examples_per_sec=trial.values[0] if complete and trial.values else None,
        peak_rss_bytes=record.peak_rss_bytes,
        peak_gpu_bytes=record.peak_gpu_bytes,
        wall_s=record.wall_s,
        feasible=complete and all(value <= 0 for value in trial.constraints.values()),
        host=record.host,
        hardware=_hardware(worker),
        knobs=record.knobs.to_dict() if record.knobs is not None else {},
        reason=record.reason,
        duplicate_of=record.duplicate_of,
        reached_examples_per_sec=_reached(trial, status),
    )


def _reached(trial: optuna.trial.FrozenTrial, status: str) -> float | None:
    """The last examples/s a pruned or over-budget trial reported before it was stopped."""
    stopped = trial.state.name == "PRUNED" or status in _BUDGET_STATUSES
    if not stopped or not trial.intermediate_values:
        return None
    return float(trial.intermediate_values[max(trial.intermediate_values)])


def flat_knobs(knobs: Knobs | Mapping[str, Any]) -> dict[str, Any]:
    """Global knobs and call-site values side by side: `sites` entries become knobs of their own.

    A plain pipeline or a script is tuned through the values at its tf.data call sites
    (`Knobs.sites`); the report shows each as one more knob, named by its place.
    Knobs that apply only under a `tf.distribute` strategy or on a GPU are left out while
    unset: a study on one CPU never touches them, and listing them would only add noise.
    """
    if isinstance(knobs, Knobs):
        knobs = knobs.to_dict()
    flat = {
        name: value
        for name, value in knobs.items()
        if name != "sites" and not (name in SITUATIONAL_KNOBS and value is None)
    }
    flat.update(knobs.get("sites") or {})
    return flat


def site_names(rows: Iterable[TrialRow]) -> list[str]:
    """The call-site knobs that appear in any trial, in order of their names."""
    from tfperf.knobs import Knobs

    return sorted({name for row in rows for name in row.flat_knobs if name not in Knobs.names()})


def _hardware(worker: dict[str, Any]) -> str | None:
    parts = [f"{field}={worker[field]}" for field in HARDWARE_FIELDS if worker.get(field)]
    return ", ".join(parts) or None


def _importances(study: optuna.Study) -> tuple[dict[str, float], str | None]:
    """PED-ANOVA importances of the knobs for examples/s (no scikit-learn needed)."""
    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 4:
        return {}, f"needs at least 4 completed trials; the study has {len(complete)}"
    # PED-ANOVA's warnings are captured and logged, not printed: they would land between the
    # tuner's progress and its answer. One says it explains what makes the target low (tfperf
    # maximises examples/s, so the target is negated); the others say a study is too small to
    # tell the knobs apart, which the report's chart already says from the figures.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            found = optuna.importance.get_param_importances(
                study,
                evaluator=PedAnovaImportanceEvaluator(),
                target=lambda trial: -trial.values[0],
            )
        except (RuntimeError, ValueError) as error:
            return {}, f"not computable for this study: {error}"
    for warning in caught:
        logger.debug("PED-ANOVA: %s", warning.message)
    return {name: float(value) for name, value in found.items()}, None


def _best_trial(trials: tuple[TrialRow, ...], measurements: tuple[Measurement, ...]) -> int | None:
    """The trial behind the recommendation (see `choose`), else the best single run."""
    choice = choose(list(measurements))
    if choice is not None and choice.best.trial_number is not None:
        return choice.best.trial_number
    feasible = [row for row in trials if row.feasible and row.examples_per_sec is not None]
    if not feasible:
        return None
    return max(feasible, key=lambda row: row.examples_per_sec or 0.0).number


def choose(measured: list[Measurement]) -> InputOnlyChoice | None:
    """The tuner's input-only rule (`tfperf.results.input_only_choice`) over the re-measured
    configurations; the fastest within the memory budgets while no baseline has completed;
    None while nothing has."""
    within = [m for m in measured if m.within_budgets]
    fastest = max(within, key=lambda m: m.selection_median, default=None)
    baseline = next((m for m in measured if m.label == "baseline"), None)
    if fastest is None:
        return None
    if baseline is None:
        return InputOnlyChoice(fastest, fastest, None, None)
    return input_only_choice(measured, baseline)


def _budget(
    trials: Iterable[optuna.trial.FrozenTrial],
    constraint: str,
    peak_of: Callable[[TrialRecord], int | None],
) -> int | None:
    """The budget a study ran under, recovered from its constraints (figure - budget).

    tfperf stores a constraint of exactly 0.0 when no budget was set, so a study where every
    stored constraint is 0.0 had none.
    """
    for trial in trials:
        value = trial.constraints.get(constraint) if trial.constraints else None
        peak = peak_of(TrialRecord.from_trial(trial))
        if value and peak is not None:
            return round(float(peak) - value)
    return None
