"""What a tune's next trials and re-measurement runs should take, priced by its finished ones.

Each completed trial's duration (start-up included) is priced less the work the next run will
not repeat: the baseline trial alone analyses the stages and probes the training settings, and
a re-measurement run measures the end-to-end phase alone, not the pipeline-only and
compute-only phases. Pricing every run at the first trial's duration said a tune of a few
minutes would take three times as long.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import TYPE_CHECKING

from tfperf.results import ProfileResult
from tfperf.study.records import TrialRecord

if TYPE_CHECKING:
    import optuna


@dataclasses.dataclass(frozen=True)
class Prices:
    """Seconds per run, start-up included, as the study's completed trials took.

    Attributes:
        trial_s: a search trial: the median of the completed trials, each less what only
            the baseline trial does (the stage analysis, the training probes).
        rerun_s: a re-measurement run: the median of the same, each less also the phases a
            re-measurement does not measure.
        rerun_by_trial: each completed trial's own re-measurement price, by trial number.
    """

    trial_s: float
    rerun_s: float
    rerun_by_trial: dict[int, float]

    def rerun_of(self, trial_number: int | None) -> float:
        """A re-measurement run of the configuration trial `trial_number` measured: priced by
        that trial, else by the study's median."""
        if trial_number is None:
            return self.rerun_s
        return self.rerun_by_trial.get(trial_number, self.rerun_s)


def prices(study: optuna.Study) -> Prices | None:
    """The study's prices (`Prices`); None before a trial has completed. A caller that asks
    after every trial keeps a `Pricing`, which reads each trial's profile once."""
    return Pricing().of(study)


class Pricing:
    """The study's `Prices`, each completed trial priced once: what it measured never changes,
    and its stored profile is the costly part to read."""

    def __init__(self) -> None:
        self._priced: dict[int, tuple[float, float]] = {}

    def of(self, study: optuna.Study) -> Prices | None:
        """The study's prices now (`Prices`); None before a trial has completed."""
        import optuna

        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if trial.number in self._priced:
                continue
            if trial.datetime_start is None or trial.datetime_complete is None:
                continue
            took = (trial.datetime_complete - trial.datetime_start).total_seconds()
            self._priced[trial.number] = priced(took, TrialRecord.from_trial(trial).profile())
        if not self._priced:
            return None
        searched = [search for search, _ in self._priced.values()]
        rerun = {number: rerun for number, (_, rerun) in self._priced.items()}
        return Prices(statistics.median(searched), statistics.median(rerun.values()), rerun)


def priced(took_s: float, profile: ProfileResult | None) -> tuple[float, float]:
    """A trial of `took_s` seconds that measured `profile`, as (a search trial's seconds, a
    re-measurement run's seconds). A part that does not fit in `took_s` is not taken off.

    Example:
        >>> priced(12.0, None)
        (12.0, 12.0)
    """
    if profile is None:
        return took_s, took_s
    once = profile.stages.duration_s if profile.stages is not None else 0.0
    once += sum(rate.duration_s or 0.0 for rate in profile.training_rates)
    search = took_s - once if once < took_s else took_s
    unmeasured = sum(
        phase.warmup.duration_s + phase.duration_s
        for phase in (profile.pipeline_only, profile.compute_only)
        if phase is not None
    )
    return search, search - unmeasured if unmeasured < search else search
