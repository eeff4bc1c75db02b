"""GPU memory sizing: from a measured peak to a per-process limit, and how many fit; and the
host-to-GPU copy of one batch, pageable and pinned.

TensorFlow takes almost all of a GPU's memory by default; to share one GPU between several
processes or models, each gets a logical device with a fixed `memory_limit` (or memory
growth). PyTorch's caching allocator takes what it needs and keeps it cached; its cap is a
share of the GPU, `torch.cuda.set_per_process_memory_fraction`. The limit is sized from what
the profile measured, with a margin for fragmentation and batches larger than the ones
measured, and the count that fits includes each process's CUDA context, which lies outside
either framework's limit.

Pure arithmetic on `GpuStats` and the loader's copy figures: no TensorFlow or torch, so saved
results get the advice too.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import TYPE_CHECKING, Any

from tfperf.units import format_bytes, format_seconds

if TYPE_CHECKING:
    # Only for annotations: `_profile` imports this module to put the advice in its JSON.
    from tfperf.results._profile import GpuStats, LoaderReport

MIB = 1 << 20
#: Headroom over the measured peak: the allocator fragments, and batches vary.
MARGIN = 0.2
#: Limits are rounded up to this granularity, so the advice reads as a round figure.
ROUND_TO_BYTES = 256 * MIB
#: A CUDA context's own memory when the measurement cannot tell it (H100, CUDA 12: ~500-700 MiB).
DEFAULT_CONTEXT_BYTES = 512 * MIB
#: Share of the device that processes may plan on; the driver keeps some for itself.
USABLE_SHARE = 0.95
#: A pinned copy at least this many times faster than the pageable one is worth pinning for:
#: below it, the gain is within what two timings of a few copies differ by.
PINNED_GAIN = 1.2


class PeakSource(str, Enum):
    """Which measurement the advice is sized from, most precise first."""

    TF_ALLOCATOR = "tensorflow-allocator"  # what TensorFlow's allocator held at its peak
    TORCH_ALLOCATOR = "torch-allocator"  # what PyTorch's caching allocator handed out at its peak
    NVML_PROCESS = "nvml-process"  # what NVML attributed to this process tree (adds the context)
    NVML_DEVICE = "nvml-device"  # everything on the GPU: includes other people's work


class MemoryApi(str, Enum):
    """Whose API the advice's code calls: the framework the profile measured."""

    TENSORFLOW = "tensorflow"  # a logical device with `memory_limit` (MiB)
    TORCH = "torch"  # `torch.cuda.set_per_process_memory_fraction` (a share of the GPU)


@dataclasses.dataclass(frozen=True)
class GpuMemoryAdvice:
    """A per-process limit for one GPU, and how many processes of this size share it.

    Derived from a `GpuStats` (never stored on its own): `ProfileResult.gpu_memory_advice()`
    recomputes it, and `ProfileResult.to_dict()` writes it under `gpu_memory_advice` for JSON
    readers. Sizes are bytes; `memory_limit_mib` is what `LogicalDeviceConfiguration` takes,
    `memory_fraction` what `torch.cuda.set_per_process_memory_fraction` takes (`api` says
    which the code calls).
    """

    gpu_index: int
    gpu_name: str
    peak_bytes: int
    source: PeakSource
    memory_limit_bytes: int
    context_bytes: int
    processes_per_gpu: int
    memory_total_bytes: int
    api: MemoryApi = MemoryApi.TENSORFLOW

    @property
    def memory_limit_mib(self) -> int:
        return self.memory_limit_bytes // MIB

    @property
    def memory_fraction(self) -> float:
        """The limit as a share of the GPU, rounded up to two decimals (at most 1)."""
        return _fraction(self.memory_limit_bytes, self.memory_total_bytes)

    @property
    def memory_total_mib(self) -> int:
        return self.memory_total_bytes // MIB

    def code(self) -> str:
        """The lines that give one process this GPU with this limit, in `api`'s words."""
        if self.api is MemoryApi.TORCH:
            return (
                "import torch\n"
                f"torch.cuda.set_per_process_memory_fraction({self.memory_fraction:.2f}, "
                f"device={self.gpu_index})  # of {self.memory_total_mib:,} MiB"
            )
        return (
            'gpus = tf.config.list_physical_devices("GPU")\n'
            "tf.config.set_logical_device_configuration(\n"
            f"    gpus[{self.gpu_index}], "
            f"[tf.config.LogicalDeviceConfiguration(memory_limit={self.memory_limit_mib})]\n"
            ")  # MiB; run before TensorFlow first uses the GPU"
        )

    def code_intro(self) -> str:
        """The sentence that introduces `code`: where in the process it goes."""
        if self.api is MemoryApi.TORCH:
            return (
                "Give each process this share of the GPU (the caching allocator refuses to grow "
                "past it):"
            )
        return "Give each process this limit before TensorFlow first uses the GPU:"

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
            "api": self.api.value,
            "memory_limit_mib": self.memory_limit_mib,
            "memory_fraction": self.memory_fraction,
            "fits": self.fits(),
            "code": self.code(),
        }

    def describe(self) -> str:
        """One sentence: the peak, the limit to set, and how many such processes fit."""
        where = {
            PeakSource.TF_ALLOCATOR: "TensorFlow's allocator peak",
            PeakSource.TORCH_ALLOCATOR: "PyTorch's allocator peak",
            PeakSource.NVML_PROCESS: "this process's peak as NVML saw it",
            PeakSource.NVML_DEVICE: "the whole GPU's peak (other processes included)",
        }[self.source]
        if self.api is MemoryApi.TORCH:
            limit = (
                f"a memory fraction of {self.memory_fraction:.2f} "
                f"({self.memory_fraction * self.memory_total_mib:,.0f} MiB) leaves at least "
                f"{MARGIN:.0%} headroom"
            )
        else:
            limit = f"a memory_limit of {self.memory_limit_mib} MiB leaves {MARGIN:.0%} headroom"
        return (
            f"GPU {self.gpu_index}: {where} was {format_bytes(self.peak_bytes)}; {limit}, and "
            f"{self.fits()} (each also needs about {format_bytes(self.context_bytes)} for its CUDA "
            "context)."
        )


def gpu_memory_advice(
    gpu: GpuStats, margin: float = MARGIN, *, api: MemoryApi = MemoryApi.TENSORFLOW
) -> GpuMemoryAdvice | None:
    """Sizes a per-process limit from the best peak measured on `gpu`; None if none was.

    `api` picks the code's words; with PyTorch's, the limit a process gets is its fraction of
    the GPU rounded up, and the count that fits is sized from that.

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
    if source not in (PeakSource.TF_ALLOCATOR, PeakSource.TORCH_ALLOCATOR):
        # An NVML peak already holds the context: the limit covers allocations only.
        limit = max(ROUND_TO_BYTES, _round_up(max(peak - context, 0) * (1 + margin)))
    usable = gpu.memory_total_bytes * USABLE_SHARE
    granted = limit
    if api is MemoryApi.TORCH:  # the process may grow to its rounded-up share
        granted = max(limit, int(_fraction(limit, gpu.memory_total_bytes) * gpu.memory_total_bytes))
    return GpuMemoryAdvice(
        gpu_index=gpu.index,
        gpu_name=gpu.name,
        peak_bytes=peak,
        source=source,
        memory_limit_bytes=limit,
        context_bytes=context,
        processes_per_gpu=math.floor(usable / (granted + context)),
        memory_total_bytes=gpu.memory_total_bytes,
        api=api,
    )


def _peak(gpu: GpuStats) -> tuple[int, PeakSource]:
    if gpu.tf_allocator_peak_bytes:
        return gpu.tf_allocator_peak_bytes, PeakSource.TF_ALLOCATOR
    if gpu.torch_allocator_peak_bytes:
        return gpu.torch_allocator_peak_bytes, PeakSource.TORCH_ALLOCATOR
    if gpu.process_memory_peak_bytes:
        return gpu.process_memory_peak_bytes, PeakSource.NVML_PROCESS
    return gpu.memory_used_peak_bytes, PeakSource.NVML_DEVICE


def _context_bytes(gpu: GpuStats) -> int:
    """The process's memory outside the framework's allocator, when both were measured.

    PyTorch's figure is what its allocator handed out, not what it cached: the difference
    from NVML's then holds the cache too, so the context is, if anything, overstated.
    """
    process = gpu.process_memory_peak_bytes
    allocator = gpu.tf_allocator_peak_bytes or gpu.torch_allocator_peak_bytes
    if process and allocator and process > allocator:
        return process - allocator
    return DEFAULT_CONTEXT_BYTES


def _round_up(count: float) -> int:
    return int(math.ceil(count / ROUND_TO_BYTES) * ROUND_TO_BYTES)


def _fraction(limit: int, total: int) -> float:
    """`limit` as a share of `total`, rounded up to two decimals, at most 1."""
    if total <= 0:
        return 1.0
    # Rounded first so a share of exactly 0.30 is not pushed to 0.31 by float error.
    return min(1.0, math.ceil(round(limit / total * 100, 6)) / 100)


@dataclasses.dataclass(frozen=True)
class HostCopy:
    """The host-to-GPU copy of one batch, pageable and pinned, and whether pinning pays.

    Derived from a `LoaderReport` (never stored on its own): `ProfileResult.host_copy()`
    recomputes it. Times are medians of a few copies, each waited for
    (`torch.cuda.synchronize`).
    """

    bytes_per_batch: int
    pageable_s: float
    pinned_s: float
    pin_memory: bool | None  # whether the loader pinned its batches; None: not recorded

    @property
    def pageable_gb_per_s(self) -> float:
        return _gb_per_s(self.bytes_per_batch, self.pageable_s)

    @property
    def pinned_gb_per_s(self) -> float:
        return _gb_per_s(self.bytes_per_batch, self.pinned_s)

    @property
    def pinning_pays(self) -> bool:
        """Whether to advise pinning: the loader does not pin, and a pinned copy was at least
        `PINNED_GAIN` times faster."""
        return self.pin_memory is not True and self.pinned_s * PINNED_GAIN <= self.pageable_s

    def describe(self) -> str:
        """One line: the batch's bytes, each copy's time and rate, and the advice if it pays.

        Example:
            >>> copy = HostCopy(64 << 20, 0.012, 0.0025, pin_memory=False)
            >>> print(copy.describe())  # doctest: +NORMALIZE_WHITESPACE
            Host-to-GPU copy of one batch (64 MiB): 12 ms from pageable memory (5.6 GB/s),
            2.5 ms pinned (26.8 GB/s). Pinned is 4.8x faster: set pin_memory=True on the
            DataLoader and copy with .to("cuda", non_blocking=True) in the step; it takes both
            (non_blocking copies of pageable memory still wait, and a pinned batch copied
            without non_blocking still holds the step).
        """
        line = (
            f"Host-to-GPU copy of one batch ({format_bytes(self.bytes_per_batch)}): "
            f"{format_seconds(self.pageable_s)} from pageable memory "
            f"({self.pageable_gb_per_s:.1f} GB/s), {format_seconds(self.pinned_s)} pinned "
            f"({self.pinned_gb_per_s:.1f} GB/s)."
        )
        if not self.pinning_pays:
            return line
        return (
            f"{line} Pinned is {self.pageable_s / self.pinned_s:.1f}x faster: set "
            'pin_memory=True on the DataLoader and copy with .to("cuda", non_blocking=True) in '
            "the step; it takes both (non_blocking copies of pageable memory still wait, and a "
            "pinned batch copied without non_blocking still holds the step)."
        )


def host_copy(loader: LoaderReport | None, pin_memory: Any) -> HostCopy | None:
    """The copy figures `loader` carries, with the loader's `pin_memory`; None if not timed."""
    if loader is None:
        return None
    size, pageable = loader.copy_bytes_per_batch, loader.copy_s_per_batch
    pinned = loader.pinned_copy_s_per_batch
    if size is None or pageable is None or pinned is None:
        return None
    pinned_batches = pin_memory if isinstance(pin_memory, bool) else None
    return HostCopy(size, pageable, pinned, pin_memory=pinned_batches)


def _gb_per_s(count: int, seconds: float) -> float:
    return count / seconds / 1e9 if seconds > 0 else math.inf
