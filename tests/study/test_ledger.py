"""Typed trial records and a tuner's ledger, on real Optuna SQLite storages."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings

import optuna
import pytest

from tests.fakes.trials import fake_result, outcome
from tfperf.hardware import Machine
from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement, Objective
from tfperf.study import enqueue_references
from tfperf.study._records import TrialRole
from tfperf.study._study import Remeasurement
from tfperf.study.cluster import Liveness, worker_record
from tfperf.study.ledger import DONE, Claim, Ledger, Lock, Wait, Waiting, open_study, quiet_optuna
from tfperf.study.records import TrialRecord

State = optuna.trial.TrialState
WORKER = worker_record(Machine(1, 2**30, 2**30, (), False))  # this process: a live tuner
FAST, SLOW = Knobs(batch_size=64), Knobs(batch_size=8)


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 's.db'}"


def ledger(url: str, budget: int | None = 3) -> Ledger:
    study, _ = open_study(url, "s", optuna.samplers.RandomSampler(0), ["maximize"], Liveness(1, 2))
    return Ledger(study, Liveness(1, 2), WORKER, budget, Objective.THROUGHPUT, (None, None))


def claim(book: Ledger) -> Claim:
    step = book.next()
    assert isinstance(step, Claim), step
    return step


def measured(knobs: Knobs) -> TrialOutcome:
    return TrialOutcome(TrialStatus.COMPLETE, fake_result(knobs, 0.01), "", 100, None, 1.0)


def run(book: Ledger, claimed: Claim, knobs: Knobs = SLOW) -> None:
    book.start(claimed, knobs)
    book.finish(claimed, measured(knobs))


# --- TrialRecord ------------------------------------------------------------------------------


def test_a_full_record_round_trips_through_user_attrs():
    record = TrialRecord(
        knobs=FAST,
        status=TrialStatus.COMPLETE,
        reason="",
        peak_rss_bytes=100,
        peak_gpu_bytes=7,
        wall_s=1.5,
        result="{}",
        reference="baseline",
        duplicate_of=2,
        worker={"host": "a", "pid": 1},
        lost=True,
        retry_of=3,
        role=TrialRole.LOCK,
    )
    attrs = record.to_user_attrs()
    assert TrialRecord.from_user_attrs(attrs) == record
    assert attrs["knobs"] == FAST.to_dict()
    assert (attrs["status"], attrs["role"]) == ("complete", "remeasure")
    assert type(attrs["status"]) is str and type(attrs["role"]) is str  # plain JSON values


def test_fields_that_do_not_apply_are_not_stored():
    attrs = TrialRecord(knobs=SLOW, retry_of=0, reference=None).to_user_attrs()
    assert attrs == {"knobs": SLOW.to_dict(), "retry_of": 0}
    assert TrialRecord(reason="").to_user_attrs() == {"reason": ""}


def test_a_record_reads_what_earlier_tfperf_versions_stored(url):
    """The stored names and values are those of studies already on disk."""
    study = optuna.create_study(storage=url, study_name="old")
    stored = {
        "knobs": SLOW.to_dict(),
        "status": "interrupted",
        "reason": "orphaned: ...",
        "peak_rss_bytes": 5,
        "peak_gpu_bytes": None,
        "wall_s": 2.0,
        "lost": True,
        "worker": {"host": "h", "pid": 9},
    }
    study.add_trial(optuna.trial.create_trial(state=State.FAIL, user_attrs=stored))
    record = TrialRecord.from_trial(study.trials[0])
    assert record.knobs == SLOW and record.status is TrialStatus.INTERRUPTED
    assert record.lost and record.host == "h" and record.searched
    assert record.to_user_attrs() == {k: v for k, v in stored.items() if v is not None}


def test_values_this_tfperf_cannot_read_are_left_out():
    record = TrialRecord.from_user_attrs({"knobs": {"no_such_knob": 1}, "status": "odd"})
    assert record == TrialRecord()


def test_an_outcome_record_rounds_the_wall_time():
    record = TrialRecord.of_outcome(
        dataclasses.replace(outcome(TrialStatus.FAILED, "x"), wall_s=1.23456)
    )
    assert (record.status, record.reason, record.wall_s) == (TrialStatus.FAILED, "x", 1.235)


def test_roles_and_extra_states_are_string_enums():
    assert TrialStatus("duplicate") is TrialStatus.DUPLICATE
    assert TrialStatus("remeasure") is TrialStatus.LOCK
    assert TrialRole("duplicate") is TrialRole.DUPLICATE


# --- the ledger -------------------------------------------------------------------------------


def test_a_claimed_trial_names_its_worker_before_it_starts(url):
    """A tuner killed between the claim and `start` leaves a trial `recover` can tell is
    orphaned (its worker is known), not one it must wait out as stale."""
    book = ledger(url)
    enqueue_references(book.study, {"baseline": (SLOW, {})})
    claimed = claim(book)
    record = TrialRecord.from_trial(book.study.trials[claimed.number])
    assert record.worker == WORKER
    assert record.reference == "baseline" and record.knobs == SLOW  # the queued attrs kept


def test_claims_run_the_references_first_and_stop_at_the_budget(url):
    book = ledger(url, budget=2)
    enqueue_references(book.study, {"baseline": (SLOW, {})})
    first = claim(book)
    assert first.reference == "baseline"
    run(book, first)
    second = claim(book)
    assert second.reference is None
    run(book, second, FAST)
    assert book.next() is DONE
    assert book.finished() == 2
    stored = [TrialRecord.from_trial(t) for t in book.trials()]
    assert [r.knobs for r in stored] == [SLOW, FAST]
    assert [r.worker for r in stored] == [WORKER, WORKER]


def test_a_second_tuner_waits_while_the_last_slot_runs(url):
    mine, theirs = ledger(url, budget=1), ledger(url, budget=1)
    held = claim(mine)
    mine.start(held, SLOW)
    waiting = theirs.next()
    assert waiting == Waiting(Wait.SLOTS, (held.number,), (WORKER["host"],))
    run(mine, held)
    assert theirs.next() is DONE


def test_a_trial_beyond_the_budget_goes_back_to_waiting(url):
    """The race where the last slot was taken between a tuner's look and its ask."""
    mine, theirs = ledger(url, budget=1), ledger(url, budget=1)
    held = claim(mine)
    with quiet_optuna():
        late = theirs.study.ask()
    assert not theirs._keep(late)
    assert [t.state for t in theirs.trials()] == [State.RUNNING, State.WAITING]
    run(mine, held)
    assert theirs.next() is DONE
    mine.budget = theirs.budget = 2  # a later run with a larger --trials runs it
    assert claim(theirs).number == late.number


def test_a_second_copy_of_a_reference_is_failed_unrun(url):
    book = ledger(url)
    book.study.enqueue_trial({}, user_attrs={"reference": "baseline"})
    book.study.enqueue_trial({}, user_attrs={"reference": "baseline"})
    run(book, claim(book))
    third = claim(book)  # the copy is skipped on the way
    assert third.reference is None
    copy = TrialRecord.from_trial(book.trials()[1])
    assert copy.role is TrialRole.DUPLICATE and copy.status is TrialStatus.DUPLICATE
    assert copy.reason == "a second copy of the reference measured by trial 0; not run"


def test_a_twin_s_figures_are_copied_and_a_running_twin_is_waited_for(url):
    book = ledger(url)
    first, second = claim(book), claim(book)
    book.start(first, FAST)
    assert book.twin(second, FAST) == Waiting(Wait.TWIN, (first.number,), (WORKER["host"],))
    book.finish(first, measured(FAST))
    twin = book.twin(second, FAST)
    assert isinstance(twin, optuna.trial.FrozenTrial) and twin.number == first.number
    book.copy(second, twin)
    copied = TrialRecord.from_trial(book.trials()[second.number])
    assert copied.duplicate_of == first.number and copied.status is TrialStatus.COMPLETE
    assert copied.result == TrialRecord.from_trial(twin).result is not None
    assert book.trials()[second.number].values == twin.values


def test_an_interrupted_trial_is_failed_with_its_reason(url):
    book = ledger(url)
    held = claim(book)
    book.interrupt(held, "interrupted by Ctrl-C")
    (trial,) = book.trials()
    assert trial.state is State.FAIL
    assert trial.user_attrs == {
        "status": "interrupted",
        "reason": "interrupted by Ctrl-C",
        "worker": WORKER,  # written at the claim
    }


def test_one_tuner_re_measures_under_the_lock_and_the_other_adopts_it(url):
    mine, theirs = ledger(url, budget=1), ledger(url, budget=1)
    run(mine, claim(mine))
    lock = mine.final()
    assert isinstance(lock, Lock) and lock.finished == 1
    assert theirs.final() == Waiting(Wait.REMEASURE, (lock.number,), (WORKER["host"],))
    measured = [Measurement("baseline", 0, SLOW.to_dict(), [1.0], 10, None)]
    with mine.holding(lock):
        pass
    mine.store(lock, measured, rounds=3)
    assert theirs.final() == Remeasurement(measured, 1, lock.number, WORKER)
    record = TrialRecord.from_trial(mine.trials()[lock.number])
    assert record.role is TrialRole.LOCK and record.status is TrialStatus.LOCK
    assert record.reason is not None and record.reason.startswith("lock of the final")


def test_a_lock_is_released_when_the_re_measurement_fails(url):
    book = ledger(url, budget=None)
    lock = book.final()
    assert isinstance(lock, Lock)
    with pytest.raises(RuntimeError), book.holding(lock):
        raise RuntimeError("boom")
    released = book.trials()[lock.number]
    assert released.state is State.FAIL
    assert released.user_attrs["reason"] == "the re-measurement stopped before it ended"
    assert isinstance(book.final(), Lock)  # the next try takes a new lock


def test_quiet_optuna_leaves_the_process_warning_filters_alone():
    before = list(warnings.filters)
    with quiet_optuna():
        assert len(warnings.filters) == len(before) + 3
    assert warnings.filters == before


def test_importing_the_tuner_adds_no_warning_filter():
    code = (
        "import warnings; before = list(warnings.filters); import tfperf.tuner; "
        "assert warnings.filters == before, warnings.filters[:3]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
