"""Runs a user's training script up to its first `model.fit(...)`, or into its own loop.

`tfperf profile train.py` and `tfperf tune train.py` accept an ordinary script that builds a
dataset and either calls `model.fit` or trains in a loop of its own. The script runs as
`python train.py ARGS` would (`pipeline.run_as_main`: `__name__ == "__main__"`, `sys.argv ==
[train.py, *ARGS]`, its folder first on `sys.path`; all restored afterwards) with `keras.Model.fit`
replaced: the first call records the model and its input and stops the script by raising a
private exception, so no training runs. tfperf then measures that model's train step on that
input for a bounded number of steps. A loop of the script's own over a tf.data dataset is
found as it first trains, and is served the profiler's batches (`_loop`).

What the script must do, and the messages when it does not:

- reach `fit` or its loop when run this way: a script that ends without training, or exits
  first (`sys.exit`, argparse rejecting an argument), stops with a `PipelineFileError`
  naming the file and the fix; `SystemExit` never leaves this module;
- train in a loop tfperf can see: a script that trains (a tape's `gradient`, a Keras
  optimizer's `apply_gradients` or `apply`, or `model.train_on_batch`) on batches of no
  tf.data dataset iterated in Python (its loop inside a `tf.function`, say) is stopped at
  that first step, with a `PipelineFileError` that names the line, rather than left to
  train to its end;
- pass a `tf.data.Dataset` as `x` (or arrays, which tfperf feeds as Keras's own `fit` would:
  the validation split held out, shuffled, batched with fit's `batch_size`, prefetched).

TensorFlow and Keras are imported inside functions.

Example:
    >>> call = run_until_fit(load_pipeline("train.py", ["--epochs", "3"]))  # doctest: +SKIP
    >>> call.model, call.where  # doctest: +SKIP
    (<Sequential name=sequential>, 'train.py:41')
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfperf.errors import PipelineFileError, PipelineRuntimeError, TfperfError
from tfperf.frameworks.tensorflow._loop import (
    IteratorTraced,
    LoopCall,
    LoopSession,
    Watch,
)
from tfperf.frameworks.tensorflow._tf import keras_array_dataset, patched
from tfperf.measure.served import InStep, Stop
from tfperf.pipeline import PipelineFile, run_as_main
from tfperf.tracebacks import (
    exception_user_frames,
    format_frames,
    user_frame,
    user_place,
)

#: Batch size Keras uses when `fit` gets arrays and no `batch_size`.
KERAS_DEFAULT_BATCH = 32


@dataclasses.dataclass(frozen=True)
class FitCall:
    """What the script passed to its first `fit`: the model, the input, where it called
    (`where` for people; `filename` and `line` of the user's frame, None when unknown), and
    for arrays how `fit` would feed them (`shuffle`, `validation_split`)."""

    model: Any
    x: Any
    y: Any
    sample_weight: Any
    batch_size: int | None
    where: str
    filename: str | None = None
    line: int | None = None
    shuffle: bool | str = True
    validation_split: float = 0.0


class _TrainedFirst(BaseException):
    """Stops a script whose own loop trains before any `fit` (a custom training loop)."""

    def __init__(self, what: str, where: str) -> None:
        super().__init__(where)
        self.what = what
        self.where = where


class _LoopReached(BaseException):
    """Stops the script at its own loop's first step, where no session serves it."""

    def __init__(self, call: LoopCall) -> None:
        super().__init__(call.where)
        self.call = call


class _FitReached(BaseException):
    """Stops the script at `fit`. A BaseException, so the script's `except Exception` lets it
    through, as it would a KeyboardInterrupt."""

    def __init__(self, call: FitCall) -> None:
        super().__init__(call.where)
        self.call = call


def run_until_fit(pipeline: PipelineFile, session: LoopSession | None = None) -> FitCall | LoopCall:
    """Runs the script `pipeline` until it calls `fit` on a Keras model, or trains in its own
    loop over a tf.data dataset (`_loop`).

    With a `session`, a loop of the script's own is served the profiler's phases, and the
    script runs until they are measured; without one, it stops at the loop's first step.

    Raises:
        PipelineFileError: the script ended, or exited, before calling `fit` or training in a
            loop tfperf can serve.
        PipelineRuntimeError: the script raised before calling `fit`, or in its loop.
    """
    shown = pipeline.path.name
    watch = Watch(pipeline.user_paths, session)
    with _fit_intercepted(pipeline.user_paths, watch):
        try:
            with run_as_main(pipeline.path, pipeline.argv) as run:
                run()
        except _FitReached as reached:
            return reached.call
        except _LoopReached as reached:
            return reached.call
        except Stop:
            if session is not None and session.call is not None:
                return session.call
            raise
        except _TrainedFirst as trained:
            raise PipelineFileError(_own_loop_message(shown, trained)) from None
        except IteratorTraced as traced:
            raise PipelineFileError(_traced_iterator_message(shown, traced.call)) from None
        except InStep:
            assert session is not None and session.call is not None
            raise PipelineFileError(_in_step_message(shown, session.call)) from None
        except SystemExit as error:
            raise PipelineFileError(_exit_message(shown, error, pipeline.argv)) from None
        except TfperfError:
            raise  # the profiler's own errors say what failed and where
        except Exception as error:
            frames = format_frames(exception_user_frames(error, pipeline.user_paths))
            serving = session is not None and session.serving
            when = "in its training loop" if serving else "before reaching `model.fit(...)`"
            raise PipelineRuntimeError(
                f"{shown} raised {type(error).__name__} {when}: "
                f"{error}" + (f"\n{frames}" if frames else "")
            ) from error
    if session is not None and session.call is not None:
        return session.call  # the script ended its loop before the phases did
    raise PipelineFileError(_no_fit_message(shown, pipeline.argv))


def fit_dataset(call: FitCall, shown: str) -> Any:
    """The `tf.data.Dataset` of batches that `fit` would have trained on.

    A dataset is used as it is. Arrays (NumPy, tensors, or dicts of them) become the dataset
    Keras's own `fit` builds from them (`_tf.keras_array_dataset`); where this Keras has no such
    builder, they are sliced and batched with fit's `batch_size` (32 when it gives none),
    without shuffling or prefetching.

    Raises:
        PipelineFileError: `x` is something tfperf cannot measure (a generator, a PyDataset).
    """
    import keras
    import tensorflow as tf

    if isinstance(call.x, tf.data.Dataset):
        return call.x
    if isinstance(call.x, keras.utils.PyDataset):
        name = type(call.x).__name__
        raise PipelineFileError(
            f"{shown}: `fit` at {call.where} gets x as a {name} (a keras.utils.PyDataset); "
            "tfperf measures tf.data input. Pass a tf.data.Dataset of its batches instead, "
            "e.g. `tf.data.Dataset.from_generator(lambda: (rows[i] for i in range(len(rows))), "
            "output_signature=...)` for `rows`, your PyDataset, to profile how it loads as it "
            "is; or move its per-batch work into tf.data calls (map, batch) to tune it."
        )
    built = keras_array_dataset(
        (call.x, call.y, call.sample_weight),
        call.batch_size or KERAS_DEFAULT_BATCH,
        shuffle=call.shuffle,
        validation_split=call.validation_split,
    )
    if built is not None:
        return built
    parts = tuple(part for part in (call.x, call.y, call.sample_weight) if part is not None)
    try:
        slices = tf.data.Dataset.from_tensor_slices(parts if len(parts) > 1 else parts[0])
    except (TypeError, ValueError) as error:
        raise PipelineFileError(
            f"{shown}: `fit` at {call.where} gets x as a {type(call.x).__name__}; tfperf "
            "measures tf.data input. Pass a tf.data.Dataset (for a generator, wrap it with "
            f"tf.data.Dataset.from_generator). ({error})"
        ) from None
    return slices.batch(call.batch_size or KERAS_DEFAULT_BATCH)


@contextlib.contextmanager
def _fit_intercepted(user_paths: tuple[Path, ...], watch: Watch) -> Iterator[None]:
    import keras
    import tensorflow as tf

    signature = inspect.signature(keras.Model.fit)

    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs).arguments
        frame = user_frame(sys._getframe(1), user_paths)
        raise _FitReached(
            FitCall(
                model=self,
                x=bound.get("x"),
                y=bound.get("y"),
                sample_weight=bound.get("sample_weight"),
                batch_size=bound.get("batch_size"),
                where=user_place(frame, user_paths),
                filename=frame.f_code.co_filename if frame is not None else None,
                line=frame.f_lineno if frame is not None else None,
                shuffle=bound.get("shuffle", True),
                validation_split=bound.get("validation_split", 0.0),
            )
        )

    def trains(owner: type, what: str) -> Any:
        original = getattr(owner, what)

        def step(*args: Any, **kwargs: Any) -> Any:
            session = watch.session
            if session is None or not session.serving:
                loop = watch.training()
                if loop is None:
                    raise _TrainedFirst(what, user_place(sys._getframe(1), user_paths))
                if session is None:
                    raise _LoopReached(loop.call)
                session.chose(loop)
            return original(*args, **kwargs)

        return step

    original_iter = tf.data.Dataset.__iter__

    def iterate(self: Any) -> Any:
        return watch.iterating(self, original_iter)

    optimizer = keras.optimizers.Optimizer
    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(keras.Model, "fit", fit))
        stack.enter_context(patched(tf.data.Dataset, "__iter__", iterate))
        stack.enter_context(
            patched(keras.Model, "train_on_batch", trains(keras.Model, "train_on_batch"))
        )
        for method in ("apply_gradients", "apply"):
            stack.enter_context(patched(optimizer, method, trains(optimizer, method)))
        # A loop with no Keras optimizer (variables updated by hand, a legacy optimizer)
        # still takes gradients: its first is its first step.
        tape = tf.GradientTape
        stack.enter_context(patched(tape, "gradient", trains(tape, "gradient")))
        yield


def _exit_message(shown: str, error: SystemExit, argv: tuple[str, ...]) -> str:
    return (
        f"{shown} called sys.exit({error.code!r}) before reaching `model.fit(...)`, so tfperf "
        "had no model and dataset to measure. tfperf runs the script as `python "
        f"{shown}{''.join(' ' + arg for arg in argv)}` and takes over at its first `fit`; a "
        "script that exits first (argparse rejecting an argument or printing --help, a failed "
        "check, an early `sys.exit`) never gets there. Pass the script's own arguments after "
        f"`--`: `tfperf profile {shown} -- --epochs 3`."
    )


def _own_loop_message(shown: str, trained: _TrainedFirst) -> str:
    what = {"train_on_batch": "model.train_on_batch", "gradient": "GradientTape.gradient"}.get(
        trained.what, trained.what
    )
    return (
        f"{shown} trains in its own loop: it reached `{what}` from {trained.where} before any "
        "`model.fit(...)`, on batches that came from no tf.data dataset iterated in Python. "
        "tfperf measures a custom loop that iterates a tf.data.Dataset in Python (`for x, y in "
        "dataset:` or `next(iterator)`, the step a `tf.function` or not); this one iterates its "
        "input inside a `tf.function`, from a distributed dataset, or trains on arrays. tfperf "
        "stopped the script at that first step rather than let it train. Iterate the dataset in "
        "Python and call the step per batch, or write a pipeline file with `make_dataset()` and "
        "`make_train_step()` (see docs/zero-change.md)."
    )


def _traced_iterator_message(shown: str, call: LoopCall) -> str:
    return (
        f"{shown} passes the iterator it makes at {call.where} into a `tf.function` and calls "
        "`next()` inside it: the traced step reads its batches where tfperf cannot serve or "
        "time them, so tfperf stopped the script there rather than let it train. Call "
        "`next()` in Python and pass the batch to the step (`train_step(next(iterator))`), "
        "or write a pipeline file with `make_dataset()` and `make_train_step()` (see "
        "docs/zero-change.md)."
    )


def _in_step_message(shown: str, call: LoopCall) -> str:
    return (
        f"{shown}'s training loop reads two datasets in step (iterated at {call.where}), as "
        "`zip(a, b)` does: tfperf serves a loop one dataset, and the other's batches would be "
        "timed as the model's, so it stopped the script. Join them into one, "
        "`tf.data.Dataset.zip((a, b))`, and loop over that: it is then measured and tuned as "
        "one pipeline."
    )


def _no_fit_message(shown: str, argv: tuple[str, ...]) -> str:
    return (
        f"{shown} ran to its end without calling `model.fit(...)` or training in a loop over a "
        "tf.data dataset, so tfperf had no training to measure. tfperf runs the script as "
        f"`python {shown}{''.join(' ' + arg for arg in argv)}` and takes over at the first "
        "`fit` of a Keras model, or at the first step of a loop of the script's own: check "
        "that it trains when run this way (not only under a flag or from another entry point)."
    )
