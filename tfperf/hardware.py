"""The machine that measures: versions, CPUs, RAM, GPUs and bf16 support, from one reader.

A profile records the `Environment` it ran in; `tfperf tune` sizes its search ranges and its
per-trial memory budget from a `Machine`, read once per study, so the figures here are the ones
a trial can actually use: in a container, CPU quota and memory limit of the cgroup count, not
the host's totals. Nothing here imports TensorFlow: its version comes from the installed
package's metadata, so this stays cheap and works where TensorFlow is missing.

Example:
    >>> machine = detect_machine()
    >>> machine.cpu_count >= 1 and default_ram_budget(machine) <= machine.available_ram_bytes
    True
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import platform
import socket
from collections import Counter
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

from tfperf.probes import NvmlProbe
from tfperf.results import Environment

__all__ = [
    "HARDWARE_FIELDS",
    "RAM_BUDGET_SHARE",
    "Machine",
    "cgroup_cpu_limit",
    "cgroup_memory_limit",
    "collect_environment",
    "cpu_bf16_supported",
    "cpu_model",
    "default_ram_budget",
    "describe_hardware",
    "detect_machine",
    "gpu_model",
    "hardware_record",
    "package_version",
    "read_cpuinfo",
    "tensorflow_version",
]

logger = logging.getLogger(__name__)

# Distributions that provide the `tensorflow` module, most common first.
_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly")
_CPUINFO = Path("/proc/cpuinfo")
_CGROUP = Path("/sys/fs/cgroup")
# x86: AVX512-BF16 (Cooper Lake, Zen 4) and AMX-BF16 (Sapphire Rapids); Arm: the BF16 extension
# (Graviton 3, Neoverse V1/N2). oneDNN runs bf16 matmuls natively on each of them.
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
# cgroup v1 writes "no limit" as a huge number (2**63 rounded down to a page), not as "max".
_NO_LIMIT = 2**62

#: The fields of `hardware_record`: what makes two machines' timings comparable or not.
HARDWARE_FIELDS = ("cpu_model", "cpu_count", "gpu_model", "tf_version")

#: Share of the RAM available when the study starts that one trial may use; see
#: `default_ram_budget`.
RAM_BUDGET_SHARE = 0.6


def collect_environment(gpu_names: list[str]) -> Environment:
    """Describes this machine; `gpu_names` come from the GPU probe (empty without GPUs).

    Example:
        >>> env = collect_environment([])
        >>> env.cpu_count >= 1
        True
    """
    return Environment(
        tfperf_version=package_version("tfperf") or "unknown",
        tensorflow_version=tensorflow_version(),
        python_version=platform.python_version(),
        platform=platform.platform(),
        hostname=socket.gethostname(),
        cpu_count=os.cpu_count() or 1,
        cpu_model=cpu_model(),
        gpu_names=list(gpu_names),
        torch_version=package_version("torch"),
    )


def package_version(distribution: str) -> str | None:
    """The installed version of `distribution`, or None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def tensorflow_version() -> str | None:
    """TensorFlow's version from whichever distribution installed it, without importing it."""
    for distribution in _TENSORFLOW_DISTRIBUTIONS:
        version = package_version(distribution)
        if version is not None:
            return version
    return None


def cpu_model(cpuinfo: Path = _CPUINFO) -> str:
    """The CPU's marketing name, e.g. "AMD EPYC 7B13"; "unknown" when nothing says.

    Reads Linux's `/proc/cpuinfo`, then falls back to `platform.processor()`, which is often
    only the architecture but beats nothing.
    """
    return _model_from_cpuinfo(cpuinfo) or platform.processor() or "unknown"


def read_cpuinfo(cpuinfo: Path = _CPUINFO) -> dict[str, str]:
    """The first value of each `key: value` line of `/proc/cpuinfo`; empty when unreadable.

    The first processor's entries stand for all: they share model and flags in practice.
    """
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip():
            fields.setdefault(key.strip(), value.strip())
    return fields


def _model_from_cpuinfo(cpuinfo: Path) -> str | None:
    return read_cpuinfo(cpuinfo).get("model name")


@dataclasses.dataclass(frozen=True)
class Machine:
    """The resources a study runs on.

    Attributes:
        cpu_count: Logical CPUs this process may use: the affinity mask, lowered to the cgroup's
            CPU quota (rounded up) in a container limited to fewer CPUs.
        total_ram_bytes: Physical RAM, or the cgroup's memory limit when lower.
        available_ram_bytes: RAM that can be used without swapping (psutil's `available`),
            or what is left under the cgroup's limit when lower.
        gpu_names: Names of the visible NVIDIA GPUs, in `CUDA_VISIBLE_DEVICES` order; empty
            without a GPU, driver or NVML.
        cpu_bf16: Whether the CPU computes bfloat16 natively (AVX512-BF16, AMX-BF16 or Arm
            BF16), so `mixed_bfloat16` can pay off without a GPU.
    """

    cpu_count: int
    total_ram_bytes: int
    available_ram_bytes: int
    gpu_names: tuple[str, ...]
    cpu_bf16: bool

    @property
    def has_gpu(self) -> bool:
        """Whether at least one NVIDIA GPU is visible."""
        return bool(self.gpu_names)


def detect_machine(
    *,
    nvml: ModuleType | None = None,
    cpuinfo: Path = _CPUINFO,
    cgroup: Path = _CGROUP,
) -> Machine:
    """Reads this machine's CPUs, RAM, GPUs and bf16 support.

    Never raises on missing hardware: without NVML the GPU list is empty (the reason is logged),
    and an unreadable `/proc/cpuinfo` means no bf16.

    Args:
        nvml: A module with the `pynvml` API; `None` imports `pynvml`. Tests pass a fake.
        cpuinfo: Where the CPU flags are read (Linux's `/proc/cpuinfo`).
        cgroup: Where the cgroup's CPU and memory limits are read (`/sys/fs/cgroup`).
    """
    memory = psutil.virtual_memory()
    total, available = int(memory.total), int(memory.available)
    limit = cgroup_memory_limit(cgroup)
    if limit is not None:
        limit_bytes, used_bytes = limit
        total = min(total, limit_bytes)
        available = max(0, min(available, limit_bytes - used_bytes))
    return Machine(
        cpu_count=_cpu_count(cgroup),
        total_ram_bytes=total,
        available_ram_bytes=available,
        gpu_names=_gpu_names(nvml),
        cpu_bf16=cpu_bf16_supported(cpuinfo),
    )


def hardware_record(machine: Machine) -> dict[str, Any]:
    """What a trial records about the hardware and software that measured it.

    Two machines with the same record give comparable timings; a study whose trials carry
    different records mixes machines, and its figures should be compared per machine. Cheap:
    TensorFlow's version comes from package metadata, not from importing it.

    Example:
        >>> record = hardware_record(Machine(8, 2**34, 2**33, ("NVIDIA L4",), False))
        >>> record["cpu_count"], record["gpu_model"]
        (8, 'NVIDIA L4')
    """
    return {
        "cpu_model": cpu_model(),
        "cpu_count": machine.cpu_count,
        "gpu_model": gpu_model(machine.gpu_names),
        "tf_version": tensorflow_version(),
    }


def gpu_model(names: tuple[str, ...] | list[str]) -> str | None:
    """The visible GPUs in one phrase: "NVIDIA L4", "4 x NVIDIA A100", or None without GPUs.

    Example:
        >>> gpu_model(("NVIDIA A100", "NVIDIA A100", "NVIDIA T4"))
        '2 x NVIDIA A100 + NVIDIA T4'
    """
    counts = Counter(names)
    parts = [name if count == 1 else f"{count} x {name}" for name, count in counts.items()]
    return " + ".join(parts) or None


def describe_hardware(record: Mapping[str, Any]) -> str:
    """A `hardware_record` (or a trial's `worker` attribute) as one line for people.

    Example:
        >>> describe_hardware({"cpu_model": "AMD EPYC 7B13", "cpu_count": 16,
        ...                    "gpu_model": None, "tf_version": "2.16.1"})
        '16 CPUs (AMD EPYC 7B13), no GPU, TensorFlow 2.16.1'
    """
    gpu = record.get("gpu_model") or "no GPU"
    tf = record.get("tf_version") or "unknown"
    return (
        f"{record.get('cpu_count', '?')} CPUs ({record.get('cpu_model') or 'unknown model'}), "
        f"{gpu}, TensorFlow {tf}"
    )


def default_ram_budget(machine: Machine) -> int:
    """Bytes of host RAM one trial may use: 60% of the RAM available when the study starts.

    Why this share: a trial's process tree holds TensorFlow's runtime, the model, the shuffle
    buffer and every prefetched batch, and the search deliberately tries large buffers and
    batches, so a trial must be stopped before the kernel's OOM killer picks a victim (it may
    pick the tuner, or someone else's process). Keeping 40% back leaves room for the tuner
    itself, the OS page cache that file-reading pipelines depend on, and the rest of the
    machine; it also absorbs the growth between two memory samples (they are 50 ms apart).
    It is taken from *available* RAM rather than the total, so memory others already use is
    never promised to a trial.

    Example:
        >>> default_ram_budget(Machine(4, 16 * 2**30, 10 * 2**30, (), False)) == 6 * 2**30
        True
    """
    return max(1, math.floor(machine.available_ram_bytes * RAM_BUDGET_SHARE))


def cpu_bf16_supported(cpuinfo: Path = _CPUINFO) -> bool:
    """Whether `/proc/cpuinfo` lists a native bfloat16 flag; False when it cannot be read."""
    fields = read_cpuinfo(cpuinfo)
    # x86 names the list "flags", Arm names it "Features".
    for key in ("flags", "Features"):
        if _BF16_FLAGS.intersection(fields.get(key, "").split()):
            return True
    return False


def cgroup_cpu_limit(cgroup: Path = _CGROUP) -> float | None:
    """CPUs the cgroup's quota allows (e.g. 2.5), or None when there is no quota.

    Reads cgroup v2's `cpu.max` ("200000 100000" or "max 100000"), else cgroup v1's
    `cpu/cpu.cfs_quota_us` and `cpu/cpu.cfs_period_us` (quota -1 means none).
    """
    v2 = _read(cgroup / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _ratio(quota, period)
    quota_v1 = _read(cgroup / "cpu" / "cpu.cfs_quota_us")
    period_v1 = _read(cgroup / "cpu" / "cpu.cfs_period_us")
    if quota_v1 is None or period_v1 is None:
        return None
    return _ratio(quota_v1, period_v1)


def cgroup_memory_limit(cgroup: Path = _CGROUP) -> tuple[int, int] | None:
    """The cgroup's memory `(limit, usage)` in bytes, or None when it sets no limit.

    Reads cgroup v2's `memory.max` and `memory.current`, else cgroup v1's
    `memory/memory.limit_in_bytes` and `memory/memory.usage_in_bytes`.
    """
    for limit_file, usage_file in (
        (cgroup / "memory.max", cgroup / "memory.current"),
        (cgroup / "memory" / "memory.limit_in_bytes", cgroup / "memory" / "memory.usage_in_bytes"),
    ):
        limit = _read_int(limit_file)
        if limit is not None:
            if limit >= _NO_LIMIT:
                return None
            return limit, _read_int(usage_file) or 0
        if limit_file.exists():  # "max": no limit
            return None
    return None


def _cpu_count(cgroup: Path) -> int:
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        count = os.cpu_count() or 1
    quota = cgroup_cpu_limit(cgroup)
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return count


def _gpu_names(nvml: ModuleType | None) -> tuple[str, ...]:
    probe = NvmlProbe(nvml=nvml)
    reason = probe.open()
    try:
        if reason is not None:
            logger.info("No GPU for tuning: %s", reason)
        return tuple(probe.gpu_names())
    finally:
        probe.close()


def _ratio(quota: str, period: str) -> float | None:
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max"
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return None if text is None else int(text)
    except ValueError:
        return None
