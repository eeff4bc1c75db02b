"""`tfperf tune` on a stream every worker reads whole: the configurations with workers yield
duplicates, so none of them is ranked, and the answer is no speed-up."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.frameworks.torch import pipelines
from tests.frameworks.torch.test_cli import SMALL, run
from tests.frameworks.torch.test_profile import UNSHARDED

pytest.importorskip("torch")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="PyTorch's rule is one worker here")
def test_duplicated_data_is_never_a_speed_up(tmp_path: Path):
    pipelines.write(tmp_path, UNSHARDED)
    args = ("--trials", "2", "--rounds", "1", "--finalists", "1", "--seed", "3")
    done = run(tmp_path, "tune", "pipeline.py", *SMALL, *args)

    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "reports" / "pipeline-tune.json").read_text())
    # PyTorch's rule (a worker per core) yields every example once per worker: refused.
    assert [c["label"] for c in saved["candidates"]] == ["baseline"]
    assert saved["best"]["label"] == "baseline"
    assert saved["trial_counts"].get("pruned") == 1
