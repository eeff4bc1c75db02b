"""Builds what a pipeline file describes, for given knobs: its dataset, model and train step.

Three kinds of file (`PipelineKind`) come to the same `Built`:

- a knobs file: `make_dataset(knobs)`, `make_model(knobs)` or `make_train_step(knobs)`;
- a plain file: `make_dataset()` runs while `tfperf.sites._recording` records its tf.data calls and
  passes the knobs' site values instead of the written ones;
- a script: it runs up to its first `model.fit` (`tfperf.pipeline._script`), recorded the same way,
  and
  the model and input given to `fit` are what is measured.

The knobs that are tf.data options are applied to the dataset; the precision policy is the
caller's to set around the build (it must be in place before the model exists).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tfperf import _tf
from tfperf.errors import KnobError, PipelineFileError, PipelineRuntimeError
from tfperf.knobs import Knobs
from tfperf.pipeline._contract import function_place
from tfperf.pipeline._loader import PipelineFile, PipelineKind
from tfperf.results import Discovery

if TYPE_CHECKING:
    from tfperf.sites import Recorder

__all__ = ["Built", "build", "build_dataset", "build_parts", "found_sites", "raw_dataset"]


@dataclasses.dataclass(frozen=True)
class Built:
    """A pipeline ready to measure. `discovery` is None for a file that reads its knobs."""

    dataset: Any
    model: Any | None
    train_step: Callable[[Any], Any]
    discovery: Discovery | None


def build(pipeline: PipelineFile, knobs: Knobs) -> Built:
    """Builds the dataset (options applied) and the train step of `pipeline` under `knobs`.

    Raises:
        PipelineFileError: the file or script breaks the contract (wrong return types, no
            `fit`, an exit before it).
        PipelineRuntimeError: the user's code raised.
        KnobError: a site value names no call the build made.
    """
    dataset, model, train_step, recorder = build_parts(pipeline, knobs)
    discovery = found_sites(recorder, dataset, pipeline)
    return Built(_tf.apply_options(dataset, knobs), model, train_step, discovery)


def build_dataset(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Discovery | None]:
    """The dataset as the file's `make_dataset` returns it, and its call sites (plain files)."""
    dataset, recorder = raw_dataset(pipeline, knobs)
    return dataset, found_sites(recorder, dataset, pipeline)


def build_parts(
    pipeline: PipelineFile, knobs: Knobs
) -> tuple[Any, Any | None, Callable[[Any], Any], Recorder | None]:
    """The raw dataset, the model (if any), the train step, and the recorder of the sites."""
    if pipeline.kind is not PipelineKind.SCRIPT:
        dataset, recorder = raw_dataset(pipeline, knobs)
        model, train_step = _build_train_step(pipeline, knobs)
        return dataset, model, train_step, recorder
    from tfperf.pipeline._script import fit_dataset, run_until_fit

    with _sites(pipeline, knobs) as recorder:
        call = run_until_fit(pipeline)
    if not getattr(call.model, "compiled", True) or getattr(call.model, "optimizer", None) is None:
        raise PipelineFileError(
            f"{pipeline.path.name}: the model given to `fit` at {call.where} is not compiled. "
            "Call `model.compile(optimizer=..., loss=...)` before `fit`."
        )
    dataset = fit_dataset(call, pipeline.path.name)
    if recorder is not None and call.filename is not None and call.line is not None:
        dataset = recorder.finish(dataset, call.filename, call.line)  # see Recorder.finish
    return dataset, call.model, _tf.keras_train_step(call.model), recorder


def raw_dataset(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Recorder | None]:
    assert pipeline.make_dataset is not None, "a script has no make_dataset"
    with _sites(pipeline, knobs) as recorder:
        dataset = _call_user(pipeline, pipeline.make_dataset, knobs, "make_dataset")
    _tf.check_dataset(dataset, pipeline.path.name)
    if recorder is not None:
        dataset = recorder.finish(dataset, *function_place(pipeline.make_dataset))
    return dataset, recorder


def _build_train_step(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Callable[[Any], Any]]:
    if pipeline.make_train_step is not None:
        step = _call_user(pipeline, pipeline.make_train_step, knobs, "make_train_step")
        if not callable(step):
            raise PipelineFileError(
                f"{pipeline.path.name}: {pipeline.shown_call('make_train_step')} must return a "
                f"callable that takes a batch, but returned {type(step).__name__}. Did you "
                "forget to `return step`?"
            )
        return None, step
    assert pipeline.make_model is not None
    model = _call_user(pipeline, pipeline.make_model, knobs, "make_model")
    _tf.check_model(model, pipeline.path.name)
    return model, _tf.keras_train_step(model)


@contextlib.contextmanager
def _sites(pipeline: PipelineFile, knobs: Knobs) -> Iterator[Recorder | None]:
    """Records the call sites of a plain file or script for the block, applying the knobs'."""
    if pipeline.kind is PipelineKind.KNOBS:
        if knobs.sites:
            raise KnobError(
                f"{pipeline.path.name}: call-site values ({', '.join(knobs.sites)}) apply only "
                "to a file whose `make_dataset()` takes no knobs, or a script; this file's "
                "`make_dataset(knobs)` reads knobs, so set those instead."
            )
        yield None
        return
    from tfperf.sites import recording

    with recording(pipeline.path.parent, knobs.sites) as recorder:
        yield recorder


def found_sites(
    recorder: Recorder | None, dataset: Any, pipeline: PipelineFile
) -> Discovery | None:
    if recorder is None:
        return None
    recorder.check_overrides(pipeline.path.name)
    return recorder.discovery(dataset)


def _call_user(
    pipeline: PipelineFile, function: Callable[..., Any], knobs: Knobs, name: str
) -> Any:
    try:
        return pipeline.call(function, knobs)
    except Exception as error:
        where = _tf.user_frames_of(error, pipeline.user_paths)
        raise PipelineRuntimeError(
            f"{pipeline.path.name}: {pipeline.shown_call(name)} raised {type(error).__name__}: "
            f"{_tf.short_tf_message(error)}" + (f"\n{where}" if where else "")
        ) from error
