"""Re-measures the finalists side by side before a winner is declared.

A single trial's figure drifts with whatever else the machine does. So the top candidates and
the references are measured again, several rounds, interleaved (A B C, B C A, C A B, ...) so
that drift hits every configuration alike, and compared by their medians.

The highest of several noisy medians is biased high (on a flat top, the configuration that
drew the luckiest windows wins), so the chosen configuration, and the input-only best when
the choice weighed a change to training against it, are measured once more (`confirm`): the
figures reported for them come from windows that played no part in choosing them.

The re-measurement is sized to the study (`SIZING`): a short study has few finalists
(`finalist_count`), and rounds after the first run only for the finalists whose next window
could still change the answer (`deciding`): the input-only best while another contends with it
(`contenders`), and a change to training while it could still clear the margin over that best.
So a ranking already settled beyond the noise, or one that only orders changes to training
that cannot be recommended, costs no more runs. After the first round, a finalist's own trial
counts as a second window (`Finalist.prior`), for that decision only; the configurations the
answer is stated against (`Finalist.compared`) run `MIN_ROUNDS` whatever the ranking, for
their spread.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import (
    TRAINING_CHANGE_MARGIN,
    Measurement,
    Objective,
    Reference,
    changes_to_training,
    input_only_choice,
    same_training,
)
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
    leader = _leader(rates, range(len(rates)))
    if leader is None:
        return []
    floor = min(rates[leader])
    return [
        index
        for index, values in enumerate(rates)
        if values and (index == leader or max(values) >= floor)
    ]


def deciding(
    rates: Sequence[Sequence[float]],
    changes_training: Sequence[bool],
    margin: float = TRAINING_CHANGE_MARGIN,
) -> list[int]:
    """The indices of the configurations whose next window could still change the answer.

    The answer is the best configuration that leaves training as written, unless a change to
    training beats it by `margin` beyond the noise (`input_only_choice`). So another window
    decides something for:
    - the `contenders` among those that leave training as written, while more than one
      contends: a leader alone has nothing left to be reordered against;
    - of the changes to training that could still clear the margin (the best window reaches
      `margin` times the input-only leader's worst), the `contenders`, while more than one
      contends; and each that has not yet cleared it beyond the noise (its worst window is
      below `margin` times the leader's best), with the input-only leader beside it, since
      the gain is weighed on both.

    A change to training whose best window is short of the margin is short of it beyond the
    noise measured: which of several such is fastest changes no answer, and the one reported
    is confirmed on fresh windows anyway.

    Example:
        >>> deciding([[100.0, 104.0], [90.0, 92.0], [110.0, 113.0]], [False, False, True])
        []
        >>> deciding([[100.0, 104.0], [101.0, 99.0], [125.0, 118.0]], [False, False, True])
        [0, 1, 2]
    """
    keeping = [index for index, changes in enumerate(changes_training) if not changes]
    chosen: set[int] = set()
    inputs = contenders([rates[index] for index in keeping])
    if len(inputs) > 1:
        chosen.update(keeping[index] for index in inputs)
    leader = _leader(rates, keeping)
    floor = margin * min(rates[leader]) if leader is not None else 0.0
    could_clear = [
        index
        for index, changes in enumerate(changes_training)
        if changes and rates[index] and max(rates[index]) >= floor
    ]
    ranked = contenders([rates[index] for index in could_clear])
    if len(ranked) > 1:
        chosen.update(could_clear[index] for index in ranked)
    if leader is not None:
        cleared = margin * max(rates[leader])
        undecided = [index for index in could_clear if min(rates[index]) < cleared]
        if undecided:
            chosen.update([*undecided, leader])
    return sorted(chosen)


def _leader(rates: Sequence[Sequence[float]], among: Iterable[int]) -> int | None:
    """Of `among`, the index with the highest median window; None when none has one."""
    measured = [index for index in among if rates[index]]
    return max(measured, key=lambda index: statistics.median(rates[index]), default=None)


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


@dataclasses.dataclass(frozen=True)
class Repeats:
    """How re-measured configurations run: each window is the trial `request` builds for its
    knobs, run by `run` under `budgets`, at most `rounds` windows each. `on_measured` hears
    every outcome; `more`, given the runs of the next round, may refuse that round."""

    rounds: int
    request: Callable[[Knobs], TrialRequest]
    budgets: Budgets
    run: RunTrial
    on_measured: Callable[[Finalist, TrialOutcome], None] | None = None
    more: Callable[[int], bool] | None = None


def remeasure(
    finalists: Sequence[Finalist],
    repeats: Repeats,
    *,
    settle: bool = True,
    margin: float = TRAINING_CHANGE_MARGIN,
) -> list[Measurement]:
    """Measures every finalist once, then up to `repeats.rounds` times those whose next window
    could still change the answer (`_still_running`, by the training-change `margin`) while
    `repeats.more` allows, interleaved; without `settle`, every finalist all the rounds
    (figures to report, not a ranking). Failed repeats are left out, and those a
    memory budget stopped are counted (`Measurement.over_budget`).

    Returns:
        One `Measurement` per finalist that completed at least once, in the given order.
    """
    settling = margin if settle else None
    windows = _interleaved(finalists, repeats, settling)
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


#: Most variants `trim_answer` measures: one per change to training, at most this many.
TRIMMED_AT_MOST = 3


def trim_answer(
    measured: list[Measurement],
    repeats: Repeats,
    margin: float,
    started: Callable[[list[str], int], None] | None = None,
) -> list[Measurement]:
    """`measured` and, where the answer (`input_only_choice`) changes training in two ways or
    more, that answer with each change reverted to the baseline's value (`trial 5 with
    shuffle_buffer as written`), measured side by side with it (`MIN_ROUNDS` interleaved, when
    `repeats.more` allows them; `started` hears the labels first).

    A search moves every knob at once, so a winner that changes the batch size may carry a
    larger shuffle buffer that buys nothing. Measured without it, beside it, the
    recommendation's least change (`least_change`) keeps only the changes that earn their
    gain. The answer's windows from here join its earlier ones; a variant's are its own.
    """
    baseline = next((m for m in measured if m.label == Reference.BASELINE), None)
    if baseline is None:
        return measured
    best = input_only_choice(measured, baseline, margin).best
    changes = changes_to_training(best.knobs, baseline.knobs)
    if len(changes) < 2:
        return measured
    seen = {m.knobs for m in measured}
    variants = []
    for name in changes[:TRIMMED_AT_MOST]:
        if "@" in name and name not in baseline.knobs.sites:
            continue  # a site the baseline does not hold has no value as written
        variant = best.knobs.replace(**{name: baseline.knobs.value_of(name)})
        if variant not in seen:
            seen.add(variant)
            variants.append(Finalist(f"{best.label} with {name} as written", None, variant))
    finalists = [Finalist(best.label, best.trial_number, best.knobs), *variants]
    rounds = min(repeats.rounds, MIN_ROUNDS)
    if not variants or (repeats.more is not None and not repeats.more(len(finalists) * rounds)):
        return measured
    if started is not None:
        started([f.label for f in finalists], rounds)
    beside = dataclasses.replace(repeats, rounds=rounds)
    fresh = {m.label: m for m in remeasure(finalists, beside, settle=False)}
    again = fresh.pop(best.label, None)
    joined = [_joined(m, again) if m is best and again is not None else m for m in measured]
    return joined + list(fresh.values())


def _joined(measurement: Measurement, more: Measurement) -> Measurement:
    """`measurement` with the windows and peaks of `more`, the same configuration's."""
    gpu = [b for b in (measurement.peak_gpu_bytes, more.peak_gpu_bytes) if b is not None]
    return dataclasses.replace(
        measurement,
        examples_per_sec=[*measurement.examples_per_sec, *more.examples_per_sec],
        peak_rss_bytes=max(measurement.peak_rss_bytes, more.peak_rss_bytes),
        peak_gpu_bytes=max(gpu) if gpu else None,
        over_budget=measurement.over_budget + more.over_budget,
    )


def best_estimate(measured: Sequence[Measurement]) -> Measurement | None:
    """The model's proposal (`Reference.proposed`) with the highest selection median, of those
    within the memory budgets in every repeat; None when none was re-measured so. By selection
    windows, so confirming it cannot change which it is."""
    estimates = [m for m in measured if Reference.is_proposal(m.label) and m.within_budgets]
    return max(estimates, key=lambda m: m.selection_median, default=None)


def confirm(
    measured: Sequence[Measurement],
    chosen: Sequence[Measurement],
    repeats: Repeats,
    *,
    baseline: Knobs | None = None,
    margin: float = TRAINING_CHANGE_MARGIN,
) -> list[Measurement]:
    """`measured` with `chosen` measured `MIN_ROUNDS` more times, and up to `repeats.rounds`
    while another window could change the answer among them (`deciding`, by whether each
    trains as `baseline` does; without one, while they contend with each other) and
    `repeats.more` allows, interleaved, as `confirmed`.

    A chosen configuration whose every confirming repeat failed keeps its selection windows as
    its figure; its peaks take the highest of both phases.
    """
    finalists = [_finalist(m, baseline) for m in chosen]
    confirming = _interleaved(finalists, repeats, margin)
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
    finalists: Sequence[Finalist], repeats: Repeats, margin: float | None
) -> list[_Windows]:
    """Each finalist's windows from `repeats.rounds` interleaved rounds, in the given order.

    With a training-change `margin` (None: every finalist every round), rounds after the first
    run only those `_still_running`; once none is owed its `Finalist.least_rounds`, they stop
    when one is left, or when `repeats.more` refuses the next round's runs.
    """
    windows = [_Windows() for _ in finalists]
    active = list(range(len(finalists)))
    more = repeats.more
    for start in range(repeats.rounds):
        if margin is not None and start >= 1:
            active = _still_running(finalists, windows, active, start, margin)
            owed = any(start < finalists[index].least_rounds for index in active)
            if not owed and (len(active) < 2 or (more is not None and not more(len(active)))):
                break
        for offset in range(len(active)):  # each round the previous one rotated by one
            index = active[(start + offset) % len(active)]
            outcome = repeats.run(repeats.request(finalists[index].knobs), repeats.budgets)
            if repeats.on_measured is not None:
                repeats.on_measured(finalists[index], outcome)
            windows[index].add(outcome)
    return windows


def _still_running(
    finalists: Sequence[Finalist],
    windows: Sequence[_Windows],
    active: Sequence[int],
    done: int,
    margin: float,
) -> list[int]:
    """Those of `active` that run round `done + 1`: the ones still short of their
    `Finalist.least_rounds`, and those whose next window could change the answer
    (`deciding`), on their fresh windows and their `Finalist.prior`."""

    def seen(index: int) -> list[float]:
        fresh, prior = windows[index].rates, finalists[index].prior
        return [*fresh, prior] if fresh and prior is not None else fresh

    changes = [finalists[index].changes_training for index in active]
    decides = {active[i] for i in deciding([seen(index) for index in active], changes, margin)}
    return [index for index in active if index in decides or done < finalists[index].least_rounds]


def _finalist(measurement: Measurement, baseline: Knobs | None) -> Finalist:
    changes = baseline is not None and not same_training(measurement.knobs, baseline)
    return Finalist(
        measurement.label, measurement.trial_number, measurement.knobs, changes_training=changes
    )


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
