"""The study's references, and when the pipeline model's proposals join them.

Every study measures the file's `BASELINE` and everything on AUTOTUNE first. After the
baseline trial (run with the stage analysis) the model turns its profile into a `Guide`
(`tfperf.tuner._guide`): the limit, thread counts, and the configurations the model proposes
(`tfperf.tuner._proposers`). The first proposal, the estimate (the configuration predicted
best with training as written), is queued at once. `References` keeps the references, the
guide (shared through the study by every tuner on it), the ranges TPE searches from it, and
each proposal's predicted vs measured rate for the result.

Once the estimate has run, `refit` fits the model again: the CPU roofline takes the
input's CPU per example measured nearest the limit (the fastest reference's pipeline-only
phase, `tfperf.measure.nearest_limit_input_cpu`), and the other proposals are made from the
refit model and queued then (from the first fit when nothing can be refit). The estimate's own
predicted rate stays the one made before it ran, so predicted vs measured still shows the
model's error.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tfperf.errors import KnobError
from tfperf.frameworks import Framework
from tfperf.hardware import Machine
from tfperf.knobs import AUTOTUNE, Domain, IntRange, Knobs, cycle_conflicts
from tfperf.measure import nearest_limit_input_cpu
from tfperf.results import Limit, ProfileResult
from tfperf.results.tune import Estimate, Measurement, Reference
from tfperf.study import feasible_complete, reference_trial
from tfperf.study.ledger import Claim, Ledger
from tfperf.study.records import TrialRecord
from tfperf.tuner._guide import Guide, guided_ranges, make_guide
from tfperf.tuner._remeasure import finalist_count
from tfperf.tuner._search import autotune_knobs, reference_params
from tfperf.tuner._training import limit_for, training_settings

if TYPE_CHECKING:
    import optuna


logger = logging.getLogger(__name__)


class References:
    """The references of one tuner's study and the model's guide.

    Args:
        baseline: the file's `BASELINE` knobs.
        machine: the machine the trials run on (its cores size CPU-bound stages).
        space: the search space, as built for this tuner.
        guidable: the knobs tfperf sizes itself (not the file's `SEARCH_SPACE`, not a `--fix`).
        framework: the pipeline's framework, for its own rule and estimate
            (`Framework.rule`, `Framework.estimate`); None: neither.
    """

    def __init__(
        self,
        baseline: Knobs,
        machine: Machine,
        space: dict[str, Domain],
        guidable: list[str],
        framework: Framework | None = None,
    ) -> None:
        self.baseline = baseline
        self.machine = machine
        self.space = space
        self.guidable = guidable
        self.framework = framework
        self.guide: Guide | None = None
        self.knobs: dict[str, Knobs] = {Reference.BASELINE.value: baseline}
        autotune = autotune_knobs(baseline)
        if autotune != baseline:
            self.knobs[Reference.AUTOTUNE.value] = autotune
        rule = framework.rule(baseline, machine.cpu_count) if framework is not None else None
        if rule is not None and rule != baseline and self._searchable(rule):
            self.knobs[Reference.RULE.value] = rule

    def _searchable(self, knobs: Knobs) -> bool:
        """Whether every value of `knobs` lies in the space (a `--fix` may rule one out)."""
        try:
            reference_params(knobs, self.space)
        except KnobError:
            return False
        return True

    @property
    def limit(self) -> Limit | None:
        return self.guide.limit if self.guide is not None else None

    def training_settings(self) -> tuple[dict[str, Any], ...]:
        """The training settings the baseline trial times the model under (none if all fixed)."""
        return training_settings(self.baseline, self.space)

    def from_baseline(self, ledger: Ledger, result: ProfileResult) -> None:
        """Builds the guide from the baseline's stage analysis and queues the estimate."""
        guide = make_guide(result, self.machine, self.baseline, self.space, self.guidable)
        if guide is None:
            guide = self._framework_guide(result)
        if guide is None:
            logger.info("no pipeline model: the baseline's stage analysis measured nothing")
            return
        self.guide = guide
        if not self._queue(ledger, guide.estimate):
            self.refit(ledger)  # the estimate is a configuration already measured: refit now

    def _framework_guide(self, result: ProfileResult) -> Guide | None:
        """A guide from the framework's own estimate, where the model needs a stage graph the
        pipeline has not (a DataLoader): its limit, its one estimate, no thread ranges."""
        if self.framework is None or result.limit is None:
            return None
        estimate = self.framework.estimate(result, self.baseline)
        if estimate is None or not self._searchable(estimate.knobs):
            return None
        return Guide(limit=result.limit, estimates=[estimate], threads={})

    def refit(self, ledger: Ledger) -> None:
        """Fits the model again with the input's CPU per example measured nearest the limit,
        and queues the proposals after the estimate.

        Called once the estimate has run. Keeps the first fit's estimate (its prediction was
        made before it ran). The later proposals are made from the refit model: the baseline's
        roofline errs low (its CPU counts the runtime's idle threads spinning), and a blocking
        stage's threads follow it. They come from the first fit when nothing can be refit (no
        reference ran faster than the baseline, or none has CPU samples in its pipeline-only
        phase), or when the refit model proposes no training change and the first fit did.
        """
        self.load(ledger)
        if self.guide is None:
            return
        first = self.guide
        refit = self._refit(ledger)
        source = first
        if refit is not None and (
            refit.estimate_of(Reference.TRAINING) is not None
            or first.estimate_of(Reference.TRAINING) is None
        ):
            source = refit
        self.guide = dataclasses.replace(
            refit or first, estimates=[first.estimate, *_later(source)]
        )
        kept: list[Estimate] = []
        for estimate in _later(self.guide):
            if _labelled(ledger.study, estimate.kind) is not None:  # queued before (another tuner)
                earlier = first.estimate_of(estimate.kind)
                kept.extend([earlier] if earlier is not None else [])
            elif self._queue(ledger, estimate):
                kept.append(estimate)
            # else: a configuration already measured, nothing more to learn from running it
        self.guide = dataclasses.replace(self.guide, estimates=[first.estimate, *kept])
        ledger.store_guide(self.guide.to_dict())

    def _refit(self, ledger: Ledger) -> Guide | None:
        """The guide made again with the input's CPU measured nearest the limit; None when no
        reference measured it (none ran faster than the baseline, or none has CPU samples)."""
        profiles = _reference_profiles(ledger)
        baseline = profiles.pop(Reference.BASELINE.value, None)
        if baseline is None:
            return None
        cpu = nearest_limit_input_cpu(baseline, list(profiles.values()))
        if cpu is None:
            return None
        refit = make_guide(baseline, self.machine, self.baseline, self.space, self.guidable, cpu)
        if refit is not None:
            logger.info(
                "the model refit with %.3g ms input CPU per example (measured at %.0f examples/s)",
                cpu.s_per_example * 1e3,
                cpu.examples_per_sec,
            )
        return refit

    def _queue(self, ledger: Ledger, estimate: Estimate) -> bool:
        """Queues a proposal (storing the guide with it); False when its knobs were measured
        or the study already holds it."""
        assert self.guide is not None  # the guide is stored with the reference
        label = estimate.kind.value
        knobs = estimate.knobs
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
        for estimate in self.guide.estimates:
            label = estimate.kind.value
            if reference_trial(ledger.study, label) is not None:
                self.knobs[label] = estimate.knobs

    def resume(self, ledger: Ledger) -> None:
        """On opening a study whose estimate failed (Ctrl-C, or lost with its tuner) before
        `refit` queued the later proposals: queues the first fit's now.

        Called once per tuner, not before each trial: the scan of the study's trials would
        lengthen the moment between claiming a trial and recording its worker.
        """
        self.load(ledger)
        if self.guide is None or not _ended_without_refit(ledger.study):
            return
        for estimate in _later(self.guide):
            self._queue(ledger, estimate)

    def claimed_knobs(self, ledger: Ledger, claim: Claim) -> Knobs | None:
        """The knobs of a claimed reference trial (None for a trial the sampler proposes)."""
        label = claim.reference
        if label is None:
            return None
        if label in self.knobs:
            return self.knobs[label]
        if Reference.is_proposal(label):
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
        found = cycle_conflicts(knobs, knob_interleave=interleave, cores=self.machine.cpu_count)
        for name, cycle in (self.guide.fixed_cycles if self.guide is not None else {}).items():
            value = getattr(knobs, name)
            if isinstance(value, int) and value != AUTOTUNE and value > cycle:
                found.append(f"{name}={value} > the file's cycle_length={cycle}")
        return found

    def estimates(self, study: optuna.Study, measured: Mapping[str, Measurement]) -> list[Estimate]:
        """Every proposal, predicted vs measured (its re-measured median in `measured`, by
        label, else its trial's figure, else the re-measured figure of a reference with the
        same knobs: a proposal that repeats one is not queued again)."""
        if self.guide is None:
            return []
        return [
            _measured(
                estimate, study, measured.get(estimate.kind.value) or _same(estimate, measured)
            )
            for estimate in self.guide.estimates
        ]

    def finalists(self, ledger: Ledger) -> dict[str, Knobs]:
        """The references to re-measure: the study's own (its stored guide, not what this tuner
        last read), less the proposals whose trial never ran.

        A proposal queued after the trial budget was spent waits for a run with a larger
        `--trials`; it is no candidate of this one. Taking them from the study keeps the
        answer the same whichever tuner of a shared study re-measures.
        """
        self.load(ledger)
        return {
            label: knobs
            for label, knobs in self.knobs.items()
            if not (Reference.is_proposal(label) and _never_ran(ledger.study, label))
        }

    def finalists_after(self, ledger: Ledger, asked: int, left: int | None) -> int:
        """How many configurations the re-measurement will take once `left` more trials have
        run (None: no trial budget), as `pick_finalists` picks them: the references compared
        whatever ran, the proposals whose trial ran or that the budget still reaches (queued,
        they run first), the searched trials the study will hold, at most `finalist_count` of
        them. Not the variants `trim_answer` may add: whether it does follows the answer."""
        ran = len(self.finalists(ledger))  # the proposals still queued left out
        queued = len(self.knobs) - ran
        reached = queued if left is None else min(queued, left)
        trials = feasible_complete(ledger.study)
        searched = sum(not TrialRecord.from_trial(t).reference for t in trials)
        if left is not None:
            searched += left - reached
            searched = min(searched, finalist_count(asked, len(trials) + left))
        else:
            searched = finalist_count(asked, len(trials))
        return ran + reached + searched

    def waiting(self, ledger: Ledger) -> int:
        """How many references' trials are queued and have not run yet."""
        self.load(ledger)
        return sum(_never_ran(ledger.study, label) for label in self.knobs)

    def limit_for(self, knobs: Knobs) -> Limit | None:
        """The limit under the training setting `knobs` run with (None: not probed)."""
        if self.guide is None:
            return None
        return limit_for(
            knobs.to_dict(), self.baseline, self.guide.limit, self.guide.setting_limits
        )


def _reference_profiles(ledger: Ledger) -> dict[str, ProfileResult]:
    """Reference label -> the profile its completed trial stored (the first, if repeated)."""
    found: dict[str, ProfileResult] = {}
    for trial in feasible_complete(ledger.study):
        record = TrialRecord.from_trial(trial)
        label = record.reference
        if label is not None and label not in found and (profile := record.profile()):
            found[label] = profile
    return found


def _later(guide: Guide) -> list[Estimate]:
    """The proposals queued once the estimate has run: all but the estimate."""
    return [e for e in guide.estimates if e.kind is not Reference.ESTIMATE]


def _labelled(study: optuna.Study, label: str) -> optuna.trial.FrozenTrial | None:
    """The first trial of the study queued as the reference `label`, in any state."""
    trials = study.get_trials(deepcopy=False)
    return next((t for t in trials if TrialRecord.from_trial(t).reference == label), None)


def _ended_without_refit(study: optuna.Study) -> bool:
    """Whether the estimate's trial failed (interrupted, or lost with its tuner) before any
    later proposal was queued."""
    estimate = _labelled(study, Reference.ESTIMATE)
    failed = estimate is not None and estimate.state.name == "FAIL"
    later = [kind for kind in Reference if kind.proposed and kind is not Reference.ESTIMATE]
    return failed and all(_labelled(study, kind) is None for kind in later)


def _never_ran(study: optuna.Study, label: str) -> bool:
    """Whether the reference `label` was queued and is still waiting (beyond the budget)."""
    trial = _labelled(study, label)
    return trial is not None and trial.state.name == "WAITING"


def _same(estimate: Estimate, measured: Mapping[str, Measurement]) -> Measurement | None:
    """The measurement of the configuration `estimate` proposes, under another label."""
    return next((m for m in measured.values() if m.knobs == estimate.knobs), None)


def _measured(estimate: Estimate, study: optuna.Study, measured: Measurement | None) -> Estimate:
    if _never_ran(study, estimate.kind.value):
        return dataclasses.replace(estimate, trial_number=None, measured_examples_per_sec=None)
    number = reference_trial(study, estimate.kind.value)
    rate = measured.median if measured is not None else None
    if rate is None and number is not None:
        trial = study.trials[number]
        rate = trial.values[0] if trial.values else None
    return dataclasses.replace(estimate, trial_number=number, measured_examples_per_sec=rate)
