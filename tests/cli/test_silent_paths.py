"""Issue 48, items 4, 5, 6, 10 and 11: no hang without a word, no flag ignored in silence.

Real processes where the item is about them (a hang, a Ctrl-C, the process's exit); the
messages' text is asserted, never a duration.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import warnings
from pathlib import Path
from types import SimpleNamespace

import optuna
import psutil
import pytest

from tests import pipelines
from tests.cli.console import start_tfperf, wait_for_file
from tests.deadlines import HANG_S
from tfperf.cli.main import EXIT_FAILED, EXIT_USAGE, main

# Batches of 8 come; at 16 (the batch of two replicas under --scaling) the first never does.
BLOCKS_AT_TWO_REPLICAS = """
import pathlib, time
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 8}

def _never(x):
    pathlib.Path(__file__).with_name("blocking").touch()  # the test waits for it
    time.sleep(3600)
    return x

def make_dataset(knobs):
    ds = tf.data.Dataset.from_tensor_slices(np.ones((64, 4), "float32")).repeat()
    ds = ds.batch(knobs.batch_size).map(lambda x: (x, tf.zeros((tf.shape(x)[0], 1))))
    if knobs.batch_size >= 16:
        ds = ds.map(lambda x, y: (tf.numpy_function(_never, [x], tf.float32), y))
        ds = ds.map(lambda x, y: (tf.ensure_shape(x, [None, 4]), y))
    return ds

def make_model(knobs):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""

# The first batch never arrives.
HANGS = """
import time
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 4}

def _never(x):
    time.sleep(3600)
    return x

def make_dataset(knobs):
    ds = tf.data.Dataset.from_tensor_slices(np.ones((16, 4), "float32")).batch(knobs.batch_size)
    return ds.map(lambda x: (tf.numpy_function(_never, [x], tf.float32), tf.zeros((4, 1))))

def make_model(knobs):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""

# Marks, per process, whether its exit handlers ran and whether the interpreter tore its
# modules down (an object's finaliser runs when the module's globals are cleared).
MARKS_ITS_EXIT = (
    """
import atexit, os, pathlib
_HERE = pathlib.Path(__file__).parent
atexit.register(lambda: (_HERE / f"atexit-{os.getpid()}").touch())

class _Torn:
    def __del__(self):
        (_HERE / f"teardown-{os.getpid()}").touch()

_TORN = _Torn()
"""
    + pipelines.TRAIN_STEP
)


def _kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
    process.kill()
    process.communicate()


def _quick(path: Path, tmp_path: Path) -> list[str]:
    return [
        "profile",
        str(path),
        "--steps",
        "2",
        "--min-seconds",
        "0",
        "--no-stages",
        "--quiet",
        "--json",
        str(tmp_path / "out.json"),
        "--html",
        str(tmp_path / "out.html"),
    ]


# Item 4: replicas the batch cannot feed, counts the host cannot hold, a stall.


def test_cpu_replicas_above_the_global_batch_are_refused_before_measuring(
    capsys, write_pipeline, tmp_path
):
    path = write_pipeline(pipelines.TRAIN_STEP)  # batch_size 4
    status = main([*_quick(path, tmp_path), "--cpu-replicas", "8"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert (
        "--cpu-replicas 8 splits each global batch of batch_size=4 over 8 replicas, so some "
        "replicas get no examples and the step waits for them forever. Give --cpu-replicas 4 "
        "or fewer, or --set batch_size=8 or more." in err
    )
    assert not (tmp_path / "out.json").exists()


def test_tune_refuses_cpu_replicas_above_the_baselines_batch(
    capsys, monkeypatch, write_pipeline, tmp_path
):
    monkeypatch.chdir(tmp_path)
    path = write_pipeline(pipelines.TUNER_SOURCE)  # batch_size 8
    status = main(["tune", str(path), "--cpu-replicas", "16", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert "--cpu-replicas 16 splits each global batch of batch_size=8 over 16 replicas" in err
    assert not (tmp_path / "studies").exists()  # refused before the study opened


def test_cpu_replicas_above_the_cpus_are_noted(capsys, write_pipeline):
    from tfperf.cli._devices import check_cpu_replicas
    from tfperf.frameworks import StrategyKind
    from tfperf.knobs import Knobs
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(write_pipeline(pipelines.TUNER_SOURCE))
    check_cpu_replicas(SimpleNamespace(cpu_replicas=8), pipeline, Knobs(batch_size=64), 2)
    assert "Note: --cpu-replicas 8 is more than this machine's 2 CPUs" in capsys.readouterr().err
    check_cpu_replicas(SimpleNamespace(cpu_replicas=2), pipeline, Knobs(batch_size=64), 2)
    assert capsys.readouterr().err == ""
    # Without a mirrored strategy nothing splits the batch: a small one is fine.
    unsplit = SimpleNamespace(cpu_replicas=2, strategy=StrategyKind.DEFAULT)
    check_cpu_replicas(unsplit, pipeline, Knobs(batch_size=1), 2)


def test_scaling_on_cpus_is_capped_at_the_cpu_count_and_says_so():
    from tfperf.cli._scaling import _plan_message, scaling_plan
    from tfperf.hardware import Machine

    plan = scaling_plan(64, Machine(2, 8 * 2**30, 4 * 2**30, (), False))
    assert plan.counts == (1, 2) and plan.capped_from == 64
    assert "--scaling 64 asked for more replicas than this machine's CPUs" in _plan_message(plan)


def test_a_profile_that_makes_no_progress_is_stopped_and_says_where(capsys, write_pipeline):
    path = write_pipeline(HANGS)
    status = main(["profile", str(path), "--stall-timeout", "2", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_FAILED, err
    assert "pipeline.py: stopped after 2 s without progress (--stall-timeout): no step ever " in err
    assert psutil.Process().children(recursive=True) == []


def test_the_stall_message_names_the_phase_and_the_step():
    from tfperf.cli._stall import DEFAULT_STALL_S, stall_message
    from tfperf.measure import Progress
    from tfperf.results import Phase

    last = Progress(Phase.END_TO_END, warming_up=False, measured_steps=41, target_steps=100)
    text = stall_message(Path("p.py"), DEFAULT_STALL_S, last)
    assert "stopped after 900 s without progress" in text
    assert "end-to-end phase and step 42 of the measured window never finished" in text


def test_the_default_stall_guard_is_on_and_generous():
    from tfperf.cli.main import build_parser

    args = build_parser().parse_args(["profile", "p.py"])
    assert args.stall_timeout == 900
    assert build_parser().parse_args(["profile", "p.py", "--stall-timeout", "0"]).stall_timeout == 0


# Item 5: a Ctrl-C during --scaling keeps the profile already measured.


@pytest.mark.tf
def test_ctrl_c_during_scaling_keeps_and_prints_the_profile(write_pipeline, tmp_path):
    path = write_pipeline(BLOCKS_AT_TWO_REPLICAS)
    process = start_tfperf(tmp_path, *_quick(path, tmp_path), "--scaling", "2")
    try:
        wait_for_file(process, path.with_name("blocking"))  # the two-replica run blocks
        # Saved before the scaling runs started.
        assert json.loads((tmp_path / "out.json").read_text())["scaling"] is None
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=HANG_S)
    except BaseException:
        _kill(process)
        raise
    assert process.returncode == 130, err
    assert "Verdict:" in out and f"Result JSON: {tmp_path / 'out.json'}" in out
    assert "(without the scaling)" in out
    assert json.loads((tmp_path / "out.json").read_text())["end_to_end"]["steps"] >= 2
    assert (tmp_path / "out.html").stat().st_size > 0


# Item 6: a flag with no effect here says so.


@pytest.mark.tf
def test_gpu_memory_growth_without_a_gpu_is_noted_and_not_recorded(
    capsys, write_pipeline, tmp_path
):
    from tfperf.hardware import detect_machine

    if detect_machine().has_gpu:
        pytest.skip("the note is for a machine without a GPU")
    path = write_pipeline(pipelines.TRAIN_STEP)
    status = main([*_quick(path, tmp_path), "--gpu-memory-growth", "on"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert (
        "Note: --gpu-memory-growth on has no effect here: this machine has no GPU that "
        "TensorFlow can use" in err
    )
    assert json.loads((tmp_path / "out.json").read_text())["knobs"]["gpu_memory_growth"] is None


def test_profile_records_the_gpu_memory_flags_it_applies(monkeypatch, write_pipeline):
    from tfperf.cli.profile import _check_devices
    from tfperf.hardware import Machine
    from tfperf.knobs import Knobs
    from tfperf.pipeline import load_pipeline

    gpu = Machine(2, 8 * 2**30, 4 * 2**30, ("GPU 0",), False)
    monkeypatch.setattr("tfperf.hardware.detect_machine", lambda: gpu)
    pipeline = load_pipeline(write_pipeline(pipelines.TUNER_SOURCE))
    args = SimpleNamespace(cpu_replicas=None, gpu_memory_limit=None, gpu_memory_growth=True)
    assert _check_devices(args, pipeline, Knobs()).gpu_memory_growth is True
    args.gpu_memory_growth, args.gpu_memory_limit = None, 1024
    assert _check_devices(args, pipeline, Knobs(gpu_memory_growth=True)).gpu_memory_growth is None


def test_gpu_memory_flags_pin_no_growth_without_a_gpu(capsys):
    from tfperf.cli._devices import gpu_memory_fixes, note_gpu_flags

    args = SimpleNamespace(gpu_memory_limit=None, gpu_memory_growth=True)
    assert gpu_memory_fixes(args, has_gpu=False) == {"gpu_memory_growth": None}
    assert gpu_memory_fixes(args, has_gpu=True) == {"gpu_memory_growth": True}
    no_flags = SimpleNamespace(gpu_memory_limit=None, gpu_memory_growth=None)
    assert gpu_memory_fixes(no_flags, has_gpu=False) == {}
    note_gpu_flags(SimpleNamespace(gpu_memory_limit=512, gpu_memory_growth=None), has_gpu=False)
    assert "Note: --gpu-memory-limit 512 has no effect here" in capsys.readouterr().err


def test_reorder_on_a_knobs_file_says_it_has_no_effect(capsys, write_pipeline):
    from tfperf.cli._reorder import reorder_when_asked
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(write_pipeline(pipelines.TUNER_SOURCE))
    assert reorder_when_asked(pipeline, asked=True) is pipeline
    assert (
        "Note: --reorder has no effect on pipeline.py: its make_dataset(knobs) builds the "
        "pipeline in its own order" in capsys.readouterr().err
    )
    reorder_when_asked(pipeline, asked=False)
    assert capsys.readouterr().err == ""


# Item 10: the re-measurement shows its phase and a line per finished run in a log.


def test_remeasurement_shows_its_phase_and_each_run_when_not_a_terminal(capsys):
    from tests.reports import fake_profile
    from tfperf.cli._tune_progress import TuneProgress
    from tfperf.knobs import Knobs
    from tfperf.results import TrialOutcome, TrialStatus
    from tfperf.tuner import Finalist

    finalists = [Finalist("trial 3", 3, Knobs()), Finalist("baseline", 0, Knobs())]
    done = TrialOutcome(TrialStatus.COMPLETE, fake_profile(), "", 0, None, 1.0)
    hung = TrialOutcome(TrialStatus.TIMEOUT, None, "still running after 60 s", 0, None, 60.0)
    with TuneProgress(trials=4) as listener:  # capsys: stderr is not a terminal
        listener.trial_finished(3, done, best=None, baseline=None)
        listener.trial_finished(4, None, best=None, baseline=None)
        listener.remeasure_started(finalists, rounds=2)
        listener.remeasured(finalists[0], done)
        listener.remeasured(finalists[1], hung)
        listener.confirm_started(["trial 3"], rounds=2)
        listener.remeasured(finalists[0], done)
    err = capsys.readouterr().err
    rate = f"{fake_profile().end_to_end.examples_per_sec:,.0f} examples/s"
    assert f"  trial 3: {rate}\n  trial 4: repeats an earlier trial\n" in err
    assert "Re-measuring 2 finalists, 2 rounds interleaved (4 runs)" in err
    assert f"  1/4 trial 3: {rate}\n" in err
    assert "  2/4 baseline: timeout: still running after 60 s\n" in err
    # Priced by the re-measurement's own runs (one ran into the 60 s trial timeout).
    assert "Confirming trial 3 on windows that played no part in choosing (2 runs; about 6" in err
    assert f"  1/2 trial 3: {rate}\n" in err


def test_the_time_left_is_a_line_after_the_first_trial_and_when_it_moves(capsys):
    from tfperf.cli._tune_progress import TuneProgress
    from tfperf.tuner import Expected

    with TuneProgress(trials=8) as listener:  # capsys: stderr is not a terminal
        listener.expected(Expected(6, search_s=360.0, runs_after=15, run_s=60.0, rerun_s=60.0))
        listener.expected(Expected(5, search_s=300.0, runs_after=15, run_s=60.0, rerun_s=60.0))
        listener.expected(Expected(0, search_s=0.0, runs_after=15, run_s=40.0, rerun_s=40.0))
        listener.expected(Expected(None, search_s=120.0, runs_after=9, run_s=10.0, rerun_s=6.0))
        listener.time_limit_reached(7, Expected(None, 0.0, 9, run_s=10.0, rerun_s=6.0), 60.0)
        listener.time_limit_reached(6, Expected(None, 0.0, 22, run_s=10.0, rerun_s=6.0), -5.0)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "Expected: about 21 min more: 6 more trials at about 60 s each, as the study's took, "
        "then about 15 re-measurement runs at about 60 s each.",
        "Expected: about 10 min more: no more trials, then about 15 re-measurement runs at "
        "about 40 s each.",
        "Expected: about 2.9 min more: the search for 2 min, at about 10 s a trial as the "
        "study's took, then about 9 re-measurement runs at about 6 s each.",
        "Time limit (--time-limit): the search stops after 7 trials of this run; the "
        "re-measurement of its finalists and the references takes about 54 s.",
        "Time limit (--time-limit): the search stops after 6 trials of this run; the "
        "re-measurement of its finalists and the references takes about 2.2 min, about 2.2 min "
        "past the limit: the references and the least re-measurement take that long here.",
    ]


# Item 11: Optuna's warnings, the wrappers of a tuner, the exit.


def test_importances_of_a_small_study_print_no_warning():
    from tfperf.report._study_data import _importances

    # A knob set in all trials but one (a reference that pins it): PED-ANOVA warns that the
    # regime of one trial is too small.
    study = optuna.create_study(direction="maximize")
    for number in range(6):
        params = {"prefetch": number % 4, "buffer": number} if number else {"buffer": number}
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={k: optuna.distributions.IntDistribution(0, 8) for k in params},
                values=[float(number)],
            )
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importances, note = _importances(study)
    assert [str(w.message) for w in caught] == []
    assert set(importances) == {"prefetch", "buffer"} and note is None


@pytest.mark.parametrize(
    ("argv", "tuner"),
    [
        (["/v/bin/python3", "/v/bin/tfperf", "tune", "x.py"], True),
        (["/v/bin/python3", "-u", "/v/bin/tfperf", "--debug", "tune", "x.py"], True),
        (["python", "-m", "tfperf", "tune", "x.py"], True),
        (["/v/bin/python", "-X", "dev", "-m", "tfperf.trials._worker", "r.json"], True),
        (["/v/bin/python", "-m", "tfperf.trials._zygote", "5", "tensorflow", "keras"], True),
        (["/v/bin/tfperf", "tune", "x.py"], True),
        (["/v/bin/python3", "/v/bin/tfperf", "profile", "x.py"], False),
        (["/usr/bin/time", "-v", "/v/bin/tfperf", "tune", "x.py"], False),
        (["timeout", "600", "tfperf", "tune", "x.py"], False),
        (["bash", "-c", "tfperf tune x.py"], False),
        (["/bin/bash", "/v/bin/tfperf", "tune", "x.py"], False),
        (["python", "-c", "import time", "/v/bin/tfperf", "tune"], False),
    ],
)
def test_a_tuner_is_known_by_its_own_command_not_a_wrappers_arguments(argv, tuner):
    from tfperf.cli.tune import _is_tuner

    assert _is_tuner(argv) is tuner


@pytest.mark.tf
def test_tfperf_ends_at_its_last_line_without_tearing_the_interpreter_down(
    write_pipeline, tmp_path
):
    path = write_pipeline(MARKS_ITS_EXIT)
    process = start_tfperf(tmp_path, *_quick(path, tmp_path))
    try:
        out, err = process.communicate(timeout=600)  # a hang guard, not a limit
    except BaseException:
        _kill(process)
        raise
    assert process.returncode == 0, err
    assert "HTML report:" in out
    # The pipeline file is loaded in tfperf's own process too: its exit handler ran there...
    assert (tmp_path / f"atexit-{process.pid}").exists()
    # ...but not the interpreter's teardown of TensorFlow's objects (the seconds after the
    # last line).
    assert not (tmp_path / f"teardown-{process.pid}").exists()
