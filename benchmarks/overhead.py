"""The profiler's own overhead on a measured training loop.

Runs the same loop bare and under `tfperf.Profiler` (iterator wrapped, every step synchronised
and recorded, host and GPU probes sampling in the background), interleaved A/B/A/B so drift on
a shared machine hits both alike, and reports the median of each and their ratio.

    python -m benchmarks.overhead [--steps 300] [--repeats 7]

It also measures the profiler's two costs directly, which is far less noisy than the A/B
difference on a shared machine: the per-step instrumentation (a loop doing nothing but being
profiled) and one pass of the background sampler (host and NVML probes).

Two workloads: a fast step (about 1-2 ms, where fixed per-step costs show most) and the
quick-start pipeline at its AUTOTUNE configuration.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tfperf.quiet import import_tensorflow_quietly

import_tensorflow_quietly()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfperf import tfsupport  # noqa: E402
from tfperf.loader import load_pipeline  # noqa: E402
from tfperf.probes import HostProbe, NvmlProbe  # noqa: E402
from tfperf.profiler import Profiler  # noqa: E402

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


def measure(name: str, workload: Workload, steps: int, repeats: int) -> dict[str, float]:
    dataset, step = workload
    bare(dataset, step, steps)  # trace and fill caches once before timing anything
    plain, timed, unsampled = [], [], []
    for _ in range(repeats):
        plain.append(bare(dataset, step, steps))
        timed.append(profiled(dataset, step, steps))
        unsampled.append(profiled(dataset, step, steps, probes=False))
    a, b, c = (statistics.median(x) for x in (plain, timed, unsampled))
    return {
        "workload": name,
        "step_ms_bare": 1000 * a / steps,
        "step_ms_profiled": 1000 * b / steps,
        "overhead_pct": 100 * (b - a) / a,
        "overhead_no_probes_pct": 100 * (c - a) / a,
        "spread_bare_pct": 100 * _iqr(plain) / a,
        "spread_profiled_pct": 100 * _iqr(timed) / b,
    }


def _iqr(values: list[float]) -> float:
    quartiles = statistics.quantiles(values, n=4)
    return quartiles[2] - quartiles[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    per_step = instrumentation_us_per_step()
    per_sample = sampler_us_per_sample()
    interval_ms = 50
    print(f"per-step instrumentation: {per_step:.2f} us")
    print(
        f"one sampler pass: {per_sample:.0f} us, every {interval_ms} ms = "
        f"{per_sample / (interval_ms * 10):.2f}% of one core"
    )
    rows = [
        measure("fast step (Dense, cached batch)", fast_workload(), args.steps, args.repeats),
        measure("quickstart, AUTOTUNE", quickstart_workload(), args.steps // 3, args.repeats),
    ]
    print(
        f"{'workload':<34}{'bare ms/step':>13}{'profiled':>10}{'overhead':>10}"
        f"{'no probes':>11}{'IQR bare/prof':>15}"
    )
    for row in rows:
        print(
            f"{row['workload']:<34}{row['step_ms_bare']:>13.3f}{row['step_ms_profiled']:>10.3f}"
            f"{row['overhead_pct']:>9.2f}%{row['overhead_no_probes_pct']:>10.2f}%"
            f"{row['spread_bare_pct']:>8.1f}%/{row['spread_profiled_pct']:.1f}%"
        )
        bound = 100 * per_step / (1000 * row["step_ms_bare"])
        print(f"{'':<34}instrumentation alone: {bound:.2f}% of this step")


if __name__ == "__main__":
    main()
