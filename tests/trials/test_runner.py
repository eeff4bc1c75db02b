"""Running trials in child processes: real workers and TensorFlow, and the pure helpers."""

from __future__ import annotations

import json
import re
import shutil
import signal
import tempfile
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.deadlines import HANG_S
from tfperf.errors import KnobError, PipelineFileError, PipelineRuntimeError
from tfperf.knobs import Knobs
from tfperf.measure import Progress
from tfperf.results import Phase, TrialOutcome, TrialStatus
from tfperf.trials import Budgets, TrialRequest, run_trial
from tfperf.trials import _worker as worker
from tfperf.trials._evidence import oom_kill_count, reap_stale_folders
from tfperf.trials._runner import (
    classify_exit,
    gpu_budget_problem,
    gpu_reason,
    pruned_reason,
    ram_reason,
    signal_reason,
    timeout_reason,
)
from tfperf.trials._worker import (
    PROTOCOL_PREFIX,
    ProgressThrottle,
    WorkRequest,
    decode_message,
    encode_message,
    error_message,
    progress_from_message,
    progress_message,
)

GIB = 2**30

_FAKE_PROGRESS = json.dumps(
    {
        "type": "progress",
        "phase": "pipeline_only",
        "warming_up": False,
        "measured_steps": 99,
        "target_steps": 99,
        "examples_per_sec": 1.0,
    }
)

# A tiny train step on a 64-element dataset; it prints to stdout at import and while building,
# including a line that looks like the protocol, which must not reach the parent.
TINY = f"""
import tensorflow as tf

print("loss: 0.3")
print('{PROTOCOL_PREFIX}{_FAKE_PROGRESS}')

def make_dataset(knobs):
    print("building the dataset", end="")
    ds = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32))
    return ds.batch(knobs.batch_size)

def make_train_step(knobs):
    @tf.function
    def step(batch):
        return tf.reduce_sum(batch)
    return step
"""

NO_MAKE_DATASET = """
def make_train_step(knobs):
    return lambda batch: batch
"""

RAISES_AT_RUN_TIME = """
import numpy as np
import tensorflow as tf

def _parse(x):
    raise ValueError("corrupt record 7")

def make_dataset(knobs):
    ds = tf.data.Dataset.range(8)
    return ds.map(lambda x: tf.numpy_function(_parse, [x], tf.int64)).batch(2)

def make_train_step(knobs):
    return lambda batch: batch
"""

# Starts a helper process (its pid written beside the file), then hangs in the input pipeline.
HANGS = """
import pathlib, subprocess, sys, time
import tensorflow as tf

def _hang(x):
    time.sleep(1000)
    return x

def make_dataset(knobs):
    helper = subprocess.Popen(["sleep", "1000"])
    pathlib.Path(__file__).with_name("helper.pid").write_text(str(helper.pid))
    ds = tf.data.Dataset.range(8)
    return ds.map(lambda x: tf.numpy_function(_hang, [x], tf.int64)).batch(2)

def make_train_step(knobs):
    return lambda batch: batch
"""

# Holds 2 GiB with every page touched, then waits; TensorFlow alone stays well under 1.5 GiB.
ALLOCATES = """
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

HELD = []

def make_dataset(knobs):
    Path(__file__).with_name("model.pt").write_text("a run cut short")  # a file of the user's
    HELD.append(np.ones(2**28, dtype=np.float64))
    time.sleep(60)
    return tf.data.Dataset.range(8).batch(2)

def make_train_step(knobs):
    return lambda batch: batch
"""

# The trainer holds a 160 MB array its three forked workers index but never write: they share
# its pages copy-on-write, so each worker's RSS counts the array (and the trainer's torch)
# again, while its private pages hold only what it allocated itself.
SHARES_WITH_WORKERS = """
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

BASELINE = {"batch_size": 4, "num_workers": 3, "persistent_workers": True}
HELD = np.ones(20 * 2**20)  # 160 MB, every page touched


class Indexes(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, index):
        return torch.full((2,), float(HELD[index * 1000]))


def make_loader(knobs):
    return DataLoader(
        Indexes(),
        batch_size=knobs.batch_size,
        num_workers=knobs.num_workers,
        persistent_workers=knobs.persistent_workers,
        multiprocessing_context="fork",
    )


def make_train_step(knobs):
    # The naive figure, read by the trainer itself: RSS summed over it and its workers.
    import pathlib, psutil

    out = pathlib.Path(__file__).with_name("summed_rss")

    def step(batch):
        tree = [psutil.Process(), *psutil.Process().children(recursive=True)]
        summed = sum(process.memory_info().rss for process in tree)
        if summed > int(out.read_text() if out.exists() else 0):
            out.write_text(str(summed))
        return batch.sum()

    return step
"""

KILLS_ITSELF = """
import os, signal

def make_dataset(knobs):
    os.kill(os.getpid(), signal.SIGKILL)

def make_train_step(knobs):
    return lambda batch: batch
"""


def _write(folder: Path, source: str, name: str = "pipeline.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def _request(path: Path, steps: int = 5) -> TrialRequest:
    return TrialRequest(path, Knobs(batch_size=4), steps=steps, warmup=1)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _assert_nothing_left(trials_dir: Path) -> None:
    """No child process of ours is alive, and the trial's temporary folder is gone."""
    assert psutil.Process().children(recursive=True) == []
    assert list(trials_dir.iterdir()) == []


@pytest.fixture
def trials_dir(tmp_path, monkeypatch):
    """Where run_trial makes its temporary folder, to check that it removes it."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    """One real trial of TINY, shared: its outcome and every progress report it delivered."""
    folder = tmp_path_factory.mktemp("completed")
    trials = folder / "tmp"
    trials.mkdir()
    reports: list[Progress] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(trials))
        outcome = run_trial(
            _request(_write(folder, TINY)), Budgets(timeout_s=120), on_progress=reports.append
        )
    _assert_nothing_left(trials)
    return outcome, reports


# --- real trials -----------------------------------------------------------------------------


@pytest.mark.tf
def test_tiny_pipeline_completes_with_its_result(completed):
    outcome, _ = completed
    assert outcome.status is TrialStatus.COMPLETE, outcome.reason
    assert outcome.reason == ""
    result = outcome.result
    assert result is not None
    assert result.knobs["batch_size"] == 4
    assert result.end_to_end.steps == 5 and result.end_to_end.examples == 20
    assert result.pipeline_only is not None and result.compute_only is not None
    assert outcome.peak_rss_bytes > 100 * 2**20  # TensorFlow alone is hundreds of MiB
    assert outcome.peak_gpu_bytes is None
    assert outcome.wall_s > 0


@pytest.mark.tf
def test_progress_reaches_the_caller_with_measured_throughput(completed):
    _, reports = completed
    measured = [p for p in reports if not p.warming_up and p.examples_per_sec is not None]
    assert measured and all(p.examples_per_sec > 0 for p in measured)
    # The last step of every phase is always sent, whatever the throttle dropped.
    finals = {p.phase for p in reports if p.measured_steps == p.target_steps == 5}
    assert finals == set(Phase)


@pytest.mark.tf
def test_user_output_on_stdout_does_not_disturb_the_protocol(completed):
    outcome, reports = completed
    assert outcome.status is TrialStatus.COMPLETE
    # TINY printed a protocol-looking progress line with 99 steps; it never arrived.
    assert all(p.measured_steps <= 5 for p in reports)


@pytest.mark.tf
def test_a_file_without_make_dataset_is_fatal_with_the_loaders_message(tmp_path, trials_dir):
    outcome = run_trial(_request(_write(tmp_path, NO_MAKE_DATASET)), Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.FATAL
    assert "defines no `make_dataset`" in outcome.reason
    assert outcome.result is None
    _assert_nothing_left(trials_dir)


@pytest.mark.tf
def test_a_dataset_raising_at_run_time_fails_the_trial_with_its_message(tmp_path, trials_dir):
    outcome = run_trial(_request(_write(tmp_path, RAISES_AT_RUN_TIME)), Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.FAILED
    assert "the dataset failed while producing batch 1" in outcome.reason
    assert "corrupt record 7" in outcome.reason
    _assert_nothing_left(trials_dir)


@pytest.mark.tf
def test_a_hang_times_out_and_kills_the_whole_process_group(tmp_path, trials_dir):
    path = _write(tmp_path, HANGS)
    # The limit must fire after the file started its helper; a loaded host can take longer
    # than the first limit to import TensorFlow, so it doubles until the helper was there.
    timeout_s = 8
    while True:
        outcome = run_trial(_request(path), Budgets(timeout_s=timeout_s))
        if (tmp_path / "helper.pid").exists() or timeout_s >= HANG_S:
            break
        timeout_s *= 2
    assert outcome.status is TrialStatus.TIMEOUT
    assert outcome.reason == f"still running after {timeout_s} s (--trial-timeout)"
    assert timeout_s <= outcome.wall_s < timeout_s + 60  # stopped at its limit
    helper = int((tmp_path / "helper.pid").read_text())
    assert _gone(helper)
    _assert_nothing_left(trials_dir)


@pytest.mark.tf
def test_a_trial_over_the_ram_budget_is_killed(tmp_path, trials_dir):
    budget = int(1.5 * GIB)
    (tmp_path / "model.pt").write_text("trained")
    outcome = run_trial(
        _request(_write(tmp_path, ALLOCATES)), Budgets(ram_bytes=budget, timeout_s=120)
    )
    assert outcome.status is TrialStatus.RAM_BUDGET, outcome.reason
    # Killed before its run could put the file back: the runner did, from the trial's copy.
    assert (tmp_path / "model.pt").read_text() == "trained"
    assert outcome.peak_rss_bytes > budget
    used = re.fullmatch(
        r"used ([\d.]+) GiB of host RAM \(.+ shared pages once\), over the 1\.5 GiB budget "
        r"\(--ram-budget\)",
        outcome.reason,
    )
    assert used is not None, outcome.reason
    assert float(used.group(1)) >= 1.5
    assert outcome.wall_s < 60  # killed, not left to finish its sleep
    _assert_nothing_left(trials_dir)


def test_dataloader_workers_are_not_charged_for_the_trainers_shared_pages(tmp_path, trials_dir):
    pytest.importorskip("torch")
    # Trainer and workers' private pages come to about 0.43 GB here; RSS summed, about 1.5 GB.
    budget = int(0.75 * GIB)
    pipeline = _write(tmp_path, SHARES_WITH_WORKERS)
    request = TrialRequest(pipeline, Knobs(batch_size=4, num_workers=3), steps=6, warmup=1)
    outcome = run_trial(request, Budgets(ram_bytes=budget, timeout_s=120))

    assert outcome.status is TrialStatus.COMPLETE, outcome.reason
    summed = int((tmp_path / "summed_rss").read_text())
    assert summed > budget > outcome.peak_rss_bytes  # RSS summed would have pruned it
    assert outcome.peak_rss_bytes > 160 * 10**6  # the trainer's array counts, once
    _assert_nothing_left(trials_dir)


@pytest.mark.tf
def test_a_child_killed_by_sigkill_is_not_blamed_on_memory_without_evidence(tmp_path, trials_dir):
    outcome = run_trial(_request(_write(tmp_path, KILLS_ITSELF)), Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.CRASHED
    # The kernel counted no OOM kill (or this machine cannot tell): never "ran out of memory".
    expected = signal_reason(signal.SIGKILL, oom_killed=None if oom_kill_count() is None else False)
    assert outcome.reason == expected
    assert "ran out of memory" not in outcome.reason
    _assert_nothing_left(trials_dir)


def test_sigkill_reasons_follow_the_kernel_s_evidence():
    assert "the kernel's out-of-memory killer (the kernel counted an OOM kill" in signal_reason(
        signal.SIGKILL, oom_killed=True
    )
    assert "--ram-budget" in signal_reason(signal.SIGKILL, oom_killed=True)
    assert "from outside tfperf, not for lack of memory" in signal_reason(
        signal.SIGKILL, oom_killed=False
    )
    assert "no OOM counter was readable here" in signal_reason(signal.SIGKILL)


def test_oom_kill_count_reads_the_kernel_s_counters():
    count = oom_kill_count()
    if Path("/proc/vmstat").is_file() and "oom_kill " in Path("/proc/vmstat").read_text():
        assert isinstance(count, int) and count >= 0
    else:
        assert count is None


def test_folders_of_dead_tuners_are_reaped_and_live_ones_kept(trials_dir):
    ended = psutil.Popen(["true"])
    ended.wait()
    stale = trials_dir / f"tfperf-trial-{ended.pid}-abc"
    live = trials_dir / f"tfperf-trial-{psutil.Process().pid}-def"
    other = trials_dir / "tfperf-trial-xyz"  # no pid: not ours to judge
    for folder in (stale, live, other):
        folder.mkdir()
        (folder / "request.json").write_text("{}")
    assert reap_stale_folders() == [stale]
    assert sorted(p.name for p in trials_dir.iterdir()) == sorted([live.name, other.name])


@pytest.mark.tf
def test_on_progress_returning_false_prunes_the_trial(tmp_path, trials_dir):
    seen: list[Progress] = []

    def prune_once_measured(progress: Progress) -> bool:
        seen.append(progress)
        return progress.examples_per_sec is None

    outcome = run_trial(
        _request(_write(tmp_path, TINY), steps=100_000),
        # No NVML here: the GPU budget is logged as not enforced, and the trial still runs.
        Budgets(gpu_memory_bytes=GIB, timeout_s=120),
        on_progress=prune_once_measured,
    )
    assert outcome.status is TrialStatus.PRUNED
    assert outcome.result is None and outcome.peak_gpu_bytes is None
    assert outcome.reason == pruned_reason(seen[-1])
    assert re.fullmatch(
        r"pruned at [\d,]+ examples/s after \d+ measured steps? \(end-to-end phase\)",
        outcome.reason,
    )
    _assert_nothing_left(trials_dir)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_gpu_budget_problem_explains_why_without_a_gpu():
    problem = gpu_budget_problem()
    assert problem is not None and "NVML" in problem


# --- fake interpreters: the parent's handling, without TensorFlow ------------------------------


def _fake_python(folder: Path, script: str) -> str:
    """An executable standing in for `python -m tfperf.trials._worker REQUEST.json`."""
    path = folder / "fake-python"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(script).lstrip(), encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def _fake_run(tmp_path: Path, script: str, **kwargs: object) -> TrialOutcome:
    request = TrialRequest(tmp_path / "unused.py", Knobs(), steps=1)
    return run_trial(
        request, Budgets(timeout_s=30), python=_fake_python(tmp_path, script), **kwargs
    )


def test_an_odd_exit_status_is_a_crash_quoting_the_childs_stderr(tmp_path, trials_dir):
    outcome = _fake_run(tmp_path, 'echo "libfoo.so: cannot open" >&2\nexit 3\n')
    assert outcome.status is TrialStatus.CRASHED
    assert outcome.reason == "the trial exited with status 3; its output ended with:\n" + (
        "libfoo.so: cannot open"
    )
    _assert_nothing_left(trials_dir)


def test_a_signal_other_than_sigkill_is_named(tmp_path, trials_dir):
    outcome = _fake_run(tmp_path, "kill -SEGV $$\n")
    assert outcome.status is TrialStatus.CRASHED
    assert outcome.reason.startswith("killed by SIGSEGV")


def test_an_error_message_from_the_child_is_the_reason(tmp_path, trials_dir):
    line = encode_message({"type": "error", "kind": "failed", "error": "X", "message": "boom"})
    outcome = _fake_run(tmp_path, f"echo '{line}'\nexit 1\n")
    assert outcome.status is TrialStatus.FAILED
    assert outcome.reason == "boom"


def test_a_configuration_the_framework_refused_is_pruned_with_its_reason(tmp_path, trials_dir):
    refused = {"type": "error", "kind": "refused", "error": "X", "message": "tf.data refused it"}
    outcome = _fake_run(tmp_path, f"echo '{encode_message(refused)}'\nexit 1\n")
    assert outcome.status is TrialStatus.PRUNED
    assert outcome.reason == "tf.data refused it"


@pytest.mark.tf
def test_calls_above_a_literal_cycle_length_are_refused_not_failed(tmp_path, trials_dir):
    from tests.pipelines import LITERAL_CYCLE

    request = TrialRequest(_write(tmp_path, LITERAL_CYCLE), Knobs(num_parallel_calls=4), steps=2)
    outcome = run_trial(request, Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.PRUNED, outcome.reason
    assert outcome.reason.startswith(
        "tf.data refused this configuration while make_dataset(knobs) built the dataset: "
    )
    assert "less than or equal to `cycle_length`" in outcome.reason
    _assert_nothing_left(trials_dir)


def test_exit_zero_without_a_result_is_a_crash(tmp_path, trials_dir):
    outcome = _fake_run(tmp_path, "exit 0\n")
    assert outcome.status is TrialStatus.CRASHED
    assert "left no result" in outcome.reason


def test_an_interrupt_while_waiting_kills_the_child_and_propagates(tmp_path, trials_dir):
    line = encode_message(progress_message(_progress()))
    # The child reports once, then would sleep for good; its own child must die too.
    script = f"sleep 1000 &\necho $! > {tmp_path}/helper.pid\necho '{line}'\nexec sleep 1000\n"

    def interrupt(progress: Progress) -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fake_run(tmp_path, script, on_progress=interrupt)
    assert _gone(int((tmp_path / "helper.pid").read_text()))
    _assert_nothing_left(trials_dir)


def test_poll_interval_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="poll_interval_s > 0"):
        run_trial(_request(tmp_path / "p.py"), Budgets(), poll_interval_s=0)


# --- pure helpers ------------------------------------------------------------------------------


def _progress(
    phase: Phase = Phase.END_TO_END,
    warming_up: bool = False,
    measured: int = 10,
    rate: float | None = 1234.4,
    complete: bool = False,
) -> Progress:
    return Progress(phase, warming_up, measured, 100, rate, complete)


def test_protocol_lines_round_trip_and_other_lines_are_ignored():
    message = progress_message(_progress(complete=True))
    assert decode_message(encode_message(message)) == message
    assert progress_from_message(message) == _progress(complete=True)
    assert decode_message("loss: 0.3") is None
    assert decode_message(PROTOCOL_PREFIX + "{not json") is None
    assert decode_message(PROTOCOL_PREFIX + "[1, 2]") is None
    assert decode_message(PROTOCOL_PREFIX + '{"no": "type"}') is None
    assert progress_from_message({"type": "progress", "phase": "sideways"}) is None


def test_throttle_sends_stage_starts_first_rates_and_phase_ends_at_most_ten_a_second():
    now = [0.0]
    throttle = ProgressThrottle(min_interval_s=0.1, clock=lambda: now[0])

    def send(progress: Progress, at: float) -> bool:
        now[0] = at
        return throttle.should_send(progress)

    assert send(_progress(warming_up=True, measured=0, rate=None), 0.0)  # warm-up starts
    assert not send(_progress(warming_up=True, measured=0, rate=None), 0.01)
    assert send(_progress(measured=0, rate=None), 0.02)  # measurement starts
    assert send(_progress(measured=1), 0.03)  # the first rate
    assert not send(_progress(measured=2), 0.04)
    assert send(_progress(measured=3), 0.14)  # 0.1 s later
    # Past the target steps, still short of the window's minimum seconds: throttled.
    assert not send(_progress(measured=100), 0.15)
    assert not send(_progress(measured=101), 0.16)
    assert send(_progress(measured=102, complete=True), 0.17)  # the phase's last step
    assert send(_progress(Phase.PIPELINE_ONLY, measured=0, rate=None), 0.16)


def test_errors_sort_into_fatal_and_failed_with_their_exit_status():
    assert error_message(PipelineFileError("no make_dataset")) == (
        2,
        {
            "type": "error",
            "kind": "fatal",
            "error": "PipelineFileError",
            "message": "no make_dataset",
        },
    )
    assert error_message(KnobError("batch_size"))[1]["kind"] == "fatal"
    status, message = error_message(PipelineRuntimeError("dataset failed"))
    assert (status, message["kind"], message["message"]) == (1, "failed", "dataset failed")
    assert error_message(SystemExit(3))[1]["message"] == (
        "the pipeline called sys.exit(3) while tfperf ran it"
    )


def test_an_unexpected_error_carries_its_traceback():
    try:
        raise RuntimeError("boom")
    except RuntimeError as error:
        status, message = error_message(error)
    assert status == 1 and message["error"] == "RuntimeError"
    assert message["message"].endswith("RuntimeError: boom")
    assert "test_runner.py" in message["message"]


def test_worker_reports_a_bad_knob_as_fatal_before_importing_tensorflow(tmp_path):
    request = WorkRequest(
        pipeline="p.py", knobs={"batch_size": 0}, steps=1, result_path=str(tmp_path / "r")
    )
    (tmp_path / "request.json").write_text(json.dumps(request.to_dict()))
    sent: list[dict] = []
    assert worker.run(tmp_path / "request.json", sent.append) == 2
    assert sent[0]["kind"] == "fatal" and "batch_size" in sent[0]["message"]


def test_worker_reports_an_unreadable_request_as_fatal(tmp_path):
    sent: list[dict] = []
    assert worker.run(tmp_path / "missing.json", sent.append) == 2
    assert "cannot read the request file" in sent[0]["message"]
    (tmp_path / "bad.json").write_text('{"pipeline": 1}')
    assert worker.run(tmp_path / "bad.json", sent.append) == 2
    assert sent[1]["message"].startswith(
        f"the request file {tmp_path / 'bad.json'} does not match the WorkRequest schema: "
        "pipeline: Input should be a valid string (got 1); knobs: missing;"
    )


def test_work_request_round_trips_and_checks_types():
    request = WorkRequest("p.py", {"batch_size": 8}, "/r.json", steps=5, warmup=None, argv=("--x",))
    assert WorkRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    # Strict JSON types: a request is written by tfperf, so "5" or true is a bug, not a 5 or 1.
    with pytest.raises(worker.RequestError) as raised:
        WorkRequest.from_dict({**request.to_dict(), "steps": "5", "analyse_stages": 1})
    assert str(raised.value) == (
        "the request does not match the WorkRequest schema: steps: Input should be a valid "
        "integer (got '5'); analyse_stages: Input should be a valid boolean (got 1)"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": 0}, "the request: `steps >= 1` must hold, but got steps=0"),
        ({"warmup": -1}, "the request: `warmup >= 0` must hold, but got warmup=-1"),
        (
            {"mode": "measure"},
            "the request does not match the WorkRequest schema: mode: Input should be "
            "'profile' or 'discover' (got 'measure')",
        ),
        (
            {"argv": ["--x", 3]},
            "the request does not match the WorkRequest schema: argv[1]: Input should be a "
            "valid string (got 3)",
        ),
    ],
)
def test_work_request_names_the_field_at_fault(change, message):
    data = {**WorkRequest("p.py", {}, "/r.json", steps=5).to_dict(), **change}
    with pytest.raises(worker.RequestError) as raised:
        WorkRequest.from_dict(data)
    assert str(raised.value) == message


def test_work_request_must_be_a_json_object():
    with pytest.raises(worker.RequestError) as raised:
        WorkRequest.from_dict(["p.py"])
    assert str(raised.value) == (
        "the request does not match the WorkRequest schema: the top level: Input should be an "
        "object (got ['p.py'])"
    )


def test_exits_are_classified():
    error = {"type": "error", "kind": "fatal", "message": "broken file"}
    assert classify_exit(0, None, "") == (TrialStatus.COMPLETE, "")
    assert classify_exit(2, error, "") == (TrialStatus.FATAL, "broken file")
    assert classify_exit(1, None, "") == (
        TrialStatus.FAILED,
        "the trial exited with status 1 without a message (it wrote nothing to stderr)",
    )
    assert classify_exit(-9, None, "")[0] is TrialStatus.CRASHED
    assert classify_exit(-11, None, "Fatal Python error") == (
        TrialStatus.CRASHED,
        "killed by SIGSEGV; its output ended with:\nFatal Python error",
    )


def test_reasons_name_the_figure_the_limit_and_the_option():
    assert ram_reason(int(1.21 * GIB), GIB) == (
        "used 1.21 GiB of host RAM (the trial's resident pages and its subprocesses' private "
        "ones: shared pages once), over the 1 GiB budget (--ram-budget)"
    )
    assert gpu_reason(3 * GIB, 2 * GIB) == (
        "used 3 GiB of GPU memory, over the 2 GiB budget (--gpu-memory-budget)"
    )
    assert timeout_reason(30.0) == "still running after 30 s (--trial-timeout)"
    assert timeout_reason(7.5) == "still running after 7.5 s (--trial-timeout)"
    assert pruned_reason(_progress()) == (
        "pruned at 1,234 examples/s after 10 measured steps (end-to-end phase)"
    )
    assert pruned_reason(_progress(warming_up=True, rate=None)) == (
        "pruned while warming up (end-to-end phase)"
    )
    assert signal_reason(200) == "killed by signal 200 (it wrote nothing to stderr)"
