"""`tfperf profile --scaling`: the plan, each count in a child of its own, and one real run."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from tests import pipelines
from tests.deadlines import HANG_S
from tests.fakes.trials import FakeRunner, outcome
from tfperf.cli._scaling import (
    AUTO,
    ScalingPlan,
    _gpus_visible,
    add_scaling_argument,
    measure_curve,
    scaling_plan,
)
from tfperf.cli.main import main
from tfperf.frameworks import DeviceLayout, StrategyKind
from tfperf.hardware import Machine
from tfperf.knobs import Knobs
from tfperf.pipeline import load_pipeline
from tfperf.results import TrialStatus
from tfperf.results.scaling import BatchScaling, ReplicaDevice

# Per-replica batch 8 through the batch_size knob; a single Dense layer, so each point is cheap.
SCALING = """
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 8, "prefetch": 2}

def make_dataset(knobs):
    x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
    y = np.zeros((256, 1), "float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    return ds.batch(knobs.batch_size, drop_remainder=True).prefetch(knobs.prefetch)

def make_model(knobs):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""


def machine(cpus: int = 2, gpus: int = 0) -> Machine:
    return Machine(cpus, 8 * 2**30, 4 * 2**30, tuple(f"GPU {i}" for i in range(gpus)), False)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_scaling_argument(parser)
    return parser.parse_args(list(argv))


def test_the_flag_takes_an_optional_count():
    assert parse().scaling is None
    assert parse("--scaling").scaling == AUTO
    assert parse("--scaling", "4").scaling == 4


def test_the_flag_refuses_zero_by_name(capsys):
    with pytest.raises(SystemExit):
        parse("--scaling", "0")
    assert (
        "--scaling: must be a number of replicas (1 or more), but got 0" in capsys.readouterr().err
    )


def test_on_cpu_the_limit_defaults_to_the_cpu_count():
    assert scaling_plan(AUTO, machine(cpus=6)) == ScalingPlan((1, 2, 4, 6), ReplicaDevice.CPU)
    assert scaling_plan(2, machine(cpus=6)).counts == (1, 2)


def test_on_gpus_the_limit_is_the_gpu_count_and_a_larger_ask_is_capped():
    plan = scaling_plan(AUTO, machine(gpus=4), visible="")
    assert plan == ScalingPlan((1, 2, 4), ReplicaDevice.GPU, ("0", "1", "2", "3"))
    capped = scaling_plan(8, machine(gpus=2), visible="3,5")
    assert (capped.counts, capped.gpus, capped.capped_from) == ((1, 2), ("3", "5"), 8)


def test_children_see_only_the_first_gpus_and_the_environment_comes_back(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    with _gpus_visible(("3", "5")):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5,7"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with _gpus_visible(("0",)):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def _args(path: Path) -> argparse.Namespace:
    return argparse.Namespace(
        pipeline=path,
        steps=5,
        min_seconds=0.0,
        warmup=1,
        epoch_steps=None,
        timeout=HANG_S,
        quiet=True,
    )


def test_each_count_is_a_child_with_its_devices_and_a_grown_batch(monkeypatch, write_pipeline):
    path = write_pipeline(pipelines.TUNER_SOURCE)
    runner = FakeRunner(wait_for=lambda knobs: 0.0 if knobs.batch_size < 32 else 0.05)
    monkeypatch.setattr("tfperf.trials.run_trial", runner)
    plan = ScalingPlan((1, 2, 4), ReplicaDevice.CPU)
    curve = measure_curve(plan, _args(path), load_pipeline(path), Knobs(batch_size=8))
    assert [r.layout for r in runner.requests] == [DeviceLayout(cpu_replicas=k) for k in (1, 2, 4)]
    assert {r.strategy for r in runner.requests} == {StrategyKind.MIRRORED}
    assert [r.knobs.batch_size for r in runner.requests] == [8, 16, 32]
    assert not any(r.analyse_stages for r in runner.requests)
    assert (curve.batch, curve.per_replica_batch) == (BatchScaling.PER_REPLICA_FIXED, 8)
    assert [p.global_batch for p in curve.points] == [8, 16, 32]
    assert (curve.feeds_replicas, curve.next_replicas) == (2, 4)
    assert curve.next_wait_fraction == curve.points[2].input_wait_fraction


def test_a_count_that_fails_is_recorded_and_the_others_still_run(monkeypatch, write_pipeline):
    path = write_pipeline(pipelines.TUNER_SOURCE)
    runner = FakeRunner(
        wait_for=lambda knobs: 0.0,
        outcome=lambda index, _: (
            outcome(TrialStatus.CRASHED, "killed by SIGKILL") if index == 1 else None
        ),
    )
    monkeypatch.setattr("tfperf.trials.run_trial", runner)
    plan = ScalingPlan((1, 2, 4), ReplicaDevice.CPU)
    curve = measure_curve(plan, _args(path), load_pipeline(path), Knobs(batch_size=8))
    assert [p.replicas for p in curve.points] == [1, 4]
    assert [(f.replicas, f.reason) for f in curve.failures] == [(2, "crashed: killed by SIGKILL")]


@pytest.mark.tf
def test_profile_scaling_two_on_a_real_mirrored_strategy(capsys, write_pipeline, tmp_path):
    path = write_pipeline(SCALING)
    target = tmp_path / "out.json"
    argv = ["profile", str(path), "--scaling", "2", "--steps", "5", "--warmup", "2"]
    try:
        status = main([*argv, "--no-stages", "--quiet", "--json", str(target)])
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "Scaling with replicas (--scaling):" in out
    scaling = json.loads(target.read_text())["scaling"]
    assert scaling["device"] == "cpu" and scaling["strategy"] == "mirrored"
    assert scaling["batch"] == "per-replica-fixed" and scaling["per_replica_batch"] == 8
    one, two = scaling["points"]
    assert (one["replicas"], one["global_batch"], two["replicas"], two["global_batch"]) == (
        1,
        8,
        2,
        16,
    )
    assert (one["replicas_in_step"], two["replicas_in_step"]) == (1, 2)
    for point in (one, two):
        assert point["examples_per_sec"] > 0 and 0 <= point["input_wait_fraction"] <= 1
        assert point["compute_only_examples_per_sec"] > 0
    if scaling["next_replicas"] is None:
        assert scaling["feeds_replicas"] == 2
    else:
        assert scaling["next_wait_fraction"] >= scaling["keeps_up_below"]
