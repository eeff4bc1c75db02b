"""Recovers the stages of a built `tf.data.Dataset`, from its source to its output.

Every tf.data dataset object keeps the datasets it was built from (`_inputs()`), so walking them
from the output back to the source gives the chain of calls the pipeline file made:
`from_tensor_slices -> interleave -> shuffle -> map -> batch -> prefetch`. Each object in the chain
is itself a complete dataset: the pipeline cut after that stage, which `tfperf.measure._stages`
measures.

This reads private tf.data attributes (`_inputs`, `_map_func`, `_batch_size`, ...). They have
been stable across TensorFlow 2.x; where one is missing, the stage keeps a plainer label or
fewer parameters rather than failing. TensorFlow is imported only inside functions.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any

from tfperf.results import StageKind, StageUnit

#: How many datasets a chain may hold before tfperf stops walking it (a cycle would be a bug).
_MAX_DEPTH = 1000

#: Dataset classes that are not stages of their own: tf.data adds them around the user's calls
#: (options, internal restructuring). Their cost is counted in the stage above them.
_NOT_STAGES = frozenset(
    {
        "_OptionsDataset",
        "_RestructuredDataset",
        "_AssertCardinalityDataset",
        "_DenseToRaggedDataset",
        "_ModelDataset",
        "_MaxIntraOpParallelismDataset",
        "_PrivateThreadPoolDataset",
    }
)

#: Dataset class -> (kind, how the call reads in code).
_KINDS: dict[str, tuple[StageKind, str]] = {
    "_RangeDataset": (StageKind.SOURCE, "range"),
    "_TensorSliceDataset": (StageKind.SOURCE, "from_tensor_slices"),
    "_TensorDataset": (StageKind.SOURCE, "from_tensors"),
    "_SparseTensorSliceDataset": (StageKind.SOURCE, "from_sparse_tensor_slices"),
    "_GeneratorDataset": (StageKind.SOURCE, "from_generator"),
    "TFRecordDatasetV2": (StageKind.READ, "TFRecordDataset"),
    "TextLineDatasetV2": (StageKind.READ, "TextLineDataset"),
    "FixedLengthRecordDatasetV2": (StageKind.READ, "FixedLengthRecordDataset"),
    "CsvDatasetV2": (StageKind.READ, "CsvDataset"),
    "_InterleaveDataset": (StageKind.INTERLEAVE, "interleave"),
    "_ParallelInterleaveDataset": (StageKind.INTERLEAVE, "interleave"),
    "_FlatMapDataset": (StageKind.INTERLEAVE, "flat_map"),
    "_MapDataset": (StageKind.MAP, "map"),
    "_ParallelMapDataset": (StageKind.MAP, "map"),
    "_FilterDataset": (StageKind.FILTER, "filter"),
    "_ShuffleDataset": (StageKind.SHUFFLE, "shuffle"),
    "_BatchDataset": (StageKind.BATCH, "batch"),
    "_ParallelBatchDataset": (StageKind.BATCH, "batch"),
    "_PaddedBatchDataset": (StageKind.BATCH, "padded_batch"),
    "_DenseToSparseBatchDataset": (StageKind.BATCH, "dense_to_sparse_batch"),
    "_GroupByWindowDataset": (StageKind.BATCH, "group_by_window"),
    "_RebatchDataset": (StageKind.BATCH, "rebatch"),
    "_MapAndBatchDataset": (StageKind.BATCH, "map_and_batch"),
    "_UnbatchDataset": (StageKind.UNBATCH, "unbatch"),
    "CacheDataset": (StageKind.CACHE, "cache"),
    "_PrefetchDataset": (StageKind.PREFETCH, "prefetch"),
    "_RepeatDataset": (StageKind.REPEAT, "repeat"),
    "_TakeDataset": (StageKind.TAKE, "take"),
    "_SkipDataset": (StageKind.SKIP, "skip"),
    "_ShardDataset": (StageKind.SHARD, "shard"),
    "_ZipDataset": (StageKind.JOIN, "zip"),
    "_ConcatenateDataset": (StageKind.JOIN, "concatenate"),
    "_DirectedInterleaveDataset": (StageKind.JOIN, "sample_from_datasets"),
}

#: Classes below which one element is one example, whatever the element was above them.
_BATCHING = frozenset(
    {
        "_BatchDataset",
        "_ParallelBatchDataset",
        "_PaddedBatchDataset",
        "_DenseToSparseBatchDataset",
        "_GroupByWindowDataset",
        "_MapAndBatchDataset",
        "_WindowDataset",
    }
)
#: Kinds whose input elements are expanded into examples (a file name into its records).
_EXPANDING = frozenset({StageKind.READ, StageKind.INTERLEAVE})

#: File-reading dataset ops, as named in a traced graph without their `Dataset` suffix.
_READERS = frozenset(
    {"TFRecord", "TextLine", "FixedLengthRecord", "CSV", "ExperimentalCSV", "Sql", "LMDB"}
)

#: Private attribute -> parameter name, for the arguments worth showing and advising on.
_PARAMETERS = {
    "_num_parallel_calls": "num_parallel_calls",
    "_num_parallel_reads": "num_parallel_reads",
    "_cycle_length": "cycle_length",
    "_block_length": "block_length",
    "_batch_size": "batch_size",
    "_drop_remainder": "drop_remainder",
    "_buffer_size": "buffer_size",
    "_count": "count",
    "_num_shards": "num_shards",
    "_index": "index",
}

#: Which parameter goes into a label: `batch(64)`, `shuffle(1000)`, `prefetch(AUTOTUNE)`.
_LABEL_PARAMETER = {
    "batch": "batch_size",
    "padded_batch": "batch_size",
    "shuffle": "buffer_size",
    "prefetch": "buffer_size",
    "repeat": "count",
    "take": "count",
    "skip": "count",
    "shard": "num_shards",
}


@dataclasses.dataclass
class StageNode:
    """One stage found in a dataset: what it is, and the dataset that ends with it.

    `dataset` is the pipeline cut right after this stage (the tf.data object itself).
    """

    index: int
    kind: StageKind
    label: str
    location: str | None
    parameters: dict[str, int | bool]
    unit: StageUnit
    class_name: str
    dataset: Any


@dataclasses.dataclass
class StageChain:
    """The stages of a pipeline from source to output; `note` explains a branch, if any."""

    stages: list[StageNode]
    note: str | None


def recover_chain(dataset: Any) -> StageChain:
    """The stages of `dataset`, source first, each with the dataset cut after it.

    Walks `_inputs()` from the output. A dataset with several inputs (zip, concatenate,
    sample_from_datasets) ends the walk: it becomes the first stage, measured together with
    everything below it, and `note` says so.

    Example:
        >>> chain = recover_chain(tf.data.Dataset.range(8).map(f).batch(2))  # doctest: +SKIP
        >>> [stage.label for stage in chain.stages]  # doctest: +SKIP
        ['range', 'map(f)', 'batch(2)']
    """
    nodes, note = _walk(dataset)
    stages: list[StageNode] = []
    unit = _output_unit(dataset, nodes)
    for current in nodes:  # output first
        name = type(current).__name__
        kind, label = describe(current)
        if _is_stage(current, name):
            stages.append(_node(current, name, kind, label, unit))
        unit = _unit_below(name, kind, unit)
    stages.reverse()
    for index, stage in enumerate(stages):
        stage.index = index
    return StageChain(stages=stages, note=note)


def describe(dataset: Any) -> tuple[StageKind, str]:
    """The kind of one dataset object and how its call reads, e.g. `map(parse_jpeg)`."""
    name = type(dataset).__name__
    generator = _generator_function(dataset)
    if generator is not None:
        return StageKind.SOURCE, f"from_generator({_name_of(generator)})"
    kind, call = _KINDS.get(name, (StageKind.OTHER, _snake_case(name)))
    function = _user_function(dataset)
    if function is not None:
        return kind, f"{call}({_function_label(dataset, function)})"
    if kind is StageKind.JOIN:
        return kind, f"{call}({len(_inputs(dataset))} inputs)"
    shown = _LABEL_PARAMETER.get(call)
    value = parameters_of(dataset).get(shown) if shown else None
    if value is None or (call == "repeat" and value == -1):
        return kind, call
    return kind, f"{call}({'AUTOTUNE' if value == -1 else value})"


def parameters_of(dataset: Any) -> dict[str, int | bool]:
    """The tf.data arguments kept on a dataset object, as plain values (-1 is AUTOTUNE)."""
    found: dict[str, int | bool] = {}
    for attribute, name in _PARAMETERS.items():
        value = _plain(getattr(dataset, attribute, None))
        if value is not None:
            found[name] = value
    return found


def _walk(dataset: Any) -> tuple[list[Any], str | None]:
    nodes, current = [], dataset
    for _ in range(_MAX_DEPTH):
        nodes.append(current)
        if _generator_function(current) is not None:
            return nodes, None  # from_generator's internal id dataset is not a stage
        inputs = _inputs(current)
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


def _inputs(dataset: Any) -> list[Any]:
    try:
        return list(dataset._inputs())
    except Exception:  # a dataset class without `_inputs` is treated as a source
        return []


def _is_stage(dataset: Any, name: str) -> bool:
    if name in _NOT_STAGES:
        return False
    if _generator_function(dataset) is not None:
        return True
    # tf.data inserts maps of its own (e.g. `normalize` for unbatch and rebatch); their cost is
    # part of the call that made them, the stage above.
    function = _user_function(dataset)
    return function is None or not _inside_tf_data(function)


def _node(dataset: Any, name: str, kind: StageKind, label: str, unit: StageUnit) -> StageNode:
    function = _generator_function(dataset) or _user_function(dataset)
    return StageNode(
        index=0,
        kind=kind,
        label=label,
        location=_location(function) if function is not None else None,
        parameters=parameters_of(dataset),
        unit=unit,
        class_name=name,
        dataset=dataset,
    )


def _output_unit(dataset: Any, nodes: list[Any]) -> StageUnit:
    """What one element of the pipeline's output is.

    The nearest batch or unbatch call decides; with neither, a first component with a leading
    dimension makes the output batches, as the profiler counts them (data stored batched).
    """
    import tensorflow as tf

    for node in nodes:
        name = type(node).__name__
        if name in _BATCHING:
            return StageUnit.BATCH
        if name == "_UnbatchDataset":
            return StageUnit.EXAMPLE
    leaves = tf.nest.flatten(dataset.element_spec)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    rank = None if shape is None else shape.rank
    return StageUnit.BATCH if rank else StageUnit.EXAMPLE


def _unit_below(name: str, kind: StageKind, unit: StageUnit) -> StageUnit:
    """What one element is in the input of a dataset whose own elements are `unit`."""
    if name in _BATCHING:
        return StageUnit.EXAMPLE
    if kind is StageKind.UNBATCH:
        return StageUnit.BATCH
    if kind in _EXPANDING:
        return StageUnit.INPUT
    return unit


def _user_function(dataset: Any) -> Any:
    """The Python function a map, filter or interleave stage calls, else None."""
    for attribute in ("_map_func", "_predicate", "_key_func"):
        wrapper = getattr(dataset, attribute, None)
        function = getattr(wrapper, "_func", None)
        if function is not None:
            return _unwrap(function)
    return None


def _unwrap(function: Any) -> Any:
    # tf.function objects keep the Python function; partials keep theirs.
    for _ in range(10):
        inner = getattr(function, "python_function", None) or (
            function.func if isinstance(function, functools.partial) else None
        )
        if inner is None:
            return function
        function = inner
    return function


def _generator_function(dataset: Any) -> Any:
    """The user's generator behind `Dataset.from_generator`, else None.

    from_generator builds a flat_map whose function (`flat_map_fn`, in tf.data's own module)
    closes over the generator's state; the generator itself is found in those closures.
    """
    function = _user_function(dataset)
    if function is None or getattr(function, "__name__", "") != "flat_map_fn":
        return None
    if "from_generator" not in getattr(function, "__module__", ""):
        return None
    return _find_generator(function, depth=3) or function


def _find_generator(function: Any, depth: int) -> Any:
    for cell in getattr(function, "__closure__", None) or ():
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        generator = getattr(content, "_generator", None)
        if generator is not None:
            return generator
        if depth > 0 and callable(content) and hasattr(content, "__closure__"):
            found = _find_generator(content, depth - 1)
            if found is not None:
                return found
    return None


def _function_label(dataset: Any, function: Any) -> str:
    name = _name_of(function)
    if name != "lambda":
        return name
    # An interleave over `lambda f: tf.data.TFRecordDataset(f)` reads best as the reader.
    reader = _reader_in(dataset)
    return reader or name


def _name_of(function: Any) -> str:
    name = getattr(function, "__name__", None) or type(function).__name__
    if name == "<lambda>":
        return "lambda"
    return re.sub(r"V\d+$", "", name)


def _reader_in(dataset: Any) -> str | None:
    wrapper = getattr(dataset, "_map_func", None)
    graph = getattr(getattr(wrapper, "function", None), "graph", None)
    if graph is None:
        return None
    for operation in graph.get_operations():
        match = re.fullmatch(r"(\w+)Dataset(V\d+)?", operation.type)
        if match and match.group(1) in _READERS:
            return f"{match.group(1)}Dataset"
    return None


def _location(function: Any) -> str | None:
    """`file:line` of a function the user wrote; None for TensorFlow's own functions."""
    code = getattr(function, "__code__", None)
    if code is None or code.co_filename.startswith(_tf_folder("tensorflow")):
        return None
    return f"{Path(code.co_filename).name}:{code.co_firstlineno}"


@functools.cache
def _tf_folder(package: str) -> str:
    import importlib

    return str(Path(importlib.import_module(package).__file__ or "").parent)


def _inside_tf_data(function: Any) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename.startswith(_tf_folder("tensorflow.python.data"))


def _plain(value: Any) -> int | bool | None:
    """A Python int or bool from an argument kept as a scalar tensor, an int or a bool."""
    if isinstance(value, (bool, int)):
        return value
    numpy = getattr(value, "numpy", None)
    if not callable(numpy) or getattr(value, "shape", None) != ():
        return None
    try:
        result = numpy()
    except Exception:  # a symbolic or variant tensor has no value to show
        return None
    if getattr(result, "dtype", None) is not None and result.dtype.kind == "b":
        return bool(result)
    if getattr(result, "dtype", None) is not None and result.dtype.kind in "iu":
        return int(result)
    return None


def _snake_case(class_name: str) -> str:
    name = re.sub(r"(Dataset)?(V\d+)?$", "", class_name.strip("_"))
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() or class_name
