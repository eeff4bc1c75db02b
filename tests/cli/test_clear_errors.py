"""Issue 54 item 5: inputs that ended in an internal error or a traceback's tail now end in
one message and the documented exit status. Real `tfperf` processes on files made here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests import pipelines
from tests.cli.console import run_tfperf
from tests.cli.test_framework_knobs import TORCH_FILE


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_tfperf(tmp_path, *argv, "--quiet")


def _one_message(completed: subprocess.CompletedProcess[str], status: int) -> str:
    err = completed.stderr
    assert completed.returncode == status, err
    assert "Traceback" not in err and "internal error" not in err and "must hold" not in err, err
    assert err.count("tfperf: error:") == 1, err
    return err


def test_a_dataset_of_length_0_says_the_dataloader_yields_no_batch(tmp_path):
    source = TORCH_FILE.replace("return 32", "return 0")
    assert source != TORCH_FILE
    (tmp_path / "loader.py").write_text(source, encoding="utf-8")
    err = _one_message(_run(tmp_path, "profile", "loader.py", "--steps", "3"), 1)
    assert "the DataLoader yields no batch: its dataset Items (loader.py:" in err, err
    assert "has length 0" in err


def test_a_dataset_smaller_than_a_dropped_batch_says_so(tmp_path):
    source = TORCH_FILE.replace("return 32", "return 3").replace(
        "batch_size=knobs.batch_size)", "batch_size=knobs.batch_size, drop_last=True)"
    )
    (tmp_path / "loader.py").write_text(source, encoding="utf-8")
    err = _one_message(_run(tmp_path, "profile", "loader.py", "--steps", "3"), 1)
    assert "has 3 items, fewer than one batch of 8, and drop_last=True drops it" in err, err


def test_a_step_time_that_cannot_fit_the_budget_is_refused_before_measuring(tmp_path):
    (tmp_path / "p.py").write_text(pipelines.TRAIN_STEP, encoding="utf-8")
    err = _one_message(_run(tmp_path, "profile", "p.py", "--step-time", "3600"), 2)
    assert "--step-time 3,600 s does not fit --budget 120s" in err, err
    assert "--budget 0 for no budget" in err
    assert not (tmp_path / "reports").exists()


def test_a_step_time_that_fits_the_budget_is_not_refused(tmp_path):
    from types import SimpleNamespace

    from tfperf.cli.profile import _check_step_budget

    _check_step_budget(SimpleNamespace(step_time=3.75, budget=120.0))
    _check_step_budget(SimpleNamespace(step_time=3600.0, budget=0.0))
