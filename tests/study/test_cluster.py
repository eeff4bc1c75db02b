"""Tuners sharing a study: counting, budgets, liveness, lost trials and the lock, on real
Optuna storages (SQLite and journal files); the multi-process tests are in test_distributed."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import time

import optuna
import psutil
import pytest

from tfperf.hardware import HARDWARE_FIELDS, Machine
from tfperf.knobs import Knobs
from tfperf.study._cluster import (
    Heartbeats,
    Step,
    counted,
    duplicate_reference,
    finished_count,
    in_budget,
    next_step,
    pid_scope,
    recover_lost,
    release_lock,
    take_lock,
    tuner_gone,
)
from tfperf.study._records import LOCK_ROLE
from tfperf.study.cluster import Liveness, worker_record
from tfperf.study.storage import StorageError, open_storage

State = optuna.trial.TrialState
START = datetime.datetime(2026, 1, 1)


def frozen(number: int, state: str = "COMPLETE", **attrs) -> optuna.trial.FrozenTrial:
    finished = State[state].is_finished()
    return optuna.trial.FrozenTrial(
        number=number,
        state=State[state],
        value=1.0 if state == "COMPLETE" else None,
        datetime_start=START,
        datetime_complete=START if finished else None,
        params={},
        distributions={},
        user_attrs=attrs,
        system_attrs={},
        intermediate_values={},
        trial_id=number,
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "journal"])
def study(request, tmp_path) -> optuna.Study:
    """A study on a real storage with heartbeats on (SQLite: Optuna's; journal: tfperf's)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 's.db'}"
    else:
        url = f"journal://{tmp_path.as_posix()}/s.log"
    storage = open_storage(url, heartbeat_interval=1, grace_period=2)
    return optuna.create_study(storage=storage, study_name="s")


def running_trial(study: optuna.Study, **attrs) -> optuna.trial.Trial:
    trial = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    return trial


def dead_worker() -> dict:
    """A worker record of a tuner that ran on this machine and has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    return {
        "host": socket.gethostname(),
        "pid": child.pid,
        "started": started,
        "pid_scope": pid_scope(),
    }


# --- counting and the budget ------------------------------------------------------------------


def test_counted_leaves_out_lost_trials_locks_and_second_copies_of_references():
    trials = [
        frozen(0, reference="baseline"),
        frozen(1, "FAIL", lost=True, knobs={}),
        frozen(2, "WAITING", reference="baseline"),  # a copy queued by a second tuner
        frozen(3, "FAIL", role=LOCK_ROLE),
        frozen(4, "WAITING", reference="autotune"),
        frozen(5, "RUNNING", retry_of=1),
        frozen(6, "WAITING", reference="baseline", retry_of=0),  # a retry is not a copy
    ]
    assert [t.number for t in counted(list(reversed(trials)))] == [0, 4, 5, 6]
    assert finished_count(trials) == 1


def test_a_second_copy_of_a_reference_names_the_first():
    trials = [frozen(0, reference="baseline"), frozen(1), frozen(2, reference="baseline")]
    assert duplicate_reference(trials, 2) == 0
    assert duplicate_reference(trials, 0) is None
    assert duplicate_reference(trials, 1) is None
    retry = [*trials, frozen(3, reference="baseline", retry_of=0)]
    assert duplicate_reference(retry, 3) is None


@pytest.mark.parametrize(
    ("states", "budget", "step"),
    [
        (["COMPLETE", "COMPLETE"], None, Step.RUN),
        (["COMPLETE", "RUNNING"], 3, Step.RUN),  # a slot is free
        (["COMPLETE", "WAITING", "RUNNING"], 3, Step.RUN),  # a slot waits to be claimed
        (["COMPLETE", "RUNNING", "RUNNING"], 3, Step.WAIT),
        (["COMPLETE", "PRUNED", "FAIL"], 3, Step.DONE),
        (["COMPLETE", "FAIL", "PRUNED", "WAITING"], 3, Step.DONE),  # given back, beyond budget
    ],
)
def test_next_step(states, budget, step):
    trials = [frozen(number, state) for number, state in enumerate(states)]
    assert next_step(trials, budget) is step


def test_a_lost_trial_frees_its_slot_for_the_first_trial_beyond_the_budget():
    trials = [frozen(0), frozen(1, "RUNNING"), frozen(2, "WAITING")]
    assert not in_budget(trials, 2, budget=2)
    assert next_step(trials, 2) is Step.WAIT
    trials[1] = frozen(1, "FAIL", lost=True)
    assert in_budget(trials, 2, budget=2)
    assert next_step(trials, 2) is Step.RUN


# --- settings and identity --------------------------------------------------------------------


def test_liveness_defaults_and_environment():
    assert Liveness.from_environment({}) == Liveness(20, 120)
    env = {"TFPERF_HEARTBEAT_S": " 5 ", "TFPERF_GRACE_S": "30"}
    assert Liveness.from_environment(env) == Liveness(5, 30)


def test_liveness_names_a_bad_environment_value():
    with pytest.raises(StorageError) as caught:
        Liveness.from_environment({"TFPERF_GRACE_S": "2m"})
    assert (
        str(caught.value)
        == "TFPERF_GRACE_S='2m' is not a whole number of seconds; unset it for 120 s."
    )


def test_grace_must_exceed_the_heartbeat():
    with pytest.raises(
        StorageError, match=r"`grace_s > heartbeat_s` must hold, but got grace_s=10"
    ):
        Liveness(heartbeat_s=10, grace_s=10)


def test_worker_record_names_this_process_and_its_hardware():
    machine = Machine(3, 2**33, 2**32, ("NVIDIA L4",), False)
    record = worker_record(machine)
    assert record["host"] == socket.gethostname()
    assert record["pid"] == os.getpid()
    assert record["started"] == pytest.approx(psutil.Process().create_time(), abs=0.01)
    assert record["cpu_count"] == 3 and record["gpu_model"] == "NVIDIA L4"
    assert set(HARDWARE_FIELDS) <= set(record)


def test_a_running_tuner_is_not_gone():
    assert not tuner_gone(worker_record(Machine(1, 1, 1, (), False)))


def test_an_exited_tuner_on_this_machine_is_gone():
    assert tuner_gone(dead_worker())


def test_a_pid_reused_by_a_later_process_is_gone():
    me = psutil.Process()
    worker = {"host": socket.gethostname(), "pid": me.pid, "pid_scope": pid_scope()}
    assert tuner_gone({**worker, "started": me.create_time() - 3600})


def test_a_zombie_tuner_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not reaped
            time.sleep(0.01)
        worker = {"host": socket.gethostname(), "pid": child.pid, "pid_scope": pid_scope()}
        assert tuner_gone(worker)
    finally:
        child.wait()


def test_tuners_elsewhere_are_left_to_their_heartbeat():
    worker = dead_worker()
    assert not tuner_gone({**worker, "pid_scope": "another-boot/pid:[1]"})
    assert not tuner_gone({**worker, "pid_scope": None, "host": "another-host"})
    assert tuner_gone({**worker, "pid_scope": None})  # an older record: same host is enough


# --- heartbeats and lost trials ---------------------------------------------------------------


def test_a_trial_watched_without_a_new_beat_for_the_grace_period_is_stale(study):
    clock = FakeClock()
    heartbeats = Heartbeats(study, Liveness(1, 2), clock=clock)
    silent = running_trial(study)  # its tuner died before its first beat
    beating = running_trial(study)
    heartbeats.beat(beating._trial_id)
    assert heartbeats.stale() == set()
    clock.now = 2.5
    heartbeats.beat(beating._trial_id)
    assert heartbeats.stale() == {silent._trial_id}


def test_a_journal_trial_whose_last_beat_is_old_is_stale_at_once(tmp_path):
    storage = open_storage(f"journal://{tmp_path.as_posix()}/s.log")
    study = optuna.create_study(storage=storage)
    trial = running_trial(study)
    study._storage.set_trial_system_attr(trial._trial_id, "tfperf:heartbeat", 1.0)
    assert Heartbeats(study, Liveness(1, 2)).stale() == {trial._trial_id}


def test_keep_beats_before_the_block_starts(study):
    trial = running_trial(study)
    with Heartbeats(study, Liveness(1, 2)).keep(trial._trial_id):
        beat = study._storage.get_trial(trial._trial_id).system_attrs["tfperf:heartbeat"]
        assert beat > 0


def test_a_lost_trial_is_failed_with_its_reason_and_retried_once(study):
    knobs = Knobs(batch_size=8).to_dict()
    trial = running_trial(study, knobs=knobs, reference="baseline", worker=dead_worker())
    trial.suggest_int("x", 0, 9)
    heartbeats = Heartbeats(study, Liveness(1, 2))

    (lost,) = recover_lost(study, heartbeats)
    dead = study._storage.get_trial(trial._trial_id)
    assert dead.state is State.FAIL
    assert dead.user_attrs["lost"] is True and dead.user_attrs["status"] == "interrupted"
    assert lost.reason == dead.user_attrs["reason"]
    assert lost.reason.startswith("orphaned: the tuner running it (pid ")
    retry = study.get_trials(deepcopy=False)[lost.retry]
    assert retry.state is State.WAITING
    assert retry.user_attrs == {"knobs": knobs, "retry_of": trial.number, "reference": "baseline"}
    assert retry.system_attrs["fixed_params"] == {"x": dead.params["x"]}
    assert recover_lost(study, heartbeats) == []

    again = study.ask()  # the retry is claimed, and its tuner dies too
    assert again.number == lost.retry
    again.set_user_attr("worker", dead_worker())
    (second,) = recover_lost(study, heartbeats)
    assert second.retry is None  # a configuration that lost two tuners is not tried again


def test_only_one_of_two_tuners_fails_a_lost_trial(study):
    from tfperf.study._cluster import _fail_lost

    trial = running_trial(study)
    snapshot = study._storage.get_trial(trial._trial_id)
    assert _fail_lost(study, snapshot, "stale: first")
    assert not _fail_lost(study, snapshot, "stale: second")
    assert study._storage.get_trial(trial._trial_id).user_attrs["reason"] == "stale: first"


def test_a_trial_of_a_live_tuner_is_left_alone(study):
    running_trial(study, worker=worker_record(Machine(1, 1, 1, (), False)))
    assert recover_lost(study, Heartbeats(study, Liveness(1, 2))) == []


# --- the re-measurement lock ------------------------------------------------------------------


def test_one_lock_at_a_time(study):
    worker = {"host": "h", "pid": 1}
    first = take_lock(study, worker)
    assert first is not None
    assert take_lock(study, worker) is None
    locks = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("role") == LOCK_ROLE]
    assert [t.state for t in locks] == [State.RUNNING, State.FAIL]
    assert locks[1].user_attrs["reason"] == "another tuner took the re-measurement lock first"
    release_lock(study, first, "done")
    assert take_lock(study, worker) is not None


def test_no_lock_while_a_trial_runs(study):
    running_trial(study)
    assert take_lock(study, {"host": "h", "pid": 1}) is None
