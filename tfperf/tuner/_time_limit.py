"""`--time-limit`: the whole tune within a wall-clock limit, its re-measurement included.

The search stops starting trials once the next trial and the least re-measurement after it
(`least_runs`) would no longer fit in what is left, as the study's trials took. The
re-measurement then sizes itself to what is left: fewer searched finalists, and no round
beyond `MIN_ROUNDS` that would not fit. The answer stays verified: its finalists and the
references run again side by side, `MIN_ROUNDS` each, and the chosen one is confirmed.
"""

from __future__ import annotations

import dataclasses
import statistics
from time import monotonic

from tfperf.tuner._remeasure import MIN_ROUNDS

#: Configurations the confirmation measures at the most: the chosen one, the input-only best
#: it was weighed against when it changes training, and the model's best estimate.
CONFIRMED_AT_MOST = 3


def least_runs(finalists: int, rounds: int) -> int:
    """The fewest runs of the re-measurement of `finalists` (searched ones and references)
    and of the confirmation after it, each `MIN_ROUNDS` (or `rounds`, if fewer) times.

    >>> least_runs(8, 3), least_runs(8, 1)
    (22, 11)
    """
    return (finalists + CONFIRMED_AT_MOST) * min(rounds, MIN_ROUNDS)


@dataclasses.dataclass
class TimeLimit:
    """A tune's wall-clock limit (None: none), and how long its re-measurement runs took.

    A re-measurement run measures the end-to-end phase alone, so it is shorter than a search
    trial: the study's trials price it until one has run, and then their median prices the
    rest (`run_seconds`).
    """

    seconds: float | None
    started: float = dataclasses.field(default_factory=lambda: monotonic())
    verifying_s: list[float] = dataclasses.field(default_factory=list)

    def left(self) -> float | None:
        """Seconds left of the limit (negative once past it); None without a limit."""
        if self.seconds is None:
            return None
        return self.seconds - (monotonic() - self.started)

    def run_seconds(self, priced_s: float) -> float:
        """One re-measurement run's seconds: the median of those that ran, else `priced_s`
        (as the study's trials took, `tfperf.study.Prices.rerun_s`)."""
        return statistics.median(self.verifying_s) if self.verifying_s else priced_s

    def fits(self, seconds: float) -> bool:
        """Whether `seconds` more end within the limit; always without one."""
        left = self.left()
        return left is None or seconds <= left

    def fits_runs(self, runs: int, priced_s: float | None) -> bool:
        """Whether `runs` re-measurement runs end within the limit; while no trial has
        completed to price them (`priced_s` None), whether any time is left."""
        if priced_s is None:
            return self.fits(0.0)
        return self.fits(runs * self.run_seconds(priced_s))
