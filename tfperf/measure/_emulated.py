"""An emulated accelerator step: a sleep of a given length in place of the training step.

DLIO and MLPerf Storage measure storage and input the same way: the training step is replaced
by a sleep as long as the accelerator's step, so the input is timed feeding a device that
costs the host no CPU (a sleeping thread holds no core and no interpreter lock). The profiler
then measures, as for a real model, how long each step waits for its batch.

Example:
    >>> step = EmulatedStep(0.005)
    >>> step.sync(step(batch))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class EmulatedStep:
    """A training step that sleeps `seconds` per batch and computes nothing.

    Attributes:
        seconds: the emulated accelerator's step time, per batch (global batch under a
            strategy: one step takes one batch whatever the replicas).
        sleep: how it waits; None: `time.sleep`. Injectable, so tests run on a fake clock.
    """

    seconds: float
    sleep: Callable[[float], None] | None = None

    def __post_init__(self) -> None:
        if not 0 < self.seconds < float("inf"):
            raise ValueError(f"`0 < seconds < inf` must hold, but got seconds={self.seconds}")

    def __call__(self, batch: Any) -> None:
        (self.sleep or time.sleep)(self.seconds)

    def sync(self, outputs: Any) -> None:
        """Nothing to wait for: the step's time was spent in the sleep itself."""
