"""Re-measures the finalists side by side before a winner is declared.

A single trial's figure drifts with whatever else the machine does. So the top candidates and
the references are measured again, several rounds, interleaved (A B C, B C A, C A B, ...) so
that drift hits every configuration alike, and compared by their medians.

The highest of several noisy medians is biased high (on a flat top, the configuration that
drew the luckiest windows wins), so the chosen configuration, and the input-only best when
the choice weighed a change to training against it, are measured once more (`confirm`): the
figures reported for them come from windows that played no part in choosing them.

The re-measurement is sized to the study (`SIZING`): a short study has few finalists
(`finalist_count`), and rounds past `MIN_ROUNDS` run only for the finalists still in
contention with the leader (`contenders`), so a ranking already settled beyond the noise
costs no more runs.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement, Objective, Reference
from tfperf.study import feasible_complete, pareto_front, reference_trial
from tfperf.study.records import TrialRecord
from tfperf.trials import Budgets, TrialRequest

if TYPE_CHECKING:
    import optuna

RunTrial = Callable[[TrialRequest, Budgets], TrialOutcome]

_OVER_BUDGET = (TrialStatus.RAM_BUDGET, TrialStatus.GPU_BUDGET)


@dataclasses.dataclass(frozen=True)
class Sizing:
    """How much re-measurement a study gets; each threshold with its reason.

    Attributes:
        trials_per_finalist: a study's completed trials per searched finalist: a study of n
            trials has at most n // 3 of them (and at least `min_finalists`), since the
            ranking of a short study's top is mostly noise and re-measuring a long tail of it
            buys nothing.
        min_finalists: searched finalists even a tiny study keeps: the best and a runner-up.
        min_rounds: rounds every finalist runs: two windows are the fewest that show their
            spread.
    """

    trials_per_finalist: int = 3
    min_finalists: int = 2
    min_rounds: int = 2


#: The sizing every tuner uses.
SIZING = Sizing()
MIN_ROUNDS = SIZING.min_rounds


def finalist_count(asked: int, trials: int, sizing: Sizing = SIZING) -> int:
    """The searched finalists of a study of `trials` completed trials, at most `asked`.

    Example:
        >>> finalist_count(3, 6), finalist_count(3, 30), finalist_count(1, 6)
        (2, 3, 1)
    """
    return min(asked, max(sizing.min_finalists, trials // sizing.trials_per_finalist))


def contenders(rates: Sequence[Sequence[float]]) -> list[int]:
    """The indices of the configurations whose windows `rates` still contend for first place.

    The leader (highest median) contends, and so does every configuration whose best window
    reaches the leader's worst: their ranges overlap, so another round could reorder them.
    One whose best window is below the leader's worst is behind beyond the noise measured.

    Example:
        >>> contenders([[100.0, 104.0], [90.0, 92.0], [101.0, 99.0]])
        [0, 2]
    """
    measured = [index for index, values in enumerate(rates) if values]
    if not measured:
        return []
    leader = max(measured, key=lambda index: statistics.median(rates[index]))
    floor = min(rates[leader])
    return [index for index in measured if index == leader or max(rates[index]) >= floor]


@dataclasses.dataclass(frozen=True)
class Finalist:
    """A configuration to re-measure: a label for people, and the trial it came from."""

    label: str
    trial_number: int | None
    knobs: Knobs


def remeasure(
    finalists: Sequence[Finalist],
    rounds: int,
    request: Callable[[Knobs], TrialRequest],
    budgets: Budgets,
    run: RunTrial,
    on_measured: Callable[[Finalist, TrialOutcome], None] | None = None,
    more: Callable[[int], bool] | None = None,
    *,
    settle: bool = True,
) -> list[Measurement]:
    """Measures every finalist `MIN_ROUNDS` times (fewer if `rounds` is), interleaved, and
    up to `rounds` times those still in `contenders` while `more` (given the runs of the next
    round) allows; without `settle`, every finalist all `rounds` (figures to report, not a
    ranking). Failed repeats are left out, and those a memory budget stopped are counted
    (`Measurement.over_budget`).

    Returns:
        One `Measurement` per finalist that completed at least once, in the given order.
    """
    windows = _interleaved(finalists, rounds, request, budgets, run, on_measured, more, settle)
    return [
        Measurement(
            label=finalist.label,
            trial_number=finalist.trial_number,
            knobs=finalist.knobs,
            examples_per_sec=window.rates,
            peak_rss_bytes=window.peak_rss_bytes,
            peak_gpu_bytes=window.peak_gpu_bytes,
            over_budget=window.over_budget,
        )
        for finalist, window in zip(finalists, windows, strict=True)
        if window.rates
    ]


def best_estimate(measured: Sequence[Measurement]) -> Measurement | None:
    """The model's proposal (`Reference.proposed`) with the highest selection median, of those
    within the memory budgets in every repeat; None when none was re-measured so. By selection
    windows, so confirming it cannot change which it is."""
    estimates = [m for m in measured if Reference.is_proposal(m.label) and m.within_budgets]
    return max(estimates, key=lambda m: m.selection_median, default=None)


def confirm(
    measured: Sequence[Measurement],
    chosen: Sequence[Measurement],
    rounds: int,
    request: Callable[[Knobs], TrialRequest],
    budgets: Budgets,
    run: RunTrial,
    on_measured: Callable[[Finalist, TrialOutcome], None] | None = None,
    more: Callable[[int], bool] | None = None,
) -> list[Measurement]:
    """`measured` with `chosen` measured `MIN_ROUNDS` more times, and up to `rounds` while
    they still contend with each other (`contenders`) and `more` allows, interleaved, as
    `confirmed`.

    A chosen configuration whose every confirming repeat failed keeps its selection windows as
    its figure; its peaks take the highest of both phases.
    """
    finalists = [_finalist(m) for m in chosen]
    confirming = _interleaved(finalists, rounds, request, budgets, run, on_measured, more, True)
    windows = dict(zip((id(m) for m in chosen), confirming, strict=True))
    return [_confirmed(m, windows[id(m)]) if id(m) in windows else m for m in measured]


@dataclasses.dataclass
class _Windows:
    """One configuration's completed repeats: examples/s per window and the peaks."""

    rates: list[float] = dataclasses.field(default_factory=list)
    peak_rss_bytes: int = 0
    peak_gpu_bytes: int | None = None
    #: Repeats stopped over the RAM or GPU-memory budget.
    over_budget: int = 0

    def add(self, outcome: TrialOutcome) -> None:
        if outcome.status in _OVER_BUDGET:
            self.over_budget += 1
        if outcome.status is not TrialStatus.COMPLETE or outcome.result is None:
            return
        self.rates.append(outcome.result.end_to_end.examples_per_sec)
        self.peak_rss_bytes = max(self.peak_rss_bytes, outcome.peak_rss_bytes)
        if outcome.peak_gpu_bytes is not None:
            self.peak_gpu_bytes = max(self.peak_gpu_bytes or 0, outcome.peak_gpu_bytes)


def _interleaved(
    finalists: Sequence[Finalist],
    rounds: int,
    request: Callable[[Knobs], TrialRequest],
    budgets: Budgets,
    run: RunTrial,
    on_measured: Callable[[Finalist, TrialOutcome], None] | None,
    more: Callable[[int], bool] | None,
    settle: bool,
) -> list[_Windows]:
    """Each finalist's windows from `rounds` interleaved rounds, in the given order.

    With `settle`, rounds after `MIN_ROUNDS` run only the `contenders`, and stop once the
    leader is alone in contention, or when `more` refuses the next round's runs.
    """
    windows = [_Windows() for _ in finalists]
    active = list(range(len(finalists)))
    for start in range(rounds):
        if settle and start >= MIN_ROUNDS:
            active = [active[i] for i in contenders([windows[i].rates for i in active])]
            if len(active) < 2 or (more is not None and not more(len(active))):
                break
        for offset in range(len(active)):  # each round the previous one rotated by one
            index = active[(start + offset) % len(active)]
            outcome = run(request(finalists[index].knobs), budgets)
            if on_measured is not None:
                on_measured(finalists[index], outcome)
            windows[index].add(outcome)
    return windows


def _finalist(measurement: Measurement) -> Finalist:
    return Finalist(measurement.label, measurement.trial_number, measurement.knobs)


def _confirmed(measurement: Measurement, windows: _Windows) -> Measurement:
    gpu = [v for v in (measurement.peak_gpu_bytes, windows.peak_gpu_bytes) if v is not None]
    return dataclasses.replace(
        measurement,
        confirmed=windows.rates,
        over_budget=measurement.over_budget + windows.over_budget,
        peak_rss_bytes=max(measurement.peak_rss_bytes, windows.peak_rss_bytes),
        peak_gpu_bytes=max(gpu) if gpu else None,
    )


def pick_finalists(
    study: optuna.Study, objective: Objective, count: int, references: Mapping[str, Knobs]
) -> list[Finalist]:
    """The best `count` distinct trials (Pareto-optimal ones under two objectives), sized to
    the study (`finalist_count`), then the references, each with the trial it was measured
    in."""
    trials = feasible_complete(study)
    count = finalist_count(count, len(trials))
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
