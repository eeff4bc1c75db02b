"""The train step alone under other training settings (batch size, autocast precision).

As for tf.data (`tfperf.frameworks.tensorflow._training`): the tuner's baseline trial times
the step on one cached batch built under each setting the search may choose, so the limit can
be stated per setting. Each setting costs one build and about `seconds` of steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tfperf.frameworks.torch import _torch
from tfperf.frameworks.torch._build import build
from tfperf.knobs import Knobs
from tfperf.measure import batch_examples
from tfperf.pipeline import PipelineFile
from tfperf.results import TrainingRate

logger = logging.getLogger(__name__)

#: Timed seconds per setting, after `_UNTIMED_STEPS` untimed steps.
PROBE_SECONDS = 0.3
_UNTIMED_STEPS, _MAX_STEPS = 2, 200


def probe_training(
    pipeline: PipelineFile,
    knobs: Knobs,
    settings: Sequence[Mapping[str, Any]],
    seconds: float = PROBE_SECONDS,
) -> list[TrainingRate]:
    """The step alone under each of `settings` (knob overrides of `knobs`).

    A setting whose build or step fails is left out with a warning: the search still runs it
    as a trial, which names the error; the probe only aims the estimate.
    """
    rates: list[TrainingRate] = []
    for setting in settings:
        changed = knobs.replace(**dict(setting), num_workers=0)  # one batch: no workers
        try:
            rates.append(_probe_one(pipeline, changed, seconds))
        except Exception:  # the trial that runs this setting reports the error properly
            logger.warning("could not time the step under %s", dict(setting), exc_info=True)
    return rates


def _probe_one(pipeline: PipelineFile, knobs: Knobs, seconds: float) -> TrainingRate:
    built = build(pipeline, knobs)
    batch = next(iter(built.loader))
    for _ in range(_UNTIMED_STEPS):
        _torch.synchronise(built.step(batch))
    steps, start, start_cpu = 0, time.perf_counter(), time.process_time()
    while steps < _MAX_STEPS and (steps < 3 or time.perf_counter() - start < seconds):
        _torch.synchronise(built.step(batch))
        steps += 1
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    examples = batch_examples(batch) * steps
    return TrainingRate(
        batch_size=knobs.batch_size,
        mixed_precision=str(knobs.mixed_precision.value),
        examples_per_sec=examples / wall,
        model_cpu_s_per_example=cpu / examples if cpu > 0 else None,
        steps=steps,
    )
