"""Re-measures the finalists side by side before a winner is declared.

A single trial's figure drifts with whatever else the machine does. So the top candidates and
the references are measured again, several rounds, interleaved (A B C, B C A, C A B, ...) so
that drift hits every configuration alike, and compared by their medians.

The highest of several noisy medians is biased high (on a flat top, the configuration that
drew the luckiest windows wins), so the chosen configuration, and the input-only best when
the choice weighed a change to training against it, are measured once more (`confirm`): the
figures reported for them come from windows that played no part in choosing them.

The re-measurement is sized to the study (`SIZING`): a short study has few finalists
(`finalist_count`), and rounds after the first run only for the finalists still in
contention with the leader (`contenders`), so a ranking already settled beyond the noise
costs no more runs. After the first round, a finalist's own trial counts as a second window
(`Finalist.prior`), for that decision only; the configurations the answer is stated against
(`Finalist.compared`) run `MIN_ROUNDS` whatever the ranking, for their spread.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement, Objective, Reference, same_training
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
    """A configuration to re-measure: a label for people, and the trial it came from.

    Attributes:
        prior: the examples/s its own trial measured. Counted beside its fresh windows only to
            decide whether it still contends after the first round, never in its figures: a
            searched finalist's is biased high by its selection, which only keeps it longer.
            None: it contends until `MIN_ROUNDS` have run.
        compared: the answer is stated against it (the baseline, AUTOTUNE), so it runs
            `MIN_ROUNDS` however far behind it is, for its spread.
        changes_training: it does not train as the baseline does (`same_training`), so it
            does not contend for the best input-only configuration.
    """

    label: str
    trial_number: int | None
    knobs: Knobs
    prior: float | None = None
    compared: bool = False
    changes_training: bool = False

    @property
    def least_rounds(self) -> int:
        """The rounds it runs even when it contends for nothing after the first (fewer, if
        the re-measurement has fewer)."""
        return 1 if self.prior is not None and not self.compared else MIN_ROUNDS


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
    """Measures every finalist once, then up to `rounds` times those still in contention
    (`_still_running`) while `more` (given the runs of the next round) allows, interleaved;
    without `settle`, every finalist all `rounds` (figures to report, not a ranking). Failed
    repeats are left out, and those a memory budget stopped are counted
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

    With `settle`, rounds after the first run only those `_still_running`; once none is owed
    its `Finalist.least_rounds`, they stop when one is left, or when `more` refuses the next
    round's runs.
    """
    windows = [_Windows() for _ in finalists]
    active = list(range(len(finalists)))
    for start in range(rounds):
        if settle and start >= 1:
            active = _still_running(finalists, windows, active, start)
            owed = any(start < finalists[index].least_rounds for index in active)
            if not owed and (len(active) < 2 or (more is not None and not more(len(active)))):
                break
        for offset in range(len(active)):  # each round the previous one rotated by one
            index = active[(start + offset) % len(active)]
            outcome = run(request(finalists[index].knobs), budgets)
            if on_measured is not None:
                on_measured(finalists[index], outcome)
            windows[index].add(outcome)
    return windows


def _still_running(
    finalists: Sequence[Finalist], windows: Sequence[_Windows], active: Sequence[int], done: int
) -> list[int]:
    """Those of `active` that run round `done + 1`: the ones still short of their
    `Finalist.least_rounds`, and the `contenders` for first place, of all and of those that
    leave training as written, on their fresh windows and their `Finalist.prior`."""

    def seen(index: int) -> list[float]:
        fresh, prior = windows[index].rates, finalists[index].prior
        return [*fresh, prior] if fresh and prior is not None else fresh

    groups = [list(active), [i for i in active if not finalists[i].changes_training]]
    contending = {
        group[i] for group in groups if group for i in contenders([seen(j) for j in group])
    }
    return [
        index for index in active if index in contending or done < finalists[index].least_rounds
    ]


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
    in. Under one objective each has its trial's examples/s as its `Finalist.prior`; under two,
    none does, since one far behind in examples/s may still be the answer for its RAM."""
    trials = feasible_complete(study)
    count = finalist_count(count, len(trials))
    rates = {t.number: t.values[0] for t in trials}
    if objective is Objective.THROUGHPUT_RAM:
        trials = pareto_front(trials)
    ranked = sorted(trials, key=lambda t: -t.values[0])
    found: list[tuple[str, int | None, Knobs]] = []
    seen = set(references.values())
    for trial in ranked:
        record = TrialRecord.from_trial(trial)
        if record.knobs is None or record.knobs in seen or record.reference:
            continue
        seen.add(record.knobs)
        found.append((f"trial {trial.number}", trial.number, record.knobs))
        if len(found) == count:
            break
    found += [(label, reference_trial(study, label), knobs) for label, knobs in references.items()]
    ranks = objective is Objective.THROUGHPUT
    baseline = references.get(Reference.BASELINE, Knobs())
    return [
        Finalist(
            label,
            number,
            knobs,
            prior=rates.get(number) if ranks and number is not None else None,
            compared=label in references and not Reference.is_proposal(label),
            changes_training=not same_training(knobs, baseline),
        )
        for label, number, knobs in found
    ]
