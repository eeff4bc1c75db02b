"""Issue 54 item 3: a PyTorch run speaks of its DataLoader, never in tf.data's words.

Each sentence here came out in TensorFlow's words for a PyTorch file: the call-site search,
the hang message, the missing train step, a worker's exception, a spawn start method that
kills every worker, and the environment record.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from tests.cli.console import run_tfperf
from tests.cli.test_framework_knobs import TORCH_FILE
from tfperf.errors import PipelineFileError
from tfperf.pipeline import PipelineKind, load_pipeline

#: Words of tf.data's that a PyTorch message must not hold.
TF_WORDS = ("make_dataset", "tf.data", "model.fit", "map/read", "Keras", "tf.function")

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.zeros(16, 4)), batch_size=4)
for epoch in range(2):
    for (batch,) in loader:
        batch.sum()
"""


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_tfperf(tmp_path, *argv, "--quiet")


def _no_tf_words(text: str) -> None:
    for words in TF_WORDS:
        assert words not in text, f"{words!r} in: {text}"


def test_finding_a_scripts_call_sites_speaks_of_its_dataloader(write_pipeline):
    from tfperf.cli.sites import finding_sites

    pipeline = load_pipeline(write_pipeline(SCRIPT, "torch_train.py"))
    assert pipeline.kind is PipelineKind.SCRIPT and pipeline.framework == "torch"
    said = finding_sites(pipeline)
    assert said == (
        "Finding the PyTorch DataLoader call sites of torch_train.py (runs its script up to "
        "its first DataLoader pass)..."
    )
    _no_tf_words(said)


def test_a_file_without_a_train_step_is_not_offered_step_time(write_pipeline):
    source = TORCH_FILE[: TORCH_FILE.index("def make_train_step")]
    with pytest.raises(PipelineFileError) as raised:
        load_pipeline(write_pipeline(source))
    message = str(raised.value)
    assert "defines no `make_train_step`" in message, message
    assert "--step-time" not in message and "make_model" not in message
    _no_tf_words(message)


def test_the_environment_records_torchs_version():
    from importlib.metadata import version

    from tfperf.hardware import collect_environment

    assert collect_environment([]).torch_version == version("torch")


def test_a_hang_names_make_loader(tmp_path):
    source = TORCH_FILE.replace(
        "        features = torch.full((4,), float(index))",
        "        import time\n        time.sleep(3600)\n        features = torch.full((4,), 0.0)",
    )
    (tmp_path / "loader.py").write_text(source, encoding="utf-8")
    completed = _run(tmp_path, "profile", "loader.py", "--stall-timeout", "2")
    err = completed.stderr
    assert completed.returncode == 1, err
    assert "Run the file's make_loader() alone to see where it blocks" in err, err
    assert "(in make_loader() or its first item (`__getitem__`" in err, err
    _no_tf_words(err)


def test_a_workers_exception_shows_the_users_getitem_line(tmp_path):
    source = TORCH_FILE.replace('"num_workers": 0', '"num_workers": 2').replace(
        "        features = torch.full((4,), float(index))",
        "        if index == 5:\n"
        '            raise KeyError(f"no label for item {index}")\n'
        "        features = torch.full((4,), float(index))",
    )
    (tmp_path / "loader.py").write_text(source, encoding="utf-8")
    err = _run(tmp_path, "profile", "loader.py", "--steps", "3").stderr
    assert (
        "KeyError: 'no label for item 5' (raised in DataLoader worker process" in err
        and 'loader.py:15 in __getitem__: raise KeyError(f"no label for item {index}")' in err
    ), err
    assert "Original Traceback" not in err and "site-packages" not in err, err


def test_a_spawn_start_method_that_kills_every_worker_says_why(tmp_path):
    source = TORCH_FILE.replace(
        '"num_workers": 0', '"num_workers": 2, "worker_start_method": "spawn"'
    )
    (tmp_path / "loader.py").write_text(source, encoding="utf-8")
    completed = _run(tmp_path, "profile", "loader.py", "--steps", "3")
    err = completed.stderr
    assert completed.returncode == 2, err
    assert "worker_start_method 'spawn' starts each DataLoader worker as a fresh interpreter" in err
    assert "Items" in err and "defined in loader.py" in err, err
    assert "Set worker_start_method 'fork' or leave it unset;" in err, err
    assert "exited unexpectedly" not in err


def test_one_worker_is_one_worker():
    """Issue 54: "about 1 workers keep the step fed"."""
    from tfperf.report._loader import loader_text, loader_view
    from tfperf.results.stages import LoaderReport

    loader = LoaderReport(
        workers=0,
        persistent_workers=False,
        item_function="Items.__getitem__",
        wall_s_per_item=0.001,
        cpu_s_per_item=0.001,
        workers_estimate=1,
    )
    text = loader_text(loader_view(loader))
    assert "about 1 worker: more add no speed here" in text, text
    assert "1 workers" not in text
    from tfperf.frameworks.torch._limit import _items_advice

    # A computing item: what workers gain here only a measurement tells, so no count is
    # claimed; an item that waits is sized by Little's law.
    computing = _items_advice(loader)
    assert "it is CPU work" in computing and "About" not in computing, computing
    waiting = dataclasses.replace(loader, cpu_s_per_item=0.0001)
    assert "About 1 worker reaches the most these items" in _items_advice(waiting)


def test_knobs_a_scripts_loader_ignores_are_named_without_values_they_do_not_have(tmp_path):
    # A script's DataLoader takes batch_size=64 at its call: the neutral `batch_size` knob's
    # default (32) is not what the code does, and must not be printed as if it were.
    from tfperf.cli.sites import fixed_lines

    reason = "a script's DataLoader takes its values at its call"
    problems = {
        "batch_size": reason,
        "num_workers": reason,
        "mixed_precision": "autocast wraps a pipeline file's train step",
        "shuffle@train.py:9.buffer_size": "no line of yours",
    }
    lines = fixed_lines(problems, {"shuffle@train.py:9.buffer_size": 500})
    assert lines == [
        f"  batch_size, num_workers: {reason}",
        "  mixed_precision: autocast wraps a pipeline file's train step",
        "  shuffle@train.py:9.buffer_size = 500: no line of yours",
    ]
