"""The search for the fastest pipeline configuration: an Optuna study, one trial at a time.

Every study starts with two references, the file's `BASELINE` and everything on AUTOTUNE, so the
answer is always measured against both; the baseline's stage analysis then feeds the pipeline
model, whose proposals join the references and whose thread counts set the ranges TPE searches
(`tfperf.tuner._references`). Each trial runs in its own child process
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

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf import frameworks
from tfperf.hardware import Machine, default_ram_budget, detect_machine
from tfperf.knobs import Domain, Knobs
from tfperf.knobs.declare import as_run
from tfperf.measure import Progress
from tfperf.pipeline import PipelineFile, source_digest, user_sources
from tfperf.results import Phase, ProfileResult, TrialOutcome
from tfperf.results.tune import Measurement, Objective, Reference, TuneResult, input_only_choice
from tfperf.study import (
    Pricing,
    SourceChangedError,
    await_references,
    claim_study,
    directions,
    enqueue_references,
    feasible_complete,
    hardware_groups,
    reference_trial,
    stored_result,
)
from tfperf.study.cluster import worker_record
from tfperf.study.ledger import Claim, Done, Ledger, Lock, Wait, Waiting, open_study, quiet_optuna
from tfperf.study.records import StudyRecord, TrialRecord, source_changed, write_study
from tfperf.study.storage import default_storage_url, mask_url
from tfperf.trials import Budgets, TrialRequest, forked_trials, run_trial
from tfperf.tuner._data import refusing_changed_data
from tfperf.tuner._guide import input_only_fixes
from tfperf.tuner._options import (
    Expected,
    TrialRunner,
    TuneInterrupted,
    TuneListener,
    TuneOptions,
    check_some_fit,
    distributed,
    tally,
)
from tfperf.tuner._ram import ram_problem
from tfperf.tuner._references import References
from tfperf.tuner._remeasure import (
    Repeats,
    best_estimate,
    confirm,
    pick_finalists,
    remeasure,
    trim_answer,
)
from tfperf.tuner._result import RunFacts, tune_result
from tfperf.tuner._search import build_space, reference_params, sampler_params, suggest_knobs
from tfperf.tuner._time_limit import TimeLimit, least_runs
from tfperf.tuner._training import ModelTimings

if TYPE_CHECKING:
    import optuna


logger = logging.getLogger(__name__)

#: Seconds a tuner that finds a study being set up by another waits for its references.
SETUP_WAIT_S, SETUP_POLL_S = 10.0, 0.1
#: Most seconds between two looks at the study by a tuner waiting for others: a few seconds
#: of delay at the end of a study, and one cheap query per look.
WAIT_POLL_S = 5
#: Random configurations TPE samples before modelling, when no pipeline model guides it.
UNGUIDED_STARTUP = 8


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
        # A trial whose loader yields other examples than its dataset's never ranks (`_data`).
        self.runner: TrialRunner = refusing_changed_data(runner or run_trial, pipeline.baseline)
        self.machine = machine or detect_machine()
        self.storage_url = options.storage or default_storage_url(pipeline.path)
        self.study_name = options.study_name or pipeline.name
        ram = options.ram_budget_bytes or default_ram_budget(self.machine)
        self.budgets = Budgets(ram, options.gpu_memory_budget_bytes, options.trial_timeout_s)
        fixes = dict(options.fixes)
        if options.input_only:
            fixes = {**input_only_fixes(pipeline.baseline), **fixes}
        self.space: dict[str, Domain] = build_space(
            pipeline.baseline,
            self.machine,
            pipeline.search_space,
            fixes,
            distributed=distributed(pipeline, options),
            framework=pipeline.framework,
        )
        # The knobs tfperf sizes itself: not the file's SEARCH_SPACE, not a --fix.
        guidable = [n for n in self.space if n not in pipeline.search_space and n not in fixes]
        self.references = References(
            pipeline.baseline,
            self.machine,
            self.space,
            guidable,
            frameworks.get(pipeline.framework),
        )
        self.worker = worker_record(self.machine)
        # The files as loaded: every trial runs them anew in its own process, so an edit
        # during the study would split it into two pipelines measured as one.
        self._sources = [path for _, path in user_sources(pipeline)]
        self.source = self._digest()
        self._ledger: Ledger | None = None
        self._ran = 0  # trials this tuner finished (measured, or copied from a twin)
        self._baseline: ProfileResult | None = None  # its memory account prices the budget
        self._hardware_seen: set[str] = set()
        self._last_wait: tuple[Wait, tuple[int, ...]] | None = None
        self._deadline: float | None = None  # when `timeout_s` stops the search
        self._limit = TimeLimit(options.time_limit_s)
        self._pricing = Pricing()  # the study's trials priced for the time left, each once
        self._timings = ModelTimings()  # the training settings its trials timed the model in

    @property
    def storage_shown(self) -> str:
        return mask_url(self.storage_url)

    def run(self) -> TuneResult:
        started = time.monotonic()
        self._limit = TimeLimit(self.options.time_limit_s)
        self._pricing = Pricing()
        self.open_study()
        try:
            # Each trial forks from one process that imported the framework once.
            with forked_trials(frameworks.get(self.pipeline.framework).preload):
                self._search()
                measurements = self._final()
        except KeyboardInterrupt:
            raise TuneInterrupted(
                f"interrupted between trials; {self.ledger.finished()} finished trials are "
                f"kept in {self.storage_shown}."
            ) from None
        facts = RunFacts(
            str(self.pipeline.path),
            self.study_name,
            self.storage_shown,
            self.options,
            self.budgets,
            self._ran,
            time.monotonic() - started,
            framework=self.pipeline.framework,
        )
        # The study's guide, as every tuner on it reads it: another may have refit it since
        # this one last looked, and each would otherwise describe its own copy.
        self.references.load(self.ledger)
        return tune_result(self.ledger.study, measurements, self.references, facts)

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
        claim_study(
            study,
            self.pipeline.path.name,
            options.objective,
            shown,
            self.source,
            step_time_s=options.step_time_s,
        )
        if self.pipeline.discovery is not None:
            root = str(self.pipeline.path.parent.resolve())
            write_study(study, StudyRecord(discovery=self.pipeline.discovery, code_root=root))
        enqueue_references(
            study,
            {
                label: (knobs, reference_params(knobs, self.space))
                for label, knobs in self.references.knobs.items()
            },
        )
        budgets = (self.budgets.ram_bytes, self.budgets.gpu_memory_bytes)
        ledger = Ledger(
            study, options.liveness, self.worker, options.trials, options.objective, budgets
        )
        lost = ledger.recover()  # before the listener hears of trials lost from now on
        ledger.on_lost = self.listener.trial_lost
        self._ledger = ledger
        self.references.resume(ledger)
        self.listener.study_ready(
            study, self.storage_shown, ledger.finished(), [t.number for t in lost]
        )
        self._check_hardware()
        return study

    def _digest(self) -> str:
        return source_digest(self.pipeline.path.parent, self._sources)

    def _check_source(self, when: str) -> None:
        """Stops the study when the pipeline's files changed since this tuner loaded them.

        Raises:
            SourceChangedError: they did; `when` places the change in the message.
        """
        if self._digest() != self.source:
            name, study = self.pipeline.path.name, self.ledger.study
            shown = f"{self.storage_shown} (study {self.study_name!r})"
            raise SourceChangedError(source_changed(name, study, shown, when))

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

        With the pipeline model's guide, the references (baseline, AUTOTUNE and the model's
        estimates) are TPE's start: it refines from the best of them at once instead of first
        sampling `UNGUIDED_STARTUP` configurations at random, which spent trials 5 to 8 blind.
        """
        import optuna

        seed = self.options.seed
        if seed is not None and number is not None:
            seed = (seed * 1_000_003 + number) % 2**32
        guided = self.references.guide is not None
        startup = len(self.references.knobs) if guided else UNGUIDED_STARTUP
        with quiet_optuna():
            return optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=startup, constant_liar=True
            )

    def _search(self) -> None:
        timeout = self.options.timeout_s
        self._deadline = deadline = None if timeout is None else time.monotonic() + timeout
        failures: list[str] = []
        while deadline is None or time.monotonic() < deadline:
            if not self._time_for_a_trial():
                self.listener.time_limit_reached(self._ran, self._expected(), self._limit.left())
                return
            self._check_source("between two trials")
            step = self.ledger.next()
            if isinstance(step, Done):
                return
            if isinstance(step, Waiting):
                self._wait(step)
            else:
                outcome = self._one_trial(step)
                feasible = self._best() is not None
                tally(
                    outcome,
                    failures,
                    self.options.max_consecutive_failures,
                    feasible_found=feasible,
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

        # Another tuner or an earlier run may have made the guide, or refit it (`refit`).
        self.references.load(self.ledger)
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
        knobs = self.references.claimed_knobs(self.ledger, claim)
        guided = self.references.ranges(self.ledger)
        if knobs is None:
            knobs = suggest_knobs(claim.trial, self.space, self.pipeline.baseline, guided)
            # As run: a worker-only value beside no workers is the configuration without it.
            knobs = as_run(knobs, self.pipeline.baseline)
        else:  # a reference: its knobs become params too, so TPE starts from it
            self.ledger.record_params(claim, sampler_params(knobs, self.space, guided))
        self.ledger.start(claim, knobs)
        if label is None:
            if conflicts := self.references.conflicts(knobs):
                # tf.data would refuse it: told to the sampler as pruned, nothing measured.
                self.ledger.reject(claim, knobs, f"invalid configuration: {'; '.join(conflicts)}")
                self._ran += 1
                self.listener.trial_finished(claim.number, None, *self._standing())
                return None
            if over := self._ram_problem(knobs):
                # Its buffers alone would break the RAM budget: pruned unrun, with the figures.
                self.ledger.reject(claim, knobs, f"over the RAM budget before running: {over}")
                self._ran += 1
                self.listener.trial_finished(claim.number, None, *self._standing())
                return None
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
                self.trial_request(knobs, stages=label == Reference.BASELINE),
                self.budgets,
                on_progress=self._pruner(claim),
            )
        except KeyboardInterrupt as interrupt:
            # A SIGTERM arrives as a KeyboardInterrupt that names itself (tfperf.cli).
            self.ledger.interrupt(claim, str(interrupt) or "interrupted by Ctrl-C")
            raise TuneInterrupted(
                f"interrupted: trial {claim.number} was recorded as interrupted; "
                f"{self.ledger.finished() - 1} finished trials are kept in "
                f"{self.storage_shown}."
            ) from None
        if self._digest() != self.source:
            # Which version the trial's process loaded is unknown: its figure is neither's.
            self.ledger.interrupt(claim, f"{self.pipeline.path.name} changed while it ran")
            self._check_source(f"while trial {claim.number} ran, now recorded as interrupted")
        self.ledger.finish(claim, outcome)
        self._timings.add(knobs, outcome.result)
        if label == Reference.BASELINE and outcome.result is not None:
            self.references.from_baseline(self.ledger, outcome.result)
        elif label == Reference.ESTIMATE:
            self.references.refit(self.ledger)
        self._ran += 1
        self.listener.trial_finished(claim.number, outcome, *self._standing())
        if (left := self._expected()) is not None:
            self.listener.expected(left)
        self._check_hardware()
        return outcome

    def _expected(self) -> Expected | None:
        """What is left of this run, as the study's completed trials took (`Expected`,
        `tfperf.study.prices`); None before one has completed."""
        priced = self._pricing.of(self.ledger.study)
        if priced is None:
            return None
        run_s = priced.trial_s
        budget = self.options.trials
        left = None if budget is None else max(0, budget - self.ledger.finished())
        finalists = self.references.finalists_after(self.ledger, self.options.finalists, left)
        runs_after = least_runs(finalists, self.options.rounds)
        rerun_s = self._limit.run_seconds(priced.rerun_s)
        search = [left * run_s] if left is not None else []
        if self._deadline is not None:
            search.append(max(0.0, self._deadline - time.monotonic()))
        if (limit_left := self._limit.left()) is not None:
            waiting = self.references.waiting(self.ledger) * run_s  # they run whatever the limit
            search.append(max(waiting, limit_left - runs_after * rerun_s))
        return Expected(left, min(search), runs_after, run_s, rerun_s)

    def _time_for_a_trial(self) -> bool:
        """Whether another trial and the least re-measurement after it fit the time limit; always
        without one, and while a reference waits to run (the answer is verified against them)."""
        if self._limit.seconds is None or self.references.waiting(self.ledger):
            return True
        left = self._expected()
        if left is None:
            return self._limit.fits(0.0)
        return self._limit.fits(left.run_s + left.runs_after * left.rerun_s)

    def _fits(self, runs: int) -> bool:
        """Whether `runs` more re-measurement runs fit the time limit."""
        priced = self._pricing.of(self.ledger.study)
        return self._limit.fits_runs(runs, priced.rerun_s if priced is not None else None)

    def _rerun(self, request: TrialRequest, budgets: Budgets) -> TrialOutcome:
        """One re-measurement run, its duration kept to price the rest."""
        outcome = self.runner(request, budgets)
        self._limit.verifying_s.append(outcome.wall_s)
        return outcome

    def _final(self) -> list[Measurement]:
        """The finalists' re-measurement: made here under the lock, or read once stored.

        Raises:
            OverBudget: trials ran only over a memory budget; nothing fits to re-measure.
        """
        check_some_fit(self.ledger.study, self.budgets)
        self._check_source("before the final re-measurement")
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
            self._check_source("during the final re-measurement; none of it is stored")
        self.ledger.store(lock, measurements, self.options.rounds)
        return measurements

    def _ram_problem(self, knobs: Knobs) -> str | None:
        """Why `knobs` would not fit the RAM budget, by the baseline's memory account."""
        if self._baseline is None:
            number = reference_trial(self.ledger.study, Reference.BASELINE.value)
            if number is not None:
                self._baseline = stored_result(self.ledger.study.trials[number])
        return ram_problem(self._baseline, self.pipeline.baseline, knobs, self.budgets.ram_bytes)

    def trial_request(
        self, knobs: Knobs, stages: bool = False, path: Path | None = None
    ) -> TrialRequest:
        """A trial of `knobs` on the pipeline (or its copy at `path`), as the options say;
        without `stages`, it times the model alone only under a new setting (`ModelTimings`)."""
        return TrialRequest(
            pipeline=path or self.pipeline.path,
            knobs=knobs,
            steps=self.options.steps,
            min_seconds=self.options.min_seconds,
            warmup=self.options.warmup,
            argv=self.pipeline.argv,
            # Through tf.data service the stages run on the workers, out of the trial's sight.
            analyse_stages=stages and knobs.service is None,
            epoch_steps=self.options.epoch_steps,
            layout=self.options.layout,
            strategy=self.options.strategy,
            training=self._training_settings() if stages else (),
            step_time_s=self.options.step_time_s,
            compute_known=not stages and self._timings.known(knobs),
        )

    def verifying_request(self, knobs: Knobs, path: Path | None = None) -> TrialRequest:
        """A re-measurement run of `knobs`: its end-to-end phase alone, the figure ranked."""
        return dataclasses.replace(self.trial_request(knobs, path=path), end_to_end_only=True)

    def _training_settings(self) -> tuple[Mapping[str, Any], ...]:
        """The training settings the baseline trial probes; none for an emulated step, which
        has no model to run under them."""
        if self.options.step_time_s is not None:
            return ()
        return tuple(self.references.training_settings())

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
        baseline = [
            t.values[0] for t in trials if TrialRecord.from_trial(t).reference == Reference.BASELINE
        ]
        best = max((t.values[0] for t in trials), default=None)
        return best, baseline[0] if baseline else None

    def _best(self) -> float | None:
        values = [trial.values[0] for trial in feasible_complete(self.ledger.study)]
        return max(values) if values else None

    def _remeasure(self) -> list[Measurement]:
        references = self.references.finalists(self.ledger)
        rounds = self.options.rounds
        searched = self.options.finalists
        while searched > 1 and not self._fits(least_runs(searched + len(references), rounds)):
            searched -= 1  # under the time limit: the answer verified, on fewer finalists
        finalists = pick_finalists(self.ledger.study, self.options.objective, searched, references)
        self.listener.remeasure_started(finalists, rounds)

        def more(runs: int) -> bool:  # the next round, and the confirmation's least after it
            return self._fits(runs + least_runs(0, rounds))

        margin, repeats = self.options.training_change_margin, self._repeats(more)
        measured = remeasure(finalists, repeats, margin=margin)
        return self._confirm(trim_answer(measured, repeats, margin, self.listener.trim_started))

    def _confirm(self, measurements: list[Measurement]) -> list[Measurement]:
        """The chosen configuration (and the input-only best it was weighed against) measured
        again, so its reported figure is not the luckiest of several medians; the model's best
        estimate beside them, so the search's gain over it is measured side by side."""
        baseline = next((m for m in measurements if m.label == Reference.BASELINE), None)
        if baseline is None:
            return measurements  # the result says why nothing can be compared
        margin = self.options.training_change_margin
        chosen = input_only_choice(measurements, baseline, margin).weighed
        estimate = best_estimate(measurements)
        if estimate is not None and all(m is not estimate for m in chosen):
            chosen.append(estimate)
        self.listener.confirm_started([m.label for m in chosen], self.options.rounds)
        repeats = self._repeats(self._fits)
        return confirm(measurements, chosen, repeats, baseline=baseline.knobs, margin=margin)

    def _repeats(self, more: Callable[[int], bool]) -> Repeats:
        """Re-measurement windows run as verifying trials, each told to the listener."""
        return Repeats(
            self.options.rounds,
            self.verifying_request,
            self.budgets,
            self._rerun,
            self.listener.remeasured,
            more,
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
