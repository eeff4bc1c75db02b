"""GPU memory sizing from measured peaks (tfperf/results/_gpu_memory.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tfperf.results import GpuStats, ProfileResult
from tfperf.results._gpu_memory import (
    DEFAULT_CONTEXT_BYTES,
    MIB,
    HostCopy,
    MemoryApi,
    PeakSource,
    gpu_memory_advice,
    host_copy,
)
from tfperf.results.stages import LoaderReport

GIB = 1 << 30


def _gpu(
    *,
    total: int = 80 * GIB,
    device_peak: int = 10 * GIB,
    process_peak: int | None = None,
    allocator_peak: int | None = None,
    torch_peak: int | None = None,
) -> GpuStats:
    return GpuStats(
        index=1,
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=total,
        memory_used_peak_bytes=device_peak,
        memory_used_mean_bytes=device_peak // 2,
        utilization_mean_percent=None,
        utilization_peak_percent=None,
        process_memory_peak_bytes=process_peak,
        tf_allocator_peak_bytes=allocator_peak,
        memory_samples=[],
        torch_allocator_peak_bytes=torch_peak,
    )


def test_allocator_peak_sizes_the_limit_and_the_context_comes_from_nvml() -> None:
    advice = gpu_memory_advice(_gpu(process_peak=3 * GIB, allocator_peak=2 * GIB))

    assert advice is not None
    assert advice.source is PeakSource.TF_ALLOCATOR
    assert advice.memory_limit_mib == 2560  # 2 GiB + 20%, rounded up to 256 MiB
    assert advice.context_bytes == 1 * GIB
    # 95% of 80 GiB over (2.5 GiB limit + 1 GiB context) per process.
    assert advice.processes_per_gpu == 21


def test_nvml_process_peak_leaves_out_the_context_from_the_limit() -> None:
    advice = gpu_memory_advice(_gpu(process_peak=4426 * MIB))

    assert advice is not None
    assert advice.source is PeakSource.NVML_PROCESS
    assert advice.context_bytes == DEFAULT_CONTEXT_BYTES
    assert advice.memory_limit_mib == 4864  # (4426 - 512) MiB + 20%, rounded up
    assert advice.processes_per_gpu == 14


def test_device_peak_is_the_last_resort_and_says_so() -> None:
    advice = gpu_memory_advice(_gpu(device_peak=60 * GIB))

    assert advice is not None
    assert advice.source is PeakSource.NVML_DEVICE
    assert advice.processes_per_gpu == 1
    assert "other processes included" in advice.describe()
    assert "only one process of this size fits on NVIDIA H100 80GB HBM3 (81,920 MiB)" in (
        advice.describe()
    )


def test_no_measured_memory_gives_no_advice() -> None:
    assert gpu_memory_advice(_gpu(device_peak=0)) is None


def test_code_sets_a_logical_device_with_the_limit_in_mib() -> None:
    advice = gpu_memory_advice(_gpu(allocator_peak=2 * GIB, process_peak=3 * GIB))

    assert advice is not None
    code = advice.code()
    assert "gpus[1]" in code
    assert "LogicalDeviceConfiguration(memory_limit=2560)" in code
    compile(code, "<advice>", "exec")


def test_negative_margin_is_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match=r"margin=-0\.1"):
        gpu_memory_advice(_gpu(), margin=-0.1)


def test_torch_allocator_peak_sizes_a_fraction_in_torch_words() -> None:
    gpu = _gpu(process_peak=3 * GIB, torch_peak=2 * GIB)
    advice = gpu_memory_advice(gpu, api=MemoryApi.TORCH)

    assert advice is not None
    assert advice.source is PeakSource.TORCH_ALLOCATOR
    assert advice.memory_limit_mib == 2560  # 2 GiB + 20%, rounded up to 256 MiB
    assert advice.context_bytes == 1 * GIB
    # 2.5 GiB of 80 GiB is 0.03125, rounded up to 0.04: each process may grow to 3.2 GiB.
    assert advice.memory_fraction == 0.04
    assert advice.processes_per_gpu == 18  # 95% of 80 GiB over (3.2 + 1) GiB
    code = advice.code()
    assert "torch.cuda.set_per_process_memory_fraction(0.04, device=1)" in code
    assert "tf." not in code and "memory_limit" not in code
    compile(code, "<advice>", "exec")
    assert "PyTorch's allocator peak was 2 GiB" in advice.describe()
    assert "a memory fraction of 0.04 (3,277 MiB)" in advice.describe()
    assert "set_per_process" not in advice.code_intro() and "TensorFlow" not in (
        advice.code_intro()
    )


def test_an_exact_share_is_not_rounded_past_itself() -> None:
    # 30% of the GPU is 24 GiB: the limit, not 0.31 of it.
    gpu = _gpu(total=80 * GIB, torch_peak=20 * GIB)
    advice = gpu_memory_advice(gpu, margin=0.2, api=MemoryApi.TORCH)

    assert advice is not None and advice.memory_limit_bytes == 24 * GIB
    assert advice.memory_fraction == 0.3


def test_a_result_torch_measured_gets_torch_words_and_a_tensorflow_one_keeps_its_own() -> None:
    from tests.reports import fake_gpu, fake_profile

    tensorflow = dataclasses.replace(fake_profile(), gpus=[fake_gpu()])
    peak = fake_gpu().tf_allocator_peak_bytes
    gpu = dataclasses.replace(
        fake_gpu(), tf_allocator_peak_bytes=None, torch_allocator_peak_bytes=peak
    )
    torch = dataclasses.replace(tensorflow, gpus=[gpu])

    [tf_advice] = tensorflow.gpu_memory_advice()
    [torch_advice] = torch.gpu_memory_advice()
    assert tf_advice.api is MemoryApi.TENSORFLOW and "tf.config" in tf_advice.code()
    assert torch_advice.api is MemoryApi.TORCH
    assert "set_per_process_memory_fraction" in torch_advice.code()
    assert "tf.config" not in torch_advice.code()
    assert torch.to_dict()["gpu_memory_advice"][0]["api"] == "torch"


def test_new_fields_round_trip_and_old_json_without_them_still_reads() -> None:
    from tests.reports import fake_gpu, fake_profile

    gpu = dataclasses.replace(fake_gpu(), torch_allocator_peak_bytes=123 * MIB)
    loader = LoaderReport(
        workers=0,
        persistent_workers=False,
        copy_bytes_per_batch=4096,
        copy_s_per_batch=2e-4,
        pinned_copy_s_per_batch=1e-4,
    )
    result = dataclasses.replace(fake_profile(), gpus=[gpu], loader=loader)

    again = ProfileResult.from_json(result.to_json())
    assert again.gpus[0].torch_allocator_peak_bytes == 123 * MIB
    assert again.loader == loader
    data = json.loads(result.to_json())
    del data["gpus"][0]["torch_allocator_peak_bytes"]
    for name in ("copy_bytes_per_batch", "copy_s_per_batch", "pinned_copy_s_per_batch"):
        del data["loader"][name]
    old = ProfileResult.from_dict(data)
    assert old.gpus[0].torch_allocator_peak_bytes is None
    assert old.loader is not None and old.loader.copy_s_per_batch is None
    assert old.host_copy() is None


def test_host_copy_rates_and_when_pinning_is_advised() -> None:
    copy = HostCopy(bytes_per_batch=10**9, pageable_s=0.5, pinned_s=0.1, pin_memory=False)

    assert copy.pageable_gb_per_s == pytest.approx(2.0)
    assert copy.pinned_gb_per_s == pytest.approx(10.0)
    assert copy.pinning_pays
    line = copy.describe()
    assert "(2.0 GB/s)" in line and "(10.0 GB/s)" in line and "5.0x faster" in line
    assert "pin_memory=True" in line and "non_blocking=True" in line and "both" in line
    # Already pinned, or pinned not faster beyond the noise: no advice.
    assert not dataclasses.replace(copy, pin_memory=True).pinning_pays
    assert "pin_memory=True" not in dataclasses.replace(copy, pin_memory=True).describe()
    assert not dataclasses.replace(copy, pinned_s=0.45).pinning_pays
    assert dataclasses.replace(copy, pin_memory=None).pinning_pays


def test_host_copy_needs_every_figure() -> None:
    timed = LoaderReport(2, False, copy_bytes_per_batch=8, copy_s_per_batch=1.0)
    assert host_copy(timed, False) is None
    assert host_copy(None, False) is None
    full = dataclasses.replace(timed, pinned_copy_s_per_batch=0.5)
    assert host_copy(full, "yes") == HostCopy(8, 1.0, 0.5, pin_memory=None)
