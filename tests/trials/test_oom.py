"""A trial that runs out of GPU memory inside TensorFlow under a GPU limit or budget counts as
over budget (tfperf/trials/_oom.py, with the classification in _runner and the worker)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tfperf.errors import PipelineRuntimeError
from tfperf.frameworks import DeviceLayout
from tfperf.knobs import Knobs
from tfperf.results import TrialStatus
from tfperf.trials import Budgets, TrialRequest, run_trial
from tfperf.trials._oom import GpuLimits
from tfperf.trials._runner import classify_exit
from tfperf.trials._worker import EXIT_FAILED, WorkRequest, error_message, trial_layout

# The train step fails as TensorFlow's allocator does when a tensor does not fit the device. It
# names the limit the child's devices were laid out with, so the test sees the child got it.
OOM_PIPELINE = """
import tensorflow as tf
from tfperf.frameworks.tensorflow._tf import _devices

BASELINE = {"batch_size": 2}

def make_dataset(knobs):
    return tf.data.Dataset.range(8).batch(knobs.batch_size)

def make_train_step(knobs):
    def step(batch):
        limit = _devices._APPLIED[-1].gpu_memory_limit_mib
        raise tf.errors.ResourceExhaustedError(
            None, None, f"OOM when allocating tensor with shape[4096,4096] (limit {limit} MiB)"
        )
    return step
"""

# A PyTorch train step failing as its caching allocator does when a batch does not fit the GPU.
TORCH_OOM_PIPELINE = """
import torch
from torch.utils.data import DataLoader

BASELINE = {"batch_size": 2}

def make_loader(knobs):
    return DataLoader(list(range(8)), batch_size=knobs.batch_size)

def make_train_step(knobs):
    def step(batch):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return step
"""

OOM_ERROR = {
    "type": "error",
    "kind": "failed",
    "error": "PipelineRuntimeError",
    "message": "pipeline.py: the train step failed\nOOM when allocating tensor with shape[8]",
    "out_of_memory": True,
}


def test_an_oom_in_a_real_child_under_a_gpu_limit_is_over_budget(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.py"
    path.write_text(textwrap.dedent(OOM_PIPELINE).lstrip(), encoding="utf-8")
    request = TrialRequest(
        path, Knobs(batch_size=2), steps=2, warmup=0, layout=DeviceLayout(gpu_memory_limit_mib=64)
    )

    outcome = run_trial(request, Budgets(timeout_s=120))

    assert outcome.status is TrialStatus.GPU_BUDGET, outcome.reason
    assert outcome.reason.startswith("ran out of GPU memory inside TensorFlow")
    assert "the 64 MiB logical GPU device it ran on (--gpu-memory-limit 64)" in outcome.reason
    assert "raise --gpu-memory-limit" in outcome.reason
    # TensorFlow's own words, from the child, which ran with the requested limit.
    assert "OOM when allocating tensor with shape[4096,4096] (limit 64 MiB)" in outcome.reason


def test_the_worker_flags_a_resource_exhausted_error_behind_a_reworded_one() -> None:
    import tensorflow as tf

    try:
        try:
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating")
        except tf.errors.ResourceExhaustedError as error:
            raise PipelineRuntimeError("pipeline.py: the train step failed") from error
    except PipelineRuntimeError as reworded:
        status, message = error_message(reworded)

    assert (status, message["out_of_memory"]) == (EXIT_FAILED, True)
    assert "out_of_memory" not in error_message(PipelineRuntimeError("the map raised"))[1]


def test_a_torch_cuda_oom_in_a_real_child_under_a_gpu_budget_is_over_budget(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pipeline.py"
    path.write_text(textwrap.dedent(TORCH_OOM_PIPELINE).lstrip(), encoding="utf-8")
    request = TrialRequest(path, Knobs(batch_size=2), steps=2, warmup=0)

    outcome = run_trial(request, Budgets(timeout_s=120, gpu_memory_bytes=2 << 30))

    assert outcome.status is TrialStatus.GPU_BUDGET, outcome.reason
    assert outcome.reason.startswith("ran out of GPU memory inside PyTorch (OutOfMemoryError)")
    assert "within the 2 GiB budget (--gpu-memory-budget)" in outcome.reason
    assert "PyTorch said: " in outcome.reason
    assert outcome.reason.endswith("CUDA out of memory. Tried to allocate 2.00 GiB")


@pytest.mark.parametrize(
    "make_error",
    [
        lambda torch: torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8 MiB"),
        lambda torch: RuntimeError("CUDA out of memory. Tried to allocate 8 MiB"),  # torch < 1.13
    ],
    ids=["OutOfMemoryError", "RuntimeError"],
)
def test_the_worker_flags_a_torch_cuda_oom_as_torch_s(make_error: Any) -> None:
    import torch

    try:
        try:
            raise make_error(torch)
        except RuntimeError as error:
            raise PipelineRuntimeError("pipeline.py: the train step failed") from error
    except PipelineRuntimeError as reworded:
        status, message = error_message(reworded)

    assert (status, message["out_of_memory"], message["framework"]) == (EXIT_FAILED, True, "torch")
    outcome = classify_exit(status, message, "", gpu_limits=GpuLimits(None, 2 << 30))
    assert outcome[0] is TrialStatus.GPU_BUDGET
    assert "inside PyTorch (OutOfMemoryError)" in outcome[1]
    assert "out_of_memory" not in error_message(RuntimeError("CUDA error: device-side assert"))[1]


def test_an_oom_under_a_budget_alone_names_the_budget_option() -> None:
    status, reason = classify_exit(EXIT_FAILED, OOM_ERROR, "", gpu_limits=GpuLimits(None, 2 << 30))

    assert status is TrialStatus.GPU_BUDGET
    assert "within the 2 GiB budget (--gpu-memory-budget)" in reason
    assert "raise --gpu-memory-budget" in reason
    assert reason.endswith("TensorFlow said: OOM when allocating tensor with shape[8]")


def test_an_oom_without_a_gpu_limit_or_budget_stays_a_failure() -> None:
    status, reason = classify_exit(EXIT_FAILED, OOM_ERROR, "")

    assert status is TrialStatus.FAILED
    assert reason == OOM_ERROR["message"]


def test_other_failures_under_a_gpu_limit_stay_failures() -> None:
    error = {**OOM_ERROR, "out_of_memory": False, "message": "the map raised"}

    assert classify_exit(EXIT_FAILED, error, "", gpu_limits=GpuLimits(1024, None)) == (
        TrialStatus.FAILED,
        "the map raised",
    )


def _work(**layout: object) -> WorkRequest:
    chosen = DeviceLayout(**layout)  # type: ignore[arg-type]
    return WorkRequest(pipeline="p.py", knobs={}, result_path="r.json", layout=chosen)


@pytest.mark.parametrize(
    ("request_layout", "knob", "expected"),
    [
        ({}, False, DeviceLayout(gpu_memory_growth=False)),  # the knob applies
        ({}, None, DeviceLayout()),  # tfperf's default
        ({"gpu_memory_growth": True}, False, DeviceLayout(gpu_memory_growth=True)),  # CLI wins
        ({"gpu_memory_limit_mib": 512}, False, DeviceLayout(gpu_memory_limit_mib=512)),
    ],
)
def test_the_growth_knob_reaches_the_layout_unless_the_command_line_decides(
    request_layout: dict[str, object], knob: bool | None, expected: DeviceLayout
) -> None:
    assert trial_layout(_work(**request_layout), Knobs(gpu_memory_growth=knob)) == expected
