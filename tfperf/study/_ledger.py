"""One tuner's account with a study: what to run next, how a trial ended, the final lock.

A `Ledger` makes every write a tuner makes to a study's trials, so the rules of
`tfperf.study._cluster` (an exact budget across tuners, lost trials retried once, one
re-measurement under a lock) live here and the tuner only asks and answers:

    while (step := ledger.next()) is not DONE:
        if isinstance(step, Waiting):
            sleep()
        else:
            ledger.finish(step, run(step))

Nothing here prints or sleeps; the tuner does both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, Literal

from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement, Objective
from tfperf.study import _cluster as cluster
from tfperf.study._records import DUPLICATE_ROLE, LOCK_ROLE, TrialRecord
from tfperf.study._storage import open_storage
from tfperf.study._study import (
    Remeasurement,
    copy_constraints,
    record_outcome,
    running_twin,
    same_knobs,
    store_remeasurement,
    stored_remeasurement,
    write_attrs,
)
from tfperf.study._study_record import StudyRecord, read_study, write_study

if TYPE_CHECKING:
    import optuna


class Wait(str, Enum):
    """What a tuner waits for when it has nothing to run."""

    SLOTS = "slots"  # every trial of the budget is taken; some still run on other tuners
    TWIN = "twin"  # another tuner is measuring the same knobs right now
    REMEASURE = "remeasure"  # another tuner re-measures the finalists


@dataclasses.dataclass(frozen=True)
class Claim:
    """A trial this tuner holds and should run; `reference` labels one of the references."""

    trial: optuna.trial.Trial
    reference: str | None

    @property
    def number(self) -> int:
        return self.trial.number


@dataclasses.dataclass(frozen=True)
class Waiting:
    """Nothing to do until `trials`, running on `hosts`, move on."""

    kind: Wait
    trials: tuple[int, ...]
    hosts: tuple[str, ...]


class Done(Enum):
    """Every trial of the budget has finished."""

    DONE = "done"


DONE: Final = Done.DONE


@dataclasses.dataclass(frozen=True)
class Lock:
    """The final re-measurement's lock, held by this tuner; `finished` trials are covered."""

    trial_id: int
    number: int
    finished: int


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Silences Optuna's warnings about options tfperf uses on purpose, for the block only.

    tfperf drives trials with ask/tell and beats for them itself, and uses Optuna's
    experimental heartbeat and constant-liar options knowingly: the warnings would only
    confuse users.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        warnings.filterwarnings("ignore", message=r"Argument ``(heartbeat_interval|grace_period)``")
        warnings.filterwarnings("ignore", message=r"Argument ``constant_liar`` is an experimental")
        yield


def open_study(
    url: str,
    name: str,
    sampler: optuna.samplers.BaseSampler,
    directions: Sequence[Literal["maximize", "minimize"]],
    liveness: cluster.Liveness,
) -> tuple[optuna.Study, bool]:
    """The study, and whether this call created it (the storage lets exactly one caller).

    A SQLite file serves one machine, where a dead tuner is known by its pid
    (`tfperf.study._cluster.tuner_gone`), so it goes without Optuna's heartbeat table;
    tfperf's own beat (a time stamp in the trial) stays for tuners in other containers.
    """
    import optuna

    beats: dict[str, int | None] = (
        {} if url.startswith("sqlite") else dict(_optuna_heartbeat(liveness))
    )
    with quiet_optuna():
        storage = open_storage(
            url,
            heartbeat_interval=beats.get("heartbeat_interval"),
            grace_period=beats.get("grace_period"),
        )
        try:
            created = optuna.create_study(
                storage=storage, study_name=name, sampler=sampler, directions=list(directions)
            )
            return created, True
        except optuna.exceptions.DuplicatedStudyError:
            return optuna.load_study(study_name=name, storage=storage, sampler=sampler), False


def _optuna_heartbeat(liveness: cluster.Liveness) -> dict[str, int]:
    return {"heartbeat_interval": liveness.heartbeat_s, "grace_period": liveness.grace_s}


class Ledger:
    """A tuner's reads and writes of a shared study's trials.

    Args:
        study: The open study.
        liveness: How often running trials beat, and when a silent one is lost.
        worker: This tuner's `worker_record`, stored on every trial it runs.
        budget: `--trials`, shared by every tuner of the study; None for no limit.
        objective: Which values a finished trial reports.
        budgets: The RAM and GPU-memory budgets in bytes (None: none), for the constraints.
        on_lost: Called with each trial this tuner fails because its tuner died.
        clock: Monotonic seconds for the heartbeat watch; tests pass a fake.
    """

    def __init__(
        self,
        study: optuna.Study,
        liveness: cluster.Liveness,
        worker: Mapping[str, Any],
        budget: int | None,
        objective: Objective,
        budgets: tuple[int | None, int | None] = (None, None),
        on_lost: Callable[[cluster.LostTrial], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.study = study
        self.worker = dict(worker)
        self.budget = budget
        self.objective = objective
        self.budgets = budgets
        self.on_lost = on_lost
        self.heartbeats = cluster.Heartbeats(study, liveness, clock)

    def trials(self) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def finished(self) -> int:
        """Trials that count toward the budget and have finished."""
        return cluster.finished_count(self.trials())

    def recover(self) -> list[cluster.LostTrial]:
        """Fails and retries the trials of dead tuners; tells `on_lost` of each."""
        lost = cluster.recover_lost(self.study, self.heartbeats)
        for item in lost:
            if self.on_lost is not None:
                self.on_lost(item)
        return lost

    # --- the search ---------------------------------------------------------------------------

    def next(self) -> Claim | Waiting | Done:
        """The next trial of the budget to run here, or what to wait for, or DONE."""
        while True:
            self.recover()
            trials = self.trials()
            step = cluster.next_step(trials, self.budget)
            if step is cluster.Step.DONE:
                return DONE
            if step is cluster.Step.WAIT:
                return _waiting(Wait.SLOTS, trials)
            with quiet_optuna():
                trial = self.study.ask()
            if self._keep(trial):
                # Who runs it, at once: a tuner killed before `start` leaves a trial that
                # names its worker, which `recover` then finds orphaned instead of waiting
                # out the heartbeat's grace for a stale one.
                write_attrs(trial, TrialRecord(worker=self.worker))
                record = TrialRecord.from_user_attrs(trial.user_attrs)
                return Claim(trial, record.reference)

    def _keep(self, trial: optuna.trial.Trial) -> bool:
        """Whether a trial just asked for is one to run: in the budget, not a copy.

        A trial beyond the budget goes back to WAITING for a later run with a larger
        `--trials`; a second copy of a reference is failed unrun, with its reason.
        """
        import optuna

        state = optuna.trial.TrialState
        trials = self.trials()
        first = cluster.duplicate_reference(trials, trial.number)
        if first is not None:
            reason = f"a second copy of the reference measured by trial {first}; not run"
            record = TrialRecord(role=DUPLICATE_ROLE, status=TrialStatus.DUPLICATE, reason=reason)
            write_attrs(trial, record)
            self.study.tell(trial, state=state.FAIL)
            return False
        if cluster.in_budget(trials, trial.number, self.budget):
            return True
        self.study._storage.set_trial_state_values(trial._trial_id, state.WAITING)
        return False

    def enqueue_reference(self, label: str, knobs: Knobs, guide: Mapping[str, Any]) -> bool:
        """Queues one more reference trial (and stores the guide it came from), once per study.

        Returns:
            False when the study already holds a trial with this reference label.
        """
        if any(TrialRecord.from_trial(t).reference == label for t in self.trials()):
            return False
        write_study(self.study, StudyRecord(guide=guide))
        record = TrialRecord(knobs=knobs, reference=label)
        self.study.enqueue_trial({}, user_attrs=record.to_user_attrs())
        return True

    def store_guide(self, guide: Mapping[str, Any]) -> None:
        """Replaces the stored guide (the model refit after the estimate ran)."""
        write_study(self.study, StudyRecord(guide=guide))

    def guide(self) -> dict[str, Any] | None:
        """The guide stored with the estimate, or None before the baseline was analysed."""
        stored = read_study(self.study).guide
        return dict(stored) if stored is not None else None

    def reject(self, claim: Claim, knobs: Knobs, reason: str) -> None:
        """Ends a claimed trial unrun: its knobs are a configuration tf.data refuses.

        Recorded as pruned with the reason, so the sampler learns to avoid the region and no
        measurement is spent on it.
        """
        import optuna

        record = TrialRecord(
            knobs=knobs, status=TrialStatus.PRUNED, reason=reason, worker=self.worker
        )
        write_attrs(claim.trial, record)
        self.study.tell(claim.trial, state=optuna.trial.TrialState.PRUNED)

    @contextlib.contextmanager
    def keep_alive(self, claim: Claim) -> Iterator[None]:
        """Beats for the claimed trial while the block runs.

        Raises:
            optuna.exceptions.UpdateFinishedTrialError: another tuner failed the trial as
                lost (no beat reached the storage for the grace period) while it ran here.
        """
        with self.heartbeats.keep(claim.trial._trial_id):
            yield

    def record_params(
        self, claim: Claim, params: Mapping[str, tuple[Any, optuna.distributions.BaseDistribution]]
    ) -> None:
        """Records a reference trial's knobs as its params (`sampler_params`), which Optuna
        records only for values a trial suggests, so the sampler learns from the reference."""
        trial = claim.trial
        for name, (value, distribution) in params.items():
            internal = distribution.to_internal_repr(value)
            trial.storage.set_trial_param(trial._trial_id, name, internal, distribution)

    def start(self, claim: Claim, knobs: Knobs) -> None:
        """Records the knobs the claimed trial measures, and who measures them."""
        write_attrs(claim.trial, TrialRecord(knobs=knobs, worker=self.worker))

    def twin(self, claim: Claim, knobs: Knobs) -> optuna.trial.FrozenTrial | Waiting | None:
        """A finished trial that measured `knobs`, or a wait for one measuring them now.

        Of two tuners proposed the same knobs at once, the one with the lower trial number
        measures them and the other copies its figures, so no configuration runs twice.
        """
        self.recover()
        twin = same_knobs(self.study, knobs, claim.number)
        running = running_twin(self.study, knobs, claim.number)
        if twin is not None or running is None:
            return twin
        return _waiting(Wait.TWIN, [running])

    def copy(self, claim: Claim, twin: optuna.trial.FrozenTrial) -> None:
        """Ends the claimed trial with the figures of `twin`, which measured the same knobs."""
        figures = TrialRecord.from_trial(twin).figures()
        write_attrs(claim.trial, dataclasses.replace(figures, duplicate_of=twin.number))
        copy_constraints(twin, claim.trial)
        self.study.tell(claim.trial, twin.values)

    def finish(self, claim: Claim, outcome: TrialOutcome) -> None:
        """Stores how the claimed trial ended and tells the sampler."""
        import optuna

        record_outcome(claim.trial, outcome, self.budgets)
        state = optuna.trial.TrialState
        if outcome.status is TrialStatus.COMPLETE and outcome.result is not None:
            values = self._values(outcome.result.end_to_end.examples_per_sec, outcome)
            self.study.tell(claim.trial, values)
        elif outcome.status in (TrialStatus.RAM_BUDGET, TrialStatus.GPU_BUDGET):
            # Complete but infeasible: the constraints (figure - budget > 0) teach the sampler.
            self.study.tell(claim.trial, self._values(0.0, outcome))
        elif outcome.status is TrialStatus.PRUNED:
            self.study.tell(claim.trial, state=state.PRUNED)
        else:
            self.study.tell(claim.trial, state=state.FAIL)

    def _values(self, throughput: float, outcome: TrialOutcome) -> list[float]:
        if self.objective is Objective.THROUGHPUT_RAM:
            return [throughput, float(outcome.peak_rss_bytes)]
        return [throughput]

    def interrupt(self, claim: Claim, reason: str) -> None:
        """Fails the claimed trial as interrupted (Ctrl-C)."""
        import optuna

        write_attrs(claim.trial, TrialRecord(status=TrialStatus.INTERRUPTED, reason=reason))
        self.study.tell(claim.trial, state=optuna.trial.TrialState.FAIL)

    # --- the final re-measurement -------------------------------------------------------------

    def final(self) -> Remeasurement | Waiting | Lock:
        """The stored re-measurement of every finished trial, what to wait for, or the lock.

        It starts when no trial of the study runs; the first tuner to take the lock
        measures, the others wait for its result, and one of them takes over if it dies.
        """
        import optuna

        self.recover()
        trials = self.trials()
        done = cluster.finished_count(trials)
        stored = stored_remeasurement(self.study)  # read after the trials: it is written first
        if stored is not None and stored.trials == done:
            return stored
        running = [t for t in trials if t.state is optuna.trial.TrialState.RUNNING]
        if running:
            locked = any(TrialRecord.from_trial(t).role is LOCK_ROLE for t in running)
            return _waiting(Wait.REMEASURE if locked else Wait.SLOTS, running)
        lock = cluster.take_lock(self.study, self.worker)
        if lock is None:
            return _waiting(Wait.REMEASURE, trials)
        return Lock(lock, self.study._storage.get_trial(lock).number, done)

    @contextlib.contextmanager
    def holding(self, lock: Lock) -> Iterator[None]:
        """Beats for the lock while the block re-measures; releases it if the block fails."""
        try:
            with self.heartbeats.keep(lock.trial_id):
                yield
        except BaseException:
            cluster.release_lock(
                self.study, lock.trial_id, "the re-measurement stopped before it ended"
            )
            raise

    def store(self, lock: Lock, measurements: list[Measurement], rounds: int) -> None:
        """Saves the re-measurement for every tuner of the study, then releases the lock."""
        remeasurement = Remeasurement(measurements, lock.finished, lock.number, self.worker)
        store_remeasurement(self.study, remeasurement)
        cluster.release_lock(
            self.study,
            lock.trial_id,
            f"lock of the final re-measurement ({len(measurements)} configurations, "
            f"{rounds} rounds) by {self.worker['host']} (pid {self.worker['pid']})",
        )


def _waiting(kind: Wait, trials: Sequence[optuna.trial.FrozenTrial]) -> Waiting:
    """Waiting on the running ones of `trials`."""
    import optuna

    running = [t for t in trials if t.state is optuna.trial.TrialState.RUNNING]
    hosts = {str(TrialRecord.from_trial(t).host) for t in running}
    return Waiting(kind, tuple(t.number for t in running), tuple(sorted(hosts)))
