from __future__ import annotations

import os
import sys

import pynvml
import pytest

from tests.fakes.fake_nvml import GPU_IS_LOST, OTHER_PID, FakeNvml, process, two_gpus
from tfperf.probes import NvmlProbe
from tfperf.results import GpuStats, TimedValue


@pytest.fixture(autouse=True)
def _no_cuda_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _run(probe: NvmlProbe, fake: FakeNvml, steps: int = 3) -> None:
    assert probe.open() is None
    for step in range(steps):
        fake.step = step
        probe.sample(float(step))
    probe.close()


def test_two_gpus_exact_figures():
    fake = two_gpus(os.getpid())
    probe = NvmlProbe(fake)
    _run(probe, fake)

    assert probe.gpu_names() == ["NVIDIA A100-SXM4-40GB", "Tesla T4"]
    assert probe.gpus() == [
        GpuStats(
            index=0,
            name="NVIDIA A100-SXM4-40GB",
            memory_total_bytes=40_000,
            memory_used_peak_bytes=300,
            memory_used_mean_bytes=200,
            utilization_mean_percent=30.0,
            utilization_peak_percent=50.0,
            process_memory_peak_bytes=96,
            tf_allocator_peak_bytes=None,
            memory_samples=[TimedValue(0.0, 100), TimedValue(1.0, 300), TimedValue(2.0, 200)],
        ),
        GpuStats(
            index=1,
            name="Tesla T4",
            memory_total_bytes=16_000,
            memory_used_peak_bytes=30,
            memory_used_mean_bytes=20,
            utilization_mean_percent=None,
            utilization_peak_percent=None,
            process_memory_peak_bytes=None,
            tf_allocator_peak_bytes=None,
            memory_samples=[TimedValue(0.0, 10), TimedValue(1.0, 20), TimedValue(2.0, 30)],
        ),
    ]
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_process_memory_sums_our_process_and_its_children():
    # Seen from our parent, this test process is a child: its entry counts, OTHER_PID's does not.
    fake = two_gpus(os.getpid())
    entries = [process(os.getppid(), 10), process(os.getpid(), 5), process(OTHER_PID, 1000)]
    fake.gpus[0].processes = [entries]
    probe = NvmlProbe(fake, pid=os.getppid())
    _run(probe, fake, steps=1)
    assert probe.gpus()[0].process_memory_peak_bytes == 15


def test_unreported_process_memory_is_none():
    fake = two_gpus(os.getpid())
    fake.gpus[0].processes = [[process(os.getpid(), None)]]
    probe = NvmlProbe(fake)
    _run(probe, fake)
    assert probe.gpus()[0].process_memory_peak_bytes is None


def test_failing_gpu_does_not_stop_the_others():
    fake = two_gpus(os.getpid())
    fake.gpus[0].used = [100, GPU_IS_LOST, 200]
    fake.gpus[0].processes = [[], pynvml.NVMLError_NotSupported(), []]
    probe = NvmlProbe(fake)
    _run(probe, fake)
    first, second = probe.gpus()
    assert first.memory_samples == [TimedValue(0.0, 100), TimedValue(2.0, 200)]
    assert (first.memory_used_peak_bytes, first.memory_used_mean_bytes) == (200, 150)
    assert first.utilization_peak_percent == 50.0
    assert second.memory_used_peak_bytes == 30


@pytest.mark.parametrize(
    ("setting", "indices"),
    [
        ("1", [1]),
        ("1,0", [1, 0]),
        (" 0 , 1 ", [0, 1]),
        ("GPU-bbbb2222-0000-0000-0000-000000000000", [1]),
        ("GPU-bbbb", [1]),
        ("GPU-aaaa,1", [0, 1]),
        ("0,7,1", [0]),  # like CUDA, the first entry that names no GPU ends the list
        ("0,0", [0]),
        ("MIG-1234abcd", [0, 1]),  # not mappable to NVML indices: measure every GPU
    ],
)
def test_cuda_visible_devices_selects_gpus(monkeypatch, setting, indices):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", setting)
    fake = two_gpus(os.getpid())
    probe = NvmlProbe(fake)
    _run(probe, fake, steps=1)
    assert [gpu.index for gpu in probe.gpus()] == indices


@pytest.mark.parametrize("setting", ["", "-1", "7", "GPU-cccc", "nonsense"])
def test_cuda_visible_devices_hiding_every_gpu_is_a_reason(monkeypatch, setting):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", setting)
    fake = two_gpus(os.getpid())
    probe = NvmlProbe(fake)
    assert probe.open() == f"CUDA_VISIBLE_DEVICES hides every GPU (it is {setting!r})"
    assert probe.gpus() == []
    assert (fake.inits, fake.shutdowns) == (1, 1)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (
            pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
            "NVML could not start (NVML Shared Library Not Found): "
            "no NVIDIA driver on this machine",
        ),
        (
            pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
            "NVML could not start (Driver Not Loaded): "
            "the NVIDIA driver is installed but not loaded",
        ),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML could not start (Unknown Error): GPU figures are off"),
    ],
)
def test_init_failure_is_a_reason(code, reason):
    fake = FakeNvml([], init_error=code)
    probe = NvmlProbe(fake)
    assert probe.open() == reason
    assert not probe.available
    probe.sample(0.0)
    probe.close()
    assert probe.gpus() == []
    assert fake.shutdowns == 0


def test_no_gpu_is_a_reason_and_shuts_nvml_down():
    fake = FakeNvml([])
    probe = NvmlProbe(fake)
    assert probe.open() == "NVML found no GPU"
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_error_while_listing_gpus_is_a_reason_and_lists_none():
    fake = two_gpus(os.getpid())
    fake.gpus[1].used = [GPU_IS_LOST]
    probe = NvmlProbe(fake)
    assert probe.open() == "NVML could not list the GPUs (GPU is lost)"
    assert probe.gpus() == []
    assert fake.shutdowns == 1


def test_missing_pynvml_is_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    probe = NvmlProbe()
    assert probe.open() == "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py"
    assert probe.gpus() == []


def test_close_twice_shuts_nvml_down_once_and_later_samples_do_nothing():
    fake = two_gpus(os.getpid())
    probe = NvmlProbe(fake)
    _run(probe, fake, steps=1)
    probe.close()
    probe.sample(5.0)
    assert (fake.inits, fake.shutdowns) == (1, 1)
    assert len(probe.gpus()[0].memory_samples) == 1


def _real_nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def test_real_pynvml_without_gpu_is_unavailable():
    if _real_nvml_works():
        pytest.skip("this machine has a working NVIDIA driver")
    probe = NvmlProbe()
    reason = probe.open()
    assert reason is not None
    assert "NVML" in reason
    probe.sample(0.0)
    probe.close()
    assert probe.gpus() == []
    assert probe.gpu_names() == []


def test_real_pynvml_with_gpu_reports_every_visible_gpu():
    if not _real_nvml_works():
        pytest.skip("no working NVIDIA driver on this machine")
    probe = NvmlProbe()
    assert probe.open() is None
    probe.sample(0.0)
    probe.sample(0.1)
    probe.close()
    gpus = probe.gpus()
    assert gpus
    assert all(gpu.memory_total_bytes > 0 and gpu.name for gpu in gpus)
    assert all(0 < gpu.memory_used_peak_bytes <= gpu.memory_total_bytes for gpu in gpus)
    assert all(len(gpu.memory_samples) == 2 for gpu in gpus)
