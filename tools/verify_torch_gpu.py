"""Checks the PyTorch DataLoader framework on a real NVIDIA GPU, without TensorFlow.

Run where a GPU is lent (`python tools/verify_torch_gpu.py`): it writes a small pipeline file
whose step copies each batch to the GPU (`non_blocking=True`) and runs matrix products there,
profiles it with `pin_memory` off and on, and checks that

- the step clock waits for the GPU (`torch.cuda.synchronize`): the compute-only phase takes at
  least the GPU work it queued, measured apart with CUDA events;
- `pin_memory=True` is applied and read back, and the pinned run completes;
- NVML reports the GPU and a used-memory peak of at least what the step allocated.

It prints one JSON object and exits 1 when a check fails; without CUDA it says so and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

PIPELINE = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    BASELINE = {"batch_size": 256, "num_workers": 2}
    SIZE = 2048

    def make_loader(knobs):
        data = torch.randn(8192, 256)
        return DataLoader(TensorDataset(data), batch_size=knobs.batch_size, shuffle=True)

    def make_train_step(knobs):
        weight = torch.randn(SIZE, SIZE, device="cuda")

        def step(batch):
            x = batch[0].to("cuda", non_blocking=True)
            y = weight
            for _ in range(20):
                y = (y @ weight).clamp_(-1, 1)
            return (x.sum() + y.sum()).detach()

        return step
"""


def _gpu_step_seconds(folder: Path) -> float:
    """The step's GPU time on one cached batch, timed with CUDA events."""
    import torch

    from tfperf import frameworks

    framework = frameworks.get("torch")
    pipeline = framework.load(folder / "pipeline.py")
    built = framework.build(pipeline, pipeline.baseline)
    batch = next(iter(built.batches()))
    built.sync(built.step(batch))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        built.step(batch)
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / 1000 / 5


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device: nothing to verify here"}))
        return 0
    from tfperf import frameworks

    checks: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pipeline.py"
        path.write_text(textwrap.dedent(PIPELINE).lstrip(), encoding="utf-8")
        framework = frameworks.get("torch")
        framework.start()
        pipeline = framework.load(path)
        gpu_s = _gpu_step_seconds(Path(folder))
        for pinned in (False, True):
            knobs = pipeline.baseline.replace(pin_memory=pinned)
            result = framework.profile(pipeline, knobs, steps=20, warmup=3)
            compute = result.compute_only
            step_s = compute.compute_s / compute.steps if compute and compute.steps else 0.0
            used = max((gpu.memory_used_peak_bytes for gpu in result.gpus), default=0)
            checks[f"pin_memory={pinned}"] = {
                "examples_per_sec": result.end_to_end.examples_per_sec,
                "compute_s_per_step": step_s,
                "gpu_s_per_step": gpu_s,
                "clock_waits_for_gpu": step_s >= 0.9 * gpu_s,
                "pin_memory_read_back": result.knobs.get("pin_memory") is pinned,
                "gpus": [gpu.name for gpu in result.gpus],
                "nvml_peak_used_bytes": used,
                "nvml_sees_memory": used >= 2048 * 2048 * 4,
            }
    failed = [
        f"{run}.{name}"
        for run, figures in checks.items()
        for name, value in figures.items()
        if value is False
    ]
    print(json.dumps({"checks": checks, "failed": failed}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
