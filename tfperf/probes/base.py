"""The interface every hardware probe shares, and the small statistics they keep.

A probe is opened once, sampled from the background `Sampler` thread, then closed. It never
raises on missing hardware: `open()` returns the reason it is off, and sampling an off probe
does nothing. That lets one contract test run against every probe.
"""

from __future__ import annotations

import abc
import dataclasses
import math

from tfperf.results import TimedValue


class Probe(abc.ABC):
    """A source of periodic measurements (host memory, CPU, GPUs)."""

    #: Short name recorded in `ProfileResult.probes`, e.g. "host" or "nvml".
    name: str = "probe"

    def __init__(self) -> None:
        self.unavailable_reason: str | None = None
        self._opened = False

    @property
    def available(self) -> bool:
        return self.unavailable_reason is None

    def open(self) -> str | None:
        """Prepares the probe; returns why it is unavailable, or None when it works.

        Never raises: a missing library, driver or device is a reason, not an error, and an
        unexpected failure of the probe itself becomes a reason too.
        """
        try:
            self.unavailable_reason = self._open()
        except Exception as error:
            self.unavailable_reason = f"failed to start: {type(error).__name__}: {error}"
        self._opened = self.unavailable_reason is None
        return self.unavailable_reason

    def sample(self, t_s: float) -> None:
        """Takes one measurement stamped `t_s` seconds after the profile origin."""
        if self.available:
            self._sample(t_s)

    def close(self) -> None:
        """Releases what `open` acquired; safe to call more than once."""
        if self._opened:
            self._opened = False
            self._close()

    @abc.abstractmethod
    def _open(self) -> str | None: ...

    @abc.abstractmethod
    def _sample(self, t_s: float) -> None: ...

    def _close(self) -> None:
        return None


@dataclasses.dataclass
class RunningStats:
    """Mean and peak of a stream without storing it (every sample counts, even decimated ones)."""

    count: int = 0
    total: float = 0.0
    peak: float = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.peak = max(self.peak, value)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def peak_or_zero(self) -> float:
        return self.peak if self.count else 0.0


class Series:
    """A time series bounded to `capacity` points: when full, every other point is dropped.

    Reports draw memory over time; a long profile must not grow the result without bound, and
    halving keeps the points evenly spread over the whole run.
    """

    def __init__(self, capacity: int = 1000) -> None:
        if capacity < 2:
            raise ValueError(f"`capacity >= 2` must hold, but got capacity={capacity}")
        self.capacity = capacity
        self._stride = 1
        self._seen = 0
        self._points: list[TimedValue] = []

    def add(self, t_s: float, value: float) -> None:
        if self._seen % self._stride == 0:
            self._points.append(TimedValue(t_s=t_s, value=value))
            if len(self._points) >= self.capacity:
                self._points = self._points[::2]
                self._stride *= 2
        self._seen += 1

    def points(self) -> list[TimedValue]:
        return list(self._points)
