"""What a tuning run takes and tells: its options, the listener of a front end, its errors.

`tfperf.tuner` runs the search; these are the parts a front end (the CLI, a notebook) uses,
kept apart so the engine stays readable. `tfperf.tuner` re-exports every name.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tfperf.errors import PipelineFileError, TfperfError
from tfperf.frameworks import DeviceLayout, StrategyKind
from tfperf.knobs import Knobs
from tfperf.measure import Progress
from tfperf.pipeline import PipelineFile, strategy_function
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import TRAINING_CHANGE_MARGIN, Objective
from tfperf.study import feasible_complete, search_trials
from tfperf.study.cluster import Liveness, LostTrial
from tfperf.study.ledger import Wait
from tfperf.study.records import TrialRecord
from tfperf.trials import Budgets, TrialRequest
from tfperf.tuner._remeasure import Finalist

if TYPE_CHECKING:
    import optuna


logger = logging.getLogger("tfperf.tuner")


class TrialRunner(Protocol):
    """Runs one trial; `tfperf.trials._runner.run_trial` in production, a fake in unit tests."""

    def __call__(
        self,
        request: TrialRequest,
        budgets: Budgets,
        *,
        on_progress: Callable[[Progress], bool] | None = None,
    ) -> TrialOutcome: ...


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How long and how carefully to search. See `tfperf tune --help` for each."""

    trials: int | None = 20
    timeout_s: float | None = None
    #: Finish the whole tune, its re-measurement included, within about this many seconds
    #: (`tfperf.tuner._time_limit`); None: no limit.
    time_limit_s: float | None = None
    trial_timeout_s: float | None = 600.0
    steps: int = 50
    #: Each phase of a trial measures at least this long: a fast configuration's 50 steps can
    #: last half a second, too short a window for the host's noise (README, tune).
    min_seconds: float = 1.0
    warmup: int | None = None
    #: Steps (batches) in one epoch of the real data, by which each trial weighs the cost of a
    #: finite dataset's restarts; None: the dataset's cardinality, else one profiled pass.
    epoch_steps: int | None = None
    ram_budget_bytes: int | None = None
    gpu_memory_budget_bytes: int | None = None
    objective: Objective = Objective.THROUGHPUT
    fixes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Search input knobs alone: batch size, shuffle buffer, precision and the call sites
    #: that hold them stay at the baseline's values.
    input_only: bool = False
    #: A change to training is recommended only when it beats the best input-only
    #: configuration by this factor beyond the noise (`--training-change-margin`).
    training_change_margin: float = TRAINING_CHANGE_MARGIN
    storage: str | None = None
    study_name: str | None = None
    seed: int | None = None
    finalists: int = 3
    rounds: int = 3
    max_consecutive_failures: int = 5
    prune: bool = True
    prune_below: float = 0.5
    liveness: Liveness = dataclasses.field(default_factory=Liveness.from_environment)
    #: Every trial's logical devices (`--cpu-replicas`), and the strategy it trains under by
    #: name (`--strategy`); None: the pipeline file's own `make_strategy()`, else none.
    layout: DeviceLayout = dataclasses.field(default_factory=DeviceLayout)
    strategy: StrategyKind | None = None
    #: Emulate the accelerator (`--step-time`): every trial's step sleeps this many seconds
    #: instead of training, so the objective is the rate the input sustains feeding it.
    step_time_s: float | None = None

    def __post_init__(self) -> None:
        if self.trials is None and self.timeout_s is None and self.time_limit_s is None:
            raise ValueError(
                "give `trials`, `timeout_s` or `time_limit_s`, or the search never ends"
            )
        if self.time_limit_s is not None and not 0 < self.time_limit_s < float("inf"):
            raise ValueError(
                f"`0 < time_limit_s < inf` must hold, but got time_limit_s={self.time_limit_s}"
            )
        for name in (
            "trials",
            "steps",
            "epoch_steps",
            "finalists",
            "rounds",
            "max_consecutive_failures",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"`{name} >= 1` must hold, but got {name}={value}")
        if not 0 <= self.min_seconds < float("inf"):
            raise ValueError(
                f"`0 <= min_seconds < inf` must hold, but got min_seconds={self.min_seconds}"
            )
        if not 1 <= self.training_change_margin < float("inf"):
            raise ValueError(
                "`1 <= training_change_margin < inf` must hold, but got "
                f"training_change_margin={self.training_change_margin}"
            )
        if self.step_time_s is not None and not 0 < self.step_time_s < float("inf"):
            raise ValueError(
                f"`0 < step_time_s < inf` must hold, but got step_time_s={self.step_time_s}"
            )
        if not 0 < self.prune_below < 1:
            raise ValueError(f"`0 < prune_below < 1` must hold, but got {self.prune_below}")


def distributed(pipeline: PipelineFile, options: TuneOptions) -> bool:
    """Whether the trials train under a strategy, so the strategy knobs are searched: one is
    named (not `default`), `--cpu-replicas` above 1 asks for one, or the file defines
    `make_strategy()`. A script's own strategy shows only once it runs, so for a script
    tuned without `--strategy` they stay at the baseline's values."""
    if options.strategy is not None:
        return options.strategy is not StrategyKind.DEFAULT
    if (options.layout.cpu_replicas or 1) > 1:
        return True
    return strategy_function(pipeline.module, pipeline.path.name) is not None


@dataclasses.dataclass(frozen=True)
class Expected:
    """What is left of a run, as its trials so far took: said before it is spent.

    Attributes:
        trials_left: trials of the budget not yet finished (by every tuner on the study);
            None when only `timeout_s` ends the search.
        search_s: seconds until the search ends: the trials left at `run_s` each, or what is
            left of `timeout_s`, or of `time_limit_s` less the re-measurement.
        runs_after: the least runs of the re-measurement and the confirmation after it
            (`least_runs`: `MIN_ROUNDS` of each finalist and reference, then of the chosen
            configurations).
        run_s: one search trial's seconds, start-up included, as the study's completed
            trials took (`tfperf.study.Prices.trial_s`).
        rerun_s: one re-measurement run's seconds: the median of those this run made, else
            as the study's trials took (`tfperf.study.Prices.rerun_s`: one phase of three).
    """

    trials_left: int | None
    search_s: float
    runs_after: int
    run_s: float
    rerun_s: float

    @property
    def seconds(self) -> float:
        """Seconds until the recommendation: the search, then the re-measurement."""
        return self.search_s + self.runs_after * self.rerun_s


class TuneListener:
    """Callbacks for a front end; the library itself never prints. Every method is optional."""

    def study_ready(
        self, study: optuna.Study, storage: str, resumed: int, orphans: list[int]
    ) -> None:
        """The study is open; `resumed` trials were already finished in it."""

    def trial_started(self, number: int, label: str | None, knobs: Knobs) -> None:
        """A trial begins (label: "baseline", "autotune" or None)."""

    def trial_progress(self, progress: Progress) -> None:
        """A step of the running trial's child process."""

    def trial_finished(
        self,
        number: int,
        outcome: TrialOutcome | None,
        best: float | None,
        baseline: float | None,
    ) -> None:
        """A trial ended (outcome None when it repeated an earlier trial's knobs).

        `best` is the best feasible examples/s in the study so far, `baseline` the baseline
        trial's (None until it has completed).
        """

    def expected(self, left: Expected) -> None:
        """After each trial this tuner ran, once a trial has completed: what is left of the
        run, as the study's trials took."""

    def time_limit_reached(self, ran: int, left: Expected | None, limit_s: float | None) -> None:
        """The search stops at `time_limit_s` after `ran` trials of this run: the next trial
        and the least re-measurement after it (`left`) would not fit in the `limit_s` seconds
        left of it (negative: past it already)."""

    def remeasure_started(self, finalists: list[Finalist], rounds: int) -> None:
        """Re-measurement of the finalists begins."""

    def remeasured(self, finalist: Finalist, outcome: TrialOutcome) -> None:
        """One repeat of one finalist ended (of the confirmation's too)."""

    def trim_started(self, labels: list[str], rounds: int) -> None:
        """The answer, which changes training in several ways (`labels[0]`), is measured
        `rounds` times beside itself with each change reverted (the rest of `labels`)."""

    def confirm_started(self, labels: list[str], rounds: int) -> None:
        """The chosen configuration (`labels`: with the input-only best it was weighed
        against, when the choice changes training, and the model's best estimate) is measured
        `rounds` times more."""

    def trial_lost(self, lost: LostTrial) -> None:
        """This tuner failed a trial whose tuner died; `lost.retry` runs its knobs again."""

    def own_trial_lost(self, number: int) -> None:
        """Another tuner failed this tuner's running trial as lost (no heartbeat reached the
        storage for the grace period); its figures are dropped and its retry re-measures it."""

    def waiting(self, kind: Wait, trials: Sequence[int], hosts: Sequence[str]) -> None:
        """This tuner waits for `trials` running on `hosts` (see `Wait`)."""

    def remeasure_adopted(self, worker: Mapping[str, Any]) -> None:
        """The final figures come from the re-measurement another tuner (`worker`) stored."""

    def hardware_mixed(self, groups: Mapping[str, Sequence[str]]) -> None:
        """The study's trials ran on different hardware: hosts by hardware description."""
        listed = "; ".join(f"{', '.join(hosts)}: {kind}" for kind, hosts in groups.items())
        logger.warning(
            "This study mixes machines, so its timings are not comparable across them (%s). "
            "Compare trials per host, or give each kind of machine its own --study.",
            listed,
        )


class TuneInterrupted(TfperfError):
    """Ctrl-C: the running trial was recorded as interrupted; finished trials are kept."""


class TooManyFailures(TfperfError):
    """Several trials in a row failed: the pipeline or the budgets need attention."""


class OverBudget(TfperfError):
    """Every trial that ran went over a memory budget: no configuration fits, so there is
    nothing to re-measure or recommend."""


#: A trial stopped at a budget: a measured configuration that does not fit, not a failure.
BUDGET_TRIPS = (TrialStatus.RAM_BUDGET, TrialStatus.GPU_BUDGET)


def check_some_fit(study: optuna.Study, budgets: Budgets) -> None:
    """Raises `OverBudget`, naming the budget and the smallest peak measured, when trials
    ended over a memory budget and none completed within the budgets.

    Without this the re-measurement runs the baseline over the same budget again and the
    study ends in "the baseline failed in every re-measurement", which hides the cause.
    """
    if feasible_complete(study):
        return
    records = [TrialRecord.from_trial(trial) for trial in search_trials(study)]
    tripped = [r for r in records if r.status in BUDGET_TRIPS]
    if not tripped:
        return  # nothing ran to a budget: the failures say why (NothingCompleted, reasons)
    ram = [r.peak_rss_bytes for r in tripped if r.status is TrialStatus.RAM_BUDGET]
    gpu = [r.peak_gpu_bytes for r in tripped if r.status is TrialStatus.GPU_BUDGET]
    named = [
        _over("--ram-budget", budgets.ram_bytes, "RAM", ram),
        _over("--gpu-memory-budget", budgets.gpu_memory_bytes, "GPU memory", gpu),
    ]
    causes = "; ".join(text for text in named if text)
    raise OverBudget(
        f"every trial of study {study.study_name!r} that ran went over a memory budget "
        f"({len(tripped)} of {len(records)}: {causes}), so no configuration fits and there is "
        "nothing to re-measure or recommend. Raise the budget above the smallest peak, or make "
        "the pipeline hold less (a smaller shuffle buffer, prefetch or cache), then run the "
        "same command again to resume."
    )


def _over(flag: str, budget: int | None, what: str, peaks: list[int | None]) -> str:
    from tfperf.units import format_bytes

    if not peaks:
        return ""
    limit = format_bytes(budget) if budget is not None else "its default"
    known = [peak for peak in peaks if peak]
    smallest = f", the smallest peak {what} measured {format_bytes(min(known))}" if known else ""
    return f"{flag} {limit}{smallest}"


def tally(
    outcome: TrialOutcome | None, failures: list[str], most: int, *, feasible_found: bool = False
) -> None:
    """Records a trial's outcome in `failures` (the failures in a row so far).

    The guard stops a study whose pipeline or budgets cannot work. Once a configuration within
    the budgets has been measured (`feasible_found`) the budgets are proven workable, and a
    trial over one is the search probing the budget's edge (TPE's constraint learns from it):
    it is left out of the count, neither a failure nor a success.

    Raises:
        PipelineFileError: the outcome is fatal (the file itself is broken).
        TooManyFailures: `most` trials in a row failed.
    """
    if outcome is None or outcome.status in (TrialStatus.COMPLETE, TrialStatus.PRUNED):
        failures.clear()
        return
    if outcome.status is TrialStatus.FATAL:
        raise PipelineFileError(outcome.reason)
    if outcome.status in BUDGET_TRIPS and feasible_found:
        return
    failures.append(f"{outcome.status.value}: {outcome.reason}")
    if len(failures) >= most:
        raise TooManyFailures(
            f"{len(failures)} trials in a row failed, so the study stopped. Last reasons:\n"
            + "\n".join(f"  - {reason}" for reason in failures[-3:])
            + "\nFix the pipeline or raise the budgets (--ram-budget, --trial-timeout), "
            "then run the same command again to resume."
        )
