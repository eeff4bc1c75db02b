"""`tfperf tune` under a real 2-replica MirroredStrategy (two logical CPU devices), as a user
runs it on the bundled example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_tune import trials, tune
from tests.deadlines import HANG_S
from tfperf.results.tune import TuneResult
from tfperf.study import stored_result

pytestmark = pytest.mark.tf

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mirrored" / "pipeline.py"


def test_every_trial_of_a_tune_runs_on_both_replicas(tmp_path: Path) -> None:
    db, out = tmp_path / "study.db", tmp_path / "tune.json"
    process = tune(
        EXAMPLE,
        "--cpu-replicas",
        "2",
        "--trials",
        "3",
        "--steps",  # what is asserted is where trials ran, not their figures
        "10",
        "--warmup",
        "2",
        "--finalists",
        "1",
        "--rounds",
        "1",
        "--storage",
        f"sqlite:///{db}",
        "--study",
        "pipeline",
        "--json",
        str(out),
        "--html",
        str(tmp_path / "tune.html"),
        cwd=tmp_path,
    )
    stdout, stderr = process.communicate(timeout=HANG_S)
    assert process.returncode == 0, stderr[-3000:]

    result = TuneResult.from_dict(json.loads(out.read_text(encoding="utf-8")))
    assert result.trial_counts.get("complete") == 3
    profiles = [stored_result(trial) for trial in trials(db)]
    replicas = [p.distribution.replicas for p in profiles if p and p.distribution]
    assert replicas == [2, 2, 2], stdout[-2000:]


SCRIPT = """
import keras
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
x = tf.random.stateless_uniform((512, 4), seed=(1, 2))
ds = tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, axis=1)))
ds = ds.map(lambda a, b: (a * 2.0, b)).batch(32)
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(ds, epochs=3)
"""


def test_a_script_that_fits_in_its_strategys_scope_is_tuned_unchanged(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    before = script.read_bytes()
    db, out = tmp_path / "study.db", tmp_path / "tune.json"
    process = tune(
        script,
        "--cpu-replicas",
        "2",
        "--trials",
        "3",
        "--steps",  # what is asserted is where trials ran, not their figures
        "10",
        "--warmup",
        "2",
        "--finalists",
        "1",
        "--rounds",
        "1",
        "--storage",
        f"sqlite:///{db}",
        "--study",
        "train",
        "--json",
        str(out),
        "--html",
        str(tmp_path / "tune.html"),
        cwd=tmp_path,
    )
    stdout, stderr = process.communicate(timeout=HANG_S)
    assert process.returncode == 0, stderr[-3000:]

    assert script.read_bytes() == before  # tuned as written
    result = TuneResult.from_dict(json.loads(out.read_text(encoding="utf-8")))
    assert result.trial_counts.get("complete") == 3
    profiles = [stored_result(trial) for trial in trials(db, "train")]
    strategies = [
        (p.distribution.strategy, p.distribution.replicas) for p in profiles if p and p.distribution
    ]
    assert strategies == [("MirroredStrategy", 2)] * 3, stdout[-2000:]
