"""GPU memory sizing: from a measured peak to a per-process `memory_limit`, and how many fit.

TensorFlow takes almost all of a GPU's memory by default; to share one GPU between several
processes or models, each gets a logical device with a fixed `memory_limit` (or memory
growth). The limit is sized from what the profile measured, with a margin for fragmentation
and batches larger than the ones measured, and the count that fits includes each process's
CUDA context, which lies outside TensorFlow's limit.

Pure arithmetic on `GpuStats`: no TensorFlow, so saved results get the advice too.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import TYPE_CHECKING, Any

from tfperf.units import format_bytes

if TYPE_CHECKING:
    # Only for annotations: `_profile` imports this module to put the advice in its JSON.
    from tfperf.results._profile import GpuStats

MIB = 1 << 20
#: Headroom over the measured peak: the allocator fragments, and batches vary.
MARGIN = 0.2
#: Limits are rounded up to this granularity, so the advice reads as a round figure.
ROUND_TO_BYTES = 256 * MIB
#: A CUDA context's own memory when the measurement cannot tell it (H100, CUDA 12: ~500-700 MiB).
DEFAULT_CONTEXT_BYTES = 512 * MIB
#: Share of the device that processes may plan on; the driver keeps some for itself.
USABLE_SHARE = 0.95


class PeakSource(str, Enum):
    """Which measurement the advice is sized from, most precise first."""

    TF_ALLOCATOR = "tensorflow-allocator"  # what TensorFlow's allocator held at its peak
    NVML_PROCESS = "nvml-process"  # what NVML attributed to this process tree (adds the context)
    NVML_DEVICE = "nvml-device"  # everything on the GPU: includes other people's work


@dataclasses.dataclass(frozen=True)
class GpuMemoryAdvice:
    """A `memory_limit` for one GPU, and how many processes of this size share it.

    Derived from a `GpuStats` (never stored on its own): `ProfileResult.gpu_memory_advice()`
    recomputes it, and `ProfileResult.to_dict()` writes it under `gpu_memory_advice` for JSON
    readers. Sizes are bytes; `memory_limit_mib` is what `LogicalDeviceConfiguration` takes.
    """

    gpu_index: int
    gpu_name: str
    peak_bytes: int
    source: PeakSource
    memory_limit_bytes: int
    context_bytes: int
    processes_per_gpu: int
    memory_total_bytes: int

    @property
    def memory_limit_mib(self) -> int:
        return self.memory_limit_bytes // MIB

    @property
    def memory_total_mib(self) -> int:
        return self.memory_total_bytes // MIB

    def code(self) -> str:
        """The TensorFlow lines that give one process this GPU with this limit."""
        return (
            'gpus = tf.config.list_physical_devices("GPU")\n'
            "tf.config.set_logical_device_configuration(\n"
            f"    gpus[{self.gpu_index}], "
            f"[tf.config.LogicalDeviceConfiguration(memory_limit={self.memory_limit_mib})]\n"
            ")  # MiB; run before TensorFlow first uses the GPU"
        )

    def fits(self) -> str:
        """How many processes of this size share the GPU, with its name and size."""
        count = self.processes_per_gpu
        if count == 0:
            who = "not even one process of this size fits (limit and CUDA context together)"
        elif count == 1:
            who = "only one process of this size fits"
        else:
            who = f"{count} processes of this size fit"
        return f"{who} on {self.gpu_name} ({self.memory_total_mib:,} MiB)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the limit in MiB, the sentence and the code a reader would copy."""
        return {
            **dataclasses.asdict(self),
            "source": self.source.value,
            "memory_limit_mib": self.memory_limit_mib,
            "fits": self.fits(),
            "code": self.code(),
        }

    def describe(self) -> str:
        """One sentence: the peak, the limit to set, and how many such processes fit."""
        where = {
            PeakSource.TF_ALLOCATOR: "TensorFlow's allocator peak",
            PeakSource.NVML_PROCESS: "this process's peak as NVML saw it",
            PeakSource.NVML_DEVICE: "the whole GPU's peak (other processes included)",
        }[self.source]
        return (
            f"GPU {self.gpu_index}: {where} was {format_bytes(self.peak_bytes)}; a "
            f"memory_limit of {self.memory_limit_mib} MiB leaves {MARGIN:.0%} headroom, and "
            f"{self.fits()} (each also needs about {format_bytes(self.context_bytes)} for its CUDA "
            "context)."
        )


def gpu_memory_advice(gpu: GpuStats, margin: float = MARGIN) -> GpuMemoryAdvice | None:
    """Sizes a per-process limit from the best peak measured on `gpu`; None if none was.

    Example:
        >>> from tfperf.results import GpuStats
        >>> gpu = GpuStats(0, "H100", 80 << 30, 5 << 30, 4 << 30, None, None, 3 << 30, 2 << 30, [])
        >>> advice = gpu_memory_advice(gpu)
        >>> advice.memory_limit_mib, advice.processes_per_gpu
        (2560, 21)
    """
    if margin < 0:
        raise ValueError(f"`margin >= 0` must hold, but got margin={margin}")
    peak, source = _peak(gpu)
    if peak <= 0:
        return None
    limit = _round_up(peak * (1 + margin))
    context = _context_bytes(gpu)
    if source is not PeakSource.TF_ALLOCATOR:
        # An NVML peak already holds the context: the limit covers allocations only.
        limit = max(ROUND_TO_BYTES, _round_up(max(peak - context, 0) * (1 + margin)))
    usable = gpu.memory_total_bytes * USABLE_SHARE
    return GpuMemoryAdvice(
        gpu_index=gpu.index,
        gpu_name=gpu.name,
        peak_bytes=peak,
        source=source,
        memory_limit_bytes=limit,
        context_bytes=context,
        processes_per_gpu=math.floor(usable / (limit + context)),
        memory_total_bytes=gpu.memory_total_bytes,
    )


def _peak(gpu: GpuStats) -> tuple[int, PeakSource]:
    if gpu.tf_allocator_peak_bytes:
        return gpu.tf_allocator_peak_bytes, PeakSource.TF_ALLOCATOR
    if gpu.process_memory_peak_bytes:
        return gpu.process_memory_peak_bytes, PeakSource.NVML_PROCESS
    return gpu.memory_used_peak_bytes, PeakSource.NVML_DEVICE


def _context_bytes(gpu: GpuStats) -> int:
    """The process's memory outside TensorFlow's allocator, when both were measured."""
    process, allocator = gpu.process_memory_peak_bytes, gpu.tf_allocator_peak_bytes
    if process and allocator and process > allocator:
        return process - allocator
    return DEFAULT_CONTEXT_BYTES


def _round_up(count: float) -> int:
    return int(math.ceil(count / ROUND_TO_BYTES) * ROUND_TO_BYTES)
