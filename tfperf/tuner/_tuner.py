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
and leave the final re-measurement to one of them (`tfperf.study.Ledger`, docs/distributed.md).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
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
    training_changes,
)
from tfperf.study import (
    AUTOTUNE_REF,
    BASELINE,
    DISCOVERY_ATTR,
    Claim,
    Done,
    Ledger,
    Lock,
    TrialRecord,
    Waiting,
    await_references,
    claim_study,
    default_storage_url,
    directions,
    enqueue_references,
    feasible_complete,
    hardware_groups,
    mask_url,
    open_study,
    pareto_front,
    quiet_optuna,
    reference_trial,
    status_counts,
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
        self._ledger: Ledger | None = None
        self._ran = 0  # trials this tuner finished (measured, or copied from a twin)
        self._hardware_seen: set[str] = set()
        self._last_wait: tuple[Wait, tuple[int, ...]] | None = None

    @property
    def storage_shown(self) -> str:
        return mask_url(self.storage_url)

    def run(self) -> TuneResult:
        started = time.monotonic()
        self.open_study()
        try:
            self._search()
            measurements = self._final()
        except KeyboardInterrupt:
            raise TuneInterrupted(
                f"interrupted between trials; {self.ledger.finished()} finished trials are "
                f"kept in {self.storage_shown}."
            ) from None
        return self._result(self.ledger.study, measurements, started)

    def open_study(self) -> optuna.Study:
        """Opens (or creates) the study, checks it is this pipeline's, enqueues the references.

        Only the tuner that creates the study enqueues the references, so tuners started at
        the same moment on many machines queue them once; the others wait for that.
        """
        options = self.options
        study, created = open_study(
            self.storage_url,
            self.study_name,
            self._sampler(None),
            directions(options.objective),
            options.liveness,
        )
        if not created:
            await_references(study, SETUP_WAIT_S, SETUP_POLL_S)
        shown = f"{self.storage_shown} (study {self.study_name!r})"
        claim_study(study, self.pipeline.path.name, options.objective, shown)
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
        budgets = (self.budgets.ram_bytes, self.budgets.gpu_memory_bytes)
        ledger = Ledger(
            study, options.liveness, self.worker, options.trials, options.objective, budgets
        )
        lost = ledger.recover()  # before the listener hears of trials lost from now on
        ledger.on_lost = self.listener.trial_lost
        self._ledger = ledger
        self.listener.study_ready(
            study, self.storage_shown, ledger.finished(), [t.number for t in lost]
        )
        self._check_hardware()
        return study

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            raise RuntimeError("open_study() must run before the tuner touches trials")
        return self._ledger

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
        with quiet_optuna():
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, constant_liar=True)

    def _search(self) -> None:
        timeout = self.options.timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout
        failures: list[str] = []
        while deadline is None or time.monotonic() < deadline:
            step = self.ledger.next()
            if isinstance(step, Done):
                return
            if isinstance(step, Waiting):
                self._wait(step)
            else:
                self._tally(self._one_trial(step), failures)

    def _tally(self, outcome: TrialOutcome | None, failures: list[str]) -> None:
        """Stops the search on a fatal outcome, or on too many failures in a row."""
        if outcome is None or outcome.status in (TrialStatus.COMPLETE, TrialStatus.PRUNED):
            failures.clear()
            return
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

    def _wait(self, waiting: Waiting) -> None:
        """Tells the listener what this tuner waits for (once per change), then sleeps."""
        if (waiting.kind, waiting.trials) != self._last_wait:
            self._last_wait = (waiting.kind, waiting.trials)
            self.listener.waiting(waiting.kind, list(waiting.trials), list(waiting.hosts))
        # Jitter: tuners that woke together would otherwise keep colliding.
        poll = min(self.options.liveness.heartbeat_s, WAIT_POLL_S)
        time.sleep(poll * random.uniform(0.5, 1.0))

    def _check_hardware(self) -> None:
        groups = hardware_groups(self.ledger.study, self.worker)
        if len(groups) > 1 and not set(groups) <= self._hardware_seen:
            self._hardware_seen |= set(groups)
            self.listener.hardware_mixed(groups)

    def _one_trial(self, claim: Claim) -> TrialOutcome | None:
        """Runs a claimed trial; None when it ran nothing (a twin ran its knobs, or lost)."""
        import optuna

        if self.options.seed is not None:
            self.ledger.study.sampler = self._sampler(claim.number)
        try:
            with self.ledger.keep_alive(claim):
                return self._run_claimed(claim)
        except optuna.exceptions.UpdateFinishedTrialError:
            # Another tuner failed this trial as lost while it ran here.
            self.listener.own_trial_lost(claim.number)
            return None

    def _run_claimed(self, claim: Claim) -> TrialOutcome | None:
        label = claim.reference
        knobs = self.references.get(label) if label else None
        knobs = knobs or suggest_knobs(claim.trial, self.space, self.pipeline.baseline)
        self.ledger.start(claim, knobs)
        if label is None:
            while isinstance(twin := self.ledger.twin(claim, knobs), Waiting):
                self._wait(twin)
            if twin is not None:
                # The sampler proposed knobs already measured: reuse the figures, not re-run.
                self.ledger.copy(claim, twin)
                self._ran += 1
                self.listener.trial_finished(claim.number, None, *self._standing())
                return None
        self.listener.trial_started(claim.number, label, knobs)
        try:
            outcome = self.runner(
                self._request(knobs), self.budgets, on_progress=self._pruner(claim)
            )
        except KeyboardInterrupt:
            self.ledger.interrupt(claim, "interrupted by Ctrl-C")
            raise TuneInterrupted(
                f"interrupted: trial {claim.number} was recorded as interrupted; "
                f"{self.ledger.finished() - 1} finished trials are kept in "
                f"{self.storage_shown}."
            ) from None
        self.ledger.finish(claim, outcome)
        self._ran += 1
        self.listener.trial_finished(claim.number, outcome, *self._standing())
        self._check_hardware()
        return outcome

    def _final(self) -> list[Measurement]:
        """The finalists' re-measurement: made here under the lock, or read once stored."""
        while True:
            step = self.ledger.final()
            if isinstance(step, Waiting):
                self._wait(step)
            elif isinstance(step, Lock):
                return self._remeasure_locked(step)
            else:
                if not _same_worker(step.worker, self.worker):
                    self.listener.remeasure_adopted(step.worker)
                return step.measurements

    def _remeasure_locked(self, lock: Lock) -> list[Measurement]:
        with self.ledger.holding(lock):
            measurements = self._remeasure()
        self.ledger.store(lock, measurements, self.options.rounds)
        return measurements

    def _request(self, knobs: Knobs) -> TrialRequest:
        return TrialRequest(
            pipeline=self.pipeline.path,
            knobs=knobs,
            steps=self.options.steps,
            warmup=self.options.warmup,
            argv=self.pipeline.argv,
        )

    def _pruner(self, claim: Claim) -> Callable[[Progress], bool]:
        """A progress callback that stops a trial far below the best feasible one so far."""
        best = self._best()
        single = self.options.objective is Objective.THROUGHPUT
        enough = max(5, self.options.steps // 4)

        def on_progress(progress: Progress) -> bool:
            self.listener.trial_progress(progress)
            rate = progress.examples_per_sec
            if progress.phase is not Phase.END_TO_END or rate is None or not single:
                return True
            claim.trial.report(rate, progress.measured_steps)
            if not self.options.prune or best is None or claim.reference:
                return True
            return progress.measured_steps < enough or rate >= self.options.prune_below * best

        return on_progress

    def _standing(self) -> tuple[float | None, float | None]:
        """The best feasible examples/s so far, and the baseline trial's."""
        trials = feasible_complete(self.ledger.study)
        baseline = [t.values[0] for t in trials if TrialRecord.from_trial(t).reference == BASELINE]
        best = max((t.values[0] for t in trials), default=None)
        return best, baseline[0] if baseline else None

    def _best(self) -> float | None:
        values = [trial.values[0] for trial in feasible_complete(self.ledger.study)]
        return max(values) if values else None

    def _remeasure(self) -> list[Measurement]:
        finalists = self._finalists(self.ledger.study)
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
        seen = set(self.references.values())
        for trial in ranked:
            record = TrialRecord.from_trial(trial)
            if record.knobs is None or record.knobs in seen or record.reference:
                continue
            seen.add(record.knobs)
            finalists.append(Finalist(f"trial {trial.number}", trial.number, record.knobs))
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
        changes = training_changes(best, baseline)
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
    """Tunes a loaded pipeline file; give `options`, or keyword arguments for `TuneOptions`.

    Raises:
        TypeError: both `options` and keyword arguments were given.

    Example:
        >>> result = tfperf.tune(tfperf.load_pipeline("pipeline.py"), trials=20)  # doctest: +SKIP
        >>> result.best.knobs, result.speedup_vs_baseline.describe()  # doctest: +SKIP
    """
    if options is not None and kwargs:
        given = ", ".join(f"{name}=" for name in sorted(kwargs))
        raise TypeError(
            f"tune() takes `options` or keyword arguments for TuneOptions, not both; got "
            f"options and {given}. Put them in the options: "
            "dataclasses.replace(options, ...)."
        )
    return Tuner(pipeline, options if options is not None else TuneOptions(**kwargs)).run()


def _same_worker(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(key) == b.get(key) for key in ("host", "pid", "started"))
