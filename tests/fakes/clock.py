"""A fake clock and fake data for exact-figure tests of the profiler."""

from __future__ import annotations

from collections.abc import Iterator, Sequence


class FakeClock:
    """Time moves only when a test says so."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Batch:
    """A stand-in for a batch tensor: only its leading dimension matters to the profiler."""

    def __init__(self, size: int) -> None:
        self.shape = (size, 3)


class TimedData:
    """Re-iterable data whose every element takes `waits[i]` seconds to arrive."""

    def __init__(self, clock: FakeClock, waits: Sequence[float], batch: int = 8) -> None:
        self.clock, self.waits, self.batch = clock, list(waits), batch
        self.epochs_started = 0

    def __iter__(self) -> Iterator[Batch]:
        self.epochs_started += 1
        for wait in self.waits:
            self.clock.advance(wait)
            yield Batch(self.batch)


def timed_step(clock: FakeClock, seconds: float):
    def step(batch: Batch) -> None:
        clock.advance(seconds)

    return step


class PrefetchedData:
    """Re-iterable data produced in the background, as with ideal prefetch: batch i of a pass
    is ready `i * interval_s` after the pass starts, whatever the step does meanwhile."""

    def __init__(self, clock: FakeClock, interval_s: float, count: int = 200) -> None:
        self.clock, self.interval_s, self.count = clock, interval_s, count

    def __iter__(self) -> Iterator[Batch]:
        start = self.clock()
        for index in range(1, self.count + 1):
            ready = start + index * self.interval_s
            if ready > self.clock():
                self.clock.advance(ready - self.clock())
            yield Batch(8)
