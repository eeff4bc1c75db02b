"""Issue 54 item 4: a knob of the other framework is refused, never dropped in silence.

A tf.data knob in a PyTorch file's `BASELINE`, `SEARCH_SPACE` or `--set`, and a DataLoader
knob in a tf.data file's, reach no code that applies them: each exits 2 with one message
naming the knob, the file and the knobs that framework takes. Which framework a knob acts in
comes from its declaration (`Knob.frameworks`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import pipelines
from tests.cli.console import run_tfperf
from tfperf.errors import PipelineFileError
from tfperf.knobs import framework_knobs
from tfperf.pipeline import load_pipeline

TORCH_FILE = """
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BASELINE = {"batch_size": 8, "num_workers": 0}


class Items(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, index):
        features = torch.full((4,), float(index))
        return features, features.sum().unsqueeze(0)


def make_loader(knobs):
    return DataLoader(Items(), batch_size=knobs.batch_size)


def make_train_step(knobs):
    model = nn.Linear(4, 1)

    def step(batch):
        features, targets = batch
        return nn.functional.mse_loss(model(features), targets)

    return step
"""


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_tfperf(tmp_path, *argv, "--quiet")


def _assert_refused(completed: subprocess.CompletedProcess[str], *named: str) -> None:
    err = completed.stderr
    assert completed.returncode == 2, err
    assert err.count("tfperf: error:") == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    for text in named:
        assert text in err, err


def test_a_tf_data_knob_in_a_pytorch_baseline_exits_2(tmp_path):
    source = TORCH_FILE.replace('"num_workers": 0}', '"num_workers": 0, "prefetch": 2}')
    (tmp_path / "loader.py").write_text(source, encoding="utf-8")
    completed = _run(tmp_path, "profile", "loader.py")
    torch_knobs = ", ".join(framework_knobs("torch"))
    _assert_refused(completed, "'prefetch'", "loader.py", "BASELINE", torch_knobs)
    assert "PyTorch DataLoader pipeline" in completed.stderr


def test_a_tf_data_knob_in_set_on_a_pytorch_file_exits_2(tmp_path):
    (tmp_path / "loader.py").write_text(TORCH_FILE, encoding="utf-8")
    completed = _run(tmp_path, "profile", "loader.py", "--set", "num_parallel_calls=4")
    _assert_refused(completed, "--set", "'num_parallel_calls'", "loader.py", "num_workers")


def test_a_tf_data_knob_in_fix_on_a_pytorch_file_exits_2(tmp_path):
    (tmp_path / "loader.py").write_text(TORCH_FILE, encoding="utf-8")
    completed = _run(tmp_path, "tune", "loader.py", "--fix", "cycle_length=2", "--trials", "1")
    _assert_refused(completed, "--fix", "'cycle_length'", "loader.py")


def test_a_tf_data_knob_in_a_pytorch_search_space_is_refused(write_pipeline):
    path = write_pipeline(TORCH_FILE + '\nSEARCH_SPACE = {"shuffle_buffer": [64, 128]}\n')
    with pytest.raises(PipelineFileError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert "SEARCH_SPACE" in message and "'shuffle_buffer'" in message, message
    assert str(path) in message and "num_workers" in message, message


def test_a_dataloader_knob_in_a_tf_data_baseline_is_refused(write_pipeline):
    source = pipelines.TRAIN_STEP.replace('"batch_size": 4', '"batch_size": 4, "num_workers": 2')
    assert source != pipelines.TRAIN_STEP
    path = write_pipeline(source)
    with pytest.raises(PipelineFileError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert "'num_workers'" in message and "PyTorch DataLoader pipelines only" in message
    assert "tf.data pipeline" in message and "num_parallel_calls" in message, message


def test_a_knob_of_both_frameworks_is_accepted(write_pipeline):
    path = write_pipeline(TORCH_FILE.replace('"batch_size": 8', '"mixed_precision": "float32"'))
    assert load_pipeline(path).baseline.num_workers == 0
