"""What a tuning run found, as plain dataclasses that round-trip through JSON.

No TensorFlow and no Optuna here: a saved `TuneResult` is read by reports and scripts anywhere.
Throughputs are examples per second; spreads are relative (0.05 = 5%).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from tfperf.knobs import KNOBS, Knobs, training_sites
from tfperf.results._json import JsonRecord, KnobsField, as_knobs
from tfperf.results._limit import Estimate, Limit
from tfperf.results._references import Reference, folded_estimates, reference_name

TUNE_SCHEMA_VERSION = 1


class Objective(str, Enum):
    """What the study optimises."""

    THROUGHPUT = "throughput"
    THROUGHPUT_RAM = "throughput-ram"


@dataclasses.dataclass
class Measurement:
    """One configuration re-measured several times, interleaved with the others.

    `examples_per_sec` are the windows the winner was chosen on. The configuration chosen (and
    the one it was weighed against, when the choice changes training) is then measured again,
    `confirmed`: the highest of several noisy medians is biased high, so the figures reported
    for it come from windows that played no part in choosing it. `median` and `spread` are the
    reported figure (the confirmed windows where there are some); `selection_median` is the
    figure the choice compared.
    """

    label: str
    trial_number: int | None
    knobs: KnobsField
    examples_per_sec: list[float]
    peak_rss_bytes: int
    peak_gpu_bytes: int | None
    confirmed: list[float] = dataclasses.field(default_factory=list)
    #: Repeats stopped over the RAM or GPU-memory budget (they left no window). A configuration
    #: with any is never recommended: its trial met the budget by a margin the next run erased.
    over_budget: int = 0

    def __post_init__(self) -> None:
        # A mapping in `to_dict()`'s shape is read as the knobs it describes.
        self.knobs = as_knobs(self.knobs)

    @property
    def within_budgets(self) -> bool:
        """Whether every repeat of this configuration stayed within the memory budgets."""
        return self.over_budget == 0

    @property
    def windows(self) -> list[float]:
        """The windows the reported figure comes from: the confirmed ones, if any."""
        return self.confirmed or self.examples_per_sec

    @property
    def median(self) -> float:
        """The reported examples/s: the median of `windows`."""
        return statistics.median(self.windows) if self.windows else 0.0

    @property
    def selection_median(self) -> float:
        """The median of the windows the choice was made on (`examples_per_sec`)."""
        values = self.examples_per_sec
        return statistics.median(values) if values else 0.0

    @property
    def spread_known(self) -> bool:
        """Whether `spread` was measured: one window has no range, so its noise is unknown
        (its `spread` reads 0.0, which is not "no noise")."""
        return len(self.windows) >= 2

    @property
    def spread(self) -> float:
        """Half the range of `windows`, relative to their median: the noise of this figure."""
        values = self.windows
        if len(values) < 2 or self.median <= 0:
            return 0.0
        return (max(values) - min(values)) / 2 / self.median


@dataclasses.dataclass
class Speedup:
    """A ratio of medians, its spread, and whether it exceeds the measured noise."""

    ratio: float
    spread: float
    significant: bool
    # False when either figure is a single run: its spread reads 0.0 but was never measured.
    spread_known: bool = True

    @property
    def gains(self) -> bool:
        """Whether the ratio is a gain beyond the measured noise."""
        return self.significant and self.ratio > 1

    def describe(self) -> str:
        if not self.spread_known:
            text = f"{self.ratio:.2f}x (spread unknown: a figure from a single run)"
            return text if self.significant else f"{text} (not a measured gain)"
        text = f"{self.ratio:.2f}x ± {self.ratio * self.spread:.2f}"
        return text if self.significant else f"{text} (within noise: not a measured gain)"


@dataclasses.dataclass
class SearchGain:
    """What the search added to the model's answer: the recommendation over the model's best
    estimate (the estimate reference with the highest selection median), both measured again
    side by side after the choice, so neither figure is the luckiest of several medians and
    drift between the study's phases falls on both alike."""

    estimate: str
    gain: Speedup

    def describe(self) -> str:
        return f"{self.gain.describe()} over {self.estimate}, both measured after the choice"


@dataclasses.dataclass
class EditGain:
    """One structure edit the study searched (`cache@p.py:12.added`, ...): whether the
    recommendation's patch makes it, and what it was worth: the best trial that made it over
    the best trial that did not (other knobs free, each measured once; None when one side has
    no finished trial)."""

    site: str
    what: str
    used: bool
    gain: float | None
    trials_with: int
    trials_without: int

    def describe(self) -> str:
        worth = (
            f"best trial with it {self.gain:.2f}x the best without"
            if self.gain is not None
            else "not measured both ways"
        )
        used = "made" if self.used else "not made"
        return (
            f"{self.what}: {used}; {worth} ({self.trials_with} trials with, "
            f"{self.trials_without} without)"
        )


@dataclasses.dataclass
class HandOver:
    """What a zero-change study hands back: the whole change that reproduces the recommendation.

    `diff` applies with `patch -p0` (or `git apply`) from `root`; `manual_edits` are the
    changes tfperf could not write, each a complete sentence with the code to add and where.
    `verified` is the patched files over the original, re-measured interleaved in fresh
    processes; `verify_problem` says why there is no verification (skipped, failed, no patch).
    """

    root: str
    diff: str
    manual_edits: list[str]
    verified: Speedup | None = None
    verify_problem: str | None = None
    # The structure edits searched (a cache added, a call moved), with what each was worth.
    edits: list[EditGain] = dataclasses.field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when applying the diff alone reproduces the measured configuration."""
        return not self.manual_edits


#: The framework of a stored tune result that names none: every result was tf.data's before
#: results named their framework (`tfperf.frameworks.get` takes the name).
UNNAMED_FRAMEWORK = "tensorflow"


@dataclasses.dataclass
class TuneResult(JsonRecord):
    """The outcome of `tfperf tune`: the recommendation, measured against both references."""

    pipeline: str
    study_name: str
    storage: str
    objective: Objective
    best: Measurement
    baseline: Measurement
    autotune: Measurement | None
    candidates: list[Measurement]
    speedup_vs_baseline: Speedup
    speedup_vs_autotune: Speedup | None
    recommendation: str
    changes_training: list[str]
    pareto_trials: list[int]
    trial_counts: dict[str, int]
    trials_this_run: int
    wall_s: float
    ram_budget_bytes: int | None
    gpu_memory_budget_bytes: int | None
    schema_version: int = TUNE_SCHEMA_VERSION
    # Added after schema version 1 shipped: optional, so files written before them still load.
    # The pipeline's limit on this machine, from the model built before the search.
    limit: Limit | None = None
    # `best.median / limit.examples_per_sec`: how far the answer is from the limit.
    tuned_over_limit: float | None = None
    # The best re-measured configuration that leaves training as written (may be `best`).
    input_only: Measurement | None = None
    # The fastest configuration when it changes training and was not recommended: its gain
    # over `input_only` is within noise, or `best` changes training less for a figure within
    # noise of it (`least_change`); None when `best` is the fastest.
    fastest: Measurement | None = None
    # `best` over `input_only` when it changes training, else `fastest` over `input_only`.
    gain_over_input_only: Speedup | None = None
    # For code tuned at its call sites: the diff, every manual edit, and its verification.
    handover: HandOver | None = None
    # The limit under the recommended configuration's training setting (batch size,
    # precision), by which `tuned_over_limit` is taken; `limit` when it keeps the baseline's.
    best_limit: Limit | None = None
    # The configurations the pipeline model proposed, in the order it proposed them, each
    # predicted vs measured (`Estimate.kind` says which proposal it is).
    estimates: list[Estimate] = dataclasses.field(default_factory=list)
    # `best` over the model's best-measured estimate, confirmed side by side; None when `best`
    # is that estimate or the study measured none.
    search_gain: SearchGain | None = None
    # The framework of the tuned pipeline (`tfperf.frameworks` name), for the report's words.
    framework: str = UNNAMED_FRAMEWORK
    # What adopting `best` changes in the data training sees, as its trial's findings said
    # and the baseline's did not (`tfperf.results.findings.introduced_hazards`).
    hazards: list[str] = dataclasses.field(default_factory=list)
    # The user's files the study's trials changed, each put back, and those they created
    # (every stored trial's `ProfileResult.files_put_back` and `files_created`, once each).
    files_put_back: list[str] = dataclasses.field(default_factory=list)
    files_created: list[str] = dataclasses.field(default_factory=list)

    def estimate_of(self, kind: Reference) -> Estimate | None:
        """The model's proposal of `kind`, if it made one."""
        return next((e for e in self.estimates if e.kind is kind), None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuneResult:
        return cls.validate(data)

    @classmethod
    def validate(cls, data: Any) -> TuneResult:
        """The result saved by `to_dict`, or by a tfperf that stored each estimate in a field
        of its own (`estimate`, `training_estimate`, ...)."""
        return super().validate(folded_estimates(data) if isinstance(data, Mapping) else data)


def speedup(new: Measurement, old: Measurement) -> Speedup:
    """`new` over `old` by medians; significant only if the gain exceeds both figures' noise.

    The spread of a ratio is taken as the sum of the two relative spreads (a first-order
    bound), so the ratio is known to `ratio * spread` either way, the "± x" every report
    prints. A gain counts only when 1 lies outside that interval: a "3.14x ± 3.14" is noise.
    """
    if old.median <= 0:
        return Speedup(ratio=0.0, spread=0.0, significant=False)
    ratio = new.median / old.median
    spread = new.spread + old.spread
    known = new.spread_known and old.spread_known
    return Speedup(
        ratio=ratio,
        spread=spread,
        significant=abs(ratio - 1) > ratio * spread,
        spread_known=known,
    )


#: Knobs that change what the model trains on or how it computes, not only how fast input
#: arrives: a recommendation that changes them needs an accuracy check before adoption.
TRAINING_KNOBS = KNOBS.where(lambda knob: knob.changes_training)


def training_changes(best: Measurement, baseline: Measurement) -> list[str]:
    """Knobs and call sites that change training, not only speed, and differ from the baseline.

    The one rule tfperf applies everywhere (the tune JSON's `changes_training`, the terminal
    summary, the HTML report, the patch): the `TRAINING_KNOBS` and, for code tuned at its call
    sites, the sites whose `SiteKind` changes training (batch sizes, shuffle buffers).

    Example:
        >>> site = "batch@train.py:9.batch_size"
        >>> old, new = ({"sites": {site: size}} for size in (32, 64))
        >>> training_changes(Measurement("trial 3", 3, new, [2.0], 0, None),
        ...                  Measurement("baseline", 0, old, [1.0], 0, None))
        ['batch@train.py:9.batch_size']
    """
    return changes_to_training(best.knobs, baseline.knobs)


def same_training(knobs: Knobs, other: Knobs) -> bool:
    """Whether `knobs` and `other` train alike: neither changes training from the other
    (`training_changes`), so the model alone runs the same under both."""
    return not changes_to_training(knobs, other)


def changes_to_training(knobs: Knobs, baseline: Knobs) -> list[str]:
    """`training_changes` of two configurations' knobs."""
    changed = knobs.diff(baseline)
    return [name for name in TRAINING_KNOBS if name in changed] + training_sites(
        baseline.sites, knobs.sites
    )


def training_distance(
    knobs: Knobs | Mapping[str, Any], baseline: Knobs | Mapping[str, Any]
) -> float:
    """How far `knobs` move training from `baseline`'s: doublings of a batch size or shuffle
    buffer (global or at a call site), plus one for a change of precision or of any value
    that is not a positive number.

    Example:
        >>> training_distance({"batch_size": 128, "mixed_precision": "mixed_bfloat16"},
        ...                   {"batch_size": 32, "mixed_precision": "float32"})
        3.0
    """
    knobs, baseline = _mapping(knobs), _mapping(baseline)
    own = {name: knobs.get(name) for name in TRAINING_KNOBS}
    base = {name: baseline.get(name) for name in TRAINING_KNOBS}
    sites, base_sites = knobs.get("sites") or {}, baseline.get("sites") or {}
    for name in training_sites(base_sites, sites):
        own[name], base[name] = sites.get(name), base_sites.get(name)
    return sum(_step(own[name], base[name]) for name in own)


def _mapping(knobs: Knobs | Mapping[str, Any]) -> Mapping[str, Any]:
    return knobs.to_dict() if isinstance(knobs, Knobs) else knobs


def _step(value: Any, base: Any) -> float:
    if value == base:
        return 0.0
    numbers = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (value, base)
    )
    return abs(math.log2(value / base)) if numbers else 1.0


@dataclasses.dataclass(frozen=True)
class InputOnlyChoice:
    """The recommendation under the input-only rule, with the figures the result reports.

    `best` is the recommended measurement; `input_only` the best that leaves training as
    written; `fastest` the fastest one when it was not recommended (None when `best` is the
    fastest): it changes training, and either its gain over `input_only` is within noise or
    `best` changes training less for a figure within noise of it; `gain` the recommended
    training change over `input_only` (the fastest's when `best` leaves training as written;
    None when the fastest does).
    """

    best: Measurement
    input_only: Measurement
    fastest: Measurement | None
    gain: Speedup | None

    @property
    def weighed(self) -> list[Measurement]:
        """The measurements the choice rests on: the recommended one and, where a change to
        training was weighed against the input-only best or a faster, larger change, those
        too (each once)."""
        sides = (self.best, self.input_only, self.fastest)
        return list({id(m): m for m in sides if m is not None}.values())

    @property
    def passed_over(self) -> Speedup | None:
        """`fastest` over `best` when a faster configuration was not recommended."""
        return speedup(self.fastest, self.best) if self.fastest is not None else None


#: How much faster than the best input-only configuration a change to training (batch size,
#: shuffle buffer, precision) must run, beyond the noise, to be recommended: it changes what
#: the model learns, and a few percent of speed does not pay for re-checking accuracy.
TRAINING_CHANGE_MARGIN = 1.2


def worth_changing_training(gain: Speedup, margin: float = TRAINING_CHANGE_MARGIN) -> bool:
    """Whether `gain` (a change to training over the best input-only configuration) clears
    `margin` beyond the noise: a ratio of at least `margin`, and a gain beyond the measured
    noise (`Speedup.significant`: 1 lies outside the "± x" reports print).

    Example:
        >>> worth_changing_training(Speedup(1.06, 0.05, True))
        False
        >>> worth_changing_training(Speedup(1.5, 0.05, True))
        True
    """
    return gain.significant and gain.ratio >= margin


def input_only_choice(
    measured: list[Measurement], baseline: Measurement, margin: float = TRAINING_CHANGE_MARGIN
) -> InputOnlyChoice:
    """Picks the best that leaves training as written unless a change to training beats it,
    and then the smallest change to training that does.

    A configuration that changes training (`training_changes`) is recommended only when its
    gain over the best input-only one clears `margin` beyond the noise of both
    (`worth_changing_training`).
    Of the configurations that change training, the one recommended is the one that changes
    it least (`training_distance`) among those the fastest does not beat beyond noise
    (`least_change`): a shuffle buffer that rides along with a larger batch, at a figure the
    noise could explain, is a change to training nothing measured asks for.
    A configuration stopped over a memory budget in any repeat is never recommended
    (`eligible`).
    Which configurations are compared is decided on `selection_median`s and their windows;
    the gain is weighed on their reported figures, which are their confirmed windows once the
    tuner has measured them again.

    Example:
        >>> base = Measurement("baseline", 0, {"batch_size": 32}, [100.0, 100.0], 0, None)
        >>> bigger = Measurement("trial 4", 4, {"batch_size": 64}, [104.0, 110.0], 0, None)
        >>> choice = input_only_choice([base, bigger], base)
        >>> choice.best.label, choice.fastest.label, round(choice.gain.ratio, 2)
        ('baseline', 'trial 4', 1.07)
    """
    measured = eligible(measured, baseline)
    fastest = max(measured, key=lambda m: m.selection_median)
    keeping = [m for m in measured if not training_changes(m, baseline)]
    input_only = max(keeping, key=lambda m: m.selection_median) if keeping else baseline
    if fastest is input_only:
        return InputOnlyChoice(fastest, input_only, None, None)
    least = least_change(measured, fastest, input_only, baseline)
    for changer in (least, fastest) if least is not fastest else (fastest,):
        gain = speedup(changer, input_only)
        if worth_changing_training(gain, margin):
            passed = None if changer is fastest else fastest
            return InputOnlyChoice(changer, input_only, passed, gain)
    return InputOnlyChoice(input_only, input_only, fastest, speedup(fastest, input_only))


def eligible(measured: list[Measurement], baseline: Measurement) -> list[Measurement]:
    """The measurements a recommendation may be: those whose every repeat stayed within the
    memory budgets, and the baseline (what the user runs today) whatever it used.

    A configuration that went over a budget once, even in one repeat, sits at the budget's edge
    and will go over again in the user's runs, so it is never recommended.
    """
    return [m for m in measured if m.within_budgets or m is baseline]


def least_change(
    measured: list[Measurement],
    fastest: Measurement,
    input_only: Measurement,
    baseline: Measurement,
) -> Measurement:
    """Of the configurations that change training, beat `input_only` beyond noise and are
    within noise of `fastest`, the one that changes training least (ties: the faster);
    `fastest` when none is. All by selection windows, so the tuner's confirmation cannot
    change which configuration this is.

    A change to training that buys nothing beyond noise (a doubled shuffle buffer, say) still
    costs the user something (a refill twice as long each epoch), so the smaller change wins.
    """
    candidates = [
        m
        for m in measured
        if training_changes(m, baseline)
        and _selection_beats(m, input_only)
        and not _selection_beats(fastest, m)
    ]
    if not candidates:
        return fastest
    return min(
        candidates,
        key=lambda m: (training_distance(m.knobs, baseline.knobs), -m.selection_median),
    )


def _selection_beats(new: Measurement, old: Measurement) -> bool:
    """Whether `new`'s selection windows beat `old`'s beyond the noise of both."""
    return speedup(_selection(new), _selection(old)).gains


def _selection(measurement: Measurement) -> Measurement:
    return dataclasses.replace(measurement, confirmed=[])


def _rate_range(rates: Sequence[float]) -> str:
    """`3,129` for one rate (or equal ones), `3,129 to 3,131` for a range."""
    low, high = f"{min(rates):,.0f}", f"{max(rates):,.0f}"
    return low if low == high else f"{low} to {high}"


def keeps_baseline(best: Measurement, vs_baseline: Speedup) -> bool:
    """Whether the recommendation is the baseline: nothing beat it beyond the measured noise,
    or the chosen configuration, confirmed, ran measurably slower than it.

    Then nothing is handed over (no snippet, no patch), whichever configuration ran fastest.
    """
    return best.label == "baseline" or not vs_baseline.gains


def recommend(
    best: Measurement,
    vs_baseline: Speedup,
    changes: list[str],
    input_only: Measurement | None = None,
    gain: Speedup | None = None,
    fastest: Measurement | None = None,
    baseline: Measurement | None = None,
) -> str:
    """One sentence a person can act on: which configuration to use, and what to check.

    With `input_only` and `gain` (the input-only rule's figures), a recommendation that
    changes training also names the best configuration that leaves training as written (or,
    with `baseline`, says none beat the baseline beyond the noise), and with `fastest` the
    faster one it passed over for changing training more.
    """
    if best.label != "baseline" and vs_baseline.significant and vs_baseline.ratio < 1:
        text = (
            f"Keep your baseline: {configuration_name(best)}, the one chosen, ran at "
            f"{vs_baseline.describe()} of it once confirmed on fresh windows, so no "
            "configuration is a measured gain."
        )
        chose = best.examples_per_sec
        if best.confirmed and chose and max(best.confirmed) < min(chose):
            text += (
                f" The runs that chose it measured {_rate_range(chose)} examples/s, its "
                f"confirmed ones {_rate_range(best.confirmed)}: it ran "
                "at two speeds here; tune again with more --rounds to tell which is usual."
            )
        return text
    if keeps_baseline(best, vs_baseline):
        return "Keep your baseline: no configuration beat it by more than the measured noise " + (
            f"(±{vs_baseline.spread:.0%})."
            if vs_baseline.spread_known
            else "(its spread is unknown: a figure from a single run)."
        )
    text = f"Use {configuration_name(best)}: {vs_baseline.describe()} your baseline's examples/s."
    if changes:
        text += (
            f" It changes {', '.join(changes)}, which alters training, not only speed: "
            "check accuracy before adopting it."
        )
        if input_only is not None and gain is not None and input_only is not best:
            text += _input_only_words(input_only, gain, baseline)
        if fastest is not None and fastest is not best:
            text += (
                f" The fastest, {configuration_name(fastest)}, changes training more for a figure "
                f"within the noise of this one ({speedup(fastest, best).describe()})."
            )
    elif gain is not None and not gain.significant:
        text += (
            " A configuration that changes training ran faster, but within the noise "
            f"({gain.describe()}), so it is not recommended."
        )
    elif gain is not None and gain.ratio > 1:
        text += (
            f" A configuration that changes training ran {gain.describe()} as fast, short of "
            "the margin a change to training must clear (--training-change-margin), so it is "
            "not recommended."
        )
    return text


def _input_only_words(input_only: Measurement, gain: Speedup, baseline: Measurement | None) -> str:
    """The best configuration that leaves training as written, where it beat the baseline
    beyond the noise; else that none did (the baseline's own figure then stands)."""
    if baseline is not None and not speedup(input_only, baseline).gains:
        return " Leaving training as written, no configuration beat your baseline beyond the noise."
    return (
        f" Leaving training as written, {configuration_name(input_only)} is the best: "
        f"the change to training gains {gain.describe()} over it."
    )


def configuration_name(measurement: Measurement) -> str:
    """How a recommendation names a measured configuration: a reference in its words, a trial
    by its knobs (`trial 5's knobs`), a variant no trial ran by its label."""
    if (name := reference_name(measurement.label)) is not None:
        return name
    if measurement.trial_number is None:
        return f"the knobs of {measurement.label}"
    return f"{measurement.label}'s knobs"
