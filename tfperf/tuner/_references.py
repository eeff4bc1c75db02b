"""The study's references and the pipeline model that proposes the third one.

Every study measures the file's `BASELINE` and everything on AUTOTUNE first. After the
baseline trial (run with the stage analysis) the model turns its profile into a `Guide`
(`tfperf.tuner._guide`): the limit, thread counts, and "tfperf's estimate", the configuration
the model predicts best, which is queued as the third reference. `References` keeps the three,
the guide (shared through the study by every tuner on it), the ranges TPE searches from it, and
the estimate's predicted vs measured rate for the result.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tfperf.hardware import Machine
from tfperf.knobs import Domain, IntRange, Knobs, cycle_conflicts
from tfperf.results import Estimate, Limit, Measurement, ProfileResult
from tfperf.study import (
    AUTOTUNE_REF,
    BASELINE,
    ESTIMATE_REF,
    Claim,
    Ledger,
    TrialRecord,
    feasible_complete,
    reference_trial,
)
from tfperf.tuner._guide import Guide, guided_ranges, make_guide
from tfperf.tuner._search import autotune_knobs

if TYPE_CHECKING:
    import optuna

__all__ = ["References"]

logger = logging.getLogger(__name__)

_ESTIMATE_SOURCE = "tfperf's estimate"


class References:
    """The references of one tuner's study and the model's guide.

    Args:
        baseline: the file's `BASELINE` knobs.
        machine: the machine the trials run on (its cores size CPU-bound stages).
        space: the search space, as built for this tuner.
        guidable: the knobs tfperf sizes itself (not the file's `SEARCH_SPACE`, not a `--fix`).
    """

    def __init__(
        self, baseline: Knobs, machine: Machine, space: dict[str, Domain], guidable: list[str]
    ) -> None:
        self.baseline = baseline
        self.machine = machine
        self.space = space
        self.guidable = guidable
        self.guide: Guide | None = None
        self.knobs: dict[str, Knobs] = {BASELINE: baseline}
        autotune = autotune_knobs(baseline)
        if autotune != baseline:
            self.knobs[AUTOTUNE_REF] = autotune

    @property
    def limit(self) -> Limit | None:
        return self.guide.limit if self.guide is not None else None

    def from_baseline(self, ledger: Ledger, result: ProfileResult) -> None:
        """Builds the guide from the baseline's stage analysis and queues the estimate."""
        guide = make_guide(result, self.machine, self.baseline, self.space, self.guidable)
        if guide is None:
            logger.info("no pipeline model: the baseline's stage analysis measured nothing")
            return
        knobs = Knobs.from_mapping(guide.estimate.knobs, source=_ESTIMATE_SOURCE)
        self.guide = guide
        if knobs not in self.knobs.values():
            ledger.enqueue_reference(ESTIMATE_REF, knobs, guide.to_dict())
            self.knobs[ESTIMATE_REF] = knobs

    def load(self, ledger: Ledger) -> None:
        """The guide another tuner (or an earlier run) stored in the study, if any."""
        stored = ledger.guide()
        if stored is None:
            return
        self.guide = Guide.from_dict(stored)
        if reference_trial(ledger.study, ESTIMATE_REF) is not None:
            knobs = Knobs.from_mapping(self.guide.estimate.knobs, source=_ESTIMATE_SOURCE)
            self.knobs[ESTIMATE_REF] = knobs

    def claimed_knobs(self, ledger: Ledger, claim: Claim) -> Knobs | None:
        """The knobs of a claimed reference trial (None for a trial the sampler proposes)."""
        label = claim.reference
        if label is None:
            return None
        if label in self.knobs:
            return self.knobs[label]
        if label == ESTIMATE_REF:
            self.load(ledger)
        return TrialRecord.from_user_attrs(claim.trial.user_attrs).knobs

    def ranges(self, ledger: Ledger) -> dict[str, IntRange]:
        """The ranges TPE searches now: the model's, widened where the best trial sits."""
        if self.guide is None:
            self.load(ledger)
        if self.guide is None:
            return {}
        trials = feasible_complete(ledger.study)
        best = max(trials, key=lambda t: t.values[0], default=None)
        knobs = TrialRecord.from_trial(best).knobs if best is not None else None
        return guided_ranges(self.guide, knobs)

    def conflicts(self, knobs: Knobs) -> list[str]:
        """Why tf.data would refuse `knobs` (an interleave's calls above its cycle), if it would."""
        interleave = self.guide is not None and self.guide.knob_interleave
        return cycle_conflicts(knobs, knob_interleave=interleave, cores=self.machine.cpu_count)

    def estimate(self, study: optuna.Study, measured: Measurement | None) -> Estimate | None:
        """The estimate, predicted vs measured (re-measured median, else its trial's figure)."""
        if self.guide is None:
            return None
        number = reference_trial(study, ESTIMATE_REF)
        rate = measured.median if measured is not None else None
        if rate is None and number is not None:
            trial = study.trials[number]
            rate = trial.values[0] if trial.values else None
        return Estimate(
            knobs=self.guide.estimate.knobs,
            predicted_examples_per_sec=self.guide.estimate.predicted_examples_per_sec,
            trial_number=number,
            measured_examples_per_sec=rate,
        )

    def over_limit(self, rate: float) -> float | None:
        """`rate` as a fraction of the limit, when there is one."""
        limit = self.limit
        return rate / limit.examples_per_sec if limit and limit.examples_per_sec > 0 else None
