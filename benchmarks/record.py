"""What one benchmark run measured, as plain dataclasses that round-trip through JSON.

No TensorFlow and no Optuna here: `python -m benchmarks --render RESULTS.json` re-renders a
saved run anywhere. Throughputs are examples per second, memory is bytes, times are seconds;
spreads are relative (0.05 = 5%). The statistics the report needs are small pure functions
below, so they are tested by equality.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.answer_record import ProfileAgainstTune, TimeSplit
from benchmarks.emulated_step_record import EmulatedStepRow
from benchmarks.generated_record import KnownTruthCheck
from benchmarks.lock_wait_record import LockWaitRow
from benchmarks.offload_record import OffloadResult
from benchmarks.torch_script_record import TorchScript
from benchmarks.zero_change_record import ZeroChange
from tfperf.errors import ResultFileError
from tfperf.results._json import JsonRecord
from tfperf.results.tune import TRAINING_CHANGE_MARGIN

BENCH_SCHEMA_VERSION = 1
#: "Within 5% of the final best": the tolerance of `first_within`.
CONVERGENCE_TOLERANCE = 0.05
#: What `BenchRecord.commit` ends with when the working tree had uncommitted changes.
DIRTY = "+dirty"


@dataclasses.dataclass
class Figure:
    """One configuration measured `repeats` times, interleaved with the others of its pipeline.

    Each list holds one value per completed repeat, in the order they ran: end-to-end,
    pipeline-only and compute-only examples/s, and the mean CPU use of the run (100 = one
    core). `failures` holds the reason of every repeat that did not complete.
    """

    label: str
    knobs: dict[str, Any]
    end_to_end: list[float]
    pipeline_only: list[float]
    compute_only: list[float]
    cpu_percent: list[float]
    peak_rss_bytes: int
    failures: list[str] = dataclasses.field(default_factory=list)
    # Added with restart accounting (optional, so older RESULTS.json still load): per run that
    # crossed a dataset restart, seconds per restart beyond the steady wait, and what refills.
    restart_s: list[float] = dataclasses.field(default_factory=list)
    restart_stage: str | None = None
    epoch_steps: int | None = None
    weighted_wait: list[float] = dataclasses.field(default_factory=list)
    # Added with the interference note (optional, so older RESULTS.json still load): per run,
    # how many times longer an example computed end to end than on cached batches
    # (`ProfileResult.compute_slowdown`).
    compute_slowdown: list[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Trial:
    """One finished trial of the study: its end-to-end examples/s, or None with its status."""

    number: int
    status: str
    examples_per_sec: float | None
    elapsed_s: float | None
    reference: str | None = None
    #: The median of the study's re-measurement of this trial's configuration (its finalists
    #: and references, measured again side by side before the winner is declared); None when
    #: it was not re-measured, and in records from before it was kept.
    remeasured: float | None = None
    #: For the configuration the study chose (measured again after the choice, so that
    #: `remeasured` is the confirmed median): the median it was chosen on; else None.
    selected: float | None = None
    #: The spread of the windows `remeasured` is the median of (half their range over it);
    #: None when not re-measured, and in records from before it was kept.
    remeasured_spread: float | None = None

    @property
    def figure(self) -> float | None:
        """The best figure of this configuration: its re-measured median, else its trial's."""
        return self.remeasured if self.remeasured is not None else self.examples_per_sec


@dataclasses.dataclass
class ModelFigures:
    """What tfperf's pipeline model said before the search, and how the estimate held.

    `limit` (examples/s) is the rate no configuration can exceed on the machine, `bound_by`
    what binds it (a `tfperf.results.LimitBound` value) and `explanation` the sentence that
    says what would lift it. `predicted` is the rate the model predicted for its estimate,
    `measured` the estimate's measured rate (its re-measured median, else its trial's figure),
    `trial` the study trial that measured it.
    """

    limit: float
    bound_by: str
    explanation: str
    predicted: float | None = None
    measured: float | None = None
    trial: int | None = None
    #: The limit above holds under the tuned configuration's training setting (batch size,
    #: precision); `baseline_limit` is the one under the baseline's, when that differs.
    #: `setting_probed` False: the tuned setting was never probed, so `limit` is the
    #: baseline's and tuned/limit has no meaning.
    baseline_limit: float | None = None
    setting_probed: bool = True
    #: The second estimate (training changed): predicted, measured, its trial, what it changes.
    second_predicted: float | None = None
    second_measured: float | None = None
    second_trial: int | None = None
    second_changes: list[str] = dataclasses.field(default_factory=list)
    #: The pooled estimate (the last estimate on the cores its input spends): its private
    #: pool, predicted and measured rates and trial. Records before the prediction was held
    #: to the pool's cores carry none: the estimate's it varies.
    pooled_pool: int | None = None
    pooled_predicted: float | None = None
    pooled_measured: float | None = None
    pooled_trial: int | None = None
    #: The runner-up (the training setting the model could not tell from the second's):
    #: predicted, measured, its trial, and its setting as "name value" pairs.
    runner_up_predicted: float | None = None
    runner_up_measured: float | None = None
    runner_up_trial: int | None = None
    runner_up_setting: list[str] = dataclasses.field(default_factory=list)
    #: A parallel stage whose function calls Python (`tfperf.results.Limit.python_stage`).
    python_stage: str | None = None
    #: What the search added to the model's best estimate (`tfperf.results.SearchGain`): the
    #: tuned configuration over it, both confirmed side by side; None when it was the answer.
    search_gain_estimate: str | None = None
    search_gain: float | None = None
    search_gain_spread: float | None = None
    search_gain_significant: bool | None = None


@dataclasses.dataclass
class TrainingChoice:
    """The input-only rule: whether the recommendation changes training, and why.

    `input_only` is the label of the best configuration that leaves training as written;
    `fastest` the label of a faster one that changes training (the recommendation, when it
    changes training; None when the fastest leaves training as written); `gain` and `spread`
    its ratio over `input_only`, with `significant` saying whether it is beyond the noise (the
    rule recommends it only then). `passed_over` is the label of a still faster configuration
    that changes training more, for a figure within noise of the recommendation
    (`tfperf.results.least_change`), and `passed_over_gain` its ratio over it.
    """

    input_only: str
    fastest: str | None = None
    gain: float | None = None
    spread: float | None = None
    significant: bool | None = None
    passed_over: str | None = None
    passed_over_gain: float | None = None

    @property
    def gain_words(self) -> str:
        """The gain as a ratio ("1.18x"): to three decimals where two would round a gain
        short of the margin up to it ("1.198x", not "1.20x" beside "short of the 1.2x")."""
        if self.gain is None:
            return "n/a"
        short = self.gain < TRAINING_CHANGE_MARGIN
        places = 3 if short and round(self.gain, 2) >= TRAINING_CHANGE_MARGIN else 2
        return f"{self.gain:.{places}f}x"

    @property
    def kept_because(self) -> str:
        """Why a faster change to training was not recommended, in words: its gain was within
        the noise, or beyond it but short of the margin (the tuner's default, as the bench
        runs it)."""
        if self.significant:
            return (
                f"beyond the noise but short of the {TRAINING_CHANGE_MARGIN:g}x a change to "
                "training must clear"
            )
        return "within the noise"


@dataclasses.dataclass
class Tuning:
    """How the study went: its budget, its cost, and every trial's figure.

    `model` and `training` are None in records from before the pipeline model (or when the
    baseline's stage analysis measured nothing).
    """

    trials_budget: int
    steps: int
    wall_s: float
    search_s: float
    ram_budget_bytes: int | None
    trials: list[Trial]
    best_label: str
    recommendation: str
    changes_training: list[str]
    model: ModelFigures | None = None
    training: TrainingChoice | None = None
    #: Each phase's minimum measured seconds (`tfperf tune --min-seconds`); 0 in records from
    #: before the floor, whose phases measured exactly `steps`.
    min_seconds: float = 0.0
    #: Where the tune's wall time went, read from its study; None in records from before it.
    split: TimeSplit | None = None
    #: The chosen configuration's confirmed median and its spread, from tfperf's answer: the
    #: only figures of a variant no trial ran (a trial's knobs with a change to training
    #: reverted); None in records from before they were kept.
    chosen_median: float | None = None
    chosen_spread: float | None = None


@dataclasses.dataclass
class PipelineRecord:
    """One benchmark pipeline: its tuning, and its final side-by-side figures."""

    name: str
    bottleneck: str
    expectation: str
    beyond_autotune: bool
    steps: int
    repeats: int
    tuning: Tuning
    baseline: Figure
    autotune: Figure
    tuned: Figure
    #: The goal for tuned/AUTOTUNE when the pipeline's gain is known to be large (issue 12:
    #: remote_storage >= 5x); None for the plain goal.
    autotune_goal: float | None = None
    #: What the second reference is: tf.data's AUTOTUNE, or a framework's own rule (PyTorch's
    #: num_workers = cores), in whose column it stands.
    reference: str = "AUTOTUNE"


@dataclasses.dataclass
class Repeatability:
    """One configuration measured several times in a row: the noise of a single figure."""

    pipeline: str
    knobs: dict[str, Any]
    end_to_end: list[float]


@dataclasses.dataclass
class OverheadRow:
    """The profiler's cost on one workload (see `benchmarks.overhead`)."""

    workload: str
    steps: int
    step_ms_bare: float
    step_ms_profiled: float
    overhead_pct: float
    overhead_no_probes_pct: float
    spread_bare_pct: float
    spread_profiled_pct: float
    instrumentation_pct: float


@dataclasses.dataclass
class Overhead:
    """Per-step instrumentation, one sampler pass, and A/B timings per workload."""

    instrumentation_us_per_step: float
    sampler_us_per_sample: float
    sampler_interval_ms: float
    steps: int
    repeats: int
    rows: list[OverheadRow]


@dataclasses.dataclass
class Machine:
    """Where the run happened."""

    cpu_model: str
    cpu_count: int
    total_ram_bytes: int
    bf16_flags: list[str]
    platform: str
    python_version: str
    tensorflow_version: str | None
    tfperf_version: str


@dataclasses.dataclass
class Failure:
    """A pipeline (or the overhead benchmark) that could not be measured, and why."""

    name: str
    reason: str


@dataclasses.dataclass
class BenchRecord(JsonRecord):
    """A whole benchmark run: what ran, where, and every figure the report shows."""

    command: str
    started_at: str
    wall_s: float
    smoke: bool
    machine: Machine
    settings: dict[str, Any]
    pipelines: list[PipelineRecord]
    repeatability: Repeatability | None
    overhead: Overhead | None
    failures: list[Failure] = dataclasses.field(default_factory=list)
    zero_change: ZeroChange | None = None  # the plain-file twin's hand-over (zero_change.py)
    # The emulated accelerator step against its known answer (emulated_accelerator.py).
    emulated_step: list[EmulatedStepRow] = dataclasses.field(default_factory=list)
    # remote_storage's Python fetch alone by thread count, its lock waits (lock_wait.py).
    lock_wait: list[LockWaitRow] = dataclasses.field(default_factory=list)
    # tfperf offload's prediction against the real local service, k = 1 and 2 (offload.py).
    offload: OffloadResult | None = None
    # The PyTorch script tuned with --write-patch, as written against patched (torch_script.py).
    torch_script: TorchScript | None = None
    # The known-truth family's checks (generated.py).
    known_truth: list[KnownTruthCheck] = dataclasses.field(default_factory=list)
    # One default profile of the quickstart against an 8-trial tune of it (answer.py).
    profile_against_tune: ProfileAgainstTune | None = None
    # The commit measured (`git rev-parse --short HEAD`), ending with DIRTY when the tree had
    # uncommitted changes; None where git could not tell.
    commit: str | None = None
    schema_version: int = BENCH_SCHEMA_VERSION

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRecord:
        return cls.validate(data)

    @classmethod
    def load(cls, path: str | Path) -> BenchRecord:
        """Reads a record written by `save`.

        Raises:
            ResultFileError: the file is missing, not JSON, or not a benchmark record.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ResultFileError(f"cannot read the benchmark record {path}: {error}") from None
        return cls.from_dict(data)


def median(values: Sequence[float]) -> float:
    """The median; 0 for no values."""
    return statistics.median(values) if values else 0.0


def spread(values: Sequence[float]) -> float:
    """Half the range over the median, as tfperf reports noise; 0 for fewer than two values."""
    middle = median(values)
    if len(values) < 2 or middle <= 0:
        return 0.0
    return (max(values) - min(values)) / 2 / middle


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean; None for fewer than two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A ratio of medians and its noise (the sum of both figures' relative spreads), read as
    tfperf's own reports read a speed-up (`tfperf.results.speedup`)."""

    value: float
    spread: float

    @property
    def plus_minus(self) -> float:
        """The ratio's noise in its own units: the "± x" printed beside it."""
        return self.value * self.spread

    @property
    def significant(self) -> bool:
        """Whether 1 lies outside `value ± plus_minus`."""
        return abs(self.value - 1) > self.plus_minus


def ratio(new: Sequence[float], old: Sequence[float]) -> Ratio | None:
    """`median(new) / median(old)` with its spread; None when either is empty or zero."""
    if not new or not old or median(old) <= 0:
        return None
    return Ratio(median(new) / median(old), spread(new) + spread(old))


def first_within(
    values: Sequence[float | None],
    tolerance: float = CONVERGENCE_TOLERANCE,
    best: float | None = None,
) -> int | None:
    """Index of the first value within `tolerance` of the final best; None if none is set.

    `values` are in trial order; None marks a trial without a figure (pruned, failed, over a
    budget). `best` is the final best: the figure of the configuration the study chose after
    re-measuring its finalists (`chosen_rate`); None takes the highest value. So this says how
    early the search found a configuration as good as its answer.

    Example:
        >>> first_within([100.0, None, 190.0, 200.0])
        2
        >>> first_within([100.0, None, 190.0, 200.0], best=180.0)
        2
    """
    measured = [value for value in values if value is not None]
    if not measured:
        return None
    threshold = (1 - tolerance) * (best if best is not None else max(measured))
    return next(i for i, value in enumerate(values) if value is not None and value >= threshold)


def shared_cpu_bound(pipeline_only: float, compute_only: float) -> float | None:
    """End-to-end examples/s if input and model each needed every core for their own rate.

    When both stages are CPU-bound on the same cores, an example costs `1/P` of the machine's
    time in the pipeline and `1/C` in the model, so the best end to end is `1/(1/P + 1/C)`,
    below `min(P, C)`. None when either figure is missing.

    Example:
        >>> shared_cpu_bound(300.0, 600.0)
        200.0
    """
    if pipeline_only <= 0 or compute_only <= 0:
        return None
    return 1 / (1 / pipeline_only + 1 / compute_only)


def geomean(values: Sequence[float]) -> float | None:
    """The geometric mean of positive values; None when there is none.

    Example:
        >>> geomean([1.0, 4.0])
        2.0
    """
    positive = [value for value in values if value > 0]
    if not positive:
        return None
    return math.exp(statistics.fmean(math.log(value) for value in positive))


def chosen_trial(trials: Sequence[Trial], best_label: str) -> Trial | None:
    """The trial that measured the configuration the study chose; None when none did.

    `best_label` is the re-measurement's label: a reference ("baseline", "autotune",
    "estimate", "estimate-training"), "trial N" (N counting from 0, as Optuna numbers), or a
    variant no trial ran ("trial N with mixed_precision as written").
    """
    number = best_label.removeprefix("trial ")
    if number.isdigit():
        return next((t for t in trials if t.number == int(number)), None)
    return next((t for t in trials if t.reference == best_label), None)


def chosen_rate(tuning: Tuning) -> float | None:
    """The figure of the configuration the study chose; None without one.

    The chosen configuration was re-measured and then confirmed, so this is the median of the
    windows measured after it was chosen (`Measurement.median`). Its own trial figure was among
    the highest of the study (that is how it became a finalist) and its selection median the
    highest of the finalists', so both are biased high, and the highest trial figure more so:
    none is a fair bar for the other trials. Records from before `Tuning.chosen_median` read
    it from the trial that ran the configuration (`Trial.figure`).
    """
    if tuning.chosen_median is not None:
        return tuning.chosen_median
    chosen = chosen_trial(tuning.trials, tuning.best_label)
    return chosen.figure if chosen is not None else None


def convergence(tuning: Tuning) -> int | None:
    """Index of the first trial whose configuration came within 5% of the chosen one's figure.

    Each trial counts by its best figure (`Trial.figure`: the re-measured median where the
    study measured its configuration again, else its trial's single figure). A single figure
    swings ~14% between processes on a 2-core machine, so a configuration as good as the
    answer can draw a window 10% low in its trial and be re-measured within 2% of the
    winner: it was found then, and this counts it there.
    """
    return first_within([trial.figure for trial in tuning.trials], best=chosen_rate(tuning))


def single_figure_convergence(tuning: Tuning) -> int | None:
    """`convergence` by trial figures alone (each trial's one window, the chosen one's too;
    a variant no trial ran has only its confirmed median)."""
    chosen = chosen_trial(tuning.trials, tuning.best_label)
    best = chosen.examples_per_sec if chosen is not None else tuning.chosen_median
    return first_within([trial.examples_per_sec for trial in tuning.trials], best=best)
