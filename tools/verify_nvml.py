"""Checks tfperf's NVML probe against a real NVIDIA GPU, without TensorFlow.

Run on a machine with a GPU, torch and nvidia-ml-py (`python tools/verify_nvml.py`): it
allocates known amounts of device memory with torch, in this process and in a child, runs
matrix products to load the GPU, and checks what `NvmlProbe` reports against the amounts
allocated. It prints one JSON object and exits 1 when a check fails. The test suite covers the
probe against a fake NVML; this script is how the real path is verified where a GPU is lent.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tfperf.probes import NvmlProbe, Sampler

MIB = 1 << 20
OWN_MIB = 2048
CHILD_MIB = 1024


def _hold(mib: int, ready: Any, done: Any) -> None:
    import torch

    block = torch.empty(mib * MIB, dtype=torch.uint8, device="cuda")
    ready.set()
    done.wait(30)
    del block


def _busy(seconds: float) -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()


def _measure() -> dict[str, Any]:
    import torch

    probe = NvmlProbe()
    reason = probe.open()
    if reason is not None:
        return {"opened": False, "reason": reason}
    context = multiprocessing.get_context("spawn")
    ready, done = context.Event(), context.Event()
    child = context.Process(target=_hold, args=(CHILD_MIB, ready, done))
    with Sampler([probe], clock=time.monotonic, interval_s=0.1):
        own = torch.empty(OWN_MIB * MIB, dtype=torch.uint8, device="cuda")
        child.start()
        ready.wait(60)
        _busy(3.0)
        done.set()
        child.join(30)
        del own
    probe.close()
    gpu = probe.gpus()[0]
    return {"opened": True, "gpu": dataclass_dict(gpu)}


def dataclass_dict(gpu: Any) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "name": gpu.name,
        "memory_total_mib": gpu.memory_total_bytes / MIB,
        "memory_used_peak_mib": gpu.memory_used_peak_bytes / MIB,
        "utilization_peak_percent": gpu.utilization_peak_percent,
        "process_memory_peak_mib": (
            None if gpu.process_memory_peak_bytes is None else gpu.process_memory_peak_bytes / MIB
        ),
        "samples": len(gpu.memory_samples),
    }


def _hidden() -> str | None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    probe = NvmlProbe()
    reason = probe.open()
    probe.close()
    del os.environ["CUDA_VISIBLE_DEVICES"]
    return reason


def main() -> int:
    found = _measure()
    checks: dict[str, bool] = {}
    if found["opened"]:
        gpu = found["gpu"]
        expected = OWN_MIB + CHILD_MIB
        process = gpu["process_memory_peak_mib"]
        # The CUDA context adds a few hundred MiB per process on top of the allocations.
        checks["process memory covers own + child allocations"] = (
            process is not None and expected <= process <= expected + 2048
        )
        checks["device memory peak at least the process peak"] = (
            process is not None and gpu["memory_used_peak_mib"] >= process
        )
        checks["utilisation seen while busy"] = (gpu["utilization_peak_percent"] or 0) >= 50
        checks["samples taken"] = gpu["samples"] >= 10
    found["hidden_reason"] = _hidden()
    checks["CUDA_VISIBLE_DEVICES='' hides every GPU"] = "hides every GPU" in (
        found["hidden_reason"] or ""
    )
    found["checks"] = checks
    print(json.dumps(found, indent=2))
    return 0 if found["opened"] and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
