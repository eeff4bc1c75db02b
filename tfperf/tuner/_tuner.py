"""The search for the fastest pipeline configuration: an Optuna study, one trial at a time.

Every study starts with two references, the file's `BASELINE` and everything on AUTOTUNE, so the
answer is always measured against both. Each trial runs in its own child process
(`tfperf.trials._runner`) under the RAM, GPU-memory and time budgets. Trials that exceed a budget
are recorded as infeasible through Optuna's constraints, so the sampler learns where the limits are.
At the end the best candidates and both references are re-measured side by side
(`tfperf.tuner._remeasure`) and the winner is picked by median, with its noise.

Trials run one at a time on purpose: parallel trials on the same cores would corrupt each
other's timings. To go faster, run the same command on several machines against one shared
storage: the tuners then share the study's trial budget, recover each other's lost trials,
and leave the final re-measurement to one of them (`tfperf.study._cluster`, docs/distributed.md).
"""

from __future__ import annotations

import logging
import random
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfperf.errors import PipelineFileError, TfperfError
from tfperf.hardware import Machine, default_ram_budget, detect_machine
from tfperf.knobs import Domain, Knobs
from tfperf.measure import Progress
from tfperf.pipeline import PipelineFile
from tfperf.results import (
    Measurement,
    Objective,
    Phase,
    TrialOutcome,
    TrialStatus,
    TuneResult,
    recommend,
    speedup,
    training_knob_changes,
)
from tfperf.study import (
    AUTOTUNE_REF,
    BASELINE,
    DISCOVERY_ATTR,
    DUPLICATE_ROLE,
    LOCK_ROLE,
    Heartbeats,
    LostTrial,
    Remeasurement,
    Step,
    await_references,
    claim_study,
    copy_constraints,
    default_storage_url,
    directions,
    duplicate_reference,
    enqueue_references,
    feasible_complete,
    finished_count,
    hardware_groups,
    in_budget,
    mask_url,
    next_step,
    open_storage,
    pareto_front,
    record_outcome,
    recover_lost,
    reference_trial,
    release_lock,
    running_twin,
    same_knobs,
    status_counts,
    store_remeasurement,
    stored_remeasurement,
    take_lock,
    worker_record,
)
from tfperf.trials import Budgets, TrialRequest, run_trial
from tfperf.tuner._options import (
    TooManyFailures,
    TrialRunner,
    TuneInterrupted,
    TuneListener,
    TuneOptions,
    Wait,
)
from tfperf.tuner._remeasure import Finalist, remeasure
from tfperf.tuner._search import autotune_knobs, build_space, reference_params, suggest_knobs

__all__ = [
    "TooManyFailures",
    "TrialRunner",
    "TuneInterrupted",
    "TuneListener",
    "TuneOptions",
    "Tuner",
    "Wait",
    "tune",
]

if TYPE_CHECKING:
    import optuna


logger = logging.getLogger(__name__)

# tfperf drives trials with ask/tell and beats for them itself (`tfperf.study._cluster`), and uses
# Optuna's experimental heartbeat and constant-liar options on purpose: these warnings would
# only confuse users.
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
warnings.filterwarnings("ignore", message=r"Argument ``(heartbeat_interval|grace_period)``")
warnings.filterwarnings("ignore", message=r"Argument ``constant_liar`` is an experimental")

#: Seconds a tuner that finds a study being set up by another waits for its references.
SETUP_WAIT_S, SETUP_POLL_S = 10.0, 0.1
#: Most seconds between two looks at the study by a tuner waiting for others: a few seconds
#: of delay at the end of a study, and one cheap query per look.
WAIT_POLL_S = 5


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
        self.worker = worker_record(self.machine)
        self._heartbeats: Heartbeats | None = None
        self._ran = 0  # trials this tuner finished (measured, or copied from a twin)
        self._hardware_seen: set[str] = set()
        self._last_wait: tuple[Wait, tuple[int, ...]] | None = None

    @property
    def storage_shown(self) -> str:
        return mask_url(self.storage_url)

    @property
    def heartbeats(self) -> Heartbeats:
        if self._heartbeats is None:
            raise RuntimeError("open_study() must run before the tuner touches trials")
        return self._heartbeats

    def run(self) -> TuneResult:
        started = time.monotonic()
        study = self.open_study()
        try:
            self._search(study)
            measurements = self._final(study)
        except KeyboardInterrupt:
            raise TuneInterrupted(
                f"interrupted between trials; "
                f"{finished_count(study.get_trials(deepcopy=False))} finished trials are kept "
                f"in {self.storage_shown}."
            ) from None
        return self._result(study, measurements, started)

    def open_study(self) -> optuna.Study:
        """Opens (or creates) the study, checks it is this pipeline's, enqueues the references.

        Only the tuner that creates the study enqueues the references, so tuners started at
        the same moment on many machines queue them once; the others wait for that.
        """
        liveness = self.options.liveness
        storage = open_storage(
            self.storage_url,
            heartbeat_interval=liveness.heartbeat_s,
            grace_period=liveness.grace_s,
        )
        study, created = self._create_or_load(storage)
        if not created:
            await_references(study, SETUP_WAIT_S, SETUP_POLL_S)
        shown = f"{self.storage_shown} (study {self.study_name!r})"
        claim_study(study, self.pipeline.path.name, self.options.objective, shown)
        if self.pipeline.discovery is not None:
            root = str(self.pipeline.path.parent.resolve())
            study.set_user_attr(DISCOVERY_ATTR, {"root": root, **self.pipeline.discovery.to_dict()})
        enqueue_references(
            study,
            {
                label: (knobs, reference_params(knobs, self.space))
                for label, knobs in self.references.items()
            },
        )
        self._heartbeats = Heartbeats(study, liveness)
        lost = self._recover(study, announce=False)
        finished = finished_count(study.get_trials(deepcopy=False))
        self.listener.study_ready(study, self.storage_shown, finished, [t.number for t in lost])
        self._check_hardware(study)
        return study

    def _create_or_load(self, storage: optuna.storages.BaseStorage) -> tuple[optuna.Study, bool]:
        """The study, and whether this tuner created it (the storage lets exactly one)."""
        import optuna

        sampler = self._sampler(None)
        try:
            study = optuna.create_study(
                storage=storage,
                study_name=self.study_name,
                sampler=sampler,
                directions=directions(self.options.objective),
            )
            return study, True
        except optuna.exceptions.DuplicatedStudyError:
            return optuna.load_study(
                study_name=self.study_name, storage=storage, sampler=sampler
            ), False

    def _sampler(self, number: int | None) -> optuna.samplers.BaseSampler:
        """TPE, seeded per trial number when `seed` is set.

        With one seed for the whole run, tuners on several machines started with the same
        `--seed` would all propose the same configurations; a seed per trial number keeps a
        run reproducible and makes every trial's proposal its own. `constant_liar` counts the
        trials running elsewhere as poor, so concurrent tuners spread out.
        """
        import optuna

        seed = self.options.seed
        if seed is not None and number is not None:
            seed = (seed * 1_000_003 + number) % 2**32
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, constant_liar=True)

    def _search(self, study: optuna.Study) -> None:
        deadline = (
            None if self.options.timeout_s is None else time.monotonic() + self.options.timeout_s
        )
        failures: list[str] = []
        while deadline is None or time.monotonic() < deadline:
            self._recover(study)
            trials = study.get_trials(deepcopy=False)
            step = next_step(trials, self.options.trials)
            if step is Step.DONE:
                return
            if step is Step.WAIT:
                self._wait(Wait.SLOTS, trials)
                continue
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

    def _wait(self, kind: Wait, trials: Sequence[optuna.trial.FrozenTrial]) -> None:
        """Tells the listener what this tuner waits for (once per change), then sleeps."""
        import optuna

        running = [t for t in trials if t.state is optuna.trial.TrialState.RUNNING]
        numbers = tuple(t.number for t in running)
        if (kind, numbers) != self._last_wait:
            self._last_wait = (kind, numbers)
            hosts = sorted({str((t.user_attrs.get("worker") or {}).get("host")) for t in running})
            self.listener.waiting(kind, list(numbers), hosts)
        # Jitter: tuners that woke together would otherwise keep colliding.
        poll = min(self.options.liveness.heartbeat_s, WAIT_POLL_S)
        time.sleep(poll * random.uniform(0.5, 1.0))

    def _recover(self, study: optuna.Study, announce: bool = True) -> list[LostTrial]:
        lost = recover_lost(study, self.heartbeats)
        if announce:
            for item in lost:
                self.listener.trial_lost(item)
        return lost

    def _check_hardware(self, study: optuna.Study) -> None:
        groups = hardware_groups(study, self.worker)
        if len(groups) > 1 and not set(groups) <= self._hardware_seen:
            self._hardware_seen |= set(groups)
            self.listener.hardware_mixed(groups)

    def _one_trial(self, study: optuna.Study) -> TrialOutcome | None:
        """Claims a trial and runs it; None when it ran nothing (no free slot, a twin, lost)."""
        import optuna

        trial = study.ask()
        if self.options.seed is not None:
            study.sampler = self._sampler(trial.number)
        try:
            with self.heartbeats.keep(trial._trial_id):
                return self._run_claimed(study, trial) if self._claim(study, trial) else None
        except optuna.exceptions.UpdateFinishedTrialError:
            # Another tuner failed this trial as lost while it ran here.
            self.listener.own_trial_lost(trial.number)
            return None

    def _claim(self, study: optuna.Study, trial: optuna.trial.Trial) -> bool:
        """Whether this trial is one to run: in the budget, and not a copy of a reference.

        A trial beyond the budget goes back to WAITING for a later run with a larger
        `--trials`; a second copy of a reference is failed unrun, with its reason.
        """
        import optuna

        trials = study.get_trials(deepcopy=False)
        first = duplicate_reference(trials, trial.number)
        if first is not None:
            trial.set_user_attr("role", DUPLICATE_ROLE)
            trial.set_user_attr("status", "duplicate")
            trial.set_user_attr(
                "reason", f"a second copy of the reference measured by trial {first}; not run"
            )
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return False
        if in_budget(trials, trial.number, self.options.trials):
            return True
        study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.WAITING)
        return False

    def _run_claimed(self, study: optuna.Study, trial: optuna.trial.Trial) -> TrialOutcome | None:
        import optuna

        label = trial.user_attrs.get("reference")
        knobs = self.references.get(label) if label else None
        knobs = knobs or suggest_knobs(trial, self.space, self.pipeline.baseline)
        trial.set_user_attr("knobs", knobs.to_dict())
        trial.set_user_attr("worker", self.worker)
        if label is None and (twin := self._twin(study, knobs, trial.number)) is not None:
            # The sampler proposed knobs already measured: reuse the figures rather than re-run.
            for key in ("status", "reason", "peak_rss_bytes", "peak_gpu_bytes", "result"):
                if key in twin.user_attrs:
                    trial.set_user_attr(key, twin.user_attrs[key])
            copy_constraints(twin, trial)
            trial.set_user_attr("duplicate_of", twin.number)
            study.tell(trial, twin.values)
            self._ran += 1
            self.listener.trial_finished(trial.number, None, *self._standing(study))
            return None
        self.listener.trial_started(trial.number, label, knobs)
        try:
            outcome = self.runner(
                self._request(knobs), self.budgets, on_progress=self._pruner(study, trial)
            )
        except KeyboardInterrupt:
            trial.set_user_attr("status", "interrupted")
            trial.set_user_attr("reason", "interrupted by Ctrl-C")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise TuneInterrupted(
                f"interrupted: trial {trial.number} was recorded as interrupted; "
                f"{finished_count(study.get_trials(deepcopy=False)) - 1} finished trials are "
                f"kept in {self.storage_shown}."
            ) from None
        record_outcome(trial, outcome, (self.budgets.ram_bytes, self.budgets.gpu_memory_bytes))
        self._tell(study, trial, outcome)
        self._ran += 1
        self.listener.trial_finished(trial.number, outcome, *self._standing(study))
        self._check_hardware(study)
        return outcome

    def _twin(
        self, study: optuna.Study, knobs: Knobs, number: int
    ) -> optuna.trial.FrozenTrial | None:
        """A finished trial with these knobs, waiting first for one running elsewhere.

        Of two tuners proposed the same knobs at once, the one with the lower trial number
        measures them and the other copies its figures, so no configuration runs twice.
        """
        while True:
            twin = same_knobs(study, knobs, number)
            running = running_twin(study, knobs, number)
            if twin is not None or running is None:
                return twin
            self._wait(Wait.TWIN, [running])
            self._recover(study)

    def _final(self, study: optuna.Study) -> list[Measurement]:
        """The finalists' re-measurement: made here under the lock, or read once stored.

        It starts when no trial of the study runs. The first tuner to take the lock measures;
        the others wait for its result, and one of them takes over if its tuner dies.
        """
        import optuna

        while True:
            self._recover(study)
            trials = study.get_trials(deepcopy=False)
            done = finished_count(trials)
            stored = stored_remeasurement(study)  # read after the trials: it is written first
            if stored is not None and stored.trials == done:
                if not _same_worker(stored.worker, self.worker):
                    self.listener.remeasure_adopted(stored.worker)
                return stored.measurements
            running = [t for t in trials if t.state is optuna.trial.TrialState.RUNNING]
            if running:
                locked = any(t.user_attrs.get("role") == LOCK_ROLE for t in running)
                self._wait(Wait.REMEASURE if locked else Wait.SLOTS, running)
                continue
            lock = take_lock(study, self.worker)
            if lock is None:
                self._wait(Wait.REMEASURE, trials)
                continue
            return self._remeasure_locked(study, lock, done)

    def _remeasure_locked(self, study: optuna.Study, lock: int, done: int) -> list[Measurement]:
        try:
            with self.heartbeats.keep(lock):
                measurements = self._remeasure(study)
        except BaseException:
            release_lock(study, lock, "the re-measurement stopped before it ended")
            raise
        number = study._storage.get_trial(lock).number
        store_remeasurement(study, Remeasurement(measurements, done, number, self.worker))
        release_lock(
            study,
            lock,
            f"lock of the final re-measurement ({len(measurements)} configurations, "
            f"{self.options.rounds} rounds) by {self.worker['host']} (pid {self.worker['pid']})",
        )
        return measurements

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
            Finalist(label, reference_trial(study, label), knobs)
            for label, knobs in self.references.items()
        ]
        return finalists + references

    def _result(
        self, study: optuna.Study, measured: list[Measurement], started: float
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
        # Call sites that change training are warned about by the CLI's patch section.
        changes = training_knob_changes(best, baseline)
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
            recommendation=recommend(best, vs_baseline, changes),
            changes_training=changes,
            pareto_trials=[t.number for t in front],
            trial_counts=status_counts(study),
            trials_this_run=self._ran,
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


def _same_worker(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(key) == b.get(key) for key in ("host", "pid", "started"))
