"""Many tuners on one study: heartbeats, lost trials recovered, locks, and the next step each
tuner takes, so no trial runs twice and none is lost.
"""

from __future__ import annotations

from tfperf.study._cluster import (
    Heartbeats,
    Liveness,
    LostTrial,
    Step,
    duplicate_reference,
    finished_count,
    in_budget,
    next_step,
    recover_lost,
    release_lock,
    take_lock,
    worker_record,
)

__all__ = [
    "Heartbeats",
    "Liveness",
    "LostTrial",
    "Step",
    "duplicate_reference",
    "finished_count",
    "in_budget",
    "next_step",
    "recover_lost",
    "release_lock",
    "take_lock",
    "worker_record",
]
