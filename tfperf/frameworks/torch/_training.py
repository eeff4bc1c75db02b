"""The train step alone under other training settings (batch size, autocast precision).

As for tf.data (`tfperf.frameworks.tensorflow._training`): the tuner's baseline trial times
the step on one cached batch built under each setting the search may choose, so the limit can
be stated per setting. Each setting costs one build and about `seconds` of steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfperf.frameworks.torch import _torch
from tfperf.frameworks.torch._build import build
from tfperf.knobs import Knobs
from tfperf.measure import batch_examples
from tfperf.measure.training import probe_settings, time_step, training_rate
from tfperf.pipeline import PipelineFile
from tfperf.results import TrainingRate

#: Timed seconds per setting, after the untimed steps.
PROBE_SECONDS = 0.3


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
    return probe_settings(
        settings,
        # One batch is all the probe takes: no workers to start.
        lambda setting: _probe_one(
            pipeline, knobs.replace(**dict(setting), num_workers=0), seconds
        ),
    )


def _probe_one(pipeline: PipelineFile, knobs: Knobs, seconds: float) -> TrainingRate:
    built = build(pipeline, knobs)
    batch = next(iter(built.loader))
    window = time_step(built.step, batch, _torch.synchronise, seconds)
    return training_rate(knobs, batch_examples(batch), window)
