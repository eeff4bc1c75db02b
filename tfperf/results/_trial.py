"""How a tuning trial ended, as plain records that a study stores and a report reads."""

from __future__ import annotations

import dataclasses
from enum import Enum

from tfperf.results._profile import ProfileResult


class TrialStatus(str, Enum):
    """How a trial ended. Only COMPLETE carries a result.

    The last three are never a child's verdict: a study records them on trials that did not
    finish a measurement of their own (see `tfperf.study.TrialRecord`).
    """

    COMPLETE = "complete"
    FAILED = "failed"  # the pipeline raised for this configuration: record it, go on
    FATAL = "fatal"  # the pipeline file or knobs are broken: every trial would fail, stop
    TIMEOUT = "timeout"
    RAM_BUDGET = "ram-budget"
    GPU_BUDGET = "gpu-budget"
    CRASHED = "crashed"  # the child died without saying why (a signal, an odd exit status)
    PRUNED = "pruned"  # `on_progress` returned False
    INTERRUPTED = "interrupted"  # Ctrl-C, or its tuner died and another failed it as lost
    DUPLICATE = "duplicate"  # a second copy of a reference, failed unrun
    LOCK = "remeasure"  # not a trial: the lock of a study's final re-measurement


@dataclasses.dataclass(frozen=True)
class TrialOutcome:
    """How one trial ended and what it cost.

    `result` is set only for COMPLETE; `reason` says why any other trial ended ("" when complete).
    `peak_rss_bytes` is the highest host RAM of the trial's process tree the parent sampled, shared
    pages once: the trial process's RSS plus its subprocesses' private pages (a DataLoader's workers
    are not charged for the trainer's pages they share; 0 if it never got a reading; the name is
    kept so saved studies read); `peak_gpu_bytes` is None unless a GPU budget was enforced and NVML
    reported the child's memory. `wall_s` runs from the child's start to its end.
    """

    status: TrialStatus
    result: ProfileResult | None
    reason: str
    peak_rss_bytes: int
    peak_gpu_bytes: int | None
    wall_s: float
