"""A fake `pynvml` module: scripted GPUs that raise the real pynvml exception classes.

Each scripted figure is a list indexed by `FakeNvml.step` (the last value repeats), so a test
sets the step, samples, and asserts exact figures. A scripted value that is an exception is
raised instead of returned.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pynvml

NOT_SUPPORTED = pynvml.NVMLError_NotSupported()
GPU_IS_LOST = pynvml.NVMLError_GpuIsLost()
#: Above Linux's largest pid_max (2**22), so never a process of ours.
OTHER_PID = 4_194_399


@dataclasses.dataclass
class FakeGpu:
    name: bytes | str
    uuid: str
    total: int
    used: list[Any]
    util: list[Any]
    processes: list[Any] = dataclasses.field(default_factory=lambda: [[]])


def process(pid: int, used: int | None) -> types.SimpleNamespace:
    """One entry of nvmlDeviceGetComputeRunningProcesses, as pynvml builds it."""
    return types.SimpleNamespace(pid=pid, usedGpuMemory=used)


class FakeNvml(types.ModuleType):
    """The part of the pynvml API that NvmlProbe uses."""

    NVMLError = pynvml.NVMLError

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        super().__init__("fake_pynvml")
        self.gpus = gpus
        self.init_error = init_error
        self.step = 0
        self.inits = 0
        self.shutdowns = 0

    def _at(self, script: list[Any]) -> Any:
        value = script[min(self.step, len(script) - 1)]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        if self.shutdowns >= self.inits:
            raise pynvml.NVMLError_Uninitialized()
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: FakeGpu) -> bytes | str:
        return handle.name

    def nvmlDeviceGetUUID(self, handle: FakeGpu) -> str:
        return handle.uuid

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> types.SimpleNamespace:
        used = self._at(handle.used)
        return types.SimpleNamespace(total=handle.total, used=used, free=handle.total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=self._at(handle.util), memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[Any]:
        return list(self._at(handle.processes))


def two_gpus(pid: int) -> FakeNvml:
    """GPU 0 (name as bytes) used by `pid`; GPU 1 without utilisation, used by another process."""
    return FakeNvml(
        [
            FakeGpu(
                name=b"NVIDIA A100-SXM4-40GB",
                uuid="GPU-aaaa1111-0000-0000-0000-000000000000",
                total=40_000,
                used=[100, 300, 200],
                util=[10, 50, 30],
                processes=[[process(pid, 64)], [process(pid, 96)], [process(pid, 80)]],
            ),
            FakeGpu(
                name="Tesla T4",
                uuid="GPU-bbbb2222-0000-0000-0000-000000000000",
                total=16_000,
                used=[10, 20, 30],
                util=[NOT_SUPPORTED],
                processes=[[process(OTHER_PID, 500)]],
            ),
        ]
    )
