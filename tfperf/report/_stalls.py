"""Stalls during which the CPU was idle: steps that waited far longer than usual for input while
the process tree barely used the CPU.

A long wait with busy cores is the pipeline computing slowly (more parallelism helps); a long
wait with idle cores is the pipeline blocked on something else: a slow disk or network read, a
lock, a Python generator sleeping. The profile timeline marks the second kind, since no tf.data
knob fixes it. Data only: `idle_stalls` returns frozen records, tested by equality.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from tfperf.results import CpuUsage, PhaseResult, StepRecord, TimedValue

#: A wait is a stall when it is this many times the typical (median) wait of measured steps,
#: and at least as long as a typical whole step.
STALL_FACTOR = 5.0
#: The CPU was idle during a stall when its mean use was at most this share of the phase's
#: typical (median) use ...
IDLE_SHARE = 0.25
#: ... or at most this many percent of one core, whichever is higher.
IDLE_FLOOR_PERCENT = 10.0


@dataclasses.dataclass(frozen=True)
class IdleStall:
    """One step whose wait for input ran far above typical while the CPU was nearly idle."""

    step: int
    wait_ms: float
    typical_wait_ms: float
    cpu_percent: float  # mean CPU of the process tree during the wait (100 = one core)
    typical_cpu_percent: float  # median over the phase's measured steps

    def describe(self) -> str:
        """Hover text: "step 52 · waited 1,140 ms (typical 11 ms) with the CPU idle ..."."""
        return (
            f"step {self.step} · waited {self.wait_ms:,.0f} ms (typical {self.typical_wait_ms:,.1f}"
            f" ms) with the CPU idle: {self.cpu_percent:.0f}% of one core during the wait, "
            f"{self.typical_cpu_percent:.0f}% typical. The pipeline was blocked, not computing: "
            "a slow read, a lock or a sleeping generator; no tf.data knob fixes that."
        )


def idle_stalls(phase: PhaseResult, cpu: CpuUsage | None) -> tuple[IdleStall, ...]:
    """The phase's measured steps that stalled with the CPU idle; () without CPU samples."""
    records = phase.records
    measured = [record for record in records if not record.warmup]
    if cpu is None or not cpu.samples or not measured:
        return ()
    typical_wait = statistics.median(record.wait_s for record in measured)
    typical_step = statistics.median(record.step_s for record in measured)
    threshold = max(STALL_FACTOR * typical_wait, typical_step)
    start, end = measured[0].start_s, measured[-1].start_s + measured[-1].step_s
    during_phase = [sample.value for sample in cpu.samples if start < sample.t_s <= end]
    if not during_phase:
        return ()
    typical_cpu = statistics.median(during_phase)
    idle_at = max(IDLE_FLOOR_PERCENT, IDLE_SHARE * typical_cpu)
    stalls = []
    for index, record in enumerate(records):
        if record.warmup or record.wait_s <= threshold:
            continue
        mean = _mean_during(record, cpu.samples)
        if mean is not None and mean <= idle_at:
            stalls.append(
                IdleStall(index, record.wait_s * 1000, typical_wait * 1000, mean, typical_cpu)
            )
    return tuple(stalls)


def _mean_during(record: StepRecord, samples: Sequence[TimedValue]) -> float | None:
    """Mean CPU over the step's wait, from the samples taken during it; None when none was (a
    wait shorter than the sampling interval is not judged)."""
    start, end = record.start_s, record.start_s + record.wait_s
    inside = [sample.value for sample in samples if start < sample.t_s <= end]
    return statistics.fmean(inside) if inside else None
