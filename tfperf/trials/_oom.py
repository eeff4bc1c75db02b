"""A trial that ran out of GPU memory inside its framework, under a per-process GPU limit or
budget.

NVML cannot stop such a trial first: under `--gpu-memory-limit` TensorFlow's allocator refuses
the allocation itself and the step raises `ResourceExhaustedError` ("OOM when allocating ...")
before NVML sees more than the limit, as PyTorch's caching allocator raises `OutOfMemoryError`
(`Framework.out_of_memory` tells each). When the user asked for a per-process GPU limit or budget,
that failure is the configuration not fitting, so it is recorded as over the GPU budget (an
infeasible trial the search avoids), not as a failure of the pipeline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tfperf import frameworks
from tfperf.frameworks import Words
from tfperf.units import format_bytes

#: The options named in the reason, so users know the fix.
LIMIT_OPTION = "--gpu-memory-limit"
BUDGET_OPTION = "--gpu-memory-budget"
#: How much of the framework's own message the reason quotes.
_QUOTED_CHARS = 300


@dataclasses.dataclass(frozen=True)
class GpuLimits:
    """The per-process GPU memory a trial was given; None where that limit was not set."""

    limit_mib: int | None = None
    budget_bytes: int | None = None

    @property
    def any(self) -> bool:
        return self.limit_mib is not None or self.budget_bytes is not None


#: A trial with neither a GPU memory limit nor a budget.
NO_GPU_LIMITS = GpuLimits()


def is_gpu_oom(error: Mapping[str, Any] | None, limits: GpuLimits) -> bool:
    """Whether the child's error message reports its framework running out of memory while a
    GPU limit or budget was set."""
    return limits.any and error is not None and error.get("out_of_memory") is True


def gpu_oom_reason(error: Mapping[str, Any], limits: GpuLimits) -> str:
    """Why the trial counts as over the GPU budget, naming the limit, the fix and the words of
    the framework that ran out (the message's `framework`; else the default one)."""
    if limits.limit_mib is not None:
        under = (
            f"the {limits.limit_mib:,} MiB logical GPU device it ran on ({LIMIT_OPTION} "
            f"{limits.limit_mib})"
        )
        fix = f"raise {LIMIT_OPTION}, or keep it and search smaller batches"
    else:
        assert limits.budget_bytes is not None  # `limits.any` holds
        under = f"the {format_bytes(limits.budget_bytes)} budget ({BUDGET_OPTION})"
        fix = f"raise {BUDGET_OPTION}, or search smaller batches"
    words = frameworks.get(str(error.get("framework") or frameworks.DEFAULT)).words
    said = _oom_line(str(error.get("message") or ""), words)
    quoted = f" {words.name} said: {said[:_QUOTED_CHARS]}" if said else ""
    return (
        f"ran out of GPU memory inside {words.name} ({words.oom_error}) within {under}: "
        f"this configuration does not fit in one process's share of the GPU; {fix}.{quoted}"
    )


def _oom_line(message: str, words: Words) -> str:
    """The line of the child's message with the framework's OOM in it, else its first line."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    found = [line for line in lines if any(mark in line for mark in words.oom_marks)]
    return (found or lines or [""])[0]
