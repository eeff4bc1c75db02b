"""A fake trial runner: real ProfileResults from the fake-clock profiler, speed set by knobs."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.clock import FakeClock, TimedData, timed_step
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.measure import Progress
from tfperf.measure._profiler import profile
from tfperf.results import Phase, ProfileResult, TrialOutcome, TrialStatus
from tfperf.trials import Budgets, TrialRequest


def fake_result(knobs: Knobs, wait_s: float, compute_s: float = 0.01) -> ProfileResult:
    clock = FakeClock()
    data = TimedData(clock, [wait_s] * 12, batch=knobs.batch_size)
    return profile(
        data,
        timed_step(clock, compute_s),
        steps=6,
        warmup=2,
        clock=clock,
        probes=[],
        knobs=knobs,
    )


def parallel_speed(knobs: Knobs) -> float:
    """Input wait shrinks with map parallelism (AUTOTUNE counts as 4 workers)."""
    workers = 4 if knobs.num_parallel_calls == AUTOTUNE else knobs.num_parallel_calls
    return 0.08 / workers


class FakeRunner:
    """Records every request; `outcome` decides each trial's fate (default: complete)."""

    def __init__(
        self,
        wait_for: Callable[[Knobs], float] = parallel_speed,
        outcome: Callable[[int, TrialRequest], TrialOutcome | None] | None = None,
    ) -> None:
        self.wait_for = wait_for
        self.outcome = outcome
        self.requests: list[TrialRequest] = []

    def __call__(
        self,
        request: TrialRequest,
        budgets: Budgets,
        *,
        on_progress: Callable[[Progress], bool] | None = None,
    ) -> TrialOutcome:
        self.requests.append(request)
        if self.outcome is not None:
            forced = self.outcome(len(self.requests) - 1, request)
            if forced is not None:
                return forced
        result = fake_result(request.knobs, self.wait_for(request.knobs))
        if on_progress is not None:
            rate = result.end_to_end.examples_per_sec
            if not on_progress(Progress(Phase.END_TO_END, False, 40, 50, rate)):
                return outcome(TrialStatus.PRUNED, f"pruned at {rate:.0f} examples/s")
        return TrialOutcome(TrialStatus.COMPLETE, result, "", 100_000_000, None, 1.0)


def outcome(status: TrialStatus, reason: str, peak_rss: int = 100_000_000) -> TrialOutcome:
    return TrialOutcome(status, None, reason, peak_rss, None, 0.5)
