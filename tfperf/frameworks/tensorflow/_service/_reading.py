"""Reading a dataset for a measured window: plain, or watched so a lost service cannot hang it.

A read through tf.data service blocks inside TensorFlow while no worker answers, and nothing in
Python can interrupt it. `read_watched` therefore reads on a daemon thread while the calling
thread watches: a `fault` check (a worker process that died, a dispatcher gone) or no batch for
`timeout_s` ends the measurement with a `ServiceError`; the stuck thread is left behind (the
CLI ends the process without waiting for it).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from tfperf.errors import PipelineRuntimeError, ServiceError
from tfperf.measure import batch_examples

Clock = Callable[[], float]
#: How often the watching thread checks for a fault.
POLL_S = 0.05
#: How long a failed read waits for a fault to show before it reports the read's own error.
SETTLE_S = 1.0


@dataclasses.dataclass(frozen=True)
class Rate:
    batches: int
    examples: int
    duration_s: float

    @property
    def batches_per_sec(self) -> float:
        return self.batches / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def examples_per_sec(self) -> float:
        return self.examples / self.duration_s if self.duration_s > 0 else 0.0


class _Window:
    """Counts batches after a warm-up; `done` once `seconds` are measured."""

    def __init__(self, seconds: float, warmup_s: float, clock: Clock) -> None:
        self.seconds, self.warmup_s, self.clock = seconds, warmup_s, clock
        self.first: float | None = None
        self.start: float | None = None
        self.last = clock()
        self.batches = self.examples = 0
        self.done = False

    def add(self, batch: Any) -> None:
        now = self.clock()
        self.last = now
        if self.first is None:
            self.first = now
            return
        if self.start is None:
            if now - self.first >= self.warmup_s:
                self.start = now
            return
        self.batches += 1
        self.examples += batch_examples(batch)
        self.done = now - self.start >= self.seconds

    def rate(self) -> Rate:
        end = self.last if self.start is not None else self.clock()
        return Rate(self.batches, self.examples, end - (self.start or end))


def _settled(fault: Callable[[], str | None], clock: Clock) -> str | None:
    """`fault()`, asked again for up to `SETTLE_S` while it names none."""
    deadline = clock() + SETTLE_S
    while True:
        problem = fault()
        if problem is not None or clock() >= deadline:
            return problem
        time.sleep(POLL_S)


def read_rate(
    dataset: Any, *, seconds: float, warmup_s: float, clock: Clock = time.perf_counter
) -> Rate:
    """Batches and examples per second of `dataset` (repeated if finite), after warm-up."""
    window = _Window(seconds, warmup_s, clock)
    while not window.done:
        count = 0
        for batch in dataset:
            count += 1
            window.add(batch)
            if window.done:
                break
        if count == 0:
            raise PipelineRuntimeError("the pipeline up to the cut produced no batch")
    return window.rate()


def read_watched(
    dataset: Any,
    *,
    seconds: float,
    warmup_s: float,
    timeout_s: float,
    fault: Callable[[], str | None],
    what: str,
    clock: Clock = time.perf_counter,
) -> Rate:
    """`read_rate` on a daemon thread, ended by `fault()` or `timeout_s` without a batch.

    Raises:
        ServiceError: `fault()` named a fault, or no batch came for `timeout_s`; the message
            says which, during `what`.
    """
    window = _Window(seconds, warmup_s, clock)
    failed: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            for batch in dataset:
                window.add(batch)
                if window.done or stop.is_set():
                    return
        except BaseException as error:  # reported by the watching thread
            failed.append(error)

    reader = threading.Thread(target=read, name="tfperf-service-read", daemon=True)
    reader.start()
    try:
        while reader.is_alive():
            reader.join(POLL_S)
            problem = fault()
            if problem is not None:
                raise ServiceError(f"{problem} during {what}; the measurement stopped there.")
            if clock() - window.last > timeout_s:
                raise ServiceError(
                    f"no batch came through the tf.data service for {timeout_s:g} s during "
                    f"{what}: the workers or the dispatcher stopped answering."
                )
    finally:
        stop.set()
    if failed:
        # A read that failed because a worker died names the worker, not gRPC's error: the
        # death may take a moment to show.
        problem = _settled(fault, clock)
        if problem is not None:
            raise ServiceError(f"{problem} during {what}; the measurement stopped there.")
        raise ServiceError(
            f"reading through the tf.data service failed during {what}: "
            f"{type(failed[0]).__name__}: {failed[0]}"
        ) from failed[0]
    if not window.done:
        raise PipelineRuntimeError(f"the pipeline ended before a measured window during {what}")
    return window.rate()
