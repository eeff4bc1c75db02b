"""`tfperf tune` as users run it: real child processes, real TensorFlow, real SQLite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pytest

from tests import pipelines

pytestmark = pytest.mark.tf

TFPERF = str(Path(sys.executable).with_name("tfperf"))


def tune(path: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.Popen(
        [
            TFPERF,
            "tune",
            str(path),
            "--steps",
            "8",
            "--warmup",
            "2",
            "--quiet",
            "--seed",
            "3",
            *args,
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def trials(db: Path, name: str = "pipeline") -> list[optuna.trial.FrozenTrial]:
    """The study's trials; empty while the tuner has not created the study yet."""
    if not db.exists():
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
        except KeyError:
            return []


def test_search_beats_the_baseline_on_the_knob_that_matters(write_pipeline, tmp_path):
    path = write_pipeline(pipelines.PARALLEL_SENSITIVE)
    process = tune(path, "--trials", "5", "--rounds", "2", "--finalists", "1", cwd=tmp_path)
    out, err = process.communicate(timeout=400)
    assert process.returncode == 0, err
    summary = json.loads((tmp_path / "reports" / "pipeline-tune.json").read_text())
    best, baseline = summary["best"], summary["baseline"]
    assert best["knobs"]["num_parallel_calls"] != 1
    # About 2x on 2 cores: tf.data's shared pool has a thread per core (see tests/pipelines.py).
    assert summary["speedup_vs_baseline"]["ratio"] > 1.5
    assert summary["speedup_vs_baseline"]["significant"]
    assert len(baseline["examples_per_sec"]) == 2
    assert out.startswith("Best: ")
    assert "BASELINE = {" in out
    stored = trials(tmp_path / "studies" / "pipeline.db")
    assert [t.user_attrs.get("reference") for t in stored[:2]] == ["baseline", "autotune"]
    assert all("result" in t.user_attrs for t in stored if t.user_attrs["status"] == "complete")
    report = (tmp_path / "reports" / "pipeline.html").read_text()
    assert "HTML report: reports/pipeline.html" in out
    assert "vs your baseline:" in report and "Every trial" in report


def test_sigkilled_tuner_loses_nothing_and_the_next_run_carries_on(write_pipeline, tmp_path):
    path = write_pipeline(pipelines.PARALLEL_SENSITIVE)
    db = tmp_path / "studies" / "pipeline.db"
    process = tune(path, "--trials", "20", cwd=tmp_path)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(1)
        if sum(t.state.name == "COMPLETE" for t in trials(db)) >= 2:
            break
    running = [t for t in trials(db) if t.state.name == "RUNNING"]
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    before = trials(db)
    completed = {t.number: t.values for t in before if t.state.name == "COMPLETE"}
    assert len(completed) >= 2

    resumed = tune(
        path, "--trials", str(len(before) + 1), "--rounds", "1", "--finalists", "1", cwd=tmp_path
    )
    _, err = resumed.communicate(timeout=400)
    assert resumed.returncode == 0, err
    after = {t.number: t for t in trials(db)}
    for number, values in completed.items():
        assert after[number].values == values  # finished trials survive untouched
    orphans = [after[t.number] for t in before if t.state.name == "RUNNING"]
    assert orphans or running == []
    for orphan in orphans:
        assert orphan.state.name == "FAIL"
        assert orphan.user_attrs["status"] == "interrupted"
        assert "orphaned" in orphan.user_attrs["reason"]


def test_broken_file_stops_before_any_trial(write_pipeline, tmp_path):
    path = write_pipeline(
        "BASELINE = {'batch': 3}\ndef make_dataset(knobs): pass\ndef make_model(knobs): pass\n"
    )
    process = tune(path, "--trials", "3", cwd=tmp_path)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert "unknown knob name 'batch'" in err
    assert not (tmp_path / "studies" / "pipeline.db").exists()
