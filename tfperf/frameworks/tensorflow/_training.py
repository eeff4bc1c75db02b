"""The model alone under other training settings: what a larger batch or a precision buys.

The pipeline model states the limit for the training the baseline runs (its batch size, its
precision). A search that may change them needs the limit under each: a larger batch spreads
the step's fixed cost over more examples, and bf16 on a CPU with AMX or on a GPU computes
faster. The tuner's baseline trial therefore times the model alone, as the compute-only phase
does, on one cached batch built under each setting it may choose (`probe_training`); the model
then restates the limit per setting (`tfperf.measure._model.training_limit`).

Each setting costs one build (dataset and model) and `PROBE_WINDOWS` windows of about
`seconds` of steps, of which the faster counts: whatever else runs on the host (the trial's
own pipeline winding down, another process) only slows a window, and one slowed window can
rank a slower setting first. Only the settings the search can reach are probed (`tfperf.tuner`
picks them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import psutil

from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._build import build
from tfperf.knobs import Knobs
from tfperf.measure import batch_examples, synchronise
from tfperf.pipeline import PipelineFile
from tfperf.results import TrainingRate

__all__ = ["PROBE_SECONDS", "probe_training"]

logger = logging.getLogger(__name__)

#: Timed seconds per setting, after two untimed steps (the trace and the first run).
PROBE_SECONDS = 0.4
#: Timed windows per setting; the faster counts (`fastest_window`).
PROBE_WINDOWS = 2
_UNTIMED_STEPS = 2
_MIN_STEPS = 3
_MAX_STEPS = 200


def probe_training(
    pipeline: PipelineFile,
    knobs: Knobs,
    settings: Sequence[Mapping[str, Any]],
    seconds: float = PROBE_SECONDS,
) -> list[TrainingRate]:
    """The model alone under each of `settings` (knob overrides of `knobs`).

    A setting whose build or step fails is left out with a warning: the search still runs it
    as a trial, which names the error; the probe only aims the estimate.
    """
    rates: list[TrainingRate] = []
    for setting in settings:
        changed = knobs.replace(**dict(setting))
        try:
            rates.append(_probe_one(pipeline, changed, seconds))
        except Exception:  # the trial that runs this setting reports the error properly
            logger.warning("could not time the model under %s", dict(setting), exc_info=True)
    return rates


def _probe_one(pipeline: PipelineFile, knobs: Knobs, seconds: float) -> TrainingRate:
    with _tf.precision_policy(knobs.mixed_precision):
        built = build(pipeline, knobs)
        batch = _first_batch(built.dataset)
        for _ in range(_UNTIMED_STEPS):
            synchronise(built.train_step(batch))
        windows = [_timed_steps(built.train_step, batch, seconds) for _ in range(PROBE_WINDOWS)]
    window = fastest_window(windows)
    examples = batch_examples(batch) * window.steps
    return TrainingRate(
        batch_size=knobs.batch_size,
        mixed_precision=str(knobs.mixed_precision.value),
        examples_per_sec=examples / window.wall_s,
        model_cpu_s_per_example=window.cpu_s / examples if window.cpu_s > 0 else None,
        steps=window.steps,
    )


class Window(NamedTuple):
    """One timed run of steps: how many, wall seconds, and the process's CPU seconds."""

    steps: int
    wall_s: float
    cpu_s: float


def fastest_window(windows: Sequence[Window]) -> Window:
    """The window with the most steps per wall second (its CPU time with it).

    Example:
        >>> fastest_window([Window(10, 0.5, 0.9), Window(12, 0.4, 0.8)]).steps
        12
    """
    return max(windows, key=lambda w: w.steps / w.wall_s if w.wall_s > 0 else 0.0)


def _first_batch(dataset: Any) -> Any:
    """One batch, with the iterator (and its background threads) gone before timing starts."""
    for batch in dataset.take(1):
        return batch
    raise ValueError("the dataset yielded no batch")


def _timed_steps(train_step: Any, batch: Any, seconds: float) -> Window:
    """Steps run, wall seconds and process CPU seconds, for at least `seconds` of steps."""
    process = psutil.Process()
    cpu_start = _cpu_s(process)
    start = time.perf_counter()
    steps = 0
    while steps < _MAX_STEPS and (steps < _MIN_STEPS or time.perf_counter() - start < seconds):
        synchronise(train_step(batch))
        steps += 1
    wall_s = time.perf_counter() - start
    return Window(steps, wall_s, _cpu_s(process) - cpu_start)


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)
