"""Checks the PyTorch DataLoader framework on a real NVIDIA GPU, without TensorFlow.

Run where a GPU is lent (`python tools/verify_torch_gpu.py --out $OUT/torch-gpu.json`): it
writes a small pipeline file whose step copies each batch to the GPU (`non_blocking=True`) and
runs matrix products there, profiles it with `pin_memory` off and on, and checks that

- the step clock waits for the GPU (`torch.cuda.synchronize`): the compute-only phase takes at
  least the GPU work it queued, measured apart with CUDA events;
- `pin_memory=True` is applied and read back, and the pinned run completes;
- NVML reports the GPU and a used-memory peak of at least what the step allocated;
- the host-to-GPU copy of one batch was timed, pageable and pinned, its figures positive and
  read back from the result's JSON, and the advice to pin is never given to a pinned loader;
- PyTorch's allocator peak is at least what the step allocated, and the GPU memory advice is
  in torch's words (`set_per_process_memory_fraction`, no `tf.config`);
- the terminal summary of the result has the copy line and the GPU line;
- a training script with its own loop (zero-change mode) is clocked the same way: a step's
  queued GPU work counts as computing, not as the next batch's wait.

It runs the profiles in this process, not through `python -m tfperf profile`: the CLI also
writes the HTML report, whose charts import plotly, which the GPU machine lacks.

It prints one JSON object (and writes it to `--out`), and exits 1 when a check fails; without
CUDA it says so and exits 0. `--dry-run-cpu` runs the same flow on the CPU (a smaller step),
skipping the checks that need CUDA, so the flow is proven on a machine without a GPU.
Everything it uses is imported before it looks for CUDA, so a missing module fails anywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pynvml  # noqa: F401  (the NVML probe imports it late; a missing one fails here)
import torch

from tfperf import frameworks
from tfperf.frameworks.torch._copy import host_copies
from tfperf.report import render_summary
from tfperf.results import ProfileResult

#: The step's square matrices: on a GPU, about 7 ms of products per step; on a CPU, little.
SIZE = {"cuda": 2048, "cpu": 128}
#: Measured steps per profile, and warm-up steps.
STEPS, WARMUP = 20, 3
#: What the terminal summary says for the copy and for a GPU measured by torch.
COPY_LINE, GPU_LINE = "Host-to-GPU copy of one batch", "PyTorch allocator peak"

PIPELINE = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    BASELINE = {{"batch_size": 256, "num_workers": 2}}
    DEVICE, SIZE = "{device}", {size}

    def make_loader(knobs):
        data = torch.randn(4096, 3 * 32 * 32)  # 3 MiB batches of 256
        return DataLoader(TensorDataset(data), batch_size=knobs.batch_size, shuffle=True)

    def make_train_step(knobs):
        weight = torch.randn(SIZE, SIZE, device=DEVICE)

        def step(batch):
            x = batch[0].to(DEVICE, non_blocking=True)
            y = weight
            for _ in range(20):
                y = (y @ weight).clamp_(-1, 1)
            return (x.sum() + y.sum()).detach()

        return step
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--dry-run-cpu", action="store_true", help="run the flow on the CPU, CUDA checks skipped"
    )
    args = parser.parse_args(argv)
    if not args.dry_run_cpu and not torch.cuda.is_available():
        return _emit({"skipped": "no CUDA device: nothing to verify here"}, args.out)
    device = "cpu" if args.dry_run_cpu else "cuda"
    checks: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pipeline.py"
        source = PIPELINE.format(device=device, size=SIZE[device])
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
        framework = frameworks.get("torch")
        framework.start()
        pipeline = framework.load(path)
        gpu_s = _gpu_step_seconds(framework, pipeline) if device == "cuda" else None
        for pinned in (False, True):
            knobs = pipeline.baseline.replace(pin_memory=pinned)
            result = framework.profile(pipeline, knobs, steps=STEPS, warmup=WARMUP)
            run = _profile_checks(result, pinned, gpu_s)
            if device == "cuda":
                run.update(_gpu_checks(result, pinned))
            else:
                run.update(_dry_run_checks(result, framework, pipeline))
            checks[f"pin_memory={pinned}"] = run
        checks["script"] = _script_checks(framework, Path(folder), device, gpu_s)
    failed = [
        f"{run}.{name}"
        for run, figures in checks.items()
        for name, value in figures.items()
        if value is False
    ]
    report = {"device": device, "checks": checks, "failed": failed}
    _emit(report, args.out)
    return 1 if failed else 0


#: A training script with its own loop over a DataLoader, the same GPU work per step.
SCRIPT = """
    import sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def main():
        data = torch.randn(4096, 3 * 32 * 32)
        loader = DataLoader(TensorDataset(data), batch_size=256, shuffle=True, num_workers=2)
        weight = torch.randn({size}, {size}, device="{device}")
        for _ in range(int(sys.argv[1])):
            for (batch,) in loader:
                x = batch.to("{device}", non_blocking=True)
                y = weight
                for _ in range(20):
                    y = (y @ weight).clamp_(-1, 1)
                (x.sum() + y.sum()).detach()

    if __name__ == "__main__":
        main()
"""


def _script_checks(
    framework: Any, folder: Path, device: str, gpu_s: float | None
) -> dict[str, Any]:
    """Zero-change mode on the same GPU work: the script's loop clocked, steps synchronised."""
    path = folder / "train.py"
    source = SCRIPT.format(device=device, size=SIZE[device])
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    # Each profile runs in a process of its own under the CLI; here they share one, and the
    # earlier profiles' CUDA garbage must not reach the script's forked workers.
    gc.collect()
    pipeline = framework.load(path, ["4"])
    pipeline = pipeline.with_discovery(framework.sites().find(pipeline))
    result = framework.profile(pipeline, pipeline.baseline, steps=STEPS, warmup=WARMUP)
    compute = result.compute_only
    step_s = compute.compute_s / compute.steps if compute and compute.steps else 0.0
    checks: dict[str, Any] = {
        "examples_per_sec": result.end_to_end.examples_per_sec,
        "compute_s_per_step": step_s,
        "loader_reported": result.loader is not None,
    }
    if gpu_s is not None:
        checks["gpu_s_per_step"] = gpu_s
        checks["clock_waits_for_gpu"] = step_s >= 0.9 * gpu_s
    return checks


def _gpu_step_seconds(framework: Any, pipeline: Any) -> float:
    """The step's GPU time on one cached batch, timed with CUDA events."""
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


def _profile_checks(result: ProfileResult, pinned: bool, gpu_s: float | None) -> dict[str, Any]:
    """What holds on any device: the run, its knobs read back, the DataLoader's report."""
    compute = result.compute_only
    step_s = compute.compute_s / compute.steps if compute and compute.steps else 0.0
    checks: dict[str, Any] = {
        "examples_per_sec": result.end_to_end.examples_per_sec,
        "compute_s_per_step": step_s,
        "pin_memory_read_back": result.knobs.get("pin_memory") is pinned,
        "loader_reported": result.loader is not None,
        "gpus": [gpu.name for gpu in result.gpus],
        "probes": result.probes,
    }
    if gpu_s is not None:
        checks["gpu_s_per_step"] = gpu_s
        checks["clock_waits_for_gpu"] = step_s >= 0.9 * gpu_s
    return checks


def _gpu_checks(result: ProfileResult, pinned: bool) -> dict[str, Any]:
    """The copy, the allocator peak, the advice's words and the summary, on a GPU."""
    step_bytes = SIZE["cuda"] ** 2 * 4  # the step's weight alone
    used = max((gpu.memory_used_peak_bytes for gpu in result.gpus), default=0)
    torch_peak = max((gpu.torch_allocator_peak_bytes or 0 for gpu in result.gpus), default=0)
    loader = result.loader
    copy = result.host_copy()
    again = ProfileResult.from_json(result.to_json())
    advice = result.gpu_memory_advice()
    code = advice[0].code() if advice else ""
    text = render_summary(result)
    return {
        "nvml_peak_used_bytes": used,
        "nvml_sees_memory": used >= step_bytes,
        "torch_allocator_peak_bytes": torch_peak,
        "torch_peak_holds_the_step": torch_peak >= step_bytes,
        "copy_bytes_per_batch": loader.copy_bytes_per_batch if loader else None,
        "copy_s_per_batch": loader.copy_s_per_batch if loader else None,
        "pinned_copy_s_per_batch": loader.pinned_copy_s_per_batch if loader else None,
        "copy_timed": copy is not None
        and copy.bytes_per_batch > 0
        and copy.pageable_s > 0
        and copy.pinned_s > 0,
        "copy_gb_per_s": [copy.pageable_gb_per_s, copy.pinned_gb_per_s] if copy else None,
        "advice_on_pinning": ("pin" if copy.pinning_pays else "none") if copy else None,
        "no_pinning_advice_when_pinned": not (pinned and copy is not None and copy.pinning_pays),
        "pinned_copy_read_back": again.loader is not None
        and again.loader == loader
        and again.host_copy() == copy,
        "advice_code": code,
        "advice_in_torch_words": "set_per_process_memory_fraction" in code
        and "tf.config" not in code,
        "summary_has_copy_line": COPY_LINE in text,
        "summary_has_gpu_line": GPU_LINE in text,
        "summary": text,
    }


def _dry_run_checks(result: ProfileResult, framework: Any, pipeline: Any) -> dict[str, Any]:
    """On the CPU: nothing GPU-only measured, and the copy's flow run on CPU tensors."""
    loader = result.loader
    built = framework.build(pipeline, pipeline.baseline)
    timing = host_copies(next(iter(built.batches())), device="cpu", repeats=3)
    timed = dataclasses.replace(
        result,
        loader=dataclasses.replace(
            loader,
            copy_bytes_per_batch=timing.bytes_per_batch,
            copy_s_per_batch=timing.pageable_s,
            pinned_copy_s_per_batch=timing.pinned_s,
        )
        if loader is not None and timing is not None
        else loader,
    )
    again = ProfileResult.from_json(timed.to_json())
    return {
        "no_copy_without_cuda": loader is not None and loader.copy_s_per_batch is None,
        "no_torch_peak_without_cuda": all(
            gpu.torch_allocator_peak_bytes is None for gpu in result.gpus
        ),
        "summary_without_copy_line": COPY_LINE not in render_summary(result),
        "cpu_copy_timed": timing is not None and timing.pageable_s > 0 and timing.pinned_s > 0,
        "cpu_copy_bytes": timing.bytes_per_batch if timing else None,
        "copy_read_back": again.host_copy() is not None and again.host_copy() == timed.host_copy(),
        "summary_has_copy_line": COPY_LINE in render_summary(timed),
    }


def _emit(report: dict[str, Any], out: Path | None) -> int:
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
