"""A background thread that samples probes at a fixed interval while a profile runs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from tfperf.probes.base import Probe

logger = logging.getLogger(__name__)


class Sampler:
    """Samples every available probe every `interval_s` seconds on a daemon thread.

    Use as a context manager around the measured work. `clock` returns seconds since the profile
    origin, so samples line up with step records. One sample is taken at start and one at stop,
    so even a run shorter than the interval has figures.
    """

    def __init__(
        self,
        probes: Sequence[Probe],
        clock: Callable[[], float],
        interval_s: float = 0.05,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"`interval_s > 0` must hold, but got interval_s={interval_s}")
        self.probes = list(probes)
        self.clock = clock
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        self._sample_all()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tfperf-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample_all()

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self._sample_all()
            next_at += self.interval_s

    def _sample_all(self) -> None:
        now = self.clock()
        for probe in self.probes:
            try:
                probe.sample(now)
            except Exception as error:  # a failing probe must not kill the measurement
                logger.warning(
                    "probe %s failed while sampling and is now off: %s", probe.name, error
                )
                probe.unavailable_reason = f"failed while sampling: {error}"
