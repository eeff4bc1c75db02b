"""The stage analysis of a profile: each stage's rate and cost, and which one limits.

Also AUTOTUNE's choices, the tf.data options the dataset carried, the batch shapes, what
restarting a finite dataset cost and what each buffering stage holds in host memory.

Example:
    >>> from tfperf.results.stages import StageKind
    >>> StageKind("map").value
    'map'
"""

from __future__ import annotations

from tfperf.results._loader_checks import PassCheck, WorkerMemory
from tfperf.results._memory import (
    BufferHold,
    BufferKind,
    MemoryAccount,
    SizeSource,
    memory_account,
)
from tfperf.results._profile import LoaderReport
from tfperf.results._restarts import (
    EPOCH_SOURCE_WORDS,
    EpochSource,
    RestartCost,
    RestartEvidence,
)
from tfperf.results._stages import (
    AutotuneChoice,
    AutotuneReadout,
    BatchShape,
    DatasetOptions,
    Stage,
    StageKind,
    StageReport,
    StageStat,
    StageUnit,
)

__all__ = [
    "EPOCH_SOURCE_WORDS",
    "AutotuneChoice",
    "AutotuneReadout",
    "BatchShape",
    "BufferHold",
    "BufferKind",
    "DatasetOptions",
    "EpochSource",
    "LoaderReport",
    "MemoryAccount",
    "PassCheck",
    "RestartCost",
    "RestartEvidence",
    "SizeSource",
    "Stage",
    "StageKind",
    "StageReport",
    "StageStat",
    "StageUnit",
    "WorkerMemory",
    "memory_account",
]
