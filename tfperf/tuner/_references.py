"""The study's references and the pipeline model that proposes the third one.

Every study measures the file's `BASELINE` and everything on AUTOTUNE first. After the
baseline trial (run with the stage analysis) the model turns its profile into a `Guide`
(`tfperf.tuner._guide`): the limit, thread counts, and "tfperf's estimate", the configuration
the model predicts best, which is queued as the third reference. `References` keeps the three,
the guide (shared through the study by every tuner on it), the ranges TPE searches from it, and
the estimate's predicted vs measured rate for the result.

Once the estimate has run, `refit` takes a second look: the CPU roofline is restated with the
input's CPU per example measured nearest the limit (the fastest reference's pipeline-only phase,
`tfperf.measure.nearest_limit_input_cpu`), and the second estimate (training changed) is sized
from the restated model and queued then (the first look's when nothing can be restated), with
the fifth reference after it: the same configuration with its computing stages on a pool of
the cores its input spends (`tfperf.tuner._guide.pool_estimate`), which the model prices only
by those cores and the study measures, and, when the model cannot tell the second's training setting
from the next larger batch, the sixth: the fifth's shape under that batch (the runner-up). The
estimate's own predicted rate stays the one made before it ran, so predicted vs measured still
shows the model's error.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tfperf.hardware import Machine
from tfperf.knobs import Domain, IntRange, Knobs, cycle_conflicts
from tfperf.measure import nearest_limit_input_cpu
from tfperf.results import Estimate, Limit, Measurement, ProfileResult
from tfperf.study import (
    AUTOTUNE_REF,
    BASELINE,
    ESTIMATE_REF,
    POOL_ESTIMATE_REF,
    RUNNER_UP_REF,
    TRAINING_ESTIMATE_REF,
    Claim,
    Ledger,
    TrialRecord,
    feasible_complete,
    reference_trial,
)
from tfperf.tuner._guide import Guide, guided_ranges, make_guide
from tfperf.tuner._search import autotune_knobs
from tfperf.tuner._training import limit_for, training_settings

if TYPE_CHECKING:
    import optuna

__all__ = ["References"]

logger = logging.getLogger(__name__)

_ESTIMATE_SOURCE = "tfperf's estimate"
_SECOND_SOURCE = "tfperf's estimate with training changed"
_POOL_SOURCE = "tfperf's estimate on the cores its input spends"
_RUNNER_UP_SOURCE = "tfperf's estimate under the runner-up training setting"
#: The references queued once the estimate has run: label, `Guide` field, source for messages.
_LATER = (
    (TRAINING_ESTIMATE_REF, "training_estimate", _SECOND_SOURCE),
    (POOL_ESTIMATE_REF, "pool_estimate", _POOL_SOURCE),
    (RUNNER_UP_REF, "runner_up_estimate", _RUNNER_UP_SOURCE),
)


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

    def training_settings(self) -> tuple[dict[str, Any], ...]:
        """The training settings the baseline trial times the model under (none if all fixed)."""
        return training_settings(self.baseline, self.space)

    def from_baseline(self, ledger: Ledger, result: ProfileResult) -> None:
        """Builds the guide from the baseline's stage analysis and queues the estimates."""
        guide = make_guide(result, self.machine, self.baseline, self.space, self.guidable)
        if guide is None:
            logger.info("no pipeline model: the baseline's stage analysis measured nothing")
            return
        self.guide = guide
        if not self._queue(ledger, ESTIMATE_REF, guide.estimate, _ESTIMATE_SOURCE):
            self.refit(ledger)  # the estimate is a configuration already measured: look again now

    def refit(self, ledger: Ledger) -> None:
        """Restates the guide with the input's CPU per example measured nearest the limit, and
        queues the second estimate, the pooled one and the runner-up.

        Called once the estimate has run. Keeps the first look's estimate (its prediction was
        made before it ran). The second estimate is sized here, from the restated model: the
        baseline's roofline errs low (its CPU counts the runtime's idle threads spinning), and
        a blocking stage's threads follow it, so sized from the baseline they vary from run to
        run and fall short of what the winners run (docs/limit.md, "The second look"). The
        first look's second estimate is queued when nothing can be restated (no reference ran
        faster than the baseline, or none has CPU samples in its pipeline-only phase), or when
        the restated model proposes none. The pooled estimate (`pool_estimate`) comes from the
        same look as the second.
        """
        self.load(ledger)
        if self.guide is None:
            return
        first = self.guide
        restated = self._restated(ledger)
        source = first
        if restated is not None and (
            restated.training_estimate is not None or first.training_estimate is None
        ):
            source = restated
        self.guide = dataclasses.replace(
            restated or first,
            estimate=first.estimate,
            training_estimate=source.training_estimate,
            pool_estimate=source.pool_estimate,
        )
        kept: dict[str, Estimate | None] = {}
        for label, field, text in _LATER:
            estimate = getattr(self.guide, field)
            if _labelled(ledger.study, label) is not None:  # queued before (another tuner)
                kept[field] = getattr(first, field)
            elif estimate is not None and not self._queue(ledger, label, estimate, text):
                # A configuration already measured: nothing more to learn from running it again.
                kept[field] = None
        self.guide = dataclasses.replace(self.guide, **kept)  # type: ignore[arg-type]
        ledger.store_guide(self.guide.to_dict())

    def _restated(self, ledger: Ledger) -> Guide | None:
        """The guide made again with the input's CPU measured nearest the limit; None when no
        reference measured it (none ran faster than the baseline, or none has CPU samples)."""
        profiles = _reference_profiles(ledger)
        baseline = profiles.pop(BASELINE, None)
        if baseline is None:
            return None
        cpu = nearest_limit_input_cpu(baseline, list(profiles.values()))
        if cpu is None:
            return None
        restated = make_guide(baseline, self.machine, self.baseline, self.space, self.guidable, cpu)
        if restated is not None:
            logger.info(
                "the guide restated with %.3g ms input CPU per example (measured at %.0f "
                "examples/s)",
                cpu.s_per_example * 1e3,
                cpu.examples_per_sec,
            )
        return restated

    def _queue(self, ledger: Ledger, label: str, estimate: Estimate, source: str) -> bool:
        """Queues a reference (storing the guide with it); False when its knobs were measured."""
        assert self.guide is not None  # the guide is stored with the reference
        knobs = Knobs.from_mapping(estimate.knobs, source=source)
        if knobs in self.knobs.values():
            return False
        queued = ledger.enqueue_reference(label, knobs, self.guide.to_dict())
        self.knobs[label] = knobs
        return queued

    def load(self, ledger: Ledger) -> None:
        """The guide another tuner (or an earlier run) stored in the study, if any."""
        stored = ledger.guide()
        if stored is None:
            return
        self.guide = Guide.from_dict(stored)
        for label, field, text in ((ESTIMATE_REF, "estimate", _ESTIMATE_SOURCE), *_LATER):
            estimate = getattr(self.guide, field)
            if estimate is not None and reference_trial(ledger.study, label) is not None:
                self.knobs[label] = Knobs.from_mapping(estimate.knobs, source=text)

    def resume(self, ledger: Ledger) -> None:
        """On opening a study whose estimate failed (Ctrl-C, or lost with its tuner) before
        `refit` queued the later references: queues the first look's now.

        Called once per tuner, not before each trial: the scan of the study's trials would
        lengthen the moment between claiming a trial and recording its worker.
        """
        self.load(ledger)
        if self.guide is None or not _ended_without_refit(ledger.study):
            return
        for label, field, text in _LATER:
            estimate = getattr(self.guide, field)
            if estimate is not None:
                self._queue(ledger, label, estimate, text)

    def claimed_knobs(self, ledger: Ledger, claim: Claim) -> Knobs | None:
        """The knobs of a claimed reference trial (None for a trial the sampler proposes)."""
        label = claim.reference
        if label is None:
            return None
        if label in self.knobs:
            return self.knobs[label]
        if label == ESTIMATE_REF or label in (later for later, _, _ in _LATER):
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
        return _measured(self.guide.estimate, study, ESTIMATE_REF, measured)

    def training_estimate(
        self, study: optuna.Study, measured: Measurement | None
    ) -> Estimate | None:
        """The second estimate (training changed), predicted vs measured; None without one."""
        if self.guide is None or self.guide.training_estimate is None:
            return None
        return _measured(self.guide.training_estimate, study, TRAINING_ESTIMATE_REF, measured)

    def pool_estimate(self, study: optuna.Study, measured: Measurement | None) -> Estimate | None:
        """The pooled estimate (`tfperf.tuner._guide.pool_estimate`), predicted vs measured."""
        if self.guide is None or self.guide.pool_estimate is None:
            return None
        return _measured(self.guide.pool_estimate, study, POOL_ESTIMATE_REF, measured)

    def runner_up_estimate(
        self, study: optuna.Study, measured: Measurement | None
    ) -> Estimate | None:
        """The runner-up's estimate (`Guide.runner_up_estimate`), predicted vs measured."""
        if self.guide is None or self.guide.runner_up_estimate is None:
            return None
        return _measured(self.guide.runner_up_estimate, study, RUNNER_UP_REF, measured)

    def limit_for(self, knobs: Mapping[str, Any]) -> Limit | None:
        """The limit under the training setting `knobs` run with (None: not probed)."""
        if self.guide is None:
            return None
        return limit_for(knobs, self.baseline, self.guide.limit, self.guide.setting_limits)

    def over_limit(self, rate: float, knobs: Mapping[str, Any]) -> float | None:
        """`rate` as a fraction of the limit under `knobs`' training setting, when known."""
        limit = self.limit_for(knobs)
        return rate / limit.examples_per_sec if limit and limit.examples_per_sec > 0 else None


def _reference_profiles(ledger: Ledger) -> dict[str, ProfileResult]:
    """Reference label -> the profile its completed trial stored (the first, if repeated)."""
    found: dict[str, ProfileResult] = {}
    for trial in feasible_complete(ledger.study):
        record = TrialRecord.from_trial(trial)
        label = record.reference
        if label is not None and label not in found and (profile := record.profile()):
            found[label] = profile
    return found


def _labelled(study: optuna.Study, label: str) -> optuna.trial.FrozenTrial | None:
    """The first trial of the study queued as the reference `label`, in any state."""
    trials = study.get_trials(deepcopy=False)
    return next((t for t in trials if TrialRecord.from_trial(t).reference == label), None)


def _ended_without_refit(study: optuna.Study) -> bool:
    """Whether the estimate's trial failed (interrupted, or lost with its tuner) before any
    later reference was queued."""
    estimate = _labelled(study, ESTIMATE_REF)
    failed = estimate is not None and estimate.state.name == "FAIL"
    return failed and all(_labelled(study, label) is None for label, _, _ in _LATER)


def _measured(
    estimate: Estimate, study: optuna.Study, label: str, measured: Measurement | None
) -> Estimate:
    number = reference_trial(study, label)
    rate = measured.median if measured is not None else None
    if rate is None and number is not None:
        trial = study.trials[number]
        rate = trial.values[0] if trial.values else None
    return dataclasses.replace(estimate, trial_number=number, measured_examples_per_sec=rate)
