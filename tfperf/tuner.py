"""The search for the fastest pipeline configuration: an Optuna study, one trial at a time.

Every study starts with two references, the file's `BASELINE` and everything on AUTOTUNE, so
the answer is always measured against both. Each trial runs in its own child process
(`tfperf.trial`) under the RAM, GPU-memory and time budgets. Trials that exceed a budget are
recorded as infeasible through Optuna's constraints, so the sampler learns where the limits
are. At the end the best candidates and both references are re-measured side by side
(`tfperf.remeasure`) and the winner is picked by median, with its noise.

Trials run one at a time on purpose: parallel trials on the same cores would corrupt each
other's timings. To go faster, run the same command on several machines against one shared
storage.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from tfperf.errors import PipelineFileError, TfperfError
from tfperf.knobs import Knobs
from tfperf.loader import PipelineFile
from tfperf.machine import Machine, default_ram_budget, detect_machine
from tfperf.profiler import Progress
from tfperf.remeasure import Finalist, remeasure
from tfperf.result import Phase
from tfperf.search import autotune_knobs, build_space, reference_params, suggest_knobs
from tfperf.space import Domain
from tfperf.storage import default_storage_url, mask_url, open_storage
from tfperf.study import (
    AUTOTUNE_REF,
    BASELINE,
    REMEASURE_ATTR,
    claim_study,
    copy_constraints,
    directions,
    enqueue_references,
    fail_orphans,
    feasible_complete,
    heartbeat,
    pareto_front,
    record_outcome,
    status_counts,
    worker_identity,
)
from tfperf.trial import Budgets, TrialOutcome, TrialRequest, TrialStatus, run_trial
from tfperf.tune_result import Measurement, Objective, Speedup, TuneResult, speedup

if TYPE_CHECKING:
    import optuna


class TrialRunner(Protocol):
    """Runs one trial; `tfperf.trial.run_trial` in production, a fake in unit tests."""

    def __call__(
        self,
        request: TrialRequest,
        budgets: Budgets,
        *,
        on_progress: Callable[[Progress], bool] | None = None,
    ) -> TrialOutcome: ...


logger = logging.getLogger(__name__)

# tfperf drives trials with ask/tell and beats for them itself (`study.heartbeat`), and calls
# Optuna's experimental stale-trial check on purpose: these warnings would only confuse users.
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
warnings.filterwarnings("ignore", message=r".*fail_stale_trials is experimental")
warnings.filterwarnings("ignore", message=r"Argument ``(heartbeat_interval|grace_period)``")

#: Knobs whose change alters what the model learns, not only how fast: flagged in the result.
TRAINING_KNOBS = ("batch_size", "mixed_precision", "shuffle_buffer")
#: Heartbeat for RDB storages: a trial whose tuner stops beating for GRACE_S is failed.
HEARTBEAT_S, GRACE_S = 20, 120


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How long and how carefully to search. See `tfperf tune --help` for each."""

    trials: int | None = 20
    timeout_s: float | None = None
    trial_timeout_s: float | None = 600.0
    steps: int = 50
    warmup: int | None = None
    ram_budget_bytes: int | None = None
    gpu_memory_budget_bytes: int | None = None
    objective: Objective = Objective.THROUGHPUT
    fixes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    storage: str | None = None
    study_name: str | None = None
    seed: int | None = None
    finalists: int = 3
    rounds: int = 3
    max_consecutive_failures: int = 5
    prune: bool = True
    prune_below: float = 0.5

    def __post_init__(self) -> None:
        if self.trials is None and self.timeout_s is None:
            raise ValueError("give `trials`, `timeout_s` or both, or the search never ends")
        for name in ("trials", "steps", "finalists", "rounds", "max_consecutive_failures"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"`{name} >= 1` must hold, but got {name}={value}")
        if not 0 < self.prune_below < 1:
            raise ValueError(f"`0 < prune_below < 1` must hold, but got {self.prune_below}")


class TuneListener:
    """Callbacks for a front end; the library itself never prints. Every method is optional."""

    def study_ready(
        self, study: optuna.Study, storage: str, resumed: int, orphans: list[int]
    ) -> None:
        """The study is open; `resumed` trials were already finished in it."""

    def trial_started(self, number: int, label: str | None, knobs: Knobs) -> None:
        """A trial begins (label: "baseline", "autotune" or None)."""

    def trial_progress(self, progress: Progress) -> None:
        """A step of the running trial's child process."""

    def trial_finished(
        self,
        number: int,
        outcome: TrialOutcome | None,
        best: float | None,
        baseline: float | None,
    ) -> None:
        """A trial ended (outcome None when it repeated an earlier trial's knobs).

        `best` is the best feasible examples/s in the study so far, `baseline` the baseline
        trial's (None until it has completed).
        """

    def remeasure_started(self, finalists: list[Finalist], rounds: int) -> None:
        """Re-measurement of the finalists begins."""

    def remeasured(self, finalist: Finalist, outcome: TrialOutcome) -> None:
        """One repeat of one finalist ended."""


class TuneInterrupted(TfperfError):
    """Ctrl-C: the running trial was recorded as interrupted; finished trials are kept."""


class TooManyFailures(TfperfError):
    """Several trials in a row failed: the pipeline or the budgets need attention."""


class Tuner:
    """Searches the knobs of one pipeline file; `run()` returns a `TuneResult`."""

    def __init__(
        self,
        pipeline: PipelineFile,
        options: TuneOptions,
        listener: TuneListener | None = None,
        runner: TrialRunner | None = None,
        machine: Machine | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.options = options
        self.listener = listener or TuneListener()
        self.runner: TrialRunner = runner or run_trial
        self.machine = machine or detect_machine()
        self.storage_url = options.storage or default_storage_url(pipeline.path)
        self.study_name = options.study_name or pipeline.name
        ram = options.ram_budget_bytes or default_ram_budget(self.machine)
        self.budgets = Budgets(ram, options.gpu_memory_budget_bytes, options.trial_timeout_s)
        self.space: dict[str, Domain] = build_space(
            pipeline.baseline, self.machine, pipeline.search_space, options.fixes
        )
        self.references = {BASELINE: pipeline.baseline}
        autotune = autotune_knobs(pipeline.baseline)
        if autotune != pipeline.baseline:
            self.references[AUTOTUNE_REF] = autotune

    @property
    def storage_shown(self) -> str:
        return mask_url(self.storage_url)

    def run(self) -> TuneResult:
        started = time.monotonic()
        study = self.open_study()
        before = _finished(study)
        self._search(study)
        measurements = self._remeasure(study)
        return self._result(study, measurements, _finished(study) - before, started)

    def open_study(self) -> optuna.Study:
        """Opens (or creates) the study, checks it is this pipeline's, enqueues the references."""
        import optuna

        storage = open_storage(
            self.storage_url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S
        )
        sampler = optuna.samplers.TPESampler(seed=self.options.seed, n_startup_trials=8)
        study = optuna.create_study(
            storage=storage,
            study_name=self.study_name,
            sampler=sampler,
            directions=directions(self.options.objective),
            load_if_exists=True,
        )
        shown = f"{self.storage_shown} (study {self.study_name!r})"
        claim_study(study, self.pipeline.path.name, self.options.objective, shown)
        orphans = fail_orphans(study)
        optuna.storages.fail_stale_trials(study)
        enqueue_references(
            study,
            {
                label: (knobs, reference_params(knobs, self.space))
                for label, knobs in self.references.items()
            },
        )
        self.listener.study_ready(study, self.storage_shown, _finished(study), orphans)
        return study

    def _search(self, study: optuna.Study) -> None:
        deadline = (
            None if self.options.timeout_s is None else time.monotonic() + self.options.timeout_s
        )
        failures: list[str] = []
        while not self._done(study, deadline):
            outcome = self._one_trial(study)
            if outcome is None or outcome.status in (TrialStatus.COMPLETE, TrialStatus.PRUNED):
                failures.clear()
                continue
            if outcome.status is TrialStatus.FATAL:
                raise PipelineFileError(outcome.reason)
            failures.append(f"{outcome.status.value}: {outcome.reason}")
            if len(failures) >= self.options.max_consecutive_failures:
                raise TooManyFailures(
                    f"{len(failures)} trials in a row failed, so the study stopped. Last reasons:\n"
                    + "\n".join(f"  - {reason}" for reason in failures[-3:])
                    + "\nFix the pipeline or raise the budgets (--ram-budget, --trial-timeout), "
                    "then run the same command again to resume."
                )

    def _done(self, study: optuna.Study, deadline: float | None) -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            return True
        return self.options.trials is not None and _finished(study) >= self.options.trials

    def _one_trial(self, study: optuna.Study) -> TrialOutcome | None:
        import optuna

        trial = study.ask()
        label = trial.user_attrs.get("reference")
        knobs = self.references.get(label) if label else None
        knobs = knobs or suggest_knobs(trial, self.space, self.pipeline.baseline)
        trial.set_user_attr("knobs", knobs.to_dict())
        trial.set_user_attr("worker", worker_identity())
        if label is None and (twin := _same_knobs(study, knobs, trial.number)) is not None:
            # TPE may propose a configuration already measured: reuse it rather than re-run.
            for key in ("status", "reason", "peak_rss_bytes", "peak_gpu_bytes", "result"):
                if key in twin.user_attrs:
                    trial.set_user_attr(key, twin.user_attrs[key])
            copy_constraints(twin, trial)
            trial.set_user_attr("duplicate_of", twin.number)
            study.tell(trial, twin.values)
            self.listener.trial_finished(trial.number, None, *self._standing(study))
            return None
        self.listener.trial_started(trial.number, label, knobs)
        try:
            with heartbeat(study, trial):
                outcome = self.runner(
                    self._request(knobs), self.budgets, on_progress=self._pruner(study, trial)
                )
        except KeyboardInterrupt:
            trial.set_user_attr("status", "interrupted")
            trial.set_user_attr("reason", "interrupted by Ctrl-C")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise TuneInterrupted(
                f"interrupted: trial {trial.number} was recorded as interrupted; "
                f"{_finished(study) - 1} finished trials are kept in {self.storage_shown}."
            ) from None
        record_outcome(trial, outcome, (self.budgets.ram_bytes, self.budgets.gpu_memory_bytes))
        self._tell(study, trial, outcome)
        self.listener.trial_finished(trial.number, outcome, *self._standing(study))
        return outcome

    def _request(self, knobs: Knobs) -> TrialRequest:
        return TrialRequest(
            pipeline=self.pipeline.path,
            knobs=knobs,
            steps=self.options.steps,
            warmup=self.options.warmup,
            argv=self.pipeline.argv,
        )

    def _pruner(self, study: optuna.Study, trial: optuna.trial.Trial) -> Callable[[Progress], bool]:
        """A progress callback that stops a trial far below the best feasible one so far."""
        best = self._best(study)
        single = self.options.objective is Objective.THROUGHPUT
        enough = max(5, self.options.steps // 4)

        def on_progress(progress: Progress) -> bool:
            self.listener.trial_progress(progress)
            rate = progress.examples_per_sec
            if progress.phase is not Phase.END_TO_END or rate is None or not single:
                return True
            trial.report(rate, progress.measured_steps)
            if not self.options.prune or best is None or trial.user_attrs.get("reference"):
                return True
            return progress.measured_steps < enough or rate >= self.options.prune_below * best

        return on_progress

    def _tell(self, study: optuna.Study, trial: optuna.trial.Trial, outcome: TrialOutcome) -> None:
        import optuna

        state = optuna.trial.TrialState
        if outcome.status is TrialStatus.COMPLETE and outcome.result is not None:
            study.tell(trial, self._values(outcome.result.end_to_end.examples_per_sec, outcome))
        elif outcome.status in (TrialStatus.RAM_BUDGET, TrialStatus.GPU_BUDGET):
            # Complete but infeasible: the constraints (figure - budget > 0) teach the sampler.
            study.tell(trial, self._values(0.0, outcome))
        elif outcome.status is TrialStatus.PRUNED:
            study.tell(trial, state=state.PRUNED)
        else:
            study.tell(trial, state=state.FAIL)

    def _values(self, throughput: float, outcome: TrialOutcome) -> list[float]:
        if self.options.objective is Objective.THROUGHPUT_RAM:
            return [throughput, float(outcome.peak_rss_bytes)]
        return [throughput]

    def _standing(self, study: optuna.Study) -> tuple[float | None, float | None]:
        """The best feasible examples/s so far, and the baseline trial's."""
        trials = feasible_complete(study)
        baseline = [t.values[0] for t in trials if t.user_attrs.get("reference") == BASELINE]
        best = max((t.values[0] for t in trials), default=None)
        return best, baseline[0] if baseline else None

    def _best(self, study: optuna.Study) -> float | None:
        values = [trial.values[0] for trial in feasible_complete(study)]
        return max(values) if values else None

    def _remeasure(self, study: optuna.Study) -> list[Measurement]:
        finalists = self._finalists(study)
        self.listener.remeasure_started(finalists, self.options.rounds)
        measurements = remeasure(
            finalists,
            self.options.rounds,
            self._request,
            self.budgets,
            lambda request, budgets: self.runner(request, budgets),
            self.listener.remeasured,
        )
        study.set_user_attr(REMEASURE_ATTR, [dataclasses.asdict(m) for m in measurements])
        return measurements

    def _finalists(self, study: optuna.Study) -> list[Finalist]:
        trials = feasible_complete(study)
        if self.options.objective is Objective.THROUGHPUT_RAM:
            trials = pareto_front(trials)
        ranked = sorted(trials, key=lambda t: -t.values[0])
        finalists: list[Finalist] = []
        seen = {knobs.to_dict().__repr__() for knobs in self.references.values()}
        for trial in ranked:
            key = repr(trial.user_attrs.get("knobs"))
            if key in seen or trial.user_attrs.get("reference"):
                continue
            seen.add(key)
            knobs = Knobs.from_mapping(trial.user_attrs["knobs"], source=f"trial {trial.number}")
            finalists.append(Finalist(f"trial {trial.number}", trial.number, knobs))
            if len(finalists) == self.options.finalists:
                break
        references = [
            Finalist(label, _reference_trial(study, label), knobs)
            for label, knobs in self.references.items()
        ]
        return finalists + references

    def _result(
        self, study: optuna.Study, measured: list[Measurement], trials_run: int, started: float
    ) -> TuneResult:
        by_label = {m.label: m for m in measured}
        baseline = by_label.get(BASELINE)
        if baseline is None:
            raise TfperfError(
                "the baseline configuration failed in every re-measurement, so nothing can be "
                "compared with it; see the trial reasons with `tfperf report`."
            )
        autotune = by_label.get(AUTOTUNE_REF)
        best = max(measured, key=lambda m: m.median)
        vs_baseline = speedup(best, baseline)
        changes = [
            name for name in TRAINING_KNOBS if best.knobs.get(name) != baseline.knobs.get(name)
        ]
        front = pareto_front(feasible_complete(study)) if len(study.directions) > 1 else []
        return TuneResult(
            pipeline=str(self.pipeline.path),
            study_name=self.study_name,
            storage=self.storage_shown,
            objective=self.options.objective,
            best=best,
            baseline=baseline,
            autotune=autotune,
            candidates=measured,
            speedup_vs_baseline=vs_baseline,
            speedup_vs_autotune=speedup(best, autotune) if autotune else None,
            recommendation=_recommendation(best, vs_baseline, changes),
            changes_training=changes,
            pareto_trials=[t.number for t in front],
            trial_counts=status_counts(study),
            trials_this_run=trials_run,
            wall_s=time.monotonic() - started,
            ram_budget_bytes=self.budgets.ram_bytes,
            gpu_memory_budget_bytes=self.budgets.gpu_memory_bytes,
        )


def tune(pipeline: PipelineFile, options: TuneOptions | None = None, **kwargs: Any) -> TuneResult:
    """Tunes a loaded pipeline file; keyword arguments go to `TuneOptions`.

    Example:
        >>> result = tfperf.tune(tfperf.load_pipeline("pipeline.py"), trials=20)  # doctest: +SKIP
        >>> result.best.knobs, result.speedup_vs_baseline.describe()  # doctest: +SKIP
    """
    return Tuner(pipeline, options or TuneOptions(**kwargs)).run()


def _finished(study: optuna.Study) -> int:
    import optuna

    state = optuna.trial.TrialState
    done = (state.COMPLETE, state.PRUNED, state.FAIL)
    return len(study.get_trials(deepcopy=False, states=done))


def _same_knobs(study: optuna.Study, knobs: Knobs, number: int) -> optuna.trial.FrozenTrial | None:
    wanted = knobs.to_dict()
    for trial in feasible_complete(study):
        if trial.number != number and trial.user_attrs.get("knobs") == wanted:
            return trial
    return None


def _reference_trial(study: optuna.Study, label: str) -> int | None:
    for trial in study.get_trials(deepcopy=False):
        if trial.user_attrs.get("reference") == label:
            return trial.number
    return None


def _recommendation(best: Measurement, vs_baseline: Speedup, changes: list[str]) -> str:
    if best.label == BASELINE or not vs_baseline.significant:
        return (
            "Keep your baseline: no configuration beat it by more than the measured noise "
            f"(±{vs_baseline.spread:.0%})."
        )
    name = "the AUTOTUNE configuration" if best.label == AUTOTUNE_REF else f"{best.label}'s knobs"
    text = f"Use {name}: {vs_baseline.describe()} your baseline's examples/s."
    if changes:
        text += (
            f" It changes {', '.join(changes)}, which alters training, not only speed: "
            "check accuracy before adopting it."
        )
    return text
