"""Recovers the stages of a built `tf.data.Dataset`, from its source to its output.

Every tf.data dataset object keeps the datasets it was built from (`_inputs()`), so walking them
from the output back to the source gives the chain of calls the pipeline file made:
`from_tensor_slices -> interleave -> shuffle -> map -> batch -> prefetch`. Each object in the chain
is itself a complete dataset: the pipeline cut after that stage, which `_stages`
measures.

What a dataset object keeps (its inputs, its call, its function and arguments) is read through
`_tf`, which holds tf.data's private names and pins them; where one is missing, the
stage keeps a plainer label or fewer parameters rather than failing. TensorFlow is imported
only inside functions.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

from tfperf.frameworks import StageNode
from tfperf.frameworks.tensorflow import _tf
from tfperf.results.stages import StageKind, StageUnit

#: How many datasets a chain may hold before tfperf stops walking it (a cycle would be a bug).
_MAX_DEPTH = 1000

#: Kinds whose input elements are expanded into examples (a file name into its records).
_EXPANDING = frozenset({StageKind.READ, StageKind.INTERLEAVE})

#: Calls whose function builds datasets of its own: a stage even when tf.data wrote the
#: function (bucket_by_sequence_length), labelled with the calls inside it.
_CONTAINERS = frozenset({"group_by_window", "flat_map", "scan", "window"})

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class StageChain:
    """The stages of a pipeline from source to output; `note` explains a branch, if any."""

    stages: list[StageNode]
    note: str | None


def recover_stages(dataset: Any) -> list[StageNode]:
    """The stages of `dataset`, source first; empty (with a warning logged) when its internals
    cannot be read, so a profile stands without them and AUTOTUNE's choices go unattributed."""
    try:
        return recover_chain(dataset).stages
    except Exception:  # unexpected dataset internals
        logger.warning("could not recover the stages of the dataset", exc_info=True)
        return []


def recover_chain(dataset: Any) -> StageChain:
    """The stages of `dataset`, source first, each with the dataset cut after it.

    Walks the dataset's inputs from the output. A dataset with several inputs (zip,
    concatenate, sample_from_datasets) ends the walk: it becomes the first stage, measured
    together with everything below it, and `note` says so.

    Example:
        >>> chain = recover_chain(tf.data.Dataset.range(8).map(f).batch(2))  # doctest: +SKIP
        >>> [stage.label for stage in chain.stages]  # doctest: +SKIP
        ['range', 'map(f)', 'batch(2)']
    """
    nodes, note = _walk(dataset)
    stages: list[StageNode] = []
    unit = _output_unit(dataset, nodes)
    for current in nodes:  # output first
        kind, label = describe(current)
        if _is_stage(current):
            stages.append(_node(current, kind, label, unit))
        unit = _unit_below(_tf.method_of(current), kind, unit)
    stages.reverse()
    for index, stage in enumerate(stages):
        stage.index = index
    return StageChain(stages=stages, note=note)


def describe(dataset: Any) -> tuple[StageKind, str]:
    """The kind of one dataset object and how its call reads, e.g. `map(parse_jpeg)`."""
    generator = _tf.generator_function(dataset)
    if generator is not None:
        return StageKind.SOURCE, f"from_generator({_name_of(generator)})"
    method = _tf.method_of(dataset)
    kind, call = method.stage, method.name
    function = _tf.user_function(dataset)
    if call in _CONTAINERS and function is not None:
        return kind, _container_label(dataset, call, function)
    if function is not None:
        return kind, f"{call}({_function_label(dataset, function)})"
    if kind is StageKind.JOIN:
        return kind, f"{call}({len(_tf.inputs(dataset))} inputs)"
    shown = method.label_parameter
    value = _tf.parameters(dataset).get(shown) if shown else None
    if value is None or (call == "repeat" and value == -1):
        return kind, call
    return kind, f"{call}({'AUTOTUNE' if value == -1 else value})"


def _container_label(dataset: Any, call: str, function: Any) -> str:
    """`group_by_window(key, reduce: batch)`, `flat_map(lambda: batch)`: the functions a
    stage calls and the tf.data calls they make inside it."""
    names = [_name_of(function)]
    if call == "group_by_window":
        if _tf.is_tf_data_function(function):  # Dataset.bucket_by_sequence_length built it
            call, names = "bucket_by_sequence_length", []
        else:
            key = _tf.key_function(dataset)
            names = ([_name_of(key)] if key is not None else []) + names
    inner = ", ".join(_tf.inner_datasets(dataset))
    shown = ", ".join(names)
    if inner:
        shown = f"{shown}: {inner}" if shown else inner
    return f"{call}({shown})"


def _walk(dataset: Any) -> tuple[list[Any], str | None]:
    nodes, current = [], _tf.unwrap_v1(dataset)
    for _ in range(_MAX_DEPTH):
        nodes.append(current)
        if _tf.generator_function(current) is not None:
            return nodes, None  # from_generator's internal id dataset is not a stage
        inputs = _tf.inputs(current)
        if len(inputs) > 1:
            _, label = describe(current)
            return nodes, (
                f"the pipeline joins {len(inputs)} inputs at {label}: everything up to and "
                "including it is measured as one stage. To see which input is slow, profile "
                "each input on its own (make_dataset returning just that input)."
            )
        if not inputs:
            return nodes, None
        current = inputs[0]
    raise ValueError(f"the dataset chain is deeper than {_MAX_DEPTH} datasets; is it cyclic?")


def _is_stage(dataset: Any) -> bool:
    if _tf.added_by_tf_data(dataset):
        return False
    if _tf.generator_function(dataset) is not None:
        return True
    # tf.data inserts maps of its own (e.g. `normalize` for unbatch and rebatch); their cost is
    # part of the call that made them, the stage above.
    function = _tf.user_function(dataset)
    if _tf.method_of(dataset).name in _CONTAINERS:
        return True
    return function is None or not _tf.is_tf_data_function(function)


def _node(dataset: Any, kind: StageKind, label: str, unit: StageUnit) -> StageNode:
    function = _tf.generator_function(dataset) or _tf.user_function(dataset)
    return StageNode(
        index=0,
        kind=kind,
        label=label,
        location=_location(function) if function is not None else None,
        parameters=_tf.parameters(dataset),
        unit=unit,
        class_name=type(dataset).__name__,
        dataset=dataset,
        calls_python=_tf.calls_python(dataset),
        draws_random=tuple(_tf.varying_random_ops(dataset)),
    )


def _output_unit(dataset: Any, nodes: list[Any]) -> StageUnit:
    """What one element of the pipeline's output is.

    The nearest batch or unbatch call decides; with neither, a first component with a leading
    dimension makes the output batches, as the profiler counts them (data stored batched).
    """
    import tensorflow as tf

    for node in nodes:
        method = _tf.method_of(node)
        if method.batching:
            return StageUnit.BATCH
        if method.stage is StageKind.UNBATCH:
            return StageUnit.EXAMPLE
    leaves = tf.nest.flatten(dataset.element_spec)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    rank = None if shape is None else shape.rank
    return StageUnit.BATCH if rank else StageUnit.EXAMPLE


def _unit_below(method: _tf.Method, kind: StageKind, unit: StageUnit) -> StageUnit:
    """What one element is in the input of a dataset whose own elements are `unit`."""
    if method.batching:
        return StageUnit.EXAMPLE
    if kind is StageKind.UNBATCH:
        return StageUnit.BATCH
    if kind in _EXPANDING:
        return StageUnit.INPUT
    return unit


def _function_label(dataset: Any, function: Any) -> str:
    name = _name_of(function)
    if name != "lambda":
        return name
    # An interleave over `lambda f: tf.data.TFRecordDataset(f)` reads best as the reader.
    reader = _tf.reader_in(dataset)
    return reader or name


def _name_of(function: Any) -> str:
    name = getattr(function, "__name__", None) or type(function).__name__
    if name == "<lambda>":
        return "lambda"
    return re.sub(r"V\d+$", "", name)


def _location(function: Any) -> str | None:
    """`file:line` of a function the user wrote; None for TensorFlow's own functions."""
    code = getattr(function, "__code__", None)
    if code is None or code.co_filename.startswith(str(_tf.tensorflow_dir())):
        return None
    return f"{Path(code.co_filename).name}:{code.co_firstlineno}"
