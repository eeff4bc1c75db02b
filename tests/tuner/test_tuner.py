"""The tuner on a fake trial runner: real Optuna, real SQLite files, exact bookkeeping."""

from __future__ import annotations

import socket
import subprocess
import sys

import optuna
import psutil
import pytest

from tests.fakes.trials import FakeRunner, outcome
from tests.pipelines import TUNER_SOURCE
from tfperf.errors import PipelineFileError
from tfperf.hardware import Machine
from tfperf.knobs import AUTOTUNE
from tfperf.pipeline import load_pipeline
from tfperf.results import TrialStatus
from tfperf.results.tune import Objective, Reference
from tfperf.study import Prices, Pricing, StudyMismatchError, search_trials
from tfperf.study._cluster import pid_scope
from tfperf.study._study import trials_frame
from tfperf.tuner import TooManyFailures, TuneInterrupted, TuneListener, TuneOptions, Tuner

MACHINE = Machine(
    cpu_count=2, total_ram_bytes=8 << 30, available_ram_bytes=6 << 30, gpu_names=(), cpu_bf16=False
)


@pytest.fixture
def pipeline(write_pipeline):
    return load_pipeline(write_pipeline(TUNER_SOURCE))


def tuner(pipeline, tmp_path, runner, **options):
    defaults = {
        "trials": 8,
        "storage": f"sqlite:///{tmp_path / 'study.db'}",
        "seed": 1,
        "rounds": 2,
        "finalists": 2,
    }
    return Tuner(pipeline, TuneOptions(**{**defaults, **options}), runner=runner, machine=MACHINE)


def load(tmp_path, name="pipeline"):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'study.db'}")


def searched(tmp_path):
    """The study's search trials: without the lock trial of each re-measurement."""
    return search_trials(load(tmp_path))


def test_references_run_first_and_search_finds_a_faster_configuration(pipeline, tmp_path):
    runner = FakeRunner()
    result = tuner(pipeline, tmp_path, runner).run()
    first, second = runner.requests[0].knobs, runner.requests[1].knobs
    assert first == pipeline.baseline
    assert second.num_parallel_calls == AUTOTUNE and second.prefetch == AUTOTUNE
    assert result.best.knobs.num_parallel_calls in (4, 8, AUTOTUNE)
    assert result.speedup_vs_baseline.ratio > 2
    assert result.speedup_vs_baseline.significant  # the fake has no noise: spread 0
    assert result.baseline.label == "baseline" and result.autotune is not None
    assert sum(result.trial_counts.values()) == 8
    # The fake's fastest setting (8 workers) beats AUTOTUNE (counted as 4), so a trial wins.
    assert result.best.label.startswith("trial ") and result.best.knobs.num_parallel_calls == 8
    assert result.recommendation.startswith(f"Use {result.best.label}'s knobs: ")


def test_every_trial_stores_knobs_status_and_result(pipeline, tmp_path):
    tuner(pipeline, tmp_path, FakeRunner(), trials=4).run()
    study = load(tmp_path)
    for trial in search_trials(study):
        assert trial.user_attrs["status"] == "complete"
        assert "result" in trial.user_attrs and "knobs" in trial.user_attrs
    frame = trials_frame(study)
    assert list(frame.number) == [0, 1, 2, 3]
    assert frame.reference.tolist()[:2] == ["baseline", "autotune"]
    assert (frame.examples_per_sec > 0).all()


def test_running_again_resumes_and_does_not_re_enqueue(pipeline, tmp_path):
    tuner(pipeline, tmp_path, FakeRunner(), trials=3).run()
    runner = FakeRunner()
    result = tuner(pipeline, tmp_path, runner, trials=5).run()
    trials = searched(tmp_path)
    references = [t.user_attrs.get("reference") for t in trials]
    assert references.count("baseline") == 1 and references.count("autotune") == 1
    assert result.trials_this_run == 2
    assert len(trials) == 5


def test_budget_exceeded_is_infeasible_with_its_figure(pipeline, tmp_path):
    def over_budget(index, request):
        if request.knobs.num_parallel_calls == 8:
            return outcome(TrialStatus.RAM_BUDGET, "used 3 GiB, over the 2 GiB budget", 3 << 30)
        return None

    result = tuner(
        pipeline, tmp_path, FakeRunner(outcome=over_budget), ram_budget_bytes=2 << 30
    ).run()
    infeasible = [t for t in searched(tmp_path) if t.user_attrs["status"] == "ram-budget"]
    for trial in infeasible:
        assert trial.state is optuna.trial.TrialState.COMPLETE
        assert trial.constraints["ram_bytes_over_budget"] == float(1 << 30)
        assert "over the 2 GiB budget" in trial.user_attrs["reason"]
    assert result.best.knobs.num_parallel_calls != 8


def test_failures_are_recorded_and_the_study_goes_on(pipeline, tmp_path):
    kinds = {
        2: (TrialStatus.FAILED, "map raised ValueError"),
        3: (TrialStatus.TIMEOUT, "still running after 30 s"),
        4: (TrialStatus.CRASHED, "killed by SIGKILL"),
    }

    def fail_some(index, request):
        return outcome(*kinds[index]) if index in kinds else None

    tuner(pipeline, tmp_path, FakeRunner(outcome=fail_some), trials=7).run()
    trials = searched(tmp_path)
    by_number = {t.number: t for t in trials}
    for number, (status, reason) in kinds.items():
        assert by_number[number].state is optuna.trial.TrialState.FAIL
        assert by_number[number].user_attrs["status"] == status.value
        assert by_number[number].user_attrs["reason"] == reason
    assert len(trials) == 7


def test_consecutive_failures_stop_the_study(pipeline, tmp_path):
    def always_fail(index, request):
        return outcome(TrialStatus.FAILED, f"boom {index}") if index >= 1 else None

    with pytest.raises(TooManyFailures, match="3 trials in a row failed") as caught:
        tuner(pipeline, tmp_path, FakeRunner(outcome=always_fail), max_consecutive_failures=3).run()
    assert "boom 3" in str(caught.value)
    assert len(load(tmp_path).trials) == 4


def test_budget_trips_after_a_feasible_trial_do_not_stop_the_study(pipeline, tmp_path):
    def over_unless_baseline(index, request):
        if request.knobs == pipeline.baseline:
            return None
        return outcome(TrialStatus.RAM_BUDGET, f"over budget {index}", 3 << 30)

    runner = FakeRunner(outcome=over_unless_baseline)
    result = tuner(pipeline, tmp_path, runner, trials=7, max_consecutive_failures=3).run()
    statuses = [t.user_attrs["status"] for t in searched(tmp_path)]
    assert statuses == ["complete"] + ["ram-budget"] * 6  # six in a row, and the study went on
    assert result.best.knobs == pipeline.baseline


def test_budget_trips_before_any_feasible_trial_stop_the_study(pipeline, tmp_path):
    def always_over(index, request):
        return outcome(TrialStatus.RAM_BUDGET, f"over budget {index}", 3 << 30)

    with pytest.raises(TooManyFailures, match="3 trials in a row failed") as caught:
        tuner(pipeline, tmp_path, FakeRunner(outcome=always_over), max_consecutive_failures=3).run()
    assert "--ram-budget" in str(caught.value)
    assert len(searched(tmp_path)) == 3


def test_broken_pipeline_stops_at_once(pipeline, tmp_path):
    def fatal(index, request):
        return outcome(TrialStatus.FATAL, "pipeline.py defines no `make_dataset`")

    with pytest.raises(PipelineFileError, match="no `make_dataset`"):
        tuner(pipeline, tmp_path, FakeRunner(outcome=fatal)).run()
    # The baseline ran and failed; the AUTOTUNE reference never started.
    assert [t.state.name for t in load(tmp_path).trials] == ["FAIL", "WAITING"]


def test_ctrl_c_records_interrupted_and_keeps_finished_trials(pipeline, tmp_path):
    def interrupt(index, request):
        if index == 3:
            raise KeyboardInterrupt
        return None

    with pytest.raises(TuneInterrupted, match="trial 3 was recorded as interrupted"):
        tuner(pipeline, tmp_path, FakeRunner(outcome=interrupt)).run()
    study = load(tmp_path)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3 + ["FAIL"]
    assert study.trials[3].user_attrs["status"] == "interrupted"
    result = tuner(pipeline, tmp_path, FakeRunner(), trials=6).run()
    assert result.trials_this_run == 2


def test_clearly_slow_trials_are_pruned(pipeline, tmp_path):
    def slow_unless_parallel(knobs):
        return 0.001 if knobs.num_parallel_calls in (8, AUTOTUNE) else 0.5

    tuner(pipeline, tmp_path, FakeRunner(wait_for=slow_unless_parallel), trials=10).run()
    statuses = [t.user_attrs["status"] for t in searched(tmp_path)]
    assert statuses[0] == "complete"  # the references are never pruned
    assert "pruned" in statuses


def test_study_of_another_pipeline_is_refused(pipeline, tmp_path, write_pipeline):
    tuner(pipeline, tmp_path, FakeRunner(), trials=2).run()
    other = load_pipeline(write_pipeline(TUNER_SOURCE, name="other.py"))
    with pytest.raises(StudyMismatchError, match=r"tunes pipeline\.py, not other\.py"):
        tuner(other, tmp_path, FakeRunner(), trials=2, study_name="pipeline").open_study()


def test_multi_objective_returns_the_pareto_front(pipeline, tmp_path):
    result = tuner(pipeline, tmp_path, FakeRunner(), objective=Objective.THROUGHPUT_RAM).run()
    assert result.objective is Objective.THROUGHPUT_RAM
    assert result.pareto_trials
    study = load(tmp_path)
    assert len(study.directions) == 2


def test_fixed_knob_is_held(pipeline, tmp_path):
    runner = FakeRunner()
    tuner(pipeline, tmp_path, runner, fixes={"num_parallel_calls": 2}).run()
    searched = [r.knobs for r in runner.requests[2:8]]  # after the references, before re-measuring
    assert {k.num_parallel_calls for k in searched} == {2}


class Recorder(TuneListener):
    def __init__(self) -> None:
        self.orphans: list[int] = []
        self.mixed: list[dict] = []
        self.remeasures = 0
        self.confirmed: tuple[list[str], int] | None = None

    def study_ready(self, study, storage, resumed, orphans) -> None:
        self.orphans = orphans

    def hardware_mixed(self, groups) -> None:
        self.mixed.append(dict(groups))

    def remeasure_started(self, finalists, rounds) -> None:
        self.remeasures += 1

    def confirm_started(self, labels, rounds) -> None:
        self.confirmed = (labels, rounds)


def test_the_chosen_configuration_is_reported_from_windows_measured_after_the_choice(
    pipeline, tmp_path
):
    runner, listener = FakeRunner(), Recorder()
    result = Tuner(
        pipeline,
        TuneOptions(trials=4, storage=f"sqlite:///{tmp_path / 'study.db'}", rounds=2, finalists=2),
        listener,
        runner=runner,
        machine=MACHINE,
    ).run()
    assert listener.confirmed == ([result.best.label], 2)
    # Chosen on one or two windows (a leader nothing contends with runs no second); reported
    # on two more.
    assert len(result.best.confirmed) == 2 and 1 <= len(result.best.examples_per_sec) <= 2
    assert [r.knobs for r in runner.requests[-2:]] == [result.best.knobs] * 2
    # The search's trials measure every phase; the re-measurement reads the end-to-end alone.
    searched = len(runner.requests) - sum(len(m.examples_per_sec) for m in result.candidates) - 2
    assert [r.end_to_end_only for r in runner.requests] == [False] * searched + [True] * (
        len(runner.requests) - searched
    )
    assert all(not m.confirmed for m in result.candidates if m is not result.best)
    stored = next(m for m in result.candidates if m.label == result.best.label)
    assert stored.confirmed == result.best.confirmed


def test_a_trial_that_trains_as_an_earlier_one_leaves_the_model_alone_out(pipeline, tmp_path):
    """Issue 56: every trial timed the model on cached batches, which runs alike whatever the
    input's knobs; now once per training setting (batch size, precision)."""
    from tfperf.results.tune import same_training

    runner = FakeRunner()
    options = TuneOptions(trials=8, storage=f"sqlite:///{tmp_path / 'study.db'}", rounds=2)
    Tuner(pipeline, options, Recorder(), runner=runner, machine=MACHINE).run()
    searched = [r for r in runner.requests if not r.end_to_end_only]
    for index, request in enumerate(searched):
        earlier = [r.knobs for r in searched[:index]]
        assert request.compute_known == any(same_training(request.knobs, k) for k in earlier)
    assert not searched[0].compute_known and any(r.compute_known for r in searched)


def test_running_again_on_a_finished_study_reuses_its_remeasurement(pipeline, tmp_path):
    first = tuner(pipeline, tmp_path, FakeRunner(), trials=3).run()
    runner, listener = FakeRunner(), Recorder()
    again = Tuner(
        pipeline,
        TuneOptions(trials=3, storage=f"sqlite:///{tmp_path / 'study.db'}", rounds=2, finalists=2),
        listener,
        runner=runner,
        machine=MACHINE,
    ).run()
    assert runner.requests == [] and listener.remeasures == 0
    assert again.best == first.best and again.trials_this_run == 0


def test_a_trial_whose_tuner_died_is_failed_retried_and_not_counted(pipeline, tmp_path):
    tuner(pipeline, tmp_path, FakeRunner(), trials=2).run()
    study = load(tmp_path)
    orphan = study.ask()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    orphan.set_user_attr("knobs", {"batch_size": 8})
    orphan.set_user_attr(
        "worker",
        {
            "host": socket.gethostname(),
            "pid": child.pid,
            "started": started,
            "pid_scope": pid_scope(),
        },
    )
    listener = Recorder()
    options = TuneOptions(
        trials=4, storage=f"sqlite:///{tmp_path / 'study.db'}", rounds=1, finalists=1, prune=False
    )
    result = Tuner(
        pipeline,
        options,
        listener,
        runner=FakeRunner(),
        machine=MACHINE,
    ).run()
    assert listener.orphans == [orphan.number]
    trials = {t.number: t for t in load(tmp_path).trials}
    assert trials[orphan.number].user_attrs["lost"] is True
    assert "orphaned" in trials[orphan.number].user_attrs["reason"]
    (retry,) = [t for t in trials.values() if t.user_attrs.get("retry_of") == orphan.number]
    assert retry.state.name == "COMPLETE"
    assert result.trials_this_run == 2  # the retry and one more: the lost trial does not count


def test_a_study_that_mixes_hardware_is_reported(pipeline, tmp_path):
    tuner(pipeline, tmp_path, FakeRunner(), trials=2).run()
    other = {"host": "big-box", "cpu_model": "Other CPU", "cpu_count": 64, "gpu_model": None}
    load(tmp_path).add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.FAIL,
            user_attrs={"worker": {**other, "tf_version": "2.16.1"}, "status": "failed"},
        )
    )
    listener = Recorder()
    Tuner(
        pipeline,
        TuneOptions(trials=4, storage=f"sqlite:///{tmp_path / 'study.db'}", rounds=1, finalists=1),
        listener,
        runner=FakeRunner(),
        machine=MACHINE,
    ).run()
    (groups,) = listener.mixed  # said once, not after every trial
    assert groups["64 CPUs (Other CPU), no GPU, TensorFlow 2.16.1"] == ["big-box"]
    assert [socket.gethostname()] in groups.values()


@pytest.mark.parametrize("seconds", [-0.5, float("inf"), float("nan")])
def test_options_refuse_a_window_floor_that_is_negative_or_endless(seconds):
    with pytest.raises(ValueError, match="min_seconds"):
        TuneOptions(min_seconds=seconds)


def test_every_trial_over_the_ram_budget_names_the_budget_not_the_baseline(pipeline, tmp_path):
    from tfperf.tuner import OverBudget

    def always_over(index, request):
        return outcome(TrialStatus.RAM_BUDGET, f"over budget {index}", (3 << 30) + index)

    runner = FakeRunner(outcome=always_over)
    with pytest.raises(OverBudget) as caught:
        tuner(pipeline, tmp_path, runner, trials=2, ram_budget_bytes=2 << 30).run()
    message = str(caught.value)
    assert "every trial of study 'pipeline' that ran went over a memory budget" in message
    assert "--ram-budget 2 GiB, the smallest peak RAM measured 3 GiB" in message
    assert "re-measurement" not in message.split("nothing to")[0]
    assert len(runner.requests) == 2  # nothing re-measured over the same budget


def test_a_baseline_over_the_budget_in_every_run_names_the_budget(pipeline, tmp_path):
    from tfperf.tuner import OverBudget

    def baseline_over(index, request):
        if request.knobs == pipeline.baseline:
            return outcome(TrialStatus.RAM_BUDGET, "over budget", 3 << 30)
        return None

    with pytest.raises(OverBudget, match="baseline configuration went over a memory budget"):
        tuner(
            pipeline,
            tmp_path,
            FakeRunner(outcome=baseline_over),
            trials=3,
            ram_budget_bytes=2 << 30,
        ).run()


def test_a_pipeline_edited_during_the_search_stops_it_and_the_study_refuses_it(pipeline, tmp_path):
    from tfperf.study import SourceChangedError

    def edits_the_file(index, request):
        if index == 2:  # while the third trial runs, the user saves an edit
            pipeline.path.write_text(pipeline.path.read_text() + "\n# tuned by hand\n")
        return None

    runner = FakeRunner(outcome=edits_the_file)
    with pytest.raises(SourceChangedError) as caught:
        tuner(pipeline, tmp_path, runner, trials=6).run()
    message = str(caught.value)
    assert "pipeline.py (or a file of its own it reads) changed since its study began" in message
    assert "while trial 2 ran, now recorded as interrupted" in message
    assert "Start a new study with --study NAME" in message
    assert len(runner.requests) == 3  # nothing ran after the edit
    trials = load(tmp_path).trials
    assert [t.user_attrs.get("status") for t in trials[:3]] == [
        "complete",
        "complete",
        "interrupted",
    ]
    assert trials[2].user_attrs["reason"] == "pipeline.py changed while it ran"

    edited = load_pipeline(pipeline.path)  # the next run, with the file as it is now
    with pytest.raises(SourceChangedError, match=r"the 3 finished trials of .* measured the code"):
        tuner(edited, tmp_path, FakeRunner(), trials=6).run()
    result = tuner(edited, tmp_path, FakeRunner(), trials=3, study_name="edited").run()
    assert result.study_name == "edited"


def test_a_sibling_module_edited_between_runs_is_a_changed_pipeline(write_pipeline, tmp_path):
    from tfperf.study import SourceChangedError

    helper = write_pipeline("ROWS = 64\n", name="shapes.py")
    source = "from shapes import ROWS\n" + TUNER_SOURCE.lstrip()
    first = load_pipeline(write_pipeline(source))
    tuner(first, tmp_path, FakeRunner(), trials=2, rounds=1).run()
    helper.write_text("ROWS = 128\n")
    with pytest.raises(SourceChangedError):
        tuner(load_pipeline(first.path), tmp_path, FakeRunner(), trials=3, rounds=1).run()


def test_with_a_step_time_every_trial_emulates_it_and_probes_no_model(write_pipeline, tmp_path):
    source = TUNER_SOURCE.replace("def make_train_step(knobs): pass\n", "")
    pipeline = load_pipeline(write_pipeline(source), needs_step=False)
    runner = FakeRunner()
    tuner(pipeline, tmp_path, runner, trials=3, step_time_s=0.005).run()
    assert runner.requests and {r.step_time_s for r in runner.requests} == {0.005}
    assert all(r.training == () for r in runner.requests)
    with pytest.raises(StudyMismatchError, match="measured against an emulated step of 5 ms"):
        tuner(pipeline, tmp_path, FakeRunner(), trials=4).run()  # the model's own step now
    with pytest.raises(StudyMismatchError, match="Resume it with --step-time 5ms"):
        tuner(pipeline, tmp_path, FakeRunner(), trials=4, step_time_s=0.02).run()


class Expecting(TuneListener):
    def __init__(self) -> None:
        self.heard: list = []
        self.finalists: list = []
        self.trimmed: list = []

    def expected(self, left) -> None:
        self.heard.append(left)

    def remeasure_started(self, finalists, rounds) -> None:
        self.finalists = finalists

    def trim_started(self, labels, rounds) -> None:
        self.trimmed = labels


def test_after_each_trial_the_time_left_is_said_from_the_trials_so_far(pipeline, tmp_path):
    """The estimate counts down the trial budget, and after it the re-measurement's least
    runs: MIN_ROUNDS of each finalist and reference, then of the chosen configurations."""
    from tfperf.tuner import MIN_ROUNDS
    from tfperf.tuner._time_limit import CONFIRMED_AT_MOST

    listener = Expecting()
    run = tuner(pipeline, tmp_path, FakeRunner(), trials=6, rounds=3, finalists=2)
    run.listener = listener
    run.run()
    lefts = [left.trials_left for left in listener.heard]
    assert lefts == sorted(lefts, reverse=True) and lefts[-1] == 0 and len(lefts) >= 5
    last = listener.heard[-1]
    # The last estimate counts the configurations the re-measurement then took.
    assert last.runs_after == (len(listener.finalists) + CONFIRMED_AT_MOST) * MIN_ROUNDS
    assert last.search_s == 0.0 and last.seconds == last.runs_after * last.rerun_s
    assert all(left.search_s == left.trials_left * left.run_s for left in listener.heard)


TRAINING_SPACE = TUNER_SOURCE.replace(
    '"batch_size": 8, "shuffle_buffer": 1024',
    '"batch_size": [8, 64], "shuffle_buffer": [1024, 8192]',
)


def test_an_answer_that_changes_training_twice_is_measured_with_each_change_reverted(
    write_pipeline, tmp_path
):
    # The fake runner's rate grows with the batch (a wait per batch), not with the buffer:
    # an answer with both changed is measured beside each change reverted.
    from tfperf.tuner import MIN_ROUNDS
    from tfperf.tuner._time_limit import CONFIRMED_AT_MOST

    pipeline = load_pipeline(write_pipeline(TRAINING_SPACE))
    listener = Expecting()
    run = tuner(pipeline, tmp_path, FakeRunner(), trials=8, rounds=2, seed=3)
    run.listener = listener
    result = run.run()
    assert [label.partition(" with ")[2] for label in listener.trimmed] == [
        "",
        "batch_size as written",
        "shuffle_buffer as written",
    ]
    last = listener.heard[-1]
    assert last.runs_after == (len(listener.finalists) + CONFIRMED_AT_MOST) * MIN_ROUNDS
    # The buffer buys nothing: the recommendation keeps it as written.
    assert result.best.knobs.batch_size == 64
    assert result.best.knobs.shuffle_buffer == 1024


def test_a_one_trial_tune_expects_only_the_finalists_it_will_have(pipeline, tmp_path):
    # One trial, the baseline: no trial is searched (and estimates queued after it would
    # never run), so the re-measurement takes the compared references alone. The estimate
    # once counted every reference and a searched finalist (a script: 16 runs said, 4 to 6
    # run).
    from tfperf.tuner import MIN_ROUNDS
    from tfperf.tuner._time_limit import CONFIRMED_AT_MOST

    listener = Expecting()
    run = tuner(pipeline, tmp_path, FakeRunner(), trials=1, rounds=3)
    run.listener = listener
    run.run()
    assert listener.heard and listener.finalists
    expected = (len(listener.finalists) + CONFIRMED_AT_MOST) * MIN_ROUNDS
    assert [left.runs_after for left in listener.heard] == [expected]


class Clocked(FakeRunner):
    """A runner on a fake clock: each run takes `run_s` of it."""

    def __init__(self, clock: list[float], run_s: float) -> None:
        super().__init__()
        self.clock, self.run_s = clock, run_s

    def __call__(self, request, budgets, *, on_progress=None):
        self.clock[0] += self.run_s
        return super().__call__(request, budgets, on_progress=on_progress)


class Limited(TuneListener):
    def __init__(self) -> None:
        self.reached: list[int] = []
        self.finalists: list[str] = []

    def time_limit_reached(self, ran, left, limit_s) -> None:
        self.reached.append(ran)

    def remeasure_started(self, finalists, rounds) -> None:
        self.finalists = [finalist.label for finalist in finalists]


def test_a_time_limit_stops_the_search_and_still_verifies_the_answer(
    pipeline, tmp_path, monkeypatch
):
    """Past the limit no trial starts; the answer is re-measured beside the references on one
    searched finalist, at most MIN_ROUNDS each (the references all of them, for their spread),
    and confirmed."""
    from tfperf.tuner import MIN_ROUNDS, _time_limit

    clock = [0.0]
    monkeypatch.setattr(_time_limit, "monotonic", lambda: clock[0])
    # Priced far below the fake clock's 10 s a run, whatever the real trials took: the limit
    # stops the search only once the fake clock has passed it.
    monkeypatch.setattr(Pricing, "of", lambda self, study: Prices(0.01, 0.01, {}))
    listener, runner = Limited(), Clocked(clock, run_s=10.0)
    run = tuner(pipeline, tmp_path, runner, trials=None, time_limit_s=55.0, rounds=3)
    run.listener = listener
    result = run.run()

    ran = [request for request in runner.requests if not request.end_to_end_only]
    assert len(ran) == 6  # the sixth ends at 60 s, past the 55 s limit
    assert listener.reached == [len(search_trials(run.ledger.study))]
    assert len([label for label in listener.finalists if label.startswith("trial ")]) == 1
    assert all(len(m.examples_per_sec) <= MIN_ROUNDS for m in result.candidates)
    compared = [m for m in result.candidates if m.label in (Reference.BASELINE, Reference.AUTOTUNE)]
    assert all(len(m.examples_per_sec) == MIN_ROUNDS for m in compared)
    assert len(result.best.confirmed) == MIN_ROUNDS
    assert {Reference.BASELINE, Reference.AUTOTUNE} <= {m.label for m in result.candidates}


def test_a_time_limit_shorter_than_a_trial_still_runs_the_references(
    pipeline, tmp_path, monkeypatch
):
    from tfperf.tuner import _time_limit

    clock = [0.0]
    monkeypatch.setattr(_time_limit, "monotonic", lambda: clock[0])
    listener, runner = Limited(), Clocked(clock, run_s=10.0)
    run = tuner(pipeline, tmp_path, runner, trials=None, time_limit_s=5.0)
    run.listener = listener
    result = run.run()
    references = len(run.references.knobs)
    assert references >= 2 and listener.reached == [references]
    assert [r.knobs for r in runner.requests[:references]] == list(run.references.knobs.values())
    assert result.best.confirmed


def test_without_a_time_limit_the_clock_stops_nothing(pipeline, tmp_path, monkeypatch):
    from tfperf.tuner import _time_limit

    clock = [0.0]
    monkeypatch.setattr(_time_limit, "monotonic", lambda: clock[0])
    result = tuner(pipeline, tmp_path, Clocked(clock, run_s=1e6), trials=5).run()
    assert len(search_trials(load(tmp_path))) == 5 and result.best is not None


def test_a_time_limit_must_be_positive():
    with pytest.raises(ValueError, match="0 < time_limit_s < inf"):
        TuneOptions(trials=None, time_limit_s=0.0)


def test_a_trial_with_no_workers_records_its_worker_only_knobs_as_run(tmp_path):
    # A DataLoader with no workers drops prefetch_factor and persistent_workers: the trial
    # records neither, and the proposals that differ only in them are one configuration,
    # measured once.
    pytest.importorskip("torch")
    from tests.frameworks.torch import pipelines

    loader = load_pipeline(pipelines.write(tmp_path))
    runner = FakeRunner()
    tuner(loader, tmp_path, runner, trials=12, fixes={"num_workers": 0}).run()
    ran = [(r.knobs.prefetch_factor, r.knobs.persistent_workers) for r in runner.requests]
    assert set(ran) == {(None, None)}
    stored = [t.user_attrs["knobs"] for t in searched(tmp_path) if "knobs" in t.user_attrs]
    assert stored and all("prefetch_factor" not in k for k in stored)
    assert all("persistent_workers" not in k for k in stored)


def test_the_files_trials_put_back_are_the_user_s_and_those_they_made_are_named(pipeline, tmp_path):
    """Each trial's run of the script changed the user's model.pt and made a checkpoint; a
    later trial then changes the earlier one's checkpoint too, which is not the user's."""
    from tfperf.report import render_study_html, render_tune_summary
    from tfperf.report._study_data import snapshot_study

    def with_files(number: int, request):
        made = FakeRunner()(request, None)
        assert made.result is not None
        made.result.files_put_back = ["/u/model.pt", *([f"/u/ckpt-{number - 1}.pt"] * (number > 0))]
        made.result.files_created = [f"/u/ckpt-{number}.pt"]
        return made

    result = tuner(pipeline, tmp_path, FakeRunner(outcome=with_files), trials=4).run()
    assert result.files_put_back == ["/u/model.pt"]
    assert result.files_created[:3] == ["/u/ckpt-0.pt", "/u/ckpt-1.pt", "/u/ckpt-2.pt"]
    said = (
        "Your files: pipeline.py changed /u/model.pt while tfperf ran it; tfperf put it back as "
        f"it was. It also created /u/ckpt-0.pt, /u/ckpt-1.pt, /u/ckpt-2.pt and "
        f"{len(result.files_created) - 3} more, written by a run tfperf cut short."
    )
    assert said in render_tune_summary(result)
    page = render_study_html(snapshot_study(load(tmp_path), "study.db"), result)
    assert said in page and page.count("Your files:") == 1
