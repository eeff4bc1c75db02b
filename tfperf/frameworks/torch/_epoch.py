"""The rate a DataLoader gives over a real epoch, its workers' start-up included.

The steady figures of a measured window leave out the warm-up: the workers starting, the
first batch and the ramp until every worker delivers. Training pays that again at every
epoch whose `iter(loader)` starts the workers (a loader without `persistent_workers`); a
loader that keeps its workers pays it once per run, and each later epoch only the reset of
its iterator. A rate that leaves the start-up out ranks many workers started every epoch
above what training gets (32 workers on 2 cores start for seconds in an epoch of a few), and
one that charges it to every configuration alike cannot tell `persistent_workers=True` from
False. Here every epoch is charged what starting it costs, in one rule that a training
script's profile and a pipeline file's both use:

- the steady step time is the window's, less the extra wait of any restart steps inside it
  (a pass the window began afresh), so those are not charged twice;
- each epoch is charged what a restart measured in the window cost beyond a steady step: a
  later epoch's start (the last pass's workers shut down, new ones started, or a kept pool's
  iterator reset), not the first one's;
- where the window measured no restart, a loader that starts its workers at each epoch is
  charged the warm-up's time beyond as many steady steps, and one that keeps them nothing:
  its first start-up is paid once per run.

Pure functions on plain records: tests assert exact figures.
"""

from __future__ import annotations

import dataclasses

from tfperf.results import PhaseResult
from tfperf.results.stages import RestartCost


def starts_each_epoch(num_workers: int, persistent_workers: bool) -> bool:
    """Whether every `iter(loader)` starts the loader's worker processes again."""
    return num_workers > 0 and not persistent_workers


def with_start_up(
    phase: PhaseResult,
    epoch_steps: int | None,
    *,
    restarts_workers: bool = True,
    restart: RestartCost | None = None,
) -> PhaseResult:
    """`phase` with its rate over a real epoch of `epoch_steps` batches, start-up included.

    Args:
        epoch_steps: batches in a real epoch; None (or < 1): the pass `restart` observed,
            else the window's own steps.
        restarts_workers: the loader starts its workers at each epoch (`starts_each_epoch`).
        restart: the restarts measured inside the window (the profile's `restarts`), if any.

    Returns:
        `phase` with the epoch's rate and steps per second, everything else as measured; the
        phase itself when its rate is not measured.
    """
    if phase.steps < 1 or phase.steps_per_sec <= 0:
        return phase
    window_s = phase.steps / phase.steps_per_sec
    in_window = restart.restarts * restart.seconds_per_restart if restart is not None else 0.0
    step_s = max(0.0, window_s - in_window) / phase.steps
    if step_s <= 0:
        return phase
    warm = phase.warmup
    if restart is not None and restart.restarts > 0:  # what every later epoch pays
        start_up_s = restart.seconds_per_restart
    elif restarts_workers and warm.steps >= 1:
        start_up_s = max(0.0, warm.duration_s - warm.steps * step_s)
    else:  # no warm-up left out, or workers kept and no restart measured: nothing
        start_up_s = 0.0
    if start_up_s == 0.0 and in_window == 0.0:
        return phase
    steps = _epoch_steps(phase, epoch_steps, restart)
    epoch_s = steps * step_s + start_up_s
    per_step = phase.examples / phase.steps
    return dataclasses.replace(
        phase, examples_per_sec=steps * per_step / epoch_s, steps_per_sec=steps / epoch_s
    )


def _epoch_steps(phase: PhaseResult, given: int | None, restart: RestartCost | None) -> int:
    """Batches in a real epoch: `given`; else the pass the window saw restart (an
    `IterableDataset` has no length, and a window of several of its passes is not one
    epoch); else the window's own steps."""
    if given is not None and given > 0:
        return given
    if restart is not None and restart.epoch_steps > 0:
        return restart.epoch_steps
    return phase.steps
