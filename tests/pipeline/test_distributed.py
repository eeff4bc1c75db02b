"""Profiles under a real 2-replica `MirroredStrategy` on two logical CPUs, in a trial child.

TensorFlow fixes its logical devices once per process, so each case runs through
`tfperf.trials.run_trial`, whose child lays out two CPU devices before loading the pipeline:
a contract file (`experimental_distribute_dataset` and `distribute_datasets_from_function`)
and a zero-change script that builds its own strategy and calls `fit` in its scope.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tfperf.frameworks import DeviceLayout, StrategyKind
from tfperf.knobs import Knobs
from tfperf.results import ProfileResult, TrialStatus
from tfperf.results.scaling import DistributedInput
from tfperf.trials import Budgets, TrialRequest, run_trial

_MODEL = """
def make_model(knobs):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""

# Global batches of 16, split by tf.distribute: 8 per replica.
KNOBS_FILE = (
    """
import keras
import tensorflow as tf

BASELINE = {"batch_size": 16}

def make_dataset(knobs):
    x = tf.random.stateless_uniform((256, 4), seed=(1, 2))
    ds = tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, axis=1)))
    return ds.batch(knobs.batch_size, drop_remainder=True)
"""
    + _MODEL
)

# Its own strategy, per-replica batches from the InputContext, and a step of its own.
INPUT_CONTEXT_FILE = """
import tensorflow as tf

BASELINE = {"batch_size": 16}
SEEN = []

def make_strategy():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

def make_dataset(knobs, input_context):
    SEEN.append(input_context.num_replicas_in_sync)
    per_replica = input_context.get_per_replica_batch_size(knobs.batch_size)
    x = tf.random.stateless_uniform((256, 4), seed=(1, 2))
    return tf.data.Dataset.from_tensor_slices(x).batch(per_replica, drop_remainder=True)

def make_train_step(knobs):
    weights = tf.Variable(tf.ones((4, 1)))
    optimizer = tf.keras.optimizers.SGD(0.01)

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.matmul(x, weights) ** 2)
        optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
        return loss

    return step
"""

# An ordinary script: strategy, model in its scope, fit. tfperf changes none of it.
MIRRORED_SCRIPT = """
import keras
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
x = tf.random.stateless_uniform((256, 4), seed=(1, 2))
ds = tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, axis=1))).batch(32)
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(ds, epochs=3)
"""


def _profile(
    tmp_path: Path,
    source: str,
    strategy: StrategyKind | None,
    name: str = "pipeline.py",
    knobs: Knobs | None = None,
) -> ProfileResult:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    request = TrialRequest(
        pipeline=path,
        knobs=knobs or Knobs(batch_size=16),
        steps=5,
        warmup=2,
        layout=DeviceLayout(cpu_replicas=2),
        strategy=strategy,
    )
    outcome = run_trial(request, Budgets(timeout_s=180))
    assert outcome.status is TrialStatus.COMPLETE, outcome.reason
    assert outcome.result is not None
    # What the child wrote comes back through JSON: the figures survive the round trip.
    return ProfileResult.from_json(outcome.result.to_json())


def test_a_knobs_file_under_mirrored_splits_each_global_batch_over_two_replicas(
    tmp_path: Path,
) -> None:
    # The InputOptions knobs away from TensorFlow's defaults: applied, and recorded.
    knobs = Knobs(batch_size=16, fetch_to_device=False, per_replica_buffer_size=2)
    result = _profile(tmp_path, KNOBS_FILE, StrategyKind.MIRRORED, knobs=knobs)

    distribution = result.distribution
    assert distribution is not None
    assert (distribution.strategy, distribution.replicas) == ("MirroredStrategy", 2)
    assert distribution.device_names == ["CPU:0", "CPU:1"]
    assert distribution.input is DistributedInput.DISTRIBUTE_DATASET
    assert (distribution.global_batch, distribution.per_replica_batch) == (16, 8)
    assert distribution.examples_per_sec == result.end_to_end.examples_per_sec
    assert distribution.examples_per_sec_per_replica == pytest.approx(
        result.end_to_end.examples_per_sec / 2
    )
    # Wait and compute are still timed per step, on the distributed iterator.
    measured = [r for r in result.end_to_end.records if not r.warmup]
    assert len(measured) == 5
    assert all(r.examples == 16 and r.wait_s >= 0 and r.compute_s > 0 for r in measured)
    assert (result.knobs["fetch_to_device"], result.knobs["per_replica_buffer_size"]) == (False, 2)


def test_make_dataset_with_an_input_context_is_distributed_from_the_function(
    tmp_path: Path,
) -> None:
    result = _profile(tmp_path, INPUT_CONTEXT_FILE, None)  # the file's own make_strategy()

    distribution = result.distribution
    assert distribution is not None
    assert distribution.replicas == 2
    assert distribution.input is DistributedInput.FROM_FUNCTION
    # Each replica got get_per_replica_batch_size(16) = 8 examples: 16 per step in all.
    assert (distribution.global_batch, distribution.per_replica_batch) == (16, 8)
    assert result.compute_only is not None and result.compute_only.examples_per_sec > 0


def test_a_script_that_fits_under_its_own_mirrored_strategy_is_profiled_unchanged(
    tmp_path: Path,
) -> None:
    result = _profile(tmp_path, MIRRORED_SCRIPT, None, name="train.py")

    distribution = result.distribution
    assert distribution is not None
    assert (distribution.strategy, distribution.replicas) == ("MirroredStrategy", 2)
    assert (distribution.global_batch, distribution.per_replica_batch) == (32, 16)


# A script that fits under no strategy: two logical CPUs would leave one idle.
UNSTRATEGIED_SCRIPT = """
import keras
import tensorflow as tf

x = tf.random.stateless_uniform((256, 4), seed=(1, 2))
ds = tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, axis=1))).batch(32)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(ds, epochs=3)
"""


def test_cpu_replicas_for_a_script_that_trains_under_no_strategy_are_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(UNSTRATEGIED_SCRIPT), encoding="utf-8")
    request = TrialRequest(
        pipeline=path,
        knobs=Knobs(batch_size=32),
        steps=5,
        warmup=2,
        layout=DeviceLayout(cpu_replicas=2),
    )
    outcome = run_trial(request, Budgets(timeout_s=180))

    assert outcome.status is TrialStatus.FATAL  # every trial would fail alike: the tune stops
    assert outcome.reason is not None
    assert "--cpu-replicas 2 split the CPU into 2 devices" in outcome.reason
    assert "train.py trains under no tf.distribute strategy" in outcome.reason
