"""Re-measures the finalists side by side before a winner is declared.

A single trial's figure drifts with whatever else the machine does. So the top candidates and
both references are measured again, several rounds, interleaved (A B C, B C A, C A B, ...) so
that drift hits every configuration alike, and compared by their medians.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tfperf.knobs import Knobs
from tfperf.results import Measurement, Objective, TrialOutcome, TrialStatus
from tfperf.study import TrialRecord, feasible_complete, pareto_front, reference_trial
from tfperf.trials import Budgets, TrialRequest

if TYPE_CHECKING:
    import optuna

RunTrial = Callable[[TrialRequest, Budgets], TrialOutcome]


@dataclasses.dataclass(frozen=True)
class Finalist:
    """A configuration to re-measure: a label for people, and the trial it came from."""

    label: str
    trial_number: int | None
    knobs: Knobs


def interleaved_order(count: int, rounds: int) -> list[int]:
    """Indices in the order they run: each round is the previous one rotated by one."""
    return [(start + offset) % count for start in range(rounds) for offset in range(count)]


def remeasure(
    finalists: Sequence[Finalist],
    rounds: int,
    request: Callable[[Knobs], TrialRequest],
    budgets: Budgets,
    run: RunTrial,
    on_measured: Callable[[Finalist, TrialOutcome], None] | None = None,
) -> list[Measurement]:
    """Measures every finalist `rounds` times, interleaved; failed repeats are left out.

    Returns:
        One `Measurement` per finalist that completed at least once, in the given order.
    """
    samples: dict[int, list[float]] = {i: [] for i in range(len(finalists))}
    peak_rss: dict[int, int] = dict.fromkeys(samples, 0)
    peak_gpu: dict[int, int | None] = dict.fromkeys(samples)
    for index in interleaved_order(len(finalists), rounds):
        finalist = finalists[index]
        outcome = run(request(finalist.knobs), budgets)
        if on_measured is not None:
            on_measured(finalist, outcome)
        if outcome.status is not TrialStatus.COMPLETE or outcome.result is None:
            continue
        samples[index].append(outcome.result.end_to_end.examples_per_sec)
        peak_rss[index] = max(peak_rss[index], outcome.peak_rss_bytes)
        if outcome.peak_gpu_bytes is not None:
            peak_gpu[index] = max(peak_gpu[index] or 0, outcome.peak_gpu_bytes)
    return [
        Measurement(
            label=finalist.label,
            trial_number=finalist.trial_number,
            knobs=finalist.knobs.to_dict(),
            examples_per_sec=samples[index],
            peak_rss_bytes=peak_rss[index],
            peak_gpu_bytes=peak_gpu[index],
        )
        for index, finalist in enumerate(finalists)
        if samples[index]
    ]


def pick_finalists(
    study: optuna.Study, objective: Objective, count: int, references: Mapping[str, Knobs]
) -> list[Finalist]:
    """The best `count` distinct trials (Pareto-optimal ones under two objectives), then the
    references, each with the trial it was measured in."""
    trials = feasible_complete(study)
    if objective is Objective.THROUGHPUT_RAM:
        trials = pareto_front(trials)
    ranked = sorted(trials, key=lambda t: -t.values[0])
    finalists: list[Finalist] = []
    seen = set(references.values())
    for trial in ranked:
        record = TrialRecord.from_trial(trial)
        if record.knobs is None or record.knobs in seen or record.reference:
            continue
        seen.add(record.knobs)
        finalists.append(Finalist(f"trial {trial.number}", trial.number, record.knobs))
        if len(finalists) == count:
            break
    return finalists + [
        Finalist(label, reference_trial(study, label), knobs) for label, knobs in references.items()
    ]
