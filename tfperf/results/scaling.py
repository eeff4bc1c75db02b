"""Scaling runs and distributed training: one point per replica count, the curve, and
the strategy a profile trained under.
"""

from __future__ import annotations

from tfperf.results._distribution import (
    DistributedInput,
    Distribution,
)
from tfperf.results._scaling import (
    BatchScaling,
    ReplicaDevice,
    ScalingCurve,
    ScalingFailure,
    ScalingPoint,
)

__all__ = [
    "BatchScaling",
    "DistributedInput",
    "Distribution",
    "ReplicaDevice",
    "ScalingCurve",
    "ScalingFailure",
    "ScalingPoint",
]
