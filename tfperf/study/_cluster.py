"""Several tuners on one study: who is alive, which trials count, and who re-measures.

Run `tfperf tune` with the same `--storage` and `--study` on N machines and the tuners share
one Optuna study. Optuna gives two atomic operations, and everything here rests on them:

- **Creating a trial** takes the next number, and the storage serialises creation (a row
  lock on the study in a database, the order of the log in a journal file). So whoever sees
  trial k also sees every trial numbered below k.
- **Claiming a WAITING trial** (WAITING -> RUNNING) succeeds for exactly one process.

From these:

- **`--trials N` is exact across machines.** The trials that *count* (see `counted`), taken
  in number order, form the study's trial list; the first N of them are the budget. A tuner
  runs a trial only if its number falls in the budget, and gives it back (RUNNING -> WAITING,
  for a later run with a larger N) otherwise. Counting only ever drops trials, never adds one
  below an existing number, so no two tuners can both run the N+1-th trial.
- **Dead tuners are noticed.** A running trial is kept alive by a heartbeat (Optuna's, in a
  database; a time stamp in the trial's system attributes, in a journal). A trial silent for
  the grace period, or whose tuner process is gone from this very machine, is *lost*: another
  tuner marks it (`lost`, status `interrupted`, the reason), fails it, and enqueues its knobs
  once more (`retry_of`). Lost trials do not count, so the study still ends with N trials.
- **One machine re-measures.** When the study has its trials, a tuner creates a *lock* trial
  (user attribute `role`: `remeasure`) and holds it while it re-measures, beating for it. A
  lock is valid only if no trial numbered below it is running; so of two tuners trying at
  once, the later number sees the earlier one running and backs off. The others wait for the
  stored result, and take over if the holder dies (its lock goes stale like any trial).

Nothing here prints; `tfperf.tuner` reports through its listener.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from tfperf.hardware import Machine, hardware_record
from tfperf.results import TrialStatus
from tfperf.study._records import LOCK_ROLE, TrialRecord
from tfperf.study._storage_errors import StorageError

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

#: Seconds between heartbeats of a running trial, and without one before it counts as stale.
#: 20 s costs the storage one small write per running trial every 20 s, and a stale check
#: that waiting tuners repeat as often. 120 s (six missed beats) rides out a database
#: fail-over, an NFS stall or a swapping machine without failing a live trial, yet notices a
#: dead machine within about one trial's length. See docs/distributed.md.
HEARTBEAT_S, GRACE_S = 20, 120
#: Environment variables that override them, for every tuner of a cluster alike.
HEARTBEAT_ENV, GRACE_ENV = "TFPERF_HEARTBEAT_S", "TFPERF_GRACE_S"
# Journal storages: the wall-clock time (time.time()) of the last heartbeat of a trial.
_BEAT_ATTR = "tfperf:heartbeat"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_PID_NAMESPACE = "/proc/self/ns/pid"
# psutil's create_time is rounded; a pid reused by a later process starts much later.
_START_TOLERANCE_S = 1.0


@dataclasses.dataclass(frozen=True)
class Liveness:
    """How often a running trial beats, and how long it may be silent before it is lost.

    Attributes:
        heartbeat_s: Seconds between heartbeats (whole seconds, >= 1: Optuna's unit). Tuners
            that wait for others look at the study this often.
        grace_s: Seconds without a heartbeat after which a running trial is failed as lost
            and retried; must exceed `heartbeat_s`.
    """

    heartbeat_s: int = HEARTBEAT_S
    grace_s: int = GRACE_S

    def __post_init__(self) -> None:
        if self.heartbeat_s < 1:
            raise StorageError(f"`heartbeat_s >= 1` must hold, but got {self.heartbeat_s}")
        if self.grace_s <= self.heartbeat_s:
            raise StorageError(
                f"`grace_s > heartbeat_s` must hold, but got grace_s={self.grace_s}, "
                f"heartbeat_s={self.heartbeat_s}: a live trial would be failed between beats"
            )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Liveness:
        """The defaults, overridden by `TFPERF_HEARTBEAT_S` and `TFPERF_GRACE_S` when set."""
        env = os.environ if environ is None else environ
        return cls(
            heartbeat_s=_env_seconds(env, HEARTBEAT_ENV, HEARTBEAT_S),
            grace_s=_env_seconds(env, GRACE_ENV, GRACE_S),
        )


def _env_seconds(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise StorageError(
            f"{name}={text!r} is not a whole number of seconds; unset it for {default} s."
        ) from None


def worker_record(machine: Machine) -> dict[str, Any]:
    """The `worker` attribute of a trial: which process on which machine ran it.

    `host`, `pid` and `started` (the process's start, Unix time) name the process;
    `pid_scope` says where its pid means something (this boot of this kernel, this pid
    namespace: two containers on one host have different scopes); the hardware fields come
    from `tfperf.hardware.hardware_record`.
    """
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": round(psutil.Process().create_time(), 3),
        "pid_scope": pid_scope(),
        **hardware_record(machine),
    }


def pid_scope() -> str | None:
    """An id shared exactly by processes that see the same pids; None where unknown."""
    try:
        boot = _BOOT_ID.read_text(encoding="ascii").strip()
        namespace = os.readlink(_PID_NAMESPACE)
    except OSError:
        return None
    return f"{boot}/{namespace}"


def tuner_gone(worker: Mapping[str, Any]) -> bool:
    """Whether the tuner described by a `worker` record is known to have stopped.

    Only a tuner in this process's pid scope (or, for records without one, on this host) can
    be judged: its pid no longer runs, runs as a zombie, or belongs to a later process. For
    any other tuner the answer is False, and its heartbeat decides.
    """
    scope = worker.get("pid_scope")
    if scope is not None and scope != pid_scope():
        return False
    if scope is None and worker.get("host") != socket.gethostname():
        return False
    try:
        process = psutil.Process(int(worker.get("pid", -1)))
        if process.status() == psutil.STATUS_ZOMBIE:
            return True
        started = worker.get("started")
        return started is not None and process.create_time() > started + _START_TOLERANCE_S
    except (psutil.NoSuchProcess, ValueError):
        return True
    except psutil.AccessDenied:
        return False


class Heartbeats:
    """Beats for running trials, and finds the trials whose beats stopped.

    Every beat writes the tuner's wall-clock time into a system attribute of the trial
    (`tfperf:heartbeat`); database storages also get Optuna's own heartbeat, whose time
    stamps come from the database server's clock. A running trial is stale when:

    - Optuna finds its last beat older than the grace period (databases), or its time stamp
      is (journals: the machines' clocks must agree to well within the grace period, as NTP
      makes them); or
    - this tuner has watched it for longer than the grace period without seeing a new beat.
      That needs no clock agreement, and also catches a trial whose tuner died before its
      first beat.

    Args:
        clock: Monotonic seconds, for the watching; tests pass a fake.
    """

    def __init__(
        self,
        study: optuna.Study,
        liveness: Liveness,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.study = study
        self.liveness = liveness
        self.clock = clock
        storage: Any = study._storage
        self._native = bool(getattr(storage, "get_heartbeat_interval", lambda: None)())
        # trial id -> (what its last beat looked like, when this tuner first saw it so)
        self._watched: dict[int, tuple[tuple[Any, Any], float]] = {}

    def beat(self, trial_id: int) -> None:
        storage: Any = self.study._storage
        if self._native:
            storage.record_heartbeat(trial_id)
        storage.set_trial_system_attr(trial_id, _BEAT_ATTR, time.time())

    def stale(self) -> set[int]:
        """Ids of running trials silent for longer than the grace period."""
        import optuna

        running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        storage: Any = self.study._storage
        if self._native:
            # BaseHeartbeat's query: RUNNING trials whose last beat is older than the grace.
            found = set(storage._get_stale_trial_ids(self.study._study_id))
        else:
            limit = time.time() - self.liveness.grace_s
            found = {t._trial_id for t in running if t.system_attrs.get(_BEAT_ATTR, limit) < limit}
        return found | self._silent(running)

    def _silent(self, running: Sequence[optuna.trial.FrozenTrial]) -> set[int]:
        now = self.clock()
        watched = {}
        for trial in running:
            # A trial given back and claimed again starts anew: datetime_start changes.
            looks = (trial.system_attrs.get(_BEAT_ATTR), trial.datetime_start)
            before = self._watched.get(trial._trial_id)
            watched[trial._trial_id] = (looks, before[1] if before and before[0] == looks else now)
        self._watched = watched
        return {tid for tid, (_, since) in watched.items() if now - since > self.liveness.grace_s}

    @contextlib.contextmanager
    def keep(self, trial_id: int) -> Iterator[None]:
        """Beats for `trial_id` now, then from a background thread while the block runs."""
        stop = threading.Event()
        self._beat_logged(trial_id)
        thread = threading.Thread(
            target=self._beat_until, args=(trial_id, stop), name="tfperf-heartbeat", daemon=True
        )
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _beat_until(self, trial_id: int, stop: threading.Event) -> None:
        while not stop.wait(self.liveness.heartbeat_s):
            if not self._beat_logged(trial_id):
                return

    def _beat_logged(self, trial_id: int) -> bool:
        """One beat; False once the trial has ended (another tuner failed it as lost)."""
        import optuna

        try:
            self.beat(trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:
            return False
        except Exception as error:  # a storage hiccup: the next beat may get through
            logger.warning("Heartbeat of a running trial failed (%s); retrying.", error)
        return True


@dataclasses.dataclass(frozen=True)
class LostTrial:
    """A trial failed because its tuner died; `retry` is the trial enqueued to re-run it."""

    number: int
    reason: str
    retry: int | None


def recover_lost(study: optuna.Study, heartbeats: Heartbeats) -> list[LostTrial]:
    """Fails every running trial whose tuner is gone or silent, and retries each once.

    Several tuners may find the same trial at once: the storage lets exactly one of them
    fail it, and only that one enqueues the retry. A trial that was itself a retry, or a
    lock, is not retried again.
    """
    import optuna

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    if not running:
        return []
    stale = heartbeats.stale()
    lost = []
    for trial in running:
        reason = _lost_reason(trial, trial._trial_id in stale, heartbeats.liveness.grace_s)
        if reason is not None and _fail_lost(study, trial, reason):
            retry = _retry(study, trial)
            lost.append(LostTrial(trial.number, reason, retry))
    return lost


def _lost_reason(trial: optuna.trial.FrozenTrial, stale: bool, grace_s: int) -> str | None:
    worker = TrialRecord.from_trial(trial).worker or {}
    who = f"pid {worker.get('pid', '?')} on {worker.get('host', 'an unknown host')}"
    if worker and tuner_gone(worker):
        return f"orphaned: the tuner running it ({who}) stopped before it ended"
    if stale:
        return (
            f"stale: no heartbeat from its tuner ({who}) for over {grace_s} s; the machine "
            "died or was cut off, or the tuner was killed"
        )
    return None


def _fail_lost(study: optuna.Study, trial: optuna.trial.FrozenTrial, reason: str) -> bool:
    """Records why and fails the trial; False when another tuner (or its own) ended it first."""
    import optuna

    storage = study._storage
    record = TrialRecord(status=TrialStatus.INTERRUPTED, reason=reason, lost=True)
    try:
        write_record(study, trial._trial_id, record)
        return bool(storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL))
    except optuna.exceptions.UpdateFinishedTrialError:
        return False


def _retry(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> int | None:
    record = TrialRecord.from_trial(trial)
    if record.knobs is None or record.retry_of is not None or not record.searched:
        return None
    retry = TrialRecord(knobs=record.knobs, retry_of=trial.number, reference=record.reference)
    return enqueue(study, dict(trial.params), retry)


def enqueue(study: optuna.Study, params: dict[str, Any], record: TrialRecord) -> int:
    """Like `Study.enqueue_trial`, but returns the new trial's number."""
    import optuna

    template = optuna.trial.create_trial(
        state=optuna.trial.TrialState.WAITING,
        system_attrs={"fixed_params": params},
        user_attrs=record.to_user_attrs(),
    )
    storage = study._storage
    trial_id = storage.create_new_trial(study._study_id, template_trial=template)
    return int(storage.get_trial(trial_id).number)


class Step(str, Enum):
    """What a tuner does next in a study with a trial budget."""

    RUN = "run"  # a budget slot is free: ask for a trial
    WAIT = "wait"  # every slot is taken, some still run elsewhere
    DONE = "done"  # every slot has finished


def counted(trials: Sequence[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The trials that count toward `--trials`, in number order.

    Left out: lost trials (their tuner died; a retry stands in for them), locks, and second
    copies of a reference. Whether a trial counts is known from attributes set when it was
    created, or it changes once, from counting to not, so every tuner agrees on the order.
    """
    kept = []
    seen: set[str] = set()
    for trial in sorted(trials, key=lambda t: t.number):
        record = TrialRecord.from_trial(trial)
        label = record.reference
        if label and record.retry_of is None:
            if label in seen:
                continue
            seen.add(label)
        if not record.searched or record.lost:
            continue
        kept.append(trial)
    return kept


def duplicate_reference(trials: Sequence[optuna.trial.FrozenTrial], number: int) -> int | None:
    """The first copy of the reference that trial `number` repeats, or None.

    Tuners enqueue the references only when they create the study, so copies appear only if
    that tuner died while setting the study up and several others stepped in at once.
    """
    records = {trial.number: TrialRecord.from_trial(trial) for trial in trials}
    record = records.get(number)
    if record is None or not record.reference or record.retry_of is not None:
        return None
    for other in sorted(records):
        if other >= number:
            return None
        if records[other].reference == record.reference and records[other].retry_of is None:
            return other
    return None


def in_budget(trials: Sequence[optuna.trial.FrozenTrial], number: int, budget: int | None) -> bool:
    """Whether trial `number` is among the first `budget` counted trials (None: no budget)."""
    if budget is None:
        return True
    return any(trial.number == number for trial in counted(trials)[:budget])


def next_step(trials: Sequence[optuna.trial.FrozenTrial], budget: int | None) -> Step:
    """RUN while a budget slot is free or waiting, WAIT while slots run, DONE when all ended."""
    import optuna

    if budget is None:
        return Step.RUN
    slots = counted(trials)[:budget]
    waiting = optuna.trial.TrialState.WAITING
    if len(slots) < budget or any(trial.state is waiting for trial in slots):
        return Step.RUN
    if all(trial.state.is_finished() for trial in slots):
        return Step.DONE
    return Step.WAIT


def finished_count(trials: Sequence[optuna.trial.FrozenTrial]) -> int:
    """Counted trials that have finished (complete, pruned or failed)."""
    return sum(trial.state.is_finished() for trial in counted(trials))


def take_lock(study: optuna.Study, worker: Mapping[str, Any]) -> int | None:
    """Creates the re-measurement lock; its trial id, or None when another tuner holds one.

    The lock is valid when no trial numbered below it runs. A lock that is not valid is
    failed at once (it never ran anything) and the caller waits and tries again.
    """
    import optuna

    running = optuna.trial.TrialState.RUNNING
    lock = TrialRecord(role=LOCK_ROLE, status=TrialStatus.LOCK, worker=worker)
    template = optuna.trial.create_trial(state=running, user_attrs=lock.to_user_attrs())
    storage = study._storage
    trial_id = storage.create_new_trial(study._study_id, template_trial=template)
    number = storage.get_trial(trial_id).number
    below = [t for t in study.get_trials(deepcopy=False) if t.number < number]
    if any(trial.state is running for trial in below):
        release_lock(study, trial_id, "another tuner took the re-measurement lock first")
        return None
    return int(trial_id)


def release_lock(study: optuna.Study, trial_id: int, reason: str) -> None:
    """Ends a lock trial. Optuna has no neutral end state, so it is FAIL, with its reason."""
    import optuna

    with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
        write_record(study, trial_id, TrialRecord(reason=reason))
        study._storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)


def write_record(study: optuna.Study, trial_id: int, record: TrialRecord) -> None:
    """Stores the attributes `record` has on trial `trial_id`, whoever holds the trial."""
    for key, value in record.to_user_attrs().items():
        study._storage.set_trial_user_attr(trial_id, key, value)
