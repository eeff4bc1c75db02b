"""`tfperf tune` under a real 2-replica MirroredStrategy (two logical CPU devices), as a user
runs it on the bundled example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_tune import trials, tune
from tfperf.results import TuneResult
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
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]

    result = TuneResult.from_dict(json.loads(out.read_text(encoding="utf-8")))
    assert result.trial_counts.get("complete") == 3
    profiles = [stored_result(trial) for trial in trials(db)]
    replicas = [p.distribution.replicas for p in profiles if p and p.distribution]
    assert replicas == [2, 2, 2], stdout[-2000:]
