"""What tfperf keeps in a study: search trials, hosts, the stored re-measurement."""

from __future__ import annotations

import time

import optuna
import pytest

from tfperf.knobs import Knobs
from tfperf.results.tune import Measurement
from tfperf.study import (
    await_references,
    hardware_groups,
    reference_trial,
    search_trials,
    status_counts,
)
from tfperf.study._study import (
    Remeasurement,
    running_twin,
    same_knobs,
    store_remeasurement,
    stored_remeasurement,
    trials_frame,
)
from tfperf.study.records import StudyRecord, read_study, write_study

ALIKE = {"cpu_model": "AMD EPYC 7B13", "cpu_count": 16, "gpu_model": None, "tf_version": "2.16.1"}
OTHER = {**ALIKE, "cpu_model": "Intel Xeon Gold 6338", "cpu_count": 8}


@pytest.fixture
def study(tmp_path) -> optuna.Study:
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")


def add(study: optuna.Study, state: str = "COMPLETE", **attrs) -> None:
    value = 10.0 if state == "COMPLETE" else None
    study.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState[state], value=value, user_attrs=attrs
        )
    )


def test_search_trials_leave_out_locks_and_copies(study):
    add(study, status="complete")
    add(study, "FAIL", role="remeasure", reason="lock")
    add(study, "FAIL", role="duplicate", status="duplicate")
    add(study, "FAIL", status="interrupted", lost=True)
    assert [t.number for t in search_trials(study)] == [0, 3]
    assert status_counts(study) == {"complete": 1, "interrupted": 1}


def test_trials_frame_has_the_host_and_its_hardware(study):
    add(study, status="complete", knobs={"batch_size": 8}, worker={"host": "a", "pid": 1, **ALIKE})
    add(study, "FAIL", status="interrupted", lost=True, worker={"host": "b", "pid": 2})
    add(study, "FAIL", role="remeasure")
    add(study, status="complete", retry_of=1, worker={"host": "c", "pid": 3, **OTHER})
    frame = trials_frame(study)
    assert frame.number.tolist() == [0, 1, 3]
    assert frame.host.tolist() == ["a", "b", "c"]
    hardware = frame.hardware.tolist()
    assert hardware[0] == "16 CPUs (AMD EPYC 7B13), no GPU, TensorFlow 2.16.1"
    assert hardware[2] == "8 CPUs (Intel Xeon Gold 6338), no GPU, TensorFlow 2.16.1"
    assert frame.hardware.isna().tolist() == [False, True, False]
    assert frame.cpu_count.tolist()[::2] == [16, 8]
    assert frame.lost.tolist() == [False, True, False]
    assert frame.retry_of.tolist()[2] == 1
    assert frame.knob_batch_size.tolist()[0] == 8


def test_hardware_groups_gather_hosts_by_hardware(study):
    add(study, worker={"host": "a", **ALIKE})
    add(study, worker={"host": "b", **ALIKE})
    add(study, worker={"host": "old"})  # a record from before hosts carried their hardware
    assert hardware_groups(study, {"host": "a", **ALIKE}) == {
        "16 CPUs (AMD EPYC 7B13), no GPU, TensorFlow 2.16.1": ["a", "b"]
    }
    groups = hardware_groups(study, {"host": "z", **OTHER})
    assert groups["8 CPUs (Intel Xeon Gold 6338), no GPU, TensorFlow 2.16.1"] == ["z"]
    assert len(groups) == 2


def test_remeasurement_round_trip(study):
    assert stored_remeasurement(study) is None
    measured = [Measurement("baseline", 0, {"batch_size": 8}, [10.0, 11.0], 100, None)]
    store_remeasurement(study, Remeasurement(measured, trials=12, lock_trial=14, worker={"pid": 7}))
    assert stored_remeasurement(study) == Remeasurement(measured, 12, 14, {"pid": 7})
    key = "tfperf_remeasure"
    assert study.user_attrs[key] == [
        {
            "label": "baseline",
            "trial_number": 0,
            # Stored as `Knobs.to_dict()` writes it: every knob, the ones not given at default.
            "knobs": Knobs(batch_size=8).to_dict(),
            "examples_per_sec": [10.0, 11.0],
            "peak_rss_bytes": 100,
            "peak_gpu_bytes": None,
            "confirmed": [],
            "over_budget": 0,
        }
    ]
    # A study a tfperf without the count stored reads as within the budgets.
    old = [{k: v for k, v in m.items() if k != "over_budget"} for m in study.user_attrs[key]]
    study.set_user_attr(key, old)
    stored = stored_remeasurement(study)
    assert stored is not None and stored.measurements[0].within_budgets


def test_a_remeasurement_without_what_it_covers_is_not_reused(study):
    study.set_user_attr("tfperf_remeasure", [])  # written by a tfperf before shared studies
    assert stored_remeasurement(study) is None


def test_same_knobs_finds_a_finished_feasible_twin_and_running_ones(study):
    knobs = Knobs(batch_size=8)
    add(study, status="complete", knobs=knobs.to_dict())
    add(study, "RUNNING", knobs=knobs.to_dict())
    twin = same_knobs(study, knobs, number=5)
    assert twin is not None and twin.number == 0
    assert same_knobs(study, knobs, number=0) is None
    running = running_twin(study, knobs, number=5)
    assert running is not None and running.number == 1
    assert running_twin(study, knobs, number=1) is None  # only lower numbers are waited for


def test_reference_trial_prefers_the_completed_run(study):
    add(study, "FAIL", reference="baseline", lost=True, retry_of=None)
    add(study, "FAIL", reference="baseline", status="failed", retry_of=0)
    add(study, reference="baseline", retry_of=1, status="complete")
    assert reference_trial(study, "baseline") == 2
    assert reference_trial(study, "autotune") is None


def test_await_references_returns_once_the_creator_queued_them(study):
    write_study(study, StudyRecord(references_enqueued=True))
    started = time.monotonic()
    await_references(study, wait_s=30, poll_s=0.01)
    assert time.monotonic() - started < 5


def test_await_references_does_not_wait_for_a_study_of_another_tool(study):
    add(study)
    started = time.monotonic()
    await_references(study, wait_s=30, poll_s=0.01)
    assert not read_study(study).created_by_tfperf
    assert time.monotonic() - started < 5


def test_await_references_gives_up_on_a_creator_that_died(study):
    started = time.monotonic()
    await_references(study, wait_s=0.2, poll_s=0.01)
    assert time.monotonic() - started >= 0.2


@pytest.mark.parametrize("budget", [None, 2 << 30])
def test_a_trial_that_ran_out_of_gpu_memory_is_infeasible_without_a_figure(study, budget):
    """Under --gpu-memory-limit TensorFlow refuses the allocation before NVML reads a peak."""
    from tfperf.results import TrialOutcome, TrialStatus
    from tfperf.study._study import feasible_complete, record_outcome

    trial = study.ask()
    outcome = TrialOutcome(TrialStatus.GPU_BUDGET, None, "ran out of GPU memory", 0, None, 1.0)
    record_outcome(trial, outcome, (None, budget))
    study.tell(trial, 0.0)

    assert study.trials[0].constraints["gpu_bytes_over_budget"] > 0
    assert feasible_complete(study) == []
