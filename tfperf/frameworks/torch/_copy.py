"""The host-to-GPU copy of one batch, from pageable memory and from pinned memory.

Where the profiled step used CUDA, one batch the loader made is copied to the GPU a few times
as a step would copy it (`.to("cuda")`, from ordinary pageable memory) and from pinned memory
(`.pin_memory()` once, then `.to("cuda", non_blocking=True)`), every copy waited for
(`torch.cuda.synchronize`), and the median of each kept. A pinned copy goes straight to the
GPU by DMA; a pageable one is staged through a pinned buffer by the driver first. How much
faster pinned is, is the machine's to say: the report advises `pin_memory` from the ratio
(`tfperf.results.ProfileResult.host_copy`).

The timing (`time_copies`) takes its copies and clock as functions, so its arithmetic is
tested with fakes; `host_copies` makes the real copies from a batch.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from tfperf.frameworks.torch import _torch
from tfperf.measure import leaves

#: Copies timed each way, after one untimed copy (the first pays CUDA's setup).
REPEATS = 5


@dataclasses.dataclass(frozen=True)
class CopyTiming:
    """One batch's tensors copied to the GPU: bytes, and median seconds each way."""

    bytes_per_batch: int
    pageable_s: float
    pinned_s: float


def median_seconds(
    copy: Callable[[], object],
    *,
    repeats: int = REPEATS,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """The median seconds of `repeats` calls of `copy`, after one untimed call."""
    if repeats < 1:
        raise ValueError(f"`repeats >= 1` must hold, but got repeats={repeats}")
    copy()
    times = []
    for _ in range(repeats):
        start = clock()
        copy()
        times.append(clock() - start)
    return statistics.median(times)


def time_copies(
    bytes_per_batch: int,
    pageable: Callable[[], object],
    pinned: Callable[[], object],
    *,
    repeats: int = REPEATS,
    clock: Callable[[], float] = time.perf_counter,
) -> CopyTiming:
    """Times the pageable copy, then the pinned one; each callable copies one batch and waits.

    Example:
        >>> ticks = iter(range(100))
        >>> timing = time_copies(8, lambda: None, lambda: None, clock=lambda: next(ticks))
        >>> timing.pageable_s, timing.pinned_s
        (1, 1)
    """
    return CopyTiming(
        bytes_per_batch=bytes_per_batch,
        pageable_s=median_seconds(pageable, repeats=repeats, clock=clock),
        pinned_s=median_seconds(pinned, repeats=repeats, clock=clock),
    )


def host_copies(
    batch: Any,
    device: str = "cuda",
    *,
    repeats: int = REPEATS,
    clock: Callable[[], float] = time.perf_counter,
) -> CopyTiming | None:
    """Times copying `batch`'s host tensors to `device`, pageable and pinned; None: none.

    A batch the loader already pinned (`pin_memory=True`) is copied into pageable memory for
    the pageable copy, so both ways are timed whatever the loader did. Without CUDA (a dry
    run on `device="cpu"`) nothing can be pinned: both ways copy the same pageable tensors.
    """
    torch = _torch.import_torch()
    tensors = [
        leaf
        for leaf in leaves(batch)
        if isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu"
    ]
    if not tensors:
        return None
    cuda = torch.cuda.is_available()
    pageable = [_pageable(torch, tensor) if cuda else tensor for tensor in tensors]
    pinned = [_pinned(tensor) for tensor in tensors] if cuda else pageable

    def wait() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def copy_pageable() -> None:
        for tensor in pageable:
            tensor.to(device, copy=True)
        wait()

    def copy_pinned() -> None:
        for tensor in pinned:
            tensor.to(device, non_blocking=True, copy=True)
        wait()

    size = sum(tensor.numel() * tensor.element_size() for tensor in tensors)
    return time_copies(size, copy_pageable, copy_pinned, repeats=repeats, clock=clock)


def _pageable(torch: Any, tensor: Any) -> Any:
    if not tensor.is_pinned():
        return tensor
    return torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=False).copy_(tensor)


def _pinned(tensor: Any) -> Any:
    return tensor if tensor.is_pinned() else tensor.pin_memory()
