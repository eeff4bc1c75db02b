"""Issue 54: `--write-patch` is refused before a study that cannot give a patch, and the
printed `patch -p0 < ...` command pastes into a shell whatever the path holds."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.cli.console import run_tfperf
from tests.cli.test_framework_knobs import TORCH_FILE
from tests.fakes.trials import FakeRunner
from tfperf.knobs import AUTOTUNE, Knobs

PLAIN = """
import tensorflow as tf

def make_dataset():
    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=1)
    return ds.batch(8)

def make_train_step():
    return lambda batch: batch
"""
MAP = "map@pipeline.py:4.num_parallel_calls"


def _map_speed(knobs: Knobs) -> float:
    """Input wait shrinks with the map site's parallelism (AUTOTUNE counts as 4)."""
    workers = knobs.sites.get(MAP, 1)
    return 0.08 / (4 if workers == AUTOTUNE else workers)


def test_write_patch_on_a_knobs_file_is_refused_before_any_trial(tmp_path):
    (tmp_path / "loader.py").write_text(TORCH_FILE, encoding="utf-8")
    completed = run_tfperf(tmp_path, "tune", "loader.py", "--write-patch", "--trials", "2")
    err = completed.stderr
    assert completed.returncode == 2, err
    assert "--write-patch: loader.py reads its knobs (`make_loader(knobs)`)" in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert not (tmp_path / "studies").exists(), "a study was started"


@pytest.mark.tf
def test_the_printed_patch_command_applies_from_a_folder_with_a_space(monkeypatch, capsys):
    from tfperf.cli.main import main

    folder = Path.cwd() / "my project"
    folder.mkdir()
    (folder / "pipeline.py").write_text(textwrap.dedent(PLAIN).lstrip(), encoding="utf-8")
    monkeypatch.chdir(folder)
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", FakeRunner(wait_for=_map_speed))
    fixes = ["--fix", "batch@pipeline.py:5.batch_size=8", "--fix", "mixed_precision=float32"]
    options = ["--trials", "5", "--finalists", "1", "--rounds", "2", "--seed", "3", *fixes]
    target = folder / "the patches" / "it's.patch"
    argv = ["tune", "pipeline.py", *options, "--quiet", "--no-verify"]
    status = main([*argv, "--write-patch", str(target)])
    out, err = capsys.readouterr()
    assert status == 0, err
    command = re.search(r"`(patch -p0 < [^`]+)`", out)
    assert command is not None, out
    subprocess.run(["sh", "-c", command.group(1)], cwd=folder, check=True, capture_output=True)
    assert "num_parallel_calls=1)" not in (folder / "pipeline.py").read_text()
