"""The profiler's own overhead on a measured training loop.

Runs the same loop bare and under `tfperf.Profiler` (iterator wrapped, every step synchronised
and recorded, host and GPU probes sampling in the background), interleaved A/B/A/B so drift on
a shared machine hits both alike, and reports the median of each and their ratio.

    python -m benchmarks.overhead [--steps 300] [--repeats 11] [--workload fast] [--json PATH]

It also measures the profiler's two costs directly, which is far less noisy than the A/B
difference on a shared machine: the per-step instrumentation (a loop doing nothing but being
profiled) and one pass of the background sampler (host and NVML probes).

Two workloads: a fast step (about 1-2 ms, where fixed per-step costs show most) and the
quick-start pipeline at its AUTOTUNE configuration (`--workload` picks; both by default).
`--json PATH` also writes the figures for `python -m benchmarks`, which runs this module in a
child process and puts them in `benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tfperf.frameworks.tensorflow._tf import import_tensorflow_quietly

import_tensorflow_quietly()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfperf.frameworks.tensorflow import _tf as tfsupport  # noqa: E402
from tfperf.measure._profiler import Profiler  # noqa: E402
from tfperf.pipeline import load_pipeline  # noqa: E402
from tfperf.probes import HostProbe, NvmlProbe  # noqa: E402

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart" / "pipeline.py"
Workload = tuple[Any, Callable[[Any], Any]]


def fast_workload() -> Workload:
    x = np.random.default_rng(0).normal(size=(64, 32)).astype("float32")
    y = np.zeros((64, 1), "float32")
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat().prefetch(2)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return dataset, tfsupport.keras_train_step(model)


def quickstart_workload() -> Workload:
    pipeline = load_pipeline(QUICKSTART)
    knobs = pipeline.baseline.replace(
        num_parallel_calls=-1, cycle_length=-1, num_parallel_reads=-1, prefetch=-1
    )
    dataset = pipeline.call(pipeline.make_dataset, knobs).repeat()
    model = pipeline.call(pipeline.make_model, knobs)
    return dataset, tfsupport.keras_train_step(model)


def bare(dataset: Any, step: Callable[[Any], Any], steps: int) -> float:
    iterator = iter(dataset)
    for _ in range(10):  # same warm-up as the profiled run
        step(next(iterator))
    start = time.perf_counter()
    for _ in range(steps):
        step(next(iterator))
    return time.perf_counter() - start


def profiled(dataset: Any, step: Callable[[Any], Any], steps: int, probes: bool = True) -> float:
    with Profiler(warmup=10, probes=None if probes else []) as profiler:
        start = None
        for number, batch in enumerate(profiler.iterate(dataset, steps=steps)):
            if number == 10:
                start = time.perf_counter()
            profiler.mark_step(step(batch))
        assert start is not None
        elapsed = time.perf_counter() - start
    profiler.result()
    return elapsed


def instrumentation_us_per_step(steps: int = 20_000) -> float:
    """Wall time the Profiler adds to one step: wait timing, sync of empty outputs, recording."""
    with Profiler(warmup=0, probes=[]) as profiler:
        start = time.perf_counter()
        for _ in profiler.iterate(range(steps), steps=steps):
            profiler.mark_step(None)
        elapsed = time.perf_counter() - start
    with_loop = elapsed / steps
    start = time.perf_counter()
    for _ in range(steps):
        pass
    return 1e6 * (with_loop - (time.perf_counter() - start) / steps)


def sampler_us_per_sample(samples: int = 500) -> float:
    """Time one background sampling pass takes (it holds the GIL for part of it)."""
    probes = [HostProbe(), NvmlProbe()]
    for probe in probes:
        probe.open()
    start = time.perf_counter()
    for number in range(samples):
        for probe in probes:
            probe.sample(number * 0.05)
    elapsed = time.perf_counter() - start
    for probe in probes:
        probe.close()
    return 1e6 * elapsed / samples


def measure(
    name: str, workload: Workload, steps: int, repeats: int, per_step_us: float
) -> dict[str, Any]:
    """Bare and profiled timings of one workload, interleaved; medians and spreads in percent."""
    dataset, step = workload
    bare(dataset, step, steps)  # trace and fill caches once before timing anything
    plain, timed, unsampled = [], [], []
    for _ in range(repeats):
        plain.append(bare(dataset, step, steps))
        timed.append(profiled(dataset, step, steps))
        unsampled.append(profiled(dataset, step, steps, probes=False))
    a, b, c = (statistics.median(x) for x in (plain, timed, unsampled))
    step_ms_bare = 1000 * a / steps
    return {
        "workload": name,
        "steps": steps,
        "step_ms_bare": step_ms_bare,
        "step_ms_profiled": 1000 * b / steps,
        "overhead_pct": 100 * (b - a) / a,
        "overhead_no_probes_pct": 100 * (c - a) / a,
        "spread_bare_pct": 100 * _iqr(plain) / a,
        "spread_profiled_pct": 100 * _iqr(timed) / b,
        "instrumentation_pct": 100 * per_step_us / (1000 * step_ms_bare),
    }


def _iqr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    quartiles = statistics.quantiles(values, n=4)
    return quartiles[2] - quartiles[0]


WORKLOADS: dict[str, tuple[str, Callable[[], Workload], int]] = {
    # name: (label, builder, divisor of --steps: the quick-start step is ~20x slower)
    "fast": ("fast step (Dense, cached batch)", fast_workload, 1),
    "quickstart": ("quickstart, AUTOTUNE", quickstart_workload, 3),
}
SAMPLER_INTERVAL_MS = 50


def run(steps: int, repeats: int, workloads: list[str]) -> dict[str, Any]:
    """Every figure of this benchmark, JSON-ready (the fields of `benchmarks.record.Overhead`)."""
    per_step = instrumentation_us_per_step()
    rows = []
    for name in workloads:
        label, build, divisor = WORKLOADS[name]
        rows.append(measure(label, build(), max(1, steps // divisor), repeats, per_step))
    return {
        "instrumentation_us_per_step": per_step,
        "sampler_us_per_sample": sampler_us_per_sample(),
        "sampler_interval_ms": SAMPLER_INTERVAL_MS,
        "steps": steps,
        "repeats": repeats,
        "rows": rows,
    }


def print_figures(figures: dict[str, Any]) -> None:
    per_sample, interval_ms = figures["sampler_us_per_sample"], figures["sampler_interval_ms"]
    print(f"per-step instrumentation: {figures['instrumentation_us_per_step']:.2f} us")
    print(
        f"one sampler pass: {per_sample:.0f} us, every {interval_ms} ms = "
        f"{per_sample / (interval_ms * 10):.2f}% of one core"
    )
    print(
        f"{'workload':<34}{'bare ms/step':>13}{'profiled':>10}{'overhead':>10}"
        f"{'no probes':>11}{'IQR bare/prof':>15}"
    )
    for row in figures["rows"]:
        print(
            f"{row['workload']:<34}{row['step_ms_bare']:>13.3f}{row['step_ms_profiled']:>10.3f}"
            f"{row['overhead_pct']:>9.2f}%{row['overhead_no_probes_pct']:>10.2f}%"
            f"{row['spread_bare_pct']:>8.1f}%/{row['spread_profiled_pct']:.1f}%"
        )
        print(f"{'':<34}instrumentation alone: {row['instrumentation_pct']:.2f}% of this step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument(
        "--workload",
        dest="workloads",
        action="append",
        choices=list(WORKLOADS),
        help="measure only this workload (repeatable; default: all)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    figures = run(args.steps, args.repeats, args.workloads or list(WORKLOADS))
    print_figures(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
