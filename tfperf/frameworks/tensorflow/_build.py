"""Builds what a pipeline file describes, for given knobs: its dataset, model and train step.

Three kinds of file (`PipelineKind`) come to the same `Built`:

- a knobs file: `make_dataset(knobs)`, `make_model(knobs)` or `make_train_step(knobs)`;
- a plain file: `make_dataset()` runs while `_recording` records its tf.data calls and
  passes the knobs' site values instead of the written ones;
- a script: it runs up to its first `model.fit` (`_script`), recorded the same way,
  and
  the model and input given to `fit` are what is measured.

The knobs that are tf.data options are applied to the dataset; the precision policy is the
caller's to set around the build (it must be in place before the model exists).

Under a `tf.distribute` strategy (`--strategy`, the file's `make_strategy()`, or the strategy a
script built its model under), the model and train step are built in `strategy.scope()`, the
dataset is distributed (`strategy.experimental_distribute_dataset`, or
`distribute_datasets_from_function` for `make_dataset(knobs, input_context)`) and the step runs
on every replica (`_tf.strategy_step`, `_tf.keras_distributed_step`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tfperf.errors import ConfigurationRefused, KnobError, PipelineFileError, PipelineRuntimeError
from tfperf.frameworks.tensorflow import _tf
from tfperf.knobs import Knobs
from tfperf.pipeline import (
    PipelineFile,
    PipelineKind,
    function_place,
    strategy_function,
    takes_input_context,
)
from tfperf.results.discovery import Discovery

if TYPE_CHECKING:
    from tfperf.frameworks import StrategyKind
    from tfperf.frameworks.tensorflow._loop import LoopCall, LoopSession
    from tfperf.frameworks.tensorflow._recording import Recorder
    from tfperf.frameworks.tensorflow._tf import DistributedInput


@dataclasses.dataclass(frozen=True)
class Built:
    """A pipeline ready to measure. `discovery` is None for a file that reads its knobs.

    Under a strategy, `strategy` is the live `tf.distribute.Strategy`, `distributed` the
    distributed input the step consumes, and `dataset` the tf.data pipeline that feeds it (one
    input pipeline's, for `make_dataset(knobs, input_context)`).
    """

    dataset: Any
    model: Any | None
    train_step: Callable[[Any], Any] | None
    discovery: Discovery | None
    strategy: Any | None = None
    distributed: DistributedInput | None = None
    #: A script that trains in its own loop: where it iterates its dataset. Its phases were
    #: served to that loop while it ran (`_loop`); there is no train step (None).
    loop: LoopCall | None = None

    @property
    def step(self) -> Callable[[Any], Any]:
        """The train step; a build with no loop session always has one (a script's own loop
        raises there)."""
        assert self.train_step is not None, "a script's own loop was served: it has no step"
        return self.train_step

    @property
    def data(self) -> Any:
        """What the training loop iterates: the distributed input, else the dataset."""
        return self.distributed if self.distributed is not None else self.dataset


def build(
    pipeline: PipelineFile,
    knobs: Knobs,
    strategy: StrategyKind | None = None,
    step: Callable[[Any], Any] | None = None,
    session: LoopSession | None = None,
) -> Built:
    """Builds the dataset (options applied) and the train step of `pipeline` under `knobs`.

    Args:
        strategy: a strategy by name; None takes the file's `make_strategy()`, or for a script
            the strategy its model was built under, else none.
        step: a step to run instead of the file's (an emulated accelerator's,
            `tfperf.measure.EmulatedStep`): a pipeline file's model is then not built, and a
            script's is not trained. It takes one (global) batch per call, under a strategy too.
        session: serves a script's own training loop the profiler's phases while it runs
            (`_loop`): the `Built` then has the loop and no train step. Without one, such a
            script raises (it has no step tfperf can call).

    Raises:
        PipelineFileError: the file or script breaks the contract (wrong return types, no
            `fit`, an exit before it, a `make_strategy()` that returns no strategy).
        PipelineRuntimeError: the user's code raised.
        KnobError: a site value names no call the build made.
    """
    live = _strategy(pipeline, strategy)
    if live is None and pipeline.kind is not PipelineKind.SCRIPT:
        dataset, model, train_step, recorder = build_parts(pipeline, knobs, step=step)
        discovery = found_sites(recorder, dataset, pipeline)
        dataset = through_service(_tf.apply_options(dataset, knobs), knobs, pipeline)
        return Built(dataset, model, train_step, discovery)
    from tfperf.frameworks.tensorflow._build_distributed import build_distributed

    built = build_distributed(pipeline, knobs, live, step, session)
    if strategy is None and built.strategy is None:
        refuse_idle_replicas(pipeline, loop=built.loop is not None)
    return built


def through_service(dataset: Any, knobs: Knobs, pipeline: PipelineFile) -> Any:
    """`dataset` read through tf.data service when `knobs.service` names one (`--service`)."""
    if knobs.service is None:
        return dataset
    from tfperf.frameworks.tensorflow._service import served

    return served(dataset, knobs, pipeline.path.name)


def refuse_idle_replicas(pipeline: PipelineFile, *, loop: bool) -> None:
    """Raises where `--cpu-replicas` split the CPU but the script trains under no strategy:
    it would train on one of the devices, and its figures would pass for the replicas'."""
    replicas = _tf.cpu_replicas()
    if replicas < 2:
        return
    if loop:
        fix = "tfperf measures a script's own loop on one device: leave out --cpu-replicas"
    else:
        fix = (
            "Build its model in a strategy's scope "
            "(`with tf.distribute.MirroredStrategy().scope():`) and fit there, or leave out "
            "--cpu-replicas"
        )
    raise KnobError(
        f"--cpu-replicas {replicas} split the CPU into {replicas} devices, but "
        f"{pipeline.path.name} trains under no tf.distribute strategy, so it would train on "
        f"one of them. {fix}."
    )


def refuse_service(knobs: Knobs) -> None:
    """Raises: tfperf does not read a `tf.distribute` strategy's input through the service."""
    if knobs.service is not None:
        raise KnobError(
            "--service reads the input through tf.data service in a single-replica trainer; "
            "under a tf.distribute strategy, distribute the dataset to the service in your "
            "own input function, or leave out --strategy (and --cpu-replicas)."
        )


def _strategy(pipeline: PipelineFile, kind: StrategyKind | None) -> Any | None:
    """The strategy asked for: by name, else the file's own; None for none (or the default)."""
    if kind is not None:
        return None if kind.value == "default" else _tf.make_strategy(kind)
    make = strategy_function(pipeline.module, pipeline.path.name)
    if make is None:
        return None
    strategy = call_user(pipeline, lambda _: make(), pipeline.baseline, "make_strategy")
    _tf.check_strategy(strategy, pipeline.path.name)
    return None if _tf.is_default(strategy) else strategy


def build_dataset(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Discovery | None]:
    """The dataset as the file's `make_dataset` returns it, and its call sites (plain files)."""
    dataset, recorder = raw_dataset(pipeline, knobs)
    return dataset, found_sites(recorder, dataset, pipeline)


def build_parts(
    pipeline: PipelineFile,
    knobs: Knobs,
    scope: Any | None = None,
    step: Callable[[Any], Any] | None = None,
    session: LoopSession | None = None,
) -> tuple[Any, Any | None, Callable[[Any], Any] | None, Recorder | None]:
    """The raw dataset, the model (if any), the train step, and the recorder of the sites.

    A script runs inside `scope.scope()` when a strategy `scope` is given, so the model it
    builds is the strategy's. `step`, when given, is the train step (see `build`).

    A script that trains in its own loop (`_loop`) has no step tfperf can call: the train step
    is None. With a `session`, its loop was served the profiler's phases, and the dataset is
    the one the session measured (`LoopSession.raw`); without, the script stopped at the
    loop's first step.
    """
    if pipeline.kind is not PipelineKind.SCRIPT:
        dataset, recorder = raw_dataset(pipeline, knobs)
        model, train_step = build_train_step(pipeline, knobs, step)
        return dataset, model, train_step, recorder
    from tfperf.frameworks.tensorflow._loop import LoopCall
    from tfperf.frameworks.tensorflow._script import fit_dataset, run_until_fit

    with _sites(pipeline, knobs) as recorder, _tf.in_scope(scope):
        if session is not None:
            session.finish_input = functools.partial(_loop_input, pipeline, knobs, recorder)
        call = run_until_fit(pipeline, session)
    if isinstance(call, LoopCall):
        if session is not None and session.serving:
            return session.raw, None, None, recorder
        return _loop_raw(recorder, call), None, None, recorder
    if not getattr(call.model, "compiled", True) or getattr(call.model, "optimizer", None) is None:
        raise PipelineFileError(
            f"{pipeline.path.name}: the model given to `fit` at {call.where} is not compiled. "
            "Call `model.compile(optimizer=..., loss=...)` before `fit`."
        )
    dataset = fit_dataset(call, pipeline.path.name)
    if recorder is not None and call.filename is not None and call.line is not None:
        arrays = dataset is not call.x  # Keras's dataset from them: no object of the user's
        dataset = recorder.finish(dataset, call.filename, call.line, arrays=arrays)
    train_step = step if step is not None else _tf.keras_train_step(call.model)
    return dataset, call.model, train_step, recorder


def _loop_input(
    pipeline: PipelineFile, knobs: Knobs, recorder: Recorder | None, call: LoopCall
) -> tuple[Any, Any]:
    """A script's own loop's dataset, its sites recorded, and as the knobs measure it."""
    raw = _loop_raw(recorder, call)
    return raw, through_service(_tf.apply_options(raw, knobs), knobs, pipeline)


def _loop_raw(recorder: Recorder | None, call: LoopCall) -> Any:
    """A script's own loop's dataset, its sites recorded (a prefetch tfperf may add)."""
    if recorder is None:
        return call.dataset
    return recorder.finish(call.dataset, call.filename, call.line)


def raw_dataset(pipeline: PipelineFile, knobs: Knobs) -> tuple[Any, Recorder | None]:
    """The dataset `make_dataset` returns (for one input pipeline of one replica when it takes
    an input context), and the recorder of its sites."""
    assert pipeline.make_dataset is not None, "a script has no make_dataset"
    make: Callable[[Knobs], Any] = pipeline.make_dataset
    if takes_input_context(make):
        make = with_context(pipeline.make_dataset, _tf.default_input_context())
    with _sites(pipeline, knobs) as recorder:
        dataset = call_user(pipeline, make, knobs, "make_dataset")
    _tf.check_dataset(dataset, pipeline.path.name)
    if recorder is not None:
        dataset = recorder.finish(dataset, *function_place(pipeline.make_dataset))
    return dataset, recorder


def build_train_step(
    pipeline: PipelineFile, knobs: Knobs, step: Callable[[Any], Any] | None = None
) -> tuple[Any, Callable[[Any], Any]]:
    """The model (None for a file's own step) and the train step, for a pipeline file.

    With `step` (an emulated one), no model is built: (None, `step`).
    """
    if step is not None:
        return None, step
    if pipeline.make_train_step is not None:
        step = call_user(pipeline, pipeline.make_train_step, knobs, "make_train_step")
        if not callable(step):
            raise PipelineFileError(
                f"{pipeline.path.name}: {pipeline.shown_call('make_train_step')} must return a "
                f"callable that takes a batch, but returned {type(step).__name__}. Did you "
                "forget to `return step`?"
            )
        return None, step
    assert pipeline.make_model is not None
    model = call_user(pipeline, pipeline.make_model, knobs, "make_model")
    _tf.check_model(model, pipeline.path.name)
    return model, _tf.keras_train_step(model)


def with_context(make_dataset: Callable[..., Any], context: Any) -> Callable[[Knobs], Any]:
    """`make_dataset(knobs, input_context)` as a function of the knobs alone."""

    def make(knobs: Knobs) -> Any:
        return make_dataset(knobs, context)

    make.__wrapped__ = make_dataset  # type: ignore[attr-defined]  # for function_place
    return make


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
    from tfperf.frameworks.tensorflow._recording import recording

    with recording(pipeline.path.parent, knobs.sites) as recorder:
        yield recorder


def found_sites(
    recorder: Recorder | None, dataset: Any, pipeline: PipelineFile
) -> Discovery | None:
    if recorder is None:
        return None
    recorder.check_overrides(pipeline.path.name)
    return recorder.discovery(dataset)


def call_user(pipeline: PipelineFile, function: Callable[..., Any], knobs: Knobs, name: str) -> Any:
    try:
        return pipeline.call(function, knobs)
    except Exception as error:
        if _tf.refused_by_tf_data(error):
            raise ConfigurationRefused(
                f"tf.data refused this configuration while {pipeline.shown_call(name)} built the "
                f"dataset: {_tf.short_tf_message(error)}"
            ) from error
        where = _tf.user_frames_of(error, pipeline.user_paths)
        raise PipelineRuntimeError(
            f"{pipeline.path.name}: {pipeline.shown_call(name)} raised {type(error).__name__}: "
            f"{_tf.short_tf_message(error)}" + (f"\n{where}" if where else "")
        ) from error
