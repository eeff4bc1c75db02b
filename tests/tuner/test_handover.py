"""The verified hand-over: the whole patch of the winner, applied to a copy and measured."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from tests.deadlines import HANG_S
from tests.fakes.trials import FakeRunner
from tfperf.cli.sites import describe_handover, patch_section
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.hardware import Machine
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.pipeline import PipelineFile, load_pipeline
from tfperf.results.tune import Measurement, Objective, TuneResult, speedup
from tfperf.trials import run_trial
from tfperf.tuner import TuneOptions, Tuner, hand_over

MACHINE = Machine(
    cpu_count=2, total_ram_bytes=8 << 30, available_ram_bytes=6 << 30, gpu_names=(), cpu_bf16=False
)

#: One blocking read per record (a thread sleeps in numpy_function), and no prefetch at all.
BLOCKING = """
import time

import keras
import numpy as np
import tensorflow as tf


def fetch(index):
    time.sleep(0.002)  # a blocking read: a thread waits, the CPU does not work
    return np.full([4], index, np.float32)


def make_dataset():
    ds = tf.data.Dataset.range(256)
    ds = ds.map(
        lambda i: tf.numpy_function(fetch, [i], tf.float32), num_parallel_calls=2
    )
    ds = ds.map(lambda x: (tf.reshape(x, [4]), x[0]))
    return ds.batch(8)


def make_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""
PREFETCH = "prefetch@pipeline.py:13.buffer_size"
BATCH = "batch@pipeline.py:19.batch_size"


def write(folder: Path, source: str, name: str = "pipeline.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def discovered(path: Path) -> PipelineFile:
    """The file with its sites found in this process (cheaper than a child for a test)."""
    pipeline = load_pipeline(path)
    return pipeline.with_discovery(discover_sites(pipeline))


def pool_and_prefetch_speed(knobs: Knobs) -> float:
    """Input wait: a private pool of 4 threads and an added prefetch each halve it or more."""
    pool = 4 if knobs.private_threadpool_size == 4 else 1
    prefetch = 2 if knobs.sites.get(PREFETCH) not in (None, 0) else 1
    return 0.08 / pool / prefetch


@pytest.mark.tf
def test_the_patch_holds_the_thread_pool_and_the_added_prefetch_and_is_verified(tmp_path):
    path = write(tmp_path, BLOCKING)
    pipeline = discovered(path)
    sites = {site.name: site for site in pipeline.discovery.sites}
    assert sites[PREFETCH].calls == 0 and sites[PREFETCH].value == 0  # none in the code
    assert pipeline.discovery.end == "pipeline.py:13"
    options = TuneOptions(
        trials=3,
        steps=4,
        warmup=1,
        storage=f"sqlite:///{tmp_path / 'study.db'}",
        seed=1,
        rounds=1,
        finalists=1,
        fixes={
            "private_threadpool_size": 4,
            PREFETCH: AUTOTUNE,
            "mixed_precision": "float32",
            "deterministic": None,
            BATCH: 8,
        },
    )
    # The search is faked (its winner is fixed by the speeds above); the hand-over is real.
    tuner = Tuner(pipeline, options, runner=FakeRunner(wait_for=pool_and_prefetch_speed))
    tuner.machine = MACHINE
    result = tuner.run()
    assert result.best.knobs.private_threadpool_size == 4
    verifying: list[bool] = []

    def measured(request, budgets):  # type: ignore[no-untyped-def]
        verifying.append(request.end_to_end_only)
        return run_trial(request, budgets)

    tuner.runner = measured
    handover = hand_over(tuner, result, verify=True)
    assert handover is not None
    assert verifying and all(verifying)  # the ratio reads end to end: nothing else is run
    assert "+    options.threading.private_threadpool_size = 4\n" in handover.diff
    assert ".prefetch(tf.data.AUTOTUNE).with_options(options)\n" in handover.diff
    assert handover.manual_edits == []
    assert handover.verify_problem is None
    assert handover.verified is not None and handover.verified.ratio > 0
    result.handover = handover
    assert "the patched files run at " in describe_handover(handover, result)
    assert TuneResult.from_dict(result.to_dict()).handover == handover  # JSON carries it all

    for command in (["patch", "-p0"], ["git", "apply"]):
        copy = tmp_path / command[0]
        copy.mkdir()
        shutil.copy(path, copy / "pipeline.py")
        subprocess.run(command, input=handover.diff, text=True, cwd=copy, check=True)
        patched = (copy / "pipeline.py").read_text()
        assert "options.threading.private_threadpool_size = 4" in patched


@pytest.mark.tf
def test_no_verify_hands_over_the_patch_unmeasured(tmp_path, monkeypatch, capsys):
    import json

    from tfperf.cli.main import main

    write(tmp_path, BLOCKING)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", FakeRunner(pool_and_prefetch_speed))
    fixes = ["private_threadpool_size=4", f"{PREFETCH}=AUTOTUNE", "mixed_precision=float32"]
    fixes += ["deterministic=None", f"{BATCH}=8"]
    options = ["--trials", "3", "--finalists", "1", "--rounds", "1", "--seed", "1", "--quiet"]
    argv = ["tune", "pipeline.py", *options, *(f"--fix={fix}" for fix in fixes)]
    status = main([*argv, "--write-patch", "--no-verify"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "added: options.threading.private_threadpool_size = 4" in out
    assert "Verification: not verified (--no-verify" in out
    saved = json.loads((tmp_path / "reports" / "pipeline-tune.json").read_text())
    assert "+    options.threading.private_threadpool_size = 4\n" in saved["handover"]["diff"]
    assert saved["handover"]["verified"] is None


def measurement(label: str, batch: int, rates: list[float]) -> Measurement:
    knobs = Knobs(sites={BATCH: batch, PREFETCH: 0})
    return Measurement(label, None, knobs, rates, 0, None)


@pytest.mark.tf
def test_a_batch_change_within_noise_of_the_input_only_best_is_not_in_the_patch(tmp_path):
    """Records built by hand: the fastest doubles the batch, but not beyond the noise."""
    pipeline = discovered(write(tmp_path, BLOCKING))
    baseline = measurement("baseline", 8, [100.0, 104.0])
    input_only = measurement("trial 3", 8, [150.0, 160.0])
    input_only.knobs = input_only.knobs.replace(private_threadpool_size=4)
    fastest = measurement("trial 4", 16, [152.0, 170.0])
    fastest.knobs = fastest.knobs.replace(private_threadpool_size=4)
    vs_baseline = speedup(input_only, baseline)
    result = TuneResult(
        pipeline=str(pipeline.path),
        study_name="pipeline",
        storage="sqlite://",
        objective=Objective.THROUGHPUT,
        best=input_only,  # the input-only rule: the batch change did not beat the noise
        baseline=baseline,
        autotune=None,
        candidates=[fastest, input_only, baseline],
        speedup_vs_baseline=vs_baseline,
        speedup_vs_autotune=None,
        recommendation="",
        changes_training=[],
        pareto_trials=[],
        trial_counts={},
        trials_this_run=0,
        wall_s=0.0,
        ram_budget_bytes=None,
        gpu_memory_budget_bytes=None,
        input_only=input_only,
        fastest=fastest,
        gain_over_input_only=speedup(fastest, input_only),
    )
    assert not result.gain_over_input_only.significant and vs_baseline.significant
    handover = hand_over(types.SimpleNamespace(pipeline=pipeline), result, verify=False)
    assert "private_threadpool_size = 4" in handover.diff
    assert "+    return ds.batch(8).with_options(options)\n" in handover.diff  # batch left alone
    assert "batch(16)" not in handover.diff
    assert handover.verify_problem.startswith("not verified")
    text = patch_section(pipeline, result, None)
    assert "batch@" not in text


SCRIPT = """
import argparse

import tensorflow as tf
from tensorflow import keras

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
options = parser.parse_args()


def build():
    ds = tf.data.Dataset.range(64).map(lambda i: tf.cast(i, tf.float32))
    return ds.map(lambda x: (tf.fill([4], x), x)).batch(8)


if __name__ == "__main__":
    train, validation = build(), build()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with tf.distribute.get_strategy().scope():
        model.fit(train, epochs=options.epochs, validation_data=validation, steps_per_epoch=1)
"""


@pytest.mark.tf
def test_a_script_patch_applies_and_the_patched_script_runs(tmp_path):
    path = write(tmp_path, SCRIPT, "train.py")
    pipeline = load_pipeline(path, ["--epochs", "1"])
    discovery = discover_sites(pipeline)
    pipeline = pipeline.with_discovery(discovery)
    assert discovery.end == "train.py:21"
    inserted = next(s for s in discovery.sites if s.calls == 0 and s.method == "prefetch")
    before = pipeline.baseline.to_dict()
    after = {
        **before,
        "mixed_precision": "mixed_bfloat16",
        "private_threadpool_size": 2,
        "sites": {**before["sites"], inserted.name: AUTOTUNE},
    }
    from tfperf.sites import patch_for

    patch = patch_for(tmp_path, discovery, before, after, script=True)
    assert 'keras.mixed_precision.set_global_policy("mixed_bfloat16")' in patch.diff
    assert "data_options.threading.private_threadpool_size = 2" in patch.diff  # `options` taken
    assert "model.fit(train.prefetch(tf.data.AUTOTUNE).with_options(data_options), " in patch.diff
    for command in (["patch", "-p0"], ["git", "apply"]):
        copy = tmp_path / command[0]
        copy.mkdir()
        shutil.copy(path, copy / "train.py")
        subprocess.run(command, input=patch.diff, text=True, cwd=copy, check=True)
    ran = subprocess.run(
        [sys.executable, "train.py", "--epochs", "1"],
        cwd=tmp_path / "patch",
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_a_verified_gain_above_the_headline_says_why_the_two_differ():
    from tests.report.helpers import tune_result
    from tfperf.results.tune import HandOver, Speedup

    result = tune_result()
    result.speedup_vs_baseline = Speedup(1.56, 0.045, True)
    handover = HandOver(root=".", diff="", manual_edits=[], verified=Speedup(2.34, 0.02, True))
    text = describe_handover(handover, result)
    assert "That is above the winner's 1.56x beyond noise" in text
    assert text.endswith("the recommendation rests on the study's 1.56x.")
    same = HandOver(root=".", diff="", manual_edits=[], verified=Speedup(1.58, 0.02, True))
    assert "beyond noise" not in describe_handover(same, result)
