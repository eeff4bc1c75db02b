"""The model alone under other training settings: what a larger batch or a precision buys.

The pipeline model states the limit for the training the baseline runs (its batch size, its
precision). A search that may change them needs the limit under each: a larger batch spreads
the step's fixed cost over more examples, and bf16 on a CPU with AMX or on a GPU computes
faster. The tuner's baseline trial therefore times the model alone, as the compute-only phase
does, on one cached batch built under each setting it may choose (`probe_training`); the model
then restates the limit per setting (`tfperf.tuner._training.training_estimate`).

Each setting costs one build (dataset and model) and `PROBE_WINDOWS` windows of about
`seconds` of steps, of which the faster counts: whatever else runs on the host (the trial's
own pipeline winding down, another process) only slows a window, and one slowed window can
rank a slower setting first. Only the settings the search can reach are probed (`tfperf.tuner`
picks them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._build import build
from tfperf.knobs import Knobs
from tfperf.measure import batch_examples, synchronise
from tfperf.measure.training import probe_settings, time_step, training_rate
from tfperf.pipeline import PipelineFile
from tfperf.results import TrainingRate

#: Timed seconds per window, after the untimed steps (the trace and the first run).
PROBE_SECONDS = 0.4
#: Timed windows per setting; the faster counts (`tfperf.measure.training.fastest_window`).
PROBE_WINDOWS = 2


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
    return probe_settings(
        settings, lambda setting: _probe_one(pipeline, knobs.replace(**dict(setting)), seconds)
    )


def _probe_one(pipeline: PipelineFile, knobs: Knobs, seconds: float) -> TrainingRate:
    with _tf.precision_policy(knobs.mixed_precision):
        built = build(pipeline, knobs)
        batch = _first_batch(built.dataset)
        window = time_step(built.step, batch, synchronise, seconds, PROBE_WINDOWS)
    return training_rate(knobs, batch_examples(batch), window)


def _first_batch(dataset: Any) -> Any:
    """One batch, with the iterator (and its background threads) gone before timing starts."""
    for batch in dataset.take(1):
        return batch
    raise ValueError("the dataset yielded no batch")
