"""GPU memory and utilisation from NVML (the library behind `nvidia-smi`), through `pynvml`.

What each figure in `GpuStats` means:

- `memory_used_peak_bytes` / `memory_used_mean_bytes`: memory in use on the whole device, by
  every process on it (NVML's `used`), peak and mean over the samples. On a shared GPU this
  includes other people's work.
- `utilization_mean_percent` / `utilization_peak_percent`: NVML's "GPU utilisation": the share
  of the last sample period (1/6 s to 1 s, depending on the GPU) in which at least one kernel
  ran. 100 % means busy all the time, not that every core was busy. `None` where the GPU does
  not report it.
- `process_memory_peak_bytes`: the most device memory NVML attributed to this process and its
  children. `None` when NVML never reported it: in containers NVML sees host PIDs that do not
  match ours, MIG and some drivers do not report per process, and a process that never created
  a CUDA context has no entry.
- `tf_allocator_peak_bytes`: left `None` here; the TensorFlow layer fills it from TensorFlow's
  own allocator.

Only GPUs that `CUDA_VISIBLE_DEVICES` leaves visible are measured, listed in that order, so the
n-th entry is the one TensorFlow calls `GPU:n` (with `CUDA_DEVICE_ORDER=PCI_BUS_ID`, the order
NVML uses). `GpuStats.index` is NVML's index, the number `nvidia-smi` shows.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import psutil

from tfperf.probes.base import Probe, RunningStats, Series
from tfperf.results import GpuStats

logger = logging.getLogger(__name__)

_INSTALL_HINT = "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py"

# NVML error codes (stable across NVML versions) and what they most likely mean here.
_INIT_HINTS = {
    12: "no NVIDIA driver on this machine",  # NVML_ERROR_LIBRARY_NOT_FOUND
    9: "the NVIDIA driver is installed but not loaded",  # NVML_ERROR_DRIVER_NOT_LOADED
    4: "this user may not query the GPU",  # NVML_ERROR_NO_PERMISSION
    18: "the NVIDIA driver and kernel module differ in version: reboot or reinstall the driver",
}


@dataclasses.dataclass
class _Gpu:
    """One visible GPU and what has been measured on it so far."""

    index: int
    handle: Any
    name: str
    memory_total: int
    memory_used: RunningStats = dataclasses.field(default_factory=RunningStats)
    utilization: RunningStats = dataclasses.field(default_factory=RunningStats)
    process_memory: RunningStats = dataclasses.field(default_factory=RunningStats)
    memory_series: Series = dataclasses.field(default_factory=Series)

    def stats(self) -> GpuStats:
        reported = self.utilization.count > 0
        return GpuStats(
            index=self.index,
            name=self.name,
            memory_total_bytes=self.memory_total,
            memory_used_peak_bytes=int(self.memory_used.peak_or_zero),
            memory_used_mean_bytes=int(self.memory_used.mean),
            utilization_mean_percent=self.utilization.mean if reported else None,
            utilization_peak_percent=self.utilization.peak if reported else None,
            process_memory_peak_bytes=(
                int(self.process_memory.peak) if self.process_memory.count else None
            ),
            tf_allocator_peak_bytes=None,
            memory_samples=self.memory_series.points(),
        )


class NvmlProbe(Probe):
    """Samples memory and utilisation of every visible NVIDIA GPU.

    Args:
        nvml: a module with the `pynvml` API; `None` imports `pynvml` when the probe opens.
            Tests pass a fake.
        pid: the process whose own GPU memory is reported; `None` means this process.

    Example:
        >>> probe = NvmlProbe()
        >>> probe.open()  # doctest: +SKIP
        'NVML could not start (NVML Shared Library Not Found): no NVIDIA driver on this machine'
        >>> probe.gpus()
        []
    """

    name = "nvml"

    def __init__(self, nvml: ModuleType | None = None, pid: int | None = None) -> None:
        super().__init__()
        self._nvml = nvml
        self.pid = os.getpid() if pid is None else pid
        self._gpus: list[_Gpu] = []
        self._started = False
        self._warned: set[tuple[int, str]] = set()
        self._tree: set[int] | None = None

    def _open(self) -> str | None:
        if self._nvml is None:
            try:
                self._nvml = importlib.import_module("pynvml")
            except ImportError:
                return _INSTALL_HINT
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            return f"NVML could not start ({error}): {_init_hint(error)}"
        self._started = True
        try:
            reason = self._find_gpus(nvml)
        except nvml.NVMLError as error:
            reason = f"NVML could not list the GPUs ({error})"
        if reason is not None:
            self._shutdown()
        return reason

    def _find_gpus(self, nvml: ModuleType) -> str | None:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return "NVML found no GPU"
        handles = [nvml.nvmlDeviceGetHandleByIndex(index) for index in range(count)]
        setting = os.environ.get("CUDA_VISIBLE_DEVICES")
        visible = list(range(count))
        if setting is not None:
            visible = _visible_indices(setting, count, _uuids(nvml, handles, setting))
        if not visible:
            return f"CUDA_VISIBLE_DEVICES hides every GPU (it is {setting!r})"
        self._gpus = [_describe(nvml, index, handles[index]) for index in visible]
        return None

    def _sample(self, t_s: float) -> None:
        nvml = self._nvml
        if not self._started or nvml is None:
            return
        self._tree = None
        for gpu in self._gpus:
            memory = self._read(nvml, gpu, "memory", nvml.nvmlDeviceGetMemoryInfo)
            if memory is not None:
                gpu.memory_used.add(int(memory.used))
                gpu.memory_series.add(t_s, int(memory.used))
            rates = self._read(nvml, gpu, "utilisation", nvml.nvmlDeviceGetUtilizationRates)
            if rates is not None:
                gpu.utilization.add(float(rates.gpu))
            processes = nvml.nvmlDeviceGetComputeRunningProcesses
            entries = self._read(nvml, gpu, "per-process memory", processes)
            ours = None if entries is None else self._our_memory(entries)
            if ours is not None:
                gpu.process_memory.add(ours)

    def _read(self, nvml: ModuleType, gpu: _Gpu, what: str, query: Callable[[Any], Any]) -> Any:
        """`query(gpu.handle)`; None when NVML fails it, which is said once per GPU and `what`."""
        try:
            return query(gpu.handle)
        except nvml.NVMLError as error:
            self._warn_once(gpu, what, error)
            return None

    def _our_memory(self, entries: Sequence[Any]) -> int | None:
        """Memory NVML attributes to our process tree; None when no entry of ours reports it."""
        ours = {self.pid}
        if any(entry.pid != self.pid for entry in entries):
            ours = self._tree_pids()
        used = [
            int(entry.usedGpuMemory)
            for entry in entries
            if entry.pid in ours and entry.usedGpuMemory is not None
        ]
        return sum(used) if used else None

    def _tree_pids(self) -> set[int]:
        # Read once per sample, and only when another process shares a GPU with us.
        if self._tree is None:
            self._tree = {self.pid}
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                children = []
            self._tree.update(child.pid for child in children)
        return self._tree

    def _warn_once(self, gpu: _Gpu, what: str, error: Exception) -> None:
        # NotSupported repeats on every sample of such a GPU; say it once, then stay quiet.
        if (gpu.index, what) not in self._warned:
            self._warned.add((gpu.index, what))
            logger.info("NVML cannot read %s of GPU %d (%s): %s", what, gpu.index, gpu.name, error)

    def _close(self) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        if not self._started or self._nvml is None:
            return
        self._started = False
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError as error:
            logger.info("NVML did not shut down cleanly: %s", error)

    def gpus(self) -> list[GpuStats]:
        """Figures of every visible GPU, in `CUDA_VISIBLE_DEVICES` order; empty when off."""
        return [gpu.stats() for gpu in self._gpus]

    def gpu_names(self) -> list[str]:
        """Names of the visible GPUs, e.g. ["NVIDIA A100-SXM4-40GB"]; empty when off."""
        return [gpu.name for gpu in self._gpus]


def _describe(nvml: ModuleType, index: int, handle: Any) -> _Gpu:
    name = _text(nvml.nvmlDeviceGetName(handle))
    total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
    return _Gpu(index=index, handle=handle, name=name, memory_total=total)


def _init_hint(error: Exception) -> str:
    code = getattr(error, "value", None)
    hint = _INIT_HINTS.get(code) if isinstance(code, int) else None
    return hint or "GPU figures are off"


def _text(value: bytes | str) -> str:
    """NVML strings: older pynvml returns bytes, newer returns str."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _uuids(nvml: ModuleType, handles: Sequence[Any], setting: str) -> list[str]:
    # Only ask for UUIDs when the setting names a GPU by UUID: some GPUs are slow to answer.
    if "GPU-" not in setting.upper():
        return []
    return [_text(nvml.nvmlDeviceGetUUID(handle)) for handle in handles]


def _visible_indices(setting: str, count: int, uuids: Sequence[str]) -> list[int]:
    """NVML indices that `CUDA_VISIBLE_DEVICES=setting` leaves visible, in its order.

    Follows CUDA: entries are indices or (unique prefixes of) `GPU-` UUIDs, and the first entry
    that names no GPU ends the list, so "-1" or "" hides every GPU. An entry tfperf cannot map
    (a `MIG-` UUID) makes it measure every GPU rather than guess.

    >>> _visible_indices("1,0", 2, [])
    [1, 0]
    """
    visible: list[int] = []
    for entry in (part.strip() for part in setting.split(",")):
        if entry.upper().startswith("MIG-"):
            logger.info("CUDA_VISIBLE_DEVICES=%r names MIG devices; measuring every GPU", setting)
            return list(range(count))
        index = _entry_index(entry, uuids)
        if index is None or index >= count or index in visible:
            break
        visible.append(index)
    return visible


def _entry_index(entry: str, uuids: Sequence[str]) -> int | None:
    if entry.upper().startswith("GPU-"):
        matches = [i for i, uuid in enumerate(uuids) if uuid.lower().startswith(entry.lower())]
        return matches[0] if len(matches) == 1 else None
    try:
        index = int(entry)
    except ValueError:
        return None
    return index if index >= 0 else None
