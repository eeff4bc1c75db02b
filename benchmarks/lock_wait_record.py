"""The interpreter lock's benchmark in `python -m benchmarks`: its rows, how they are measured
(`benchmarks.lock_wait` in children, each with its own TensorFlow) and their section of the
report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from benchmarks.child import json_rows
from tfperf.results import RATE_NOISE

__all__ = ["LockWaitRow", "lock_wait_section", "plateau", "run_lock_wait"]


@dataclasses.dataclass(frozen=True)
class LockWaitRow:
    """remote_storage's Python fetch stage alone at one thread count.

    Attributes:
        threads: parallel calls, and the private pool's threads.
        examples_per_sec: the input alone's rate.
        cpu_percent: the process's CPU per wall second (100 = one busy core).
        late_mean_ms: how much later than asked each fetch's `time.sleep` returned, on average:
            the kernel's wake-up, then the wait to take the interpreter lock again.
        late_p90_ms: its 90th percentile.
    """

    threads: int
    examples_per_sec: float
    cpu_percent: float
    late_mean_ms: float
    late_p90_ms: float

    @property
    def in_flight_ms(self) -> float:
        """How long one element is in flight: threads ÷ rate (Little's law)."""
        return 1000 * self.threads / self.examples_per_sec


def plateau(rows: Sequence[LockWaitRow]) -> LockWaitRow | None:
    """The fewest threads whose rate is within `RATE_NOISE` of the fastest row's, when more
    threads were measured after it (so more threads were seen to add nothing); else None.

    Example:
        >>> rows = [LockWaitRow(16, 4800, 70, 0.1, 0.2), LockWaitRow(32, 8600, 125, 0.3, 0.6),
        ...         LockWaitRow(71, 8900, 143, 2.1, 4.7)]
        >>> plateau(rows).threads, plateau(rows[:2])
        (32, None)
    """
    if not rows:
        return None
    ordered = sorted(rows, key=lambda row: row.threads)
    best = max(row.examples_per_sec for row in ordered)
    first = next(row for row in ordered if row.examples_per_sec >= (1 - RATE_NOISE) * best)
    return first if first is not ordered[-1] else None


def run_lock_wait(log: Callable[[str], None]) -> list[LockWaitRow]:
    """Runs `python -m benchmarks.lock_wait` in a child and reads its rows.

    Raises:
        RuntimeError: the benchmark failed; the message carries the end of its output.
    """
    log("the interpreter lock on latency-bound reads (python -m benchmarks.lock_wait)")
    return [LockWaitRow(**row) for row in json_rows("benchmarks.lock_wait", "the lock benchmark")]


def lock_wait_section(rows: Sequence[LockWaitRow], cpu_count: int, busy_percent: float) -> str:
    """The report's section: the fetch stage's rate, in-flight time and late wake-ups by
    thread count, and where the rate stops rising, on `cpu_count` cores, saturated from
    `busy_percent` (100 = one core).

    The input alone is not set against remote_storage's limit: that limit is training's,
    and alone the input has the cores to itself."""
    if not rows:
        return ""
    lines = [
        "## The interpreter lock on latency-bound reads",
        "",
        "`python -m benchmarks.lock_wait`: remote_storage's input alone (its fetch calls Python "
        "through `tf.numpy_function` and sleeps 2-4 ms per object, releasing the lock as a "
        "socket read does) at batch 128 and prefetch 8, with as many threads in a private pool "
        "as parallel calls, each thread count in a fresh process. A fetch's sleep returns late "
        "by the kernel's wake-up and then the wait to take the lock again.",
        "",
        "| threads | examples/s | CPU | in flight | sleep returned late: mean | p90 |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r.threads} | {r.examples_per_sec:,.0f} | {r.cpu_percent:.0f}% | "
        f"{r.in_flight_ms:.2f} ms | {r.late_mean_ms:.2f} ms | {r.late_p90_ms:.2f} ms |"
        for r in sorted(rows, key=lambda row: row.threads)
    ]
    reading = _reading(rows, cpu_count, busy_percent)
    return "\n".join(lines + (["", reading] if reading else []))


def _reading(rows: Sequence[LockWaitRow], cpu_count: int, busy_percent: float) -> str:
    """One sentence on where the rate stops rising, made only when more threads were measured
    past that point; empty otherwise. It names the lock only where the cores had room."""
    first = plateau(rows)
    if first is None:
        return ""
    most = max(rows, key=lambda row: row.threads)
    why = (
        ": the threads queue for the lock, not for the cores"
        if most.cpu_percent < busy_percent
        else ""
    )
    return (
        f"From {first.threads} threads on, more threads add no rate beyond the noise "
        f"({RATE_NOISE:.0%}): {first.examples_per_sec:,.0f} examples/s at {first.threads}, "
        f"{most.examples_per_sec:,.0f} at {most.threads}, with the CPU at "
        f"{most.cpu_percent:.0f}% of {100 * cpu_count}%, while a fetch's late return grows "
        f"from {first.late_mean_ms:.2f} ms to {most.late_mean_ms:.2f} ms{why}."
    )
