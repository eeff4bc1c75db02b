"""The train step alone on one cached batch, timed as the limit's per-setting probe needs it.

A framework builds its pipeline under a training setting (a batch size, a precision), takes
one batch and hands the step here: `time_step` runs the untimed steps (the trace, the first
run), then `windows` timed windows of at least `seconds` each, and keeps the fastest, since
whatever else runs on the host only slows a window. `training_rate` turns that window into
the `TrainingRate` the pipeline model restates the limit with, and `probe_settings` runs a
framework's probe over every setting, leaving out (with a warning) one that fails: the trial
that runs that setting names the error; the probe only aims the estimate.

Nothing here imports a framework: each passes its own step and synchronisation.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from tfperf.knobs import Knobs
from tfperf.results import TrainingRate

logger = logging.getLogger(__name__)

#: Untimed steps before timing (the trace and the first run), then at least this many timed
#: steps and at most that many per window.
UNTIMED_STEPS, MIN_STEPS, MAX_STEPS = 2, 3, 200


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


def time_step(
    step: Callable[[Any], Any],
    batch: Any,
    sync: Callable[[Any], None],
    seconds: float,
    windows: int = 1,
    max_steps: int = MAX_STEPS,
) -> Window:
    """`step` on `batch` after `UNTIMED_STEPS`: the fastest of `windows` timed windows, each
    of at least `seconds` and `MIN_STEPS` steps, at most `max_steps`.

    `sync` waits for what a step queued (a GPU's work), so each step is timed whole.
    """
    for _ in range(UNTIMED_STEPS):
        sync(step(batch))
    timed = [_timed(step, batch, sync, seconds, max_steps) for _ in range(windows)]
    return fastest_window(timed)


def training_rate(knobs: Knobs, examples_per_batch: int, window: Window) -> TrainingRate:
    """The step's rate under `knobs`' training setting, from its timed `window`."""
    examples = examples_per_batch * window.steps
    return TrainingRate(
        batch_size=knobs.batch_size,
        mixed_precision=str(knobs.mixed_precision.value),
        examples_per_sec=examples / window.wall_s,
        model_cpu_s_per_example=window.cpu_s / examples if window.cpu_s > 0 else None,
        steps=window.steps,
    )


def probe_settings(
    settings: Sequence[Mapping[str, Any]], probe: Callable[[Mapping[str, Any]], TrainingRate]
) -> list[TrainingRate]:
    """`probe` under each of `settings`, each with its duration; one whose build or step
    fails is left out, warned of."""
    rates: list[TrainingRate] = []
    for setting in settings:
        start = time.perf_counter()
        try:
            rate = probe(setting)
            rates.append(dataclasses.replace(rate, duration_s=time.perf_counter() - start))
        except Exception:  # the trial that runs this setting reports the error properly
            logger.warning("could not time the train step under %s", dict(setting), exc_info=True)
    return rates


def _timed(
    step: Callable[[Any], Any],
    batch: Any,
    sync: Callable[[Any], None],
    seconds: float,
    max_steps: int,
) -> Window:
    """Steps run, wall seconds and process CPU seconds, for at least `seconds` of steps."""
    cpu_start, start = time.process_time(), time.perf_counter()
    steps = 0
    while steps < max_steps and (steps < MIN_STEPS or time.perf_counter() - start < seconds):
        sync(step(batch))
        steps += 1
    return Window(steps, time.perf_counter() - start, time.process_time() - cpu_start)
