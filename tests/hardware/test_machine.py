"""Detecting the tuning machine: CPU flags, cgroup limits, GPUs, and the RAM budget."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import psutil
import pytest

from tests.fakes.fake_nvml import FakeNvml, two_gpus
from tfperf.hardware import (
    Machine,
    cgroup_cpu_limit,
    cgroup_memory_limit,
    cpu_bf16_supported,
    default_ram_budget,
    detect_machine,
)

GIB = 2**30


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="ascii")
    return path


def machine(**changes) -> Machine:
    base = Machine(
        cpu_count=4,
        total_ram_bytes=16 * GIB,
        available_ram_bytes=10 * GIB,
        gpu_names=(),
        cpu_bf16=False,
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n", True),
        ("flags\t\t: fpu amx_tile amx_bf16 amx_int8\n", True),
        ("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n", True),
        ("flags\t\t: fpu sse avx2 avx512f\n", False),
        ("model name\t: bf16 in the marketing name\nflags\t\t: fpu sse\n", False),
        ("", False),
    ],
)
def test_cpu_bf16_comes_from_the_flags_line(tmp_path, text, expected):
    assert cpu_bf16_supported(write(tmp_path, "cpuinfo", text)) is expected


def test_cpu_bf16_is_false_when_cpuinfo_cannot_be_read(tmp_path):
    assert cpu_bf16_supported(tmp_path / "missing") is False


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "250000 100000\n"}, 2.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.5),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_cgroup_cpu_limit_reads_v2_then_v1(tmp_path, files, expected):
    for name, text in files.items():
        write(tmp_path, name, text)
    assert cgroup_cpu_limit(tmp_path) == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"memory.max": f"{4 * GIB}\n", "memory.current": f"{GIB}\n"}, (4 * GIB, GIB)),
        ({"memory.max": "max\n", "memory.current": f"{GIB}\n"}, None),
        (
            {
                "memory/memory.limit_in_bytes": f"{2 * GIB}\n",
                "memory/memory.usage_in_bytes": f"{GIB // 2}\n",
            },
            (2 * GIB, GIB // 2),
        ),
        ({"memory/memory.limit_in_bytes": "9223372036854771712\n"}, None),
        ({}, None),
    ],
)
def test_cgroup_memory_limit_reads_v2_then_v1(tmp_path, files, expected):
    for name, text in files.items():
        write(tmp_path, name, text)
    assert cgroup_memory_limit(tmp_path) == expected


def test_detect_machine_reads_gpus_flags_and_closes_nvml(tmp_path):
    nvml = two_gpus(os.getpid())
    cpuinfo = write(tmp_path, "cpuinfo", "flags\t\t: fpu amx_bf16\n")

    found = detect_machine(nvml=nvml, cpuinfo=cpuinfo, cgroup=tmp_path / "no-cgroup")

    assert found.gpu_names == ("NVIDIA A100-SXM4-40GB", "Tesla T4")
    assert found.has_gpu
    assert found.cpu_bf16
    assert (nvml.inits, nvml.shutdowns) == (1, 1)
    assert found.cpu_count == len(os.sched_getaffinity(0))
    assert found.total_ram_bytes == psutil.virtual_memory().total
    assert 0 < found.available_ram_bytes <= found.total_ram_bytes


def test_detect_machine_without_nvml_has_no_gpu(tmp_path):
    found = detect_machine(
        nvml=FakeNvml([], init_error=12),
        cpuinfo=tmp_path / "missing",
        cgroup=tmp_path / "no-cgroup",
    )
    assert found.gpu_names == ()
    assert not found.has_gpu
    assert not found.cpu_bf16


def test_detect_machine_honours_the_cgroup_limits(tmp_path):
    write(tmp_path, "cpu.max", "50000 100000\n")  # half a CPU: counts as one
    write(tmp_path, "memory.max", f"{GIB}\n")
    write(tmp_path, "memory.current", f"{GIB // 4}\n")

    found = detect_machine(nvml=FakeNvml([]), cpuinfo=tmp_path / "missing", cgroup=tmp_path)

    assert found.cpu_count == 1
    assert found.total_ram_bytes == min(GIB, psutil.virtual_memory().total)
    assert found.available_ram_bytes <= GIB - GIB // 4


def test_ram_budget_is_sixty_percent_of_available_ram():
    assert default_ram_budget(machine(available_ram_bytes=10 * GIB)) == 6 * GIB
    assert default_ram_budget(machine(available_ram_bytes=1000)) == 600
    assert default_ram_budget(machine(available_ram_bytes=0)) == 1


def test_machine_is_frozen_and_has_gpu_follows_the_names():
    assert not machine().has_gpu
    assert machine(gpu_names=("Tesla T4",)).has_gpu
    with pytest.raises(dataclasses.FrozenInstanceError):
        machine().cpu_count = 8  # type: ignore[misc]


def test_hardware_record_has_the_hardware_fields():
    from tfperf.hardware import HARDWARE_FIELDS, cpu_model, hardware_record, tensorflow_version

    record = hardware_record(machine(cpu_count=6, gpu_names=("NVIDIA L4", "NVIDIA L4")))
    assert tuple(record) == HARDWARE_FIELDS
    assert record == {
        "cpu_model": cpu_model(),
        "cpu_count": 6,
        "gpu_model": "2 x NVIDIA L4",
        "tf_version": tensorflow_version(),
    }


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ((), None),
        (("NVIDIA T4",), "NVIDIA T4"),
        (("NVIDIA A100",) * 8, "8 x NVIDIA A100"),
        (("NVIDIA A100", "NVIDIA T4", "NVIDIA A100"), "2 x NVIDIA A100 + NVIDIA T4"),
    ],
)
def test_gpu_model(names, expected):
    from tfperf.hardware import gpu_model

    assert gpu_model(names) == expected


def test_describe_hardware_says_what_is_unknown():
    from tfperf.hardware import describe_hardware

    record = {
        "cpu_model": "Intel Xeon",
        "cpu_count": 4,
        "gpu_model": "NVIDIA L4",
        "tf_version": None,
    }
    assert describe_hardware(record) == "4 CPUs (Intel Xeon), NVIDIA L4, TensorFlow unknown"
