"""GPU memory sizing from measured peaks (tfperf/results/_gpu_memory.py)."""

from __future__ import annotations

import pytest

from tfperf.results import GpuStats, PeakSource, gpu_memory_advice
from tfperf.results._gpu_memory import DEFAULT_CONTEXT_BYTES, MIB

GIB = 1 << 30


def _gpu(
    *,
    total: int = 80 * GIB,
    device_peak: int = 10 * GIB,
    process_peak: int | None = None,
    allocator_peak: int | None = None,
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
