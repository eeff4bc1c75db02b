"""What a built tf.data dataset object keeps: its inputs, its call, its function, its arguments.

Every tf.data dataset object keeps the datasets it was built from, the traced function of a
map, filter or interleave, and the arguments of its call, all in private attributes
(`_inputs()`, `_map_func`, `_batch_size`, ...). They have been stable across TensorFlow 2.x
and are pinned by `tests/frameworks/tensorflow/_tf/test_internals.py`; where one is missing,
these functions return less (no inputs, no function, fewer parameters) rather than fail.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfperf.frameworks.tensorflow._tf._methods import NOT_STAGES, Method, method_of_class
from tfperf.knobs import KNOBS
from tfperf.knobs.declare import Applier
from tfperf.results.stages import DatasetOptions

#: Private attributes holding the traced function of a dataset (map, filter, scan, the reduce
#: and the key of group_by_window), the user's own function first.
FUNCTION_ATTRIBUTES = ("_map_func", "_predicate", "_scan_func", "_reduce_func", "_key_func")

#: Ops that run a Python function inside a traced function: tf.numpy_function and
#: tf.py_function (eager or not). Each call takes Python's global interpreter lock.
PYTHON_CALL_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

#: The class `tf.compat.v1.data` wraps every dataset in; `_dataset` holds the real one.
V1_ADAPTER = "DatasetV1Adapter"

#: Private attribute -> argument name, for the arguments worth showing and advising on.
PARAMETER_ATTRIBUTES = {
    "_num_parallel_calls": "num_parallel_calls",
    "_num_parallel_reads": "num_parallel_reads",
    "_cycle_length": "cycle_length",
    "_block_length": "block_length",
    "_batch_size": "batch_size",
    "_drop_remainder": "drop_remainder",
    "_buffer_size": "buffer_size",
    "_reshuffle_each_iteration": "reshuffle_each_iteration",
    "_count": "count",
    "_num_shards": "num_shards",
    "_index": "index",
    "_size": "size",
}

#: File-reading dataset ops, as named in a traced graph without their `Dataset` suffix.
_READER_OPS = frozenset(
    {"TFRecord", "TextLine", "FixedLengthRecord", "CSV", "ExperimentalCSV", "Sql", "LMDB"}
)


def inputs(dataset: Any) -> list[Any]:
    """The datasets `dataset` reads from directly; none for a source (or an unknown class)."""
    try:
        found = list(dataset._inputs())
    except Exception:  # a dataset class without `_inputs` is treated as a source
        return []
    return [unwrap_v1(each) for each in found]


def unwrap_v1(dataset: Any) -> Any:
    """The dataset a `tf.compat.v1.data` adapter wraps (itself for any other dataset)."""
    for _ in range(10):
        if type(dataset).__name__ != V1_ADAPTER:
            return dataset
        inner = getattr(dataset, "_dataset", None)
        if inner is None:
            return dataset
        dataset = inner
    return dataset


def walk_inputs(dataset: Any) -> Iterator[Any]:
    """`dataset` and every dataset it reads from, directly or not, each once."""
    pending, seen = [dataset], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(inputs(current))


def process_resources(dataset: Any) -> list[str]:
    """The resources `dataset`'s graph can only name by this process's handle, by type name.

    `tf.data.experimental.service.distribute` ships the dataset's graph to the workers,
    serialised as `_as_serialized_graph` writes it with the default external-state policy
    (WARN). A resource TensorFlow can rebuild there (a variable, a lookup table) becomes the
    ops that recreate it; any other (an iterator, a queue) becomes a constant handle into
    this process, which a worker fails to find at its first element.
    """
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    serialized = dataset._as_serialized_graph(
        external_state_policy=tf.data.experimental.ExternalStatePolicy.WARN
    )
    graph = graph_pb2.GraphDef.FromString(serialized.numpy())
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    found = []
    for node in nodes:
        if node.op == "Const" and node.attr["dtype"].type == tf.resource.as_datatype_enum:
            for handle in node.attr["value"].tensor.resource_handle_val:
                found.append(_type_name(handle.maybe_type_name))
    return found


def _type_name(mangled: str) -> str:
    """`IteratorResource` from the C++ type name a handle keeps (mangled: length-prefixed)."""
    names, at = [], 0
    while at < len(mangled):
        length = re.match(r"\d+", mangled[at:])
        if length is None:
            at += 1
            continue
        start = at + length.end()
        names.append(mangled[start : start + int(length.group())])
        at = start + int(length.group())
    return names[-1] if names else (mangled or "resource")


def cardinality(dataset: Any) -> int | None:
    """Elements (batches) in one pass of `dataset`; None when empty, infinite or unknown."""
    try:
        count = int(dataset.cardinality())
    except Exception:  # not a tf.data dataset (a re-iterable of the user's own)
        return None
    return count if count > 0 else None


def cache_file(dataset: Any) -> str | None:
    """The file a `cache()` writes (`""`: it caches in memory); None for any other dataset."""
    filename = getattr(dataset, "_filename", None)
    numpy = getattr(filename, "numpy", None)
    if type(dataset).__name__ != "CacheDataset" or not callable(numpy):
        return None
    value = numpy()
    return value.decode() if isinstance(value, bytes) else str(value)


def dataset_options(dataset: Any) -> DatasetOptions | None:
    """The options `dataset` carries, set by tfperf or by the pipeline itself (None if unread).

    One value per knob declared `Applier.TF_DATA`, read at its option path.
    `Options.deterministic` is also what the deprecated `experimental_deterministic` sets, so
    a pipeline that set either is read the same.
    """
    try:
        options = dataset.options()
        carried = {
            knob.name: get_option(options, knob.option or "")
            for knob in KNOBS.applied_by(Applier.TF_DATA)
        }
        return DatasetOptions.of(carried, autotune=options.autotune.enabled)
    except Exception:  # not a tf.data dataset
        return None


def set_option(options: Any, path: str, value: Any) -> None:
    """Sets the option at dotted `path` ("threading.private_threadpool_size") on `options`."""
    *parents, leaf = path.split(".")
    for parent in parents:
        options = getattr(options, parent)
    setattr(options, leaf, value)


def get_option(options: Any, path: str) -> Any:
    """The option at dotted `path` on `options`; None when unset (tf.data's default)."""
    for part in path.split("."):
        options = getattr(options, part)
    return options


def method_of(dataset: Any) -> Method:
    """The tf.data call that made `dataset` (see `method_of_class`)."""
    return method_of_class(type(dataset).__name__)


def added_by_tf_data(dataset: Any) -> bool:
    """Whether tf.data added `dataset` around the user's calls (options, restructuring)."""
    return type(dataset).__name__ in NOT_STAGES


def user_function(dataset: Any) -> Any:
    """The Python function a map, filter or interleave stage calls, else None."""
    for attribute in FUNCTION_ATTRIBUTES[:4]:
        wrapper = getattr(dataset, attribute, None)
        function = getattr(wrapper, "_func", None)
        if function is not None:
            return _unwrap(function)
    return None


def key_function(dataset: Any) -> Any:
    """The user's key function of a group_by_window, which tf.data wraps in one of its own."""
    function = getattr(getattr(dataset, "_key_func", None), "_func", None)
    if function is None:
        return None
    for cell in getattr(function, "__closure__", None) or ():
        content = cell.cell_contents
        if callable(content):
            return _unwrap(content)
    return _unwrap(function)


def inner_datasets(dataset: Any) -> list[str]:
    """The tf.data calls a stage's function makes on the datasets it builds, e.g. `["batch"]`
    for `group_by_window(key, lambda k, w: w.batch(16))` or a `flat_map` over windows."""
    found: list[str] = []
    for attribute in ("_map_func", "_reduce_func"):
        graph = _graph(getattr(dataset, attribute, None))
        if graph is None:
            continue
        for op_type in _op_types(graph):
            match = re.fullmatch(r"(\w+?)Dataset(V\d+)?", op_type)
            if match is None:
                continue
            call = re.sub(r"(?<!^)(?=[A-Z])", "_", match.group(1)).lower()
            if call not in found:
                found.append(call)
    return found


def generator_function(dataset: Any) -> Any:
    """The user's generator behind `Dataset.from_generator`, else None.

    from_generator builds a flat_map whose function (`flat_map_fn`, in tf.data's own module)
    closes over the generator's state; the generator itself is found in those closures.
    """
    function = user_function(dataset)
    if function is None or getattr(function, "__name__", "") != "flat_map_fn":
        return None
    if "from_generator" not in getattr(function, "__module__", ""):
        return None
    return _find_generator(function, depth=3) or function


def parameters(dataset: Any) -> dict[str, int | bool]:
    """The tf.data arguments kept on a dataset object, as plain values (-1 is AUTOTUNE)."""
    found: dict[str, int | bool] = {}
    for attribute, name in PARAMETER_ATTRIBUTES.items():
        value = _plain(getattr(dataset, attribute, None))
        if value is not None:
            found[name] = value
    return found


def traced_graphs(dataset: Any) -> Iterator[Any]:
    """The graphs of the functions traced for `dataset` and every dataset it reads from."""
    for current in walk_inputs(dataset):
        for attribute in FUNCTION_ATTRIBUTES:
            graph = _graph(getattr(current, attribute, None))
            if graph is not None:
                yield graph


def calls_python(dataset: Any) -> bool:
    """Whether the function of this one stage runs Python per element (a tf.numpy_function or
    tf.py_function inside it, at any depth of the functions it calls)."""
    for attribute in FUNCTION_ATTRIBUTES:
        graph = _graph(getattr(dataset, attribute, None))
        if graph is not None and PYTHON_CALL_OPS.intersection(_op_types(graph)):
            return True
    return False


#: dtypes a cast to floats multiplies the bytes of: pixels and small integer features.
_SMALL_INTEGERS = frozenset({"uint8", "int8", "uint16", "int16"})


def casts_to_float(dataset: Any) -> bool:
    """Whether the function of this one map casts small integers to floats (a `tf.cast` of
    uint8 pixels to float32, `convert_image_dtype`): a Cast op in its own graph, read as
    written, so floats that augmentation makes without a cast do not count."""
    graph = _graph(getattr(dataset, "_map_func", None))
    if graph is None:
        return False
    for operation in graph.get_operations():
        if operation.type != "Cast":
            continue
        source, target = operation.get_attr("SrcT"), operation.get_attr("DstT")
        if source.name in _SMALL_INTEGERS and target.is_floating:
            return True
    return False


def reader_in(dataset: Any) -> str | None:
    """The file reader a map or interleave function builds (`TFRecordDataset`), if any."""
    graph = _graph(getattr(dataset, "_map_func", None))
    if graph is None:
        return None
    for op_type in _op_types(graph):
        match = re.fullmatch(r"(\w+)Dataset(V\d+)?", op_type)
        if match and match.group(1) in _READER_OPS:
            return f"{match.group(1)}Dataset"
    return None


@functools.cache
def tensorflow_dir(sub: str = "") -> Path:
    """The folder of `tensorflow`, or of `tensorflow/python/<sub>` (not resolved)."""
    import tensorflow.python as tf_python

    python_dir = Path(tf_python.__file__).parent
    return python_dir / sub if sub else python_dir.parent


def is_tf_data_function(function: Any) -> bool:
    """Whether `function` is tf.data's own (a `normalize` map it adds for unbatch)."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename.startswith(str(tensorflow_dir("data")))


def _op_types(graph: Any) -> list[str]:
    # TensorFlow 2.21 builds a reader as a flat_map whose own function holds the reader op:
    # the op is in the graph's function library, not among its operations.
    library = graph.as_graph_def().library.function
    types = [op.type for op in graph.get_operations()]
    return types + [node.op for function in library for node in function.node_def]


def _graph(wrapper: Any) -> Any:
    return getattr(getattr(wrapper, "function", None), "graph", None)


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
