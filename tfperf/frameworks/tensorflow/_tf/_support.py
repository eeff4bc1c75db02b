"""The parts of tfperf that touch TensorFlow and Keras directly.

TensorFlow is imported inside functions, so the rest of the package (results, analysis,
reports) loads without it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import traceback
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from tfperf.errors import PipelineFileError
from tfperf.frameworks.tensorflow._tf._datasets import set_option, traced_graphs
from tfperf.frameworks.tensorflow._tf._devices import gpu_memory_configured
from tfperf.knobs import KNOBS, Knobs, Precision
from tfperf.knobs.declare import Applier
from tfperf.results import GpuStats
from tfperf.tracebacks import drop_library_frames, format_frames, user_frames

logger = logging.getLogger(__name__)

#: How TensorFlow names the failing graph node in a runtime error message.
_NODE_PATTERN = re.compile(r"\{\{node ([^}]+)\}\}")


def enable_gpu_memory_growth() -> None:
    """Makes TensorFlow allocate GPU memory as needed instead of taking it all up front.

    Only for processes tfperf owns: without it NVML would report TF's whole reservation, not
    what the pipeline uses. Harmless without a GPU; too late once TF has touched the GPU.
    Does nothing when `configure_devices` set a memory limit or growth (the user's choice).
    """
    import tensorflow as tf

    if gpu_memory_configured():
        return

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError as error:  # GPUs already initialised in this process
            logger.info("could not enable memory growth on %s: %s", gpu.name, error)


def device_sync() -> Callable[[], None]:
    """What waits for the work queued on the GPUs, so that a step of a script's own loop is
    clocked with its GPU time (eager GPU ops return before they finish): TensorFlow's
    `sync_devices`; nothing without a GPU, where TensorFlow runs each op to its end. Asked
    once, not at every step."""
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        sync: Callable[[], None] = tf.test.experimental.sync_devices
        return sync
    return lambda: None


@contextlib.contextmanager
def precision_policy(precision: Precision) -> Iterator[None]:
    """Sets the Keras global dtype policy for the block, restoring the previous one after."""
    import keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision.value)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def apply_options(dataset: Any, knobs: Knobs) -> Any:
    """Applies the knobs that are tf.data options rather than arguments of the user's calls.

    Each knob declared `Applier.TF_DATA` sets its `option` path on one `tf.data.Options`; a
    None value leaves that option to tf.data.
    """
    import tensorflow as tf

    options = tf.data.Options()
    changed = False
    for knob in KNOBS.applied_by(Applier.TF_DATA):
        value = getattr(knobs, knob.name)
        if value is not None:
            set_option(options, knob.option or "", value)
            changed = True
    return dataset.with_options(options) if changed else dataset


def check_dataset(value: Any, file_name: str) -> None:
    """Raises `PipelineFileError` unless `value` is a `tf.data.Dataset`."""
    import tensorflow as tf

    if isinstance(value, tf.data.Dataset):
        return
    if value is None:
        raise PipelineFileError(
            f"{file_name}: make_dataset(knobs) returned None, not a tf.data.Dataset. "
            "Did you forget to `return ds` at the end of make_dataset?"
        )
    raise PipelineFileError(
        f"{file_name}: make_dataset(knobs) returned a {type(value).__name__}, not a "
        "tf.data.Dataset. Build one, e.g. `tf.data.Dataset.from_tensor_slices(...)`, and "
        "return it batched with knobs.batch_size."
    )


def check_model(value: Any, file_name: str) -> None:
    """Raises `PipelineFileError` unless `value` is a compiled Keras model."""
    import keras

    if not isinstance(value, keras.Model):
        found = (
            "None (did you forget to `return model`?)" if value is None else type(value).__name__
        )
        raise PipelineFileError(
            f"{file_name}: make_model(knobs) must return a compiled keras.Model, "
            f"but returned {found}."
        )
    if not getattr(value, "compiled", True) or getattr(value, "optimizer", None) is None:
        raise PipelineFileError(
            f"{file_name}: make_model(knobs) returned a model that is not compiled. Call "
            "`model.compile(optimizer=..., loss=...)` before returning it."
        )


def keras_array_dataset(
    arrays: tuple[Any, Any, Any], batch_size: int, *, shuffle: bool | str, validation_split: float
) -> Any | None:
    """The dataset Keras's `fit` builds from `arrays` (x, y, sample_weight): the validation
    split held out, the examples shuffled each epoch (as `shuffle` says), batched, gathered in
    parallel and prefetched, from Keras's own array adapter; None for input that is not arrays,
    or a Keras without that adapter (its module path is Keras's, not public API)."""
    try:
        from keras.src.trainers.data_adapters import get_data_adapter
        from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter
        from keras.src.trainers.data_adapters.array_slicing import train_validation_split
    except ImportError:
        return None
    try:
        if validation_split:
            arrays, _ = train_validation_split(arrays, validation_split=validation_split)
        adapter = get_data_adapter(*arrays, batch_size=batch_size, shuffle=shuffle)
        if not isinstance(adapter, ArrayDataAdapter):
            return None  # a generator or a PyDataset: not arrays
        return adapter.get_tf_dataset()
    except Exception:  # arrays this Keras would refuse: the caller's plain slicing says why
        return None


def keras_train_step(model: Any) -> Callable[[Any], Any]:
    """A train step that runs `model.train_on_batch` on `(x, y[, sample_weight])` batches."""
    import keras

    def train_step(batch: Any) -> Any:
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
        return model.train_on_batch(x, y, sample_weight=sample_weight)

    return train_step


def describe_structure(structure: Any) -> str:
    """Tensor specs or Keras tensors as short text, e.g. `(float32[?,28,28], int64[?])`."""
    import tensorflow as tf

    def describe(leaf: Any) -> str:
        dtype = getattr(leaf, "dtype", None)
        name = getattr(dtype, "name", dtype)
        shape = getattr(leaf, "shape", None)
        dims = "?" if shape is None else ",".join("?" if d is None else str(d) for d in shape)
        return f"{name}[{dims}]"

    described = tf.nest.map_structure(describe, structure)
    return str(described).replace("'", "")


def model_input_structure(model: Any) -> str:
    inputs = getattr(model, "inputs", None)
    if not inputs:
        return "unknown (the model has no fixed inputs until it is built)"
    return describe_structure(inputs[0] if len(inputs) == 1 else inputs)


def input_error_location(dataset: Any, error: BaseException, user_paths: Collection[Path]) -> str:
    """Where in the user's code a runtime error in a dataset function was created.

    tf.data reports only the failing graph node; the node's creation traceback, kept in the
    traced function's graph, leads back to the user's line.
    """
    node = _failing_node(error)
    if node is None:
        return ""
    for graph in traced_graphs(dataset):
        try:
            op = graph.get_operation_by_name(node)
        except (KeyError, ValueError):
            continue
        frames = user_frames(list(op.traceback), user_paths)
        if frames:
            return format_frames(frames[-1:])
    return ""


def short_tf_message(error: BaseException) -> str:
    """TensorFlow's error text without its node and function decorations."""
    message = getattr(error, "message", None) or str(error)
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[\[\{\{node [^]]*\]\]", "", message)
    message = re.sub(r"\s*\[Op:[^]]*\].*$", "", message, flags=re.S)
    return drop_library_frames(message.strip())  # issue 17: the user's frames only


#: How TensorFlow names a dataset op that failed as it was made: `[Op:ParallelInterleaveDatasetV4]`.
_DATASET_OP = re.compile(r"\[Op:\w*Dataset\w*\]")


def refused_by_tf_data(error: BaseException) -> bool:
    """Whether `error` is tf.data refusing a dataset's arguments as the dataset was made.

    Two forms: an `InvalidArgumentError` raised eagerly by a dataset op's own checks (its
    message names the op, `[Op:...Dataset...]`), or a `ValueError` raised inside tf.data's
    Python code (`tensorflow/python/data/`). An error from a user's function, or from a dataset
    while it produces elements, is neither.
    """
    import tensorflow as tf

    if isinstance(error, tf.errors.InvalidArgumentError):
        return _DATASET_OP.search(str(error)) is not None
    if isinstance(error, ValueError) and not isinstance(error, tf.errors.OpError):
        frames = traceback.extract_tb(error.__traceback__)
        return bool(frames) and "/tensorflow/python/data/" in frames[-1].filename.replace("\\", "/")
    return False


def reset_allocator_peaks() -> None:
    import tensorflow as tf

    for index, _ in enumerate(tf.config.list_logical_devices("GPU")):
        with contextlib.suppress(ValueError, RuntimeError):
            tf.config.experimental.reset_memory_stats(f"GPU:{index}")


def attach_allocator_peaks(gpus: list[GpuStats]) -> None:
    """Records TensorFlow's allocator peak on each GPU TensorFlow sees, matched by order.

    TF numbers the GPUs CUDA makes visible in the same order NVML's probe lists them.
    """
    import tensorflow as tf

    for index, _ in enumerate(tf.config.list_logical_devices("GPU")):
        if index >= len(gpus):
            break
        try:
            gpus[index].tf_allocator_peak_bytes = int(
                tf.config.experimental.get_memory_info(f"GPU:{index}")["peak"]
            )
        except (ValueError, RuntimeError) as error:
            logger.info("no TensorFlow memory info for GPU:%d: %s", index, error)


def user_frames_of(error: BaseException, user_paths: Collection[Path]) -> str:
    """The user's own frames in a Python exception's traceback, formatted."""
    frames = user_frames(traceback.extract_tb(error.__traceback__), user_paths)
    return format_frames(frames)


def _failing_node(error: BaseException) -> str | None:
    match = _NODE_PATTERN.search(str(error))
    return match.group(1) if match else None
