"""Scaling runs: the replica counts to measure, and the curve their profiles make."""

from __future__ import annotations

from tfperf.measure._scaling import (
    replica_counts,
    scaling_curve,
    scaling_point,
)

__all__ = [
    "replica_counts",
    "scaling_curve",
    "scaling_point",
]
