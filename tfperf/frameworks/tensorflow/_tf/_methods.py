"""One record per tf.data call: everything tfperf knows about it, in one place.

Call-site recording (which entry points to intercept), stage recovery (which private dataset
class a call leaves in the chain, its kind and its unit) and the AUTOTUNE read-out (which
nodes of tf.data's model stand for it, and which model parameter is which argument) all read
`METHODS`. The one thing not here is the kind of each tunable argument: `tfperf.knobs.TUNABLE`
holds it, because site names are parsed and checked without TensorFlow, on a layer below this
one (and below `tfperf.results`, whose `StageKind` this table uses). `Method.arguments` reads
it, so no argument is listed twice.

The class names and model node names are TensorFlow's private ones, pinned against the
installed version by `tests/frameworks/tensorflow/_tf/test_internals.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from tfperf.knobs import TUNABLE, SiteKind
from tfperf.results.stages import StageKind


@dataclasses.dataclass(frozen=True)
class Method:
    """One tf.data call, e.g. `Dataset.map` or the `TFRecordDataset` reader.

    Attributes:
        name: the call as written: a `Dataset` method, or a reader's public class name.
        classes: the private dataset classes the call returns (one per code path).
        stage: the kind of stage the call is in the recovered chain.
        reader: the class in `tensorflow.python.data.ops.readers` whose `__init__` is the
            call; None for a `Dataset` method.
        batching: below this call, one element is one example.
        label_parameter: the argument shown in the stage's label: `batch(64)`.
        autotune_nodes: the nodes of tf.data's model (op names without `Dataset`, `Parallel`,
            `Experimental` or a version) that stand for the call.
        model_parameters: (model parameter, argument of the call it stands for).
    """

    name: str
    classes: tuple[str, ...]
    stage: StageKind
    reader: str | None = None
    batching: bool = False
    label_parameter: str | None = None
    autotune_nodes: tuple[str, ...] = ()
    model_parameters: tuple[tuple[str, str], ...] = ()

    @property
    def arguments(self) -> dict[str, tuple[SiteKind, bool]]:
        """Tunable argument -> (site kind, tuned when the call leaves it out), from knobs."""
        return {a: entry for (m, a), entry in TUNABLE.items() if m == self.name}


_S, _R, _B = StageKind.SOURCE, StageKind.READ, StageKind.BATCH
_PARALLEL = (("parallelism", "num_parallel_calls"),)
_READS = (("parallelism", "num_parallel_reads"), ("cycle_length", "num_parallel_reads"))


def _reader(name: str, node: str) -> Method:
    """A file reader: `TFRecordDataset` is class `TFRecordDatasetV2`, whose model node is
    `TFRecord`, or an interleave over its files when it reads several in parallel."""
    classes = (f"{name}V2",)
    return Method(
        name, classes, _R, classes[0], autotune_nodes=(node, "Interleave"), model_parameters=_READS
    )


METHODS: tuple[Method, ...] = (
    Method("range", ("_RangeDataset",), _S),
    Method("from_tensor_slices", ("_TensorSliceDataset",), _S),
    Method("from_tensors", ("_TensorDataset",), _S),
    Method("from_sparse_tensor_slices", ("_SparseTensorSliceDataset",), _S),
    Method("from_generator", ("_GeneratorDataset",), _S, autotune_nodes=("FlatMap",)),
    _reader("TFRecordDataset", "TFRecord"),
    _reader("TextLineDataset", "TextLine"),
    _reader("FixedLengthRecordDataset", "FixedLengthRecord"),
    Method("CsvDataset", ("CsvDatasetV2",), _R),
    Method(
        "interleave",
        ("_InterleaveDataset", "_ParallelInterleaveDataset"),
        StageKind.INTERLEAVE,
        autotune_nodes=("Interleave",),
        model_parameters=(*_PARALLEL, ("cycle_length", "cycle_length")),
    ),
    Method("flat_map", ("_FlatMapDataset",), StageKind.INTERLEAVE, autotune_nodes=("FlatMap",)),
    Method(
        "map",
        ("_MapDataset", "_ParallelMapDataset"),
        StageKind.MAP,
        autotune_nodes=("Map", "MapAndBatch"),
        model_parameters=_PARALLEL,
    ),
    Method("filter", ("_FilterDataset",), StageKind.FILTER, autotune_nodes=("Filter",)),
    Method(
        "shuffle",
        ("_ShuffleDataset",),
        StageKind.SHUFFLE,
        label_parameter="buffer_size",
        autotune_nodes=("Shuffle", "ShuffleAndRepeat"),
    ),
    Method(
        "batch",
        ("_BatchDataset", "_ParallelBatchDataset"),
        _B,
        batching=True,
        label_parameter="batch_size",
        autotune_nodes=("Batch", "MapAndBatch"),
        model_parameters=_PARALLEL,
    ),
    Method(
        "padded_batch",
        ("_PaddedBatchDataset",),
        _B,
        batching=True,
        label_parameter="batch_size",
        autotune_nodes=("PaddedBatch",),
    ),
    Method("dense_to_sparse_batch", ("_DenseToSparseBatchDataset",), _B, batching=True),
    Method("group_by_window", ("_GroupByWindowDataset",), _B, batching=True),
    Method("rebatch", ("_RebatchDataset",), _B),
    Method("map_and_batch", ("_MapAndBatchDataset",), _B, batching=True),
    Method("window", ("_WindowDataset",), StageKind.OTHER, batching=True, label_parameter="size"),
    Method("scan", ("_ScanDataset",), StageKind.OTHER),
    Method("unbatch", ("_UnbatchDataset",), StageKind.UNBATCH),
    Method("cache", ("CacheDataset",), StageKind.CACHE),
    Method(
        "prefetch",
        ("_PrefetchDataset",),
        StageKind.PREFETCH,
        label_parameter="buffer_size",
        autotune_nodes=("Prefetch",),
        model_parameters=(("buffer_size", "buffer_size"),),
    ),
    Method("repeat", ("_RepeatDataset",), StageKind.REPEAT, label_parameter="count"),
    Method("take", ("_TakeDataset",), StageKind.TAKE, label_parameter="count"),
    Method("skip", ("_SkipDataset",), StageKind.SKIP, label_parameter="count"),
    Method("shard", ("_ShardDataset",), StageKind.SHARD, label_parameter="num_shards"),
    Method("zip", ("_ZipDataset",), StageKind.JOIN),
    Method("concatenate", ("_ConcatenateDataset",), StageKind.JOIN),
    Method("sample_from_datasets", ("_DirectedInterleaveDataset",), StageKind.JOIN),
)

#: Dataset classes that are not stages of their own: tf.data adds them around the user's calls
#: (options, internal restructuring). Their cost is counted in the stage above them.
NOT_STAGES = frozenset(
    {
        "_OptionsDataset",
        "_RestructuredDataset",
        "_AssertCardinalityDataset",
        "_DenseToRaggedDataset",
    }
)

#: Model parameters tf.data fixes once, at iterator creation, from an AUTOTUNE argument.
RESOLVED_AT_START = frozenset({"cycle_length"})


def method_named(name: str) -> Method:
    """The record of the call written `name` (`map`, `TFRecordDataset`)."""
    return _BY_NAME[name]


def method_of_class(class_name: str) -> Method:
    """The call that leaves a dataset of class `class_name`; an unknown class reads as its
    name in snake case, of kind OTHER (`_SlidingWindowDataset` -> `sliding_window`)."""
    known = _BY_CLASS.get(class_name)
    if known is not None:
        return known
    name = re.sub(r"(Dataset)?(V\d+)?$", "", class_name.strip("_"))
    call = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() or class_name
    return Method(call, (class_name,), StageKind.OTHER)


def node_kinds(node_name: str) -> frozenset[StageKind]:
    """The stage kinds a node of tf.data's model can stand for (`ParallelMapV2` -> MAP)."""
    return _NODE_KINDS.get(_normalised(node_name), frozenset())


def fused_map_and_batch(node_name: str) -> bool:
    """Whether the node is a map tf.data fused with the batch after it."""
    return _normalised(node_name) == "MapAndBatch"


def autotune_argument(kind: StageKind, parameter: str) -> str | None:
    """The argument of a call of `kind` that a model parameter stands for, if any."""
    return _AUTOTUNE_ARGUMENTS.get((kind, parameter))


@functools.cache
def resolved_arguments(parameter: str) -> frozenset[str]:
    """The arguments whose AUTOTUNE makes tf.data fix model `parameter` once, at start."""
    if parameter not in RESOLVED_AT_START:
        return frozenset()
    return frozenset(a for m in METHODS for p, a in m.model_parameters if p == parameter)


def _normalised(node_name: str) -> str:
    """`ParallelMapV2` -> `Map`, `ParallelInterleaveV4` -> `Interleave`, `BatchV2` -> `Batch`."""
    name = re.sub(r"V\d+$", "", node_name)
    if name.startswith("Parallel") and name != "Parallel":
        name = name[len("Parallel") :]
    if name.startswith("Experimental"):
        name = name[len("Experimental") :]
    return name


_BY_NAME = {method.name: method for method in METHODS}
_BY_CLASS = {cls: method for method in METHODS for cls in method.classes}
_NODE_KINDS: dict[str, frozenset[StageKind]] = {
    node: frozenset(m.stage for m in METHODS if node in m.autotune_nodes)
    for node in {node for m in METHODS for node in m.autotune_nodes}
}
_AUTOTUNE_ARGUMENTS = {(m.stage, p): a for m in METHODS for p, a in m.model_parameters}
