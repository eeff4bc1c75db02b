"""Builds a pipeline to train under a `tf.distribute` strategy (see `_build`).

- a pipeline file: its model or train step is built inside `strategy.scope()`; its dataset is
  distributed with `experimental_distribute_dataset` (global batches, split across replicas),
  or, when it defines `make_dataset(knobs, input_context)`, with
  `distribute_datasets_from_function` (one pipeline per input worker, batched per replica);
- a script: it runs up to `fit` (inside the scope of a strategy given by name); the strategy
  its model was built under, if any, is the one it trains under, as `fit` would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfperf.errors import PipelineFileError
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._build import (
    Built,
    build_parts,
    build_train_step,
    call_user,
    found_sites,
    raw_dataset,
    refuse_service,
    through_service,
    with_context,
)
from tfperf.frameworks.tensorflow._loop import LoopSession, own_loop_needs_step
from tfperf.knobs import Knobs
from tfperf.pipeline import PipelineFile, PipelineKind, takes_input_context


def build_distributed(
    pipeline: PipelineFile,
    knobs: Knobs,
    strategy: Any | None,
    emulated: Callable[[Any], Any] | None = None,
    session: LoopSession | None = None,
) -> Built:
    """Builds `pipeline` under `strategy` (a script may bring its own when it is None).

    `emulated`: a step to run on each global batch instead of the file's (see `build`).
    `session`: serves a script's own training loop the profiler's phases (see `build`).
    """
    if pipeline.kind is PipelineKind.SCRIPT:
        return _script(pipeline, knobs, strategy, emulated, session)
    assert strategy is not None, "a pipeline file without a strategy builds undistributed"
    refuse_service(knobs)
    with _tf.in_scope(strategy):
        model, step = build_train_step(pipeline, knobs, emulated)
    if emulated is not None:
        train_step = emulated  # one sleep per global batch: the replicas step together
    elif model is not None:
        train_step = _tf.keras_distributed_step(model)
    else:
        train_step = _tf.strategy_step(strategy, step)
    if pipeline.kind is PipelineKind.KNOBS and takes_input_context(pipeline.make_dataset):
        distributed = _tf.distribute_from_function(strategy, _per_input(pipeline, knobs), knobs)
        return Built(distributed.dataset, model, train_step, None, strategy, distributed)
    dataset, recorder = raw_dataset(pipeline, knobs)
    discovery = found_sites(recorder, dataset, pipeline)
    dataset = _tf.apply_options(dataset, knobs)
    distributed = _tf.distribute_dataset(strategy, dataset, knobs)
    return Built(distributed.dataset, model, train_step, discovery, strategy, distributed)


def _per_input(pipeline: PipelineFile, knobs: Knobs) -> Any:
    """`make_dataset(knobs, input_context)` as `distribute_datasets_from_function` calls it."""
    make_dataset = pipeline.make_dataset
    assert make_dataset is not None

    def make(context: Any) -> Any:
        function = with_context(make_dataset, context)
        dataset = call_user(pipeline, function, knobs, "make_dataset")
        _tf.check_dataset(dataset, pipeline.path.name)
        return _tf.apply_options(dataset, knobs)

    return make


def _script(
    pipeline: PipelineFile,
    knobs: Knobs,
    strategy: Any | None,
    emulated: Callable[[Any], Any] | None = None,
    session: LoopSession | None = None,
) -> Built:
    parts = build_parts(pipeline, knobs, strategy, emulated, session)
    dataset, model, train_step, recorder = parts
    discovery = found_sites(recorder, dataset, pipeline)
    if train_step is None:  # the script trains in its own loop
        if session is None or session.call is None:
            raise PipelineFileError(own_loop_needs_step(pipeline.path.name))
        return Built(session.measured, None, None, discovery, loop=session.call)
    dataset = _tf.apply_options(dataset, knobs)
    own = model.distribute_strategy if model is not None else None
    if own is not None and not _tf.is_default(own):
        strategy = own  # the script built its model under this strategy: fit would use it
    if strategy is None:
        return Built(through_service(dataset, knobs, pipeline), model, train_step, discovery)
    refuse_service(knobs)
    distributed = _tf.distribute_dataset(strategy, dataset, knobs)
    step = emulated if emulated is not None else _tf.keras_distributed_step(model)
    return Built(distributed.dataset, model, step, discovery, strategy, distributed)
