"""The emulated accelerator step against its known answer (issue 47, Done-when bullet 1).

An input that delivers a batch every ~5 ms (a sequential map sleeping 5 ms per batch in
Python, prefetched) feeds an emulated step (`--step-time`, a sleep) of 1 ms and of 20 ms.
With prefetch, a step waits `max(0, interval - step)` for its batch: about 0.8 of a 1 ms step
and nothing of a 20 ms one. Both are measured, side by side with the model's answer from the
measured pipeline-only interval, and the shortest step the input keeps 90% busy.

    python -m benchmarks.emulated_accelerator [--smoke] [--json PATH]

`--smoke` measures 20 steps per phase instead of 100 and at least 1 s: a check that it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tfperf.frameworks.tensorflow._tf import import_tensorflow_quietly

import_tensorflow_quietly()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.emulated_step_record import EmulatedStepRow, emulated_step_section  # noqa: E402
from tfperf.measure import profile  # noqa: E402
from tfperf.results import Utilisation  # noqa: E402
from tfperf.results._utilisation import wait_at  # noqa: E402

#: Seconds the input's map sleeps per batch.
INPUT_INTERVAL_S = 0.005
#: The emulated steps measured, and the wait the issue expects at each.
STEPS_S = (0.001, 0.020)
EXPECTED_WAIT = {0.001: 0.8, 0.020: 0.0}


def five_ms_input() -> Any:
    """A batch every ~5 ms: a sequential `py_function` map that sleeps, then prefetch."""

    def slow(batch: Any) -> Any:
        time.sleep(INPUT_INTERVAL_S)
        return batch

    data = tf.data.Dataset.from_tensor_slices(np.zeros((256, 4), "float32")).batch(8)
    data = data.map(lambda b: tf.py_function(slow, [b], tf.float32), num_parallel_calls=1)
    return data.repeat().prefetch(4)


def measure(steps: int, min_seconds: float) -> list[EmulatedStepRow]:
    """Profiles the input against each emulated step in `STEPS_S`."""
    rows = []
    for step_s in STEPS_S:
        result = profile(
            five_ms_input(),
            lambda batch: None,
            steps=steps,
            min_seconds=min_seconds,
            probes=[],
            step_time_s=step_s,
        )
        found = Utilisation.of(result)
        assert found is not None, "the profile measured the pipeline-only phase"
        rows.append(
            EmulatedStepRow(
                step_s=step_s,
                expected_wait=EXPECTED_WAIT[step_s],
                measured_wait=result.input_wait_fraction,
                model_wait=wait_at(step_s, found.input_interval_s),
                input_interval_s=found.input_interval_s,
                min_step_s=found.min_step_s,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.emulated_accelerator")
    parser.add_argument("--smoke", action="store_true", help="20 steps per phase, not 100")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = measure(steps=20 if args.smoke else 100, min_seconds=1.0)
    print(emulated_step_section(rows))
    if args.json is not None:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
