"""Builds what a pipeline file describes, for given knobs: its dataset, model and train step.

Three kinds of file (`PipelineKind`) come to the same `Built`:

- a knobs file: `make_dataset(knobs)`, `make_model(knobs)` or `make_train_step(knobs)`;
- a plain file: `make_dataset()` runs while `tfperf.callsites` records its tf.data calls and
  passes the knobs' site values instead of the written ones;
- a script: it runs up to its first `model.fit` (`tfperf.script`), recorded the same way, and
  the model and input given to `fit` are what is measured.

The knobs that are tf.data options are applied to the dataset; the precision policy is the
caller's to set around the build (it must be in place before the model exists).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tfperf import tfsupport
from tfperf.errors import KnobError, PipelineFileError, PipelineRuntimeError
from tfperf.knobs import Knobs
from tfperf.loader import PipelineFile, PipelineKind
from tfperf.sites import Discovery, SlowStage

if TYPE_CHECKING:
    from tfperf.callsites import Recorder

__all__ = ["Built", "build", "build_dataset", "discover_sites"]


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
    dataset, model, train_step, recorder = _parts(pipeline, knobs)
    discovery = _found(recorder, dataset, pipeline)
    return Built(tfsupport.apply_options(dataset, knobs), model, train_step, discovery)


def build_dataset(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Discovery | None]:
    """The dataset as the file's `make_dataset` returns it, and its call sites (plain files)."""
    dataset, recorder = _dataset(pipeline, knobs)
    return dataset, _found(recorder, dataset, pipeline)


def discover_sites(pipeline: PipelineFile, *, measure_stages: bool = False) -> Discovery:
    """The call sites of a plain file or script, as its code is written.

    A plain file's `make_dataset()` runs; a script runs up to `fit` (its model is built too).
    Only calls that build the measured dataset count: a validation set built beside it has
    nothing to tune. A file that reads its knobs has no sites. With `measure_stages`, each
    stage is measured alone (`tfperf.stages`, a few seconds) to name the one that limits the
    pipeline as written, and the sites in it.
    """
    if pipeline.kind is PipelineKind.KNOBS:
        return Discovery()
    knobs = pipeline.baseline.replace(sites={})
    if pipeline.kind is PipelineKind.SCRIPT:
        dataset, _, _, recorder = _parts(pipeline, knobs)
    else:
        dataset, recorder = _dataset(pipeline, knobs)
    discovery = _found(recorder, dataset, pipeline) or Discovery()
    if measure_stages and recorder is not None:
        slowest = _slowest(tfsupport.apply_options(dataset, knobs), recorder)
        discovery = dataclasses.replace(discovery, slowest=slowest)
    return discovery


def _parts(
    pipeline: PipelineFile, knobs: Knobs
) -> tuple[Any, Any | None, Callable[[Any], Any], Recorder | None]:
    """The raw dataset, the model (if any), the train step, and the recorder of the sites."""
    if pipeline.kind is not PipelineKind.SCRIPT:
        dataset, recorder = _dataset(pipeline, knobs)
        model, train_step = _build_train_step(pipeline, knobs)
        return dataset, model, train_step, recorder
    from tfperf.script import fit_dataset, run_until_fit

    with _sites(pipeline, knobs) as recorder:
        call = run_until_fit(pipeline)
    if not getattr(call.model, "compiled", True) or getattr(call.model, "optimizer", None) is None:
        raise PipelineFileError(
            f"{pipeline.path.name}: the model given to `fit` at {call.where} is not compiled. "
            "Call `model.compile(optimizer=..., loss=...)` before `fit`."
        )
    dataset = fit_dataset(call, pipeline.path.name)
    return dataset, call.model, tfsupport.keras_train_step(call.model), recorder


def _dataset(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Recorder | None]:
    assert pipeline.make_dataset is not None, "a script has no make_dataset"
    with _sites(pipeline, knobs) as recorder:
        dataset = _call_user(pipeline, pipeline.make_dataset, knobs, "make_dataset")
    tfsupport.check_dataset(dataset, pipeline.path.name)
    return dataset, recorder


def _slowest(dataset: Any, recorder: Recorder) -> SlowStage | None:
    from tfperf.stagechain import recover_chain
    from tfperf.stages import analyse_stages

    stat = analyse_stages(dataset).bottleneck
    if stat is None:
        return None
    node = recover_chain(dataset).stages[stat.index].dataset
    return SlowStage(stat.label, stat.location, stat.added_s_per_example, recorder.sites_of(node))


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
    tfsupport.check_model(model, pipeline.path.name)
    return model, tfsupport.keras_train_step(model)


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
    from tfperf.callsites import recording

    with recording(pipeline.path.parent, knobs.sites) as recorder:
        yield recorder


def _found(recorder: Recorder | None, dataset: Any, pipeline: PipelineFile) -> Discovery | None:
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
        where = tfsupport.user_frames_of(error, pipeline.user_paths)
        raise PipelineRuntimeError(
            f"{pipeline.path.name}: {pipeline.shown_call(name)} raised {type(error).__name__}: "
            f"{tfsupport.short_tf_message(error)}" + (f"\n{where}" if where else "")
        ) from error
