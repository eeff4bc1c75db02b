"""The train step alone under other training settings (batch size, autocast precision).

As for tf.data (`tfperf.frameworks.tensorflow._training`): the tuner's baseline trial times
the step on one cached batch built under each setting the search may choose, so the limit can
be stated per setting. Each setting costs one build and about `seconds` of steps.
"""

from __future__ import annotations

from tfperf.frameworks.torch import _torch
from tfperf.frameworks.torch._build import build
from tfperf.knobs import Knobs
from tfperf.measure import batch_examples
from tfperf.measure.training import time_step, training_rate
from tfperf.pipeline import PipelineFile
from tfperf.results import TrainingRate

#: Timed seconds per setting, after the untimed steps.
PROBE_SECONDS = 0.3


def probe_one(pipeline: PipelineFile, knobs: Knobs, seconds: float = PROBE_SECONDS) -> TrainingRate:
    """The step alone under `knobs` on one batch, which is all it takes: no workers start."""
    built = build(pipeline, knobs.replace(num_workers=0))
    batch = next(iter(built.loader))
    window = time_step(built.step, batch, _torch.synchronise, seconds)
    return training_rate(knobs, batch_examples(batch), window)
