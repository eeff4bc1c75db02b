"""The closed sets of values a knob can take: tf.data's precision and sharding, a DataLoader's
worker start method, and tf.data service's `distribute()` choices."""

from __future__ import annotations

from tfperf.knobs._choices import (
    Precision,
    ProcessingMode,
    ServiceCompression,
    ShardPolicy,
    StartMethod,
    TargetWorkers,
)

__all__ = [
    "Precision",
    "ProcessingMode",
    "ServiceCompression",
    "ShardPolicy",
    "StartMethod",
    "TargetWorkers",
]
