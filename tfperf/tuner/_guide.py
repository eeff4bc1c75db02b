"""What the pipeline model tells the search: the estimate, and the thread ranges TPE explores.

After the baseline trial (run with the stage analysis), `make_guide` turns its `ProfileResult`
into a `Guide`: the limit, Little's-law thread counts per parallelism knob or call site, and
the configurations the model proposes (`tfperf.tuner._proposers`), which the study measures as
references. `guided_ranges` then gives the range TPE searches for each of those knobs.

How the ranges live in Optuna. A categorical distribution cannot change within a study, but an
integer one may change its bounds (Optuna only checks the kind and `log`). So a guided knob is
suggested as its own integer parameter, `"<name>#threads"`, on a log scale, whose bounds are the
current range: every range generation uses the same parameter, and TPE keeps learning from the
trials of earlier generations. The knob's categorical parameter of the default space (which
holds AUTOTUNE and the baseline for the references) is simply not suggested once the guide is
known; AUTOTUNE is measured by its reference trial.

Ranges are a function of the model and of the trials so far: the model's count `n` gives
`[ceil(0.75 n), ceil(1.75 n)]`, and the range widens on a side where the best trial so far sits
on its edge (to half or twice that value), so a model that guessed low or high is corrected in
a few trials. Every bound stays within `THREAD_CAP`; the RAM budget bounds threads through the
trials themselves (a configuration over it is infeasible, and the sampler learns so).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tfperf.hardware import Machine
from tfperf.knobs import AUTOTUNE, KNOBS, Domain, Fixed, IntRange, Knobs, SiteName, is_site_name
from tfperf.measure import THREAD_CAP, InputCpu, PipelineModel, model_from_profile
from tfperf.results import Limit, ProfileResult, plain_dict, validated
from tfperf.results.stages import StageKind, StageStat
from tfperf.results.tune import TRAINING_KNOBS, Estimate, Reference, folded_estimates
from tfperf.tuner._proposers import Fit, Proposer, propose, sized_threads
from tfperf.tuner._training import SettingLimit, training_estimate

#: An interleave's two arguments, the knobs of the same names.
_CYCLE, _CALLS = KNOBS.cycle_length.name, KNOBS.num_parallel_calls.name


@dataclasses.dataclass(frozen=True)
class Guide:
    """The model's advice to one study, stored in it so every tuner of the study shares it.

    Attributes:
        limit: the pipeline's limit on the machine that ran the baseline.
        estimates: the configurations the model proposes (`tfperf.tuner._proposers`), each
            with its predicted rate, in the order proposed; the first is the estimate, the
            model's best configuration with training as written.
        threads: knob or call-site name -> the threads the model sizes it at.
        cycle_caps: parallelism name -> the fixed `cycle_length` it must not exceed (tf.data
            refuses an interleave with more parallel calls than a fixed cycle).
        knob_interleave: the pipeline has an interleave with `num_parallel_calls`, so the
            knobs `num_parallel_calls` and `cycle_length` constrain each other (not when its
            cycle is written in the file: `fixed_cycles`).
        setting_limits: the limit under each training setting the baseline trial probed.
        fixed_cycles: parallelism knob -> an interleave's `cycle_length` the file writes as a
            number, read from the baseline's dataset graph (`literal_cycles`): a proposal
            above it is one tf.data refuses, so it is refused unrun.
    """

    limit: Limit
    estimates: list[Estimate]
    threads: dict[str, int]
    cycle_caps: dict[str, int] = dataclasses.field(default_factory=dict)
    knob_interleave: bool = False
    setting_limits: list[SettingLimit] = dataclasses.field(default_factory=list)
    fixed_cycles: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def estimate(self) -> Estimate:
        """The first proposal: the model's best configuration with training as written."""
        return self.estimates[0]

    def estimate_of(self, kind: Reference) -> Estimate | None:
        """The proposal of `kind`, if the model made one."""
        return next((e for e in self.estimates if e.kind is kind), None)

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Guide:
        """The stored guide; one stored by a tfperf that kept each estimate in a field of its
        own (`estimate`, `training_estimate`, ...) reads as the same list."""
        return validated(cls, folded_estimates(data), source="the study's stored guide")


def make_guide(
    baseline_result: ProfileResult,
    machine: Machine,
    baseline: Knobs,
    space: Mapping[str, Domain],
    guidable: Iterable[str],
    input_cpu: InputCpu | None = None,
    proposers: Sequence[Proposer] | None = None,
) -> Guide | None:
    """The guide from the baseline's profile; None without a stage analysis or a limit.

    Only `guidable` names (those the tuner sized itself, not the file's `SEARCH_SPACE` nor a
    `--fix`) get thread counts and estimate values. `input_cpu`: the input's CPU per example
    measured nearer the limit than the baseline ran (the refit, `References.refit`); None:
    the baseline's stage analysis. `proposers`: what proposes the configurations
    (`tfperf.tuner._proposers.PROPOSERS` by default).
    """
    model = model_from_profile(baseline_result, machine.cpu_count, input_cpu=input_cpu)
    if model is None:
        return None
    names = tuple(guidable)
    stages = baseline_result.stages.stages if baseline_result.stages else []
    fixed = literal_cycles(stages, baseline)
    # The file's own cycle, not the `cycle_length` knob, bounds the calls the knob sets there.
    caps = {**cycle_caps(baseline, space, model, machine.cpu_count), **fixed}
    choice, limits = training_estimate(baseline_result, machine, baseline, space, model, input_cpu)
    fit = Fit(model, choice, baseline, space, names, caps, machine)
    return Guide(
        limit=model.limit,
        estimates=propose(fit, proposers),
        threads=sized_threads(model, names, caps, machine),
        cycle_caps=caps,
        knob_interleave=knob_drives_interleave(stages, baseline) and not fixed,
        setting_limits=limits,
        fixed_cycles=fixed,
    )


def literal_cycles(stages: Iterable[StageStat], baseline: Knobs) -> dict[str, int]:
    """`num_parallel_calls` -> the `cycle_length` a knobs file writes as a number in an
    interleave whose parallel calls the knob sets, read from the baseline's dataset graph.

    `interleave(read, cycle_length=2, num_parallel_calls=knobs.num_parallel_calls)`: tf.data
    refuses any `num_parallel_calls` above 2 but AUTOTUNE. The graph shows the values the
    interleave ran with, not where they came from: the calls follow the knob when they are
    the baseline's `num_parallel_calls`, and the cycle is written in the file when it is not
    the baseline's `cycle_length` knob. When it is, tfperf cannot tell (the file may pass the
    knob), caps nothing, and tf.data's own refusal prunes the trial if it comes.

    Example:
        >>> from tfperf.results.stages import StageStat, StageUnit
        >>> read = StageStat(1, StageKind.INTERLEAVE, "interleave(read)", None,
        ...     {"cycle_length": 2, "num_parallel_calls": 1}, StageUnit.EXAMPLE,
        ...     None, None, None, None, None, None, 0, 0.0)
        >>> literal_cycles([read], Knobs(num_parallel_calls=1, cycle_length=None))
        {'num_parallel_calls': 2}
    """
    if baseline.sites:
        return {}  # call sites carry their own cycle_length, capped by `cycle_caps`
    found: dict[str, int] = {}
    for stage in stages:
        cycle = stage.parameters.get(_CYCLE)
        calls = stage.parameters.get(_CALLS)
        if stage.kind is not StageKind.INTERLEAVE or calls is None:
            continue
        if not isinstance(cycle, int) or isinstance(cycle, bool) or cycle <= 0:
            continue
        if calls != baseline.num_parallel_calls or cycle == baseline.cycle_length:
            continue
        found[_CALLS] = min(found.get(_CALLS, cycle), cycle)
    return found


def knob_drives_interleave(stages: Iterable[StageStat], baseline: Knobs) -> bool:
    """Whether the `num_parallel_calls` knob visibly sets an interleave's parallel calls.

    Only then does tfperf refuse a proposal tf.data would refuse (calls above the cycle)
    without measuring it. The profile shows the value an interleave ran with, not which knob
    gave it: the knob drives it when that value is the baseline's `num_parallel_calls` and not
    its `cycle_length`. When the two are equal it cannot tell (a file may pass `cycle_length`
    to both arguments, as tf.data's rule suggests), and guessing "drives" would refuse valid
    proposals by the dozen; the trial runs, and tf.data's own error says so if it refuses.
    """
    if baseline.sites or baseline.num_parallel_calls == baseline.cycle_length:
        return False
    return any(
        s.kind is StageKind.INTERLEAVE and s.parameters.get(_CALLS) == baseline.num_parallel_calls
        for s in stages
    )


def input_only_fixes(baseline: Knobs) -> dict[str, Any]:
    """`--input-only`: the knobs and call sites that change training, held at the baseline."""
    fixes: dict[str, Any] = {name: getattr(baseline, name) for name in TRAINING_KNOBS}
    fixes.update(
        {n: v for n, v in baseline.sites.items() if SiteName.parse(n).kind.changes_training}
    )
    return fixes


def cycle_caps(
    baseline: Knobs, space: Mapping[str, Domain], model: PipelineModel, cores: int
) -> dict[str, int]:
    """Parallelism names whose value must stay at or below a fixed `cycle_length`.

    At a call site, an `interleave`'s `num_parallel_calls` is capped by the same call's
    `cycle_length` when that is fixed; in a knob file, `num_parallel_calls` by the
    `cycle_length` knob when it is fixed and the pipeline has an interleave that takes both.
    A `cycle_length` fixed to AUTOTUNE caps at `cores`: tf.data sets it to the core count
    when the iterator is made (`tfperf.knobs.cycle_conflicts`).
    """
    caps: dict[str, int] = {}
    for name in baseline.sites:
        site = SiteName.parse(name)
        if site.method != "interleave" or site.argument != _CALLS:
            continue
        cycle = str(dataclasses.replace(site, argument=_CYCLE))
        value = _fixed_cycle(space.get(cycle), cores)
        if value is not None:
            caps[name] = value
    interleaves = any(s.kind is StageKind.INTERLEAVE for s in model.stages)
    value = _fixed_cycle(space.get(_CYCLE), cores)
    if interleaves and value is not None:
        caps[_CALLS] = value
    return caps


def _fixed_cycle(domain: Domain | None, cores: int) -> int | None:
    """The cycle length a fixed domain holds (AUTOTUNE: the cores); None when not fixed."""
    if not isinstance(domain, Fixed):
        return None
    value = domain.value
    if value == AUTOTUNE:
        return cores
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def thread_range(threads: int) -> IntRange:
    """The range searched around the model's count: `[ceil(0.75 n), ceil(1.75 n)]`, capped.

    Example:
        >>> thread_range(18)
        IntRange(low=14, high=32, log=True)
    """
    low = max(1, math.ceil(0.75 * threads))
    high = min(THREAD_CAP, max(low + 1, math.ceil(1.75 * threads)))
    return IntRange(min(low, high - 1), high, log=True)


def widen(current: IntRange, best: Any, cap: int = THREAD_CAP) -> IntRange:
    """`current`, widened on the side where `best` sits on (or past) its edge.

    Example:
        >>> widen(IntRange(14, 32, log=True), 32)
        IntRange(low=14, high=64, log=True)
    """
    if not isinstance(best, int) or isinstance(best, bool) or best < 1:
        return current
    low, high = current.low, current.high
    if best >= high and high < cap:
        high = min(cap, 2 * best)
    if best <= low and low > 1:
        low = max(1, best // 2)
    return IntRange(low, high, log=True)


def guided_ranges(guide: Guide, best: Knobs | None) -> dict[str, IntRange]:
    """The range each guided knob searches now: the model's, widened where the best sits."""
    ranges: dict[str, IntRange] = {}
    for name, count in guide.threads.items():
        cap = guide.cycle_caps.get(name, THREAD_CAP)
        current = thread_range(min(count, cap))
        if best is not None:
            current = widen(current, _value(best, name), cap)
        ranges[name] = IntRange(min(current.low, cap), min(current.high, cap), log=True)
    return {name: r for name, r in ranges.items() if r.low < r.high}


def _value(knobs: Knobs, name: str) -> Any:
    return knobs.sites.get(name) if is_site_name(name) else getattr(knobs, name)
