"""The closed sets of values a knob can take: tf.data's precision and sharding, a DataLoader's
worker start method, and tf.data service's `distribute()` choices."""

from __future__ import annotations

from enum import Enum


class Precision(str, Enum):
    """Keras mixed-precision policies tfperf can apply before `make_model` runs."""

    FLOAT32 = "float32"
    MIXED_FLOAT16 = "mixed_float16"
    MIXED_BFLOAT16 = "mixed_bfloat16"


class ShardPolicy(str, Enum):
    """`tf.data.experimental.AutoShardPolicy`: how tf.distribute splits input between workers."""

    AUTO = "auto"  # by file if the source reads files, else by element
    FILE = "file"  # each worker reads its own files
    DATA = "data"  # each worker reads everything and keeps every n-th element
    OFF = "off"  # no sharding: every worker sees all the data


class ProcessingMode(str, Enum):
    """tf.data service's `processing_mode`: how the workers share the dataset."""

    PARALLEL_EPOCHS = "parallel_epochs"  # every worker produces the whole dataset
    DISTRIBUTED_EPOCH = "distributed_epoch"  # the workers split one pass between them


class ServiceCompression(str, Enum):
    """tf.data service's `compression` of the elements workers send."""

    AUTO = "auto"  # snappy, unless the service decides it does not pay
    NONE = "none"


class TargetWorkers(str, Enum):
    """tf.data service's `target_workers`: which workers the trainer reads from."""

    AUTO = "auto"  # the service decides
    ANY = "any"  # any worker
    LOCAL = "local"  # only workers on the trainer's host


class StartMethod(str, Enum):
    """How a DataLoader starts its worker processes (`multiprocessing_context`)."""

    FORK = "fork"  # copies the trainer: fast to start, pages shared until written
    SPAWN = "spawn"  # a fresh interpreter that imports the dataset's module again
    FORKSERVER = "forkserver"  # forked from a clean server process
