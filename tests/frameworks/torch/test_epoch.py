"""A DataLoader's rate over a real epoch: start-up charged by one rule, on fake figures."""

from __future__ import annotations

import pytest

from tfperf.frameworks.torch._epoch import starts_each_epoch, with_start_up
from tfperf.measure import EpochInfo
from tfperf.measure._analysis import summarise_phase
from tfperf.measure._restarts import restart_cost
from tfperf.results import Phase, PhaseResult, StepRecord

#: Warm-up: 1.05 + 0.3 + 0.1 s for 3 steps that take 0.3 s when steady: 1.15 s of start-up.
WARM = [(1.0, 0.05), (0.25, 0.05), (0.05, 0.05)]


def _phase(
    warm: list[tuple[float, float]], steady: int, restart_wait_s: float | None = None
) -> PhaseResult:
    """A phase of `warm` (wait, compute) warm-up steps, then `steady` steps of 0.1 s; with
    `restart_wait_s`, the pass restarts halfway and its first step waits that long."""
    first = steady // 2
    steps = [(wait, compute, 0) for wait, compute in warm]
    steps += [(0.05, 0.05, 0)] * first
    if restart_wait_s is not None:
        steps += [(restart_wait_s, 0.05, 1)]
        first += 1
    steps += [(0.05, 0.05, 1 if restart_wait_s is not None else 0)] * (steady - first)
    records: list[StepRecord] = []
    start = 0.0
    for wait, compute, epoch in steps:
        records.append(StepRecord(start, wait, compute, 32, epoch, warmup=len(records) < len(warm)))
        start += wait + compute
    return summarise_phase(Phase.END_TO_END, records, warm[0][0] if warm else 0.05, True, 0)


def test_the_workers_start_up_is_paid_once_per_real_epoch() -> None:
    phase = _phase(WARM, steady=10)
    assert phase.examples_per_sec == pytest.approx(320.0)  # the steady rate leaves it out
    epoch = with_start_up(phase, 100)
    assert epoch.examples_per_sec == pytest.approx(100 * 32 / (100 * 0.1 + 1.15))
    assert epoch.steps_per_sec == pytest.approx(100 / 11.15)
    assert epoch.wait_s == phase.wait_s and epoch.steps == phase.steps  # the rest as measured
    # A longer epoch spreads the same start-up thinner; unknown: the window's own steps.
    assert with_start_up(phase, 1000).examples_per_sec > epoch.examples_per_sec
    assert with_start_up(phase, None).examples_per_sec == pytest.approx(320 / 2.15)


def test_a_window_with_no_warm_up_left_out_keeps_its_rate() -> None:
    phase = _phase([], steady=10)  # the start-up, if any, is inside the measured steps
    assert with_start_up(phase, 100).examples_per_sec == phase.examples_per_sec


def test_kept_workers_are_not_charged_a_start_up_at_every_epoch() -> None:
    phase = _phase(WARM, steady=10)
    started = with_start_up(phase, 100, restarts_workers=True)
    kept = with_start_up(phase, 100, restarts_workers=False)
    assert kept.examples_per_sec == pytest.approx(320.0)  # paid once per run, not per epoch
    assert kept.examples_per_sec > started.examples_per_sec
    assert starts_each_epoch(4, persistent_workers=False)
    assert not starts_each_epoch(4, persistent_workers=True)
    assert not starts_each_epoch(0, persistent_workers=False)  # no workers to start


def test_a_restart_inside_the_window_is_charged_once_not_twice() -> None:
    # 20 measured steps, one of them the first of a new pass, waiting 1.0 s beyond the rest.
    phase = _phase(WARM, steady=20, restart_wait_s=1.05)
    restart = restart_cost(phase, EpochInfo(steps=100))
    assert restart is not None and restart.seconds_per_restart == pytest.approx(1.0)
    assert phase.examples_per_sec == pytest.approx(20 * 32 / 3.0)  # the restart is in it

    started = with_start_up(phase, 100, restarts_workers=True, restart=restart)
    # The same epoch as a window without the restart: its extra wait is taken out of the
    # steady steps, and charged once per epoch as the measured restart cost it, not as the
    # first start (1.15 s in the warm-up): every later epoch starts the way it did.
    assert started.examples_per_sec == pytest.approx(100 * 32 / (100 * 0.1 + 1.0))
    kept = with_start_up(phase, 100, restarts_workers=False, restart=restart)
    # Kept workers pay what the measured restart of their iterator cost, once per epoch.
    assert kept.examples_per_sec == pytest.approx(100 * 32 / (100 * 0.1 + 1.0))


def test_a_loader_of_unknown_length_is_charged_once_per_pass_the_window_saw() -> None:
    # An IterableDataset has no length: its epoch is the pass the window saw restart, not
    # the window, which here holds two passes' steps.
    phase = _phase(WARM, steady=20, restart_wait_s=1.05)
    restart = restart_cost(phase, EpochInfo(steps=None))
    assert restart is not None and 0 < restart.epoch_steps < phase.steps
    unknown = with_start_up(phase, None, restart=restart)
    assert unknown == with_start_up(phase, restart.epoch_steps, restart=restart)
    assert (
        unknown.examples_per_sec
        < with_start_up(phase, phase.steps, restart=restart).examples_per_sec
    )
