"""`tfperf profile` and `tfperf tune` on a PyTorch pipeline file, as users run them: real child
processes, real DataLoaders, real SQLite; windows kept small."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.console import TFPERF
from tests.frameworks.torch import pipelines

pytest.importorskip("torch")

SMALL = ("--steps", "6", "--warmup", "1", "--min-seconds", "0", "--quiet")


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [TFPERF, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


def test_profile_names_the_loader_in_its_own_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """`tfperf profile --debug` measures in this process: the CLI end to end, without the
    seconds a child spends importing torch."""
    from tfperf.cli.main import main

    pipelines.write(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["profile", "pipeline.py", "--debug", "--no-stages", "--verbose", *SMALL[:-1]]
    assert main(argv) == 0
    out, err = capsys.readouterr()

    assert "PyTorch DataLoader pipeline: pipeline.py" in err
    assert "Waits.__getitem__` (pipeline.py:13)" in out
    assert "num_workers=0" in out and "num_parallel_calls" not in out
    # Every finding in the DataLoader's words, none in tf.data's.
    for words in ("parallel map", "prefetch(", "repeat()", "tf.data"):
        assert words not in out
    assert "DataLoader: 0 workers (in the trainer)" in out
    saved = json.loads((tmp_path / "reports" / "pipeline-profile.json").read_text())
    assert saved["loader"]["item_function"] == "Waits.__getitem__"


def test_tune_measures_the_baseline_and_pytorchs_rule(tmp_path: Path):
    pipelines.write(tmp_path)
    args = ("--trials", "2", "--rounds", "1", "--finalists", "1", "--seed", "3")
    done = run(tmp_path, "tune", "pipeline.py", *SMALL, *args)

    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "reports" / "pipeline-tune.json").read_text())
    assert saved["framework"] == "torch"
    labels = {candidate["label"]: candidate["knobs"] for candidate in saved["candidates"]}
    assert labels["baseline"]["num_workers"] == 0
    assert labels["rule"]["num_workers"] == os.cpu_count()
