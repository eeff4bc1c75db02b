"""From measured rates to the answer: cores per worker, the fit over k workers, what binds.

Pure functions of the measurements (no clock, no TensorFlow), so each rule is tested exactly.
The rules, each with its reason:

- `cores_per_worker`: the core count with the most examples/s per core, the cheaper on a tie
  within `TIE`: a worker is paid for by the core, and a pipeline that stops scaling at c cores
  wastes every core above c.
- `fit_workers`: the per-worker rate is the one-worker measurement through the service, and η
  the least-squares slope of rate against k (through the origin) over that rate: the service's
  own cost per worker (the trainer's reading, the dispatcher) shows up as η below 1.
- `workers_needed`: ceil(model rate / (per-worker rate * η)), at least 1.
- `binding`: the trainer's ceiling or the network, when either is below the model's rate, binds
  whatever the number of workers; else the workers do when more than one is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tfperf.offload._result import Binding, CoreRate, VerifyPoint

#: Rates per core within this fraction of the best count as a tie (measurement noise).
TIE = 0.1


def cores_per_worker(rates: Sequence[CoreRate]) -> CoreRate:
    """The pinned measurement whose core count gives the most examples/s per core.

    Raises:
        ValueError: `rates` is empty.
    """
    if not rates:
        raise ValueError("`rates` must hold at least one pinned measurement, but got none")
    best = max(rate.examples_per_sec / rate.cores for rate in rates)
    return min(
        (rate for rate in rates if rate.examples_per_sec / rate.cores >= (1 - TIE) * best),
        key=lambda rate: rate.cores,
    )


def fit_workers(points: Sequence[VerifyPoint]) -> tuple[float, float] | None:
    """(per-worker examples/s, η) from the verify runs; None without a one-worker run."""
    one = next((point for point in points if point.workers == 1), None)
    if one is None or one.examples_per_sec <= 0:
        return None
    slope = sum(p.workers * p.examples_per_sec for p in points) / sum(p.workers**2 for p in points)
    return one.examples_per_sec, slope / one.examples_per_sec


def workers_needed(model_examples_per_sec: float, per_worker: float, efficiency: float) -> int:
    """Workers whose combined rate, at efficiency η, reaches the model's rate."""
    if per_worker <= 0 or efficiency <= 0:
        raise ValueError(
            "`per_worker > 0` and `efficiency > 0` must hold, but got "
            f"(per_worker={per_worker}, efficiency={efficiency})"
        )
    return max(1, math.ceil(model_examples_per_sec / (per_worker * efficiency)))


def network_ceiling(gbps: float, bytes_per_batch: int, batch_examples: int) -> float:
    """Examples/s a link of `gbps` gigabits/s carries at `bytes_per_batch` per batch."""
    return gbps * 1e9 / 8 / max(bytes_per_batch, 1) * batch_examples


def binding(
    model_examples_per_sec: float,
    needed: int,
    trainer_ceiling: float | None,
    network: float | None,
) -> Binding:
    """What limits the rate the service feeds the model (see the module's rules)."""
    if trainer_ceiling is not None and trainer_ceiling < model_examples_per_sec:
        return Binding.TRAINER
    if network is not None and network < model_examples_per_sec:
        return Binding.NETWORK
    return Binding.WORKERS if needed > 1 else Binding.MODEL
