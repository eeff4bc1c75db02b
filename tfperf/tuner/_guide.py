"""What the pipeline model tells the search: the estimate, and the thread ranges TPE explores.

After the baseline trial (run with the stage analysis), `make_guide` turns its `ProfileResult`
into a `Guide`: the limit, Little's-law thread counts per parallelism knob or call site, and
the estimate, the configuration the model predicts best, which the study measures as its third
reference. `guided_ranges` then gives the range TPE searches for each of those knobs.

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
from collections.abc import Iterable, Mapping
from typing import Any

from tfperf.hardware import Machine
from tfperf.knobs import (
    AUTOTUNE,
    Choices,
    Domain,
    Fixed,
    IntRange,
    Knobs,
    SiteKind,
    SiteName,
    is_site_name,
)
from tfperf.measure import THREAD_CAP, InputCpu, PipelineModel, model_from_profile
from tfperf.results import (
    TRAINING_KNOBS,
    Estimate,
    Limit,
    ProfileResult,
    StageKind,
    StageStat,
    validated,
)
from tfperf.tuner._search import _PREFETCH_DEPTHS, GUIDED_SUFFIX
from tfperf.tuner._training import SettingLimit, TrainingChoice, training_estimate

__all__ = [
    "GUIDED_SUFFIX",
    "Guide",
    "guided_ranges",
    "input_only_fixes",
    "make_guide",
    "pool_estimate",
    "runner_up_estimate",
    "thread_range",
    "unordered",
    "widen",
]

POOL = "private_threadpool_size"
#: The prefetch depth of `pool_estimate` (batches).
POOLED_PREFETCH = 2
_PARALLELISM = ("num_parallel_calls", "num_parallel_reads", "cycle_length")


@dataclasses.dataclass(frozen=True)
class Guide:
    """The model's advice to one study, stored in it so every tuner of the study shares it.

    Attributes:
        limit: the pipeline's limit on the machine that ran the baseline.
        estimate: the configuration predicted best and its predicted rate.
        threads: knob or call-site name -> the threads the model sizes it at.
        cycle_caps: parallelism name -> the fixed `cycle_length` it must not exceed (tf.data
            refuses an interleave with more parallel calls than a fixed cycle).
        knob_interleave: the pipeline has an interleave with `num_parallel_calls`, so the
            knobs `num_parallel_calls` and `cycle_length` constrain each other.
        training_estimate: the second estimate, under the training setting the model predicts
            fastest (`tfperf.tuner._training`); None when none beats the first beyond noise.
        setting_limits: the limit under each training setting the baseline trial probed.
        pool_estimate: the last estimate (the second when there is one) with its computing
            stages on the cores the input spends at the predicted rate (`pool_estimate`);
            None when the pipeline has a blocking stage or tfperf does not size the private
            pool.
        runner_up_estimate: the second estimate's shape (pooled when `pool_estimate` is)
            under the next larger batch at its precision, when within the model's error of
            the second's (`tfperf.tuner._training._runner_up`); None when none is.
    """

    limit: Limit
    estimate: Estimate
    threads: dict[str, int]
    cycle_caps: dict[str, int] = dataclasses.field(default_factory=dict)
    knob_interleave: bool = False
    training_estimate: Estimate | None = None
    setting_limits: list[SettingLimit] = dataclasses.field(default_factory=list)
    pool_estimate: Estimate | None = None
    runner_up_estimate: Estimate | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Guide:
        return validated(cls, dict(data), source="the study's stored guide")


def make_guide(
    baseline_result: ProfileResult,
    machine: Machine,
    baseline: Knobs,
    space: Mapping[str, Domain],
    guidable: Iterable[str],
    input_cpu: InputCpu | None = None,
) -> Guide | None:
    """The guide from the baseline's profile; None without a stage analysis or a limit.

    Only `guidable` names (those the tuner sized itself, not the file's `SEARCH_SPACE` nor a
    `--fix`) get thread counts and estimate values. `input_cpu`: the input's CPU per example
    measured nearer the limit than the baseline ran (`References.refit`); None: the
    baseline's stage analysis.
    """
    model = model_from_profile(baseline_result, machine.cpu_count, input_cpu=input_cpu)
    if model is None:
        return None
    names = list(guidable)
    caps = cycle_caps(baseline, space, model, machine.cpu_count)
    threads = _sized(model, names, caps, machine)
    estimate = Estimate(
        knobs=estimate_knobs(baseline, threads, space, model.blocks).to_dict(),
        predicted_examples_per_sec=model.predicted_examples_per_sec,
    )
    choice, limits = training_estimate(baseline_result, machine, baseline, space, model, input_cpu)

    def under(setting: TrainingChoice) -> Estimate:
        """The estimate under a training setting, its threads sized by the model under it."""
        sized = _sized(setting.model, names, caps, machine)
        return Estimate(
            knobs=estimate_knobs(baseline, sized, space, model.blocks)
            .replace(**setting.changes)
            .to_dict(),
            predicted_examples_per_sec=setting.model.predicted_examples_per_sec,
            changes_training=sorted(setting.changes),
        )

    second = under(choice) if choice is not None else None
    stages = baseline_result.stages.stages if baseline_result.stages else []
    interleave = knob_drives_interleave(stages, baseline)
    last, last_model = (second, choice.model) if second and choice else (estimate, model)
    pooled = pool_estimate(last, last_model, space) if POOL in names else None
    runner_up = None
    if choice is not None and choice.runner_up is not None:
        runner_up = runner_up_estimate(
            under(choice.runner_up), choice.runner_up.model, space, pooled
        )
    return Guide(
        model.limit, estimate, threads, caps, interleave, second, limits, pooled, runner_up
    )


def runner_up_estimate(
    base: Estimate, model: PipelineModel, space: Mapping[str, Domain], pooled: Estimate | None
) -> Estimate:
    """The runner-up's estimate in the shape of the reference before it: on the cores its
    input spends when the study measures a pooled estimate (`pool_estimate`), so the two
    differ in the training setting alone."""
    if pooled is None:
        return base
    return pool_estimate(base, model, space) or base


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
        s.kind is StageKind.INTERLEAVE
        and s.parameters.get("num_parallel_calls") == baseline.num_parallel_calls
        for s in stages
    )


def _sized(
    model: PipelineModel, guidable: list[str], caps: Mapping[str, int], machine: Machine
) -> dict[str, int]:
    """Knob or call-site name -> the model's thread count, for the names tfperf sizes."""
    threads: dict[str, int] = {}
    for name in guidable:
        count = _threads_for(name, model)
        if count is not None:
            threads[name] = min(count, caps.get(name, THREAD_CAP))
    if POOL in set(guidable) and model.pool_threads > machine.cpu_count:
        threads[POOL] = model.pool_threads
    return threads


def input_only_fixes(baseline: Knobs) -> dict[str, Any]:
    """`--input-only`: the knobs and call sites that change training, held at the baseline."""
    fixes: dict[str, Any] = {name: getattr(baseline, name) for name in TRAINING_KNOBS}
    fixes.update(
        {n: v for n, v in baseline.sites.items() if SiteName.parse(n).kind.changes_training}
    )
    return fixes


def estimate_knobs(
    baseline: Knobs, threads: Mapping[str, int], space: Mapping[str, Domain], blocks: bool = False
) -> Knobs:
    """The baseline with every sized knob at the model's count, prefetch at `prefetch_depth`,
    and parallel stages unordered where the search may choose so (`unordered`).

    Training knobs keep the baseline's values: the estimate changes input only.
    """
    values: dict[str, Any] = {n: v for n, v in threads.items() if not is_site_name(n)}
    sites = {**baseline.sites, **{n: v for n, v in threads.items() if is_site_name(n)}}
    domain = space.get("prefetch")
    if not isinstance(domain, Fixed):
        values["prefetch"] = prefetch_depth(domain, blocks)
    if unordered(space.get("deterministic"), threads):
        values["deterministic"] = False
    for name in baseline.sites:
        site_domain = space.get(name)
        if SiteName.parse(name).kind is SiteKind.PREFETCH and not isinstance(site_domain, Fixed):
            sites[name] = prefetch_depth(site_domain, blocks)
    return baseline.replace(**values, sites=sites)


def pool_estimate(
    base: Estimate, model: PipelineModel, space: Mapping[str, Domain]
) -> Estimate | None:
    """`base` with its computing stages on a private pool of the cores the input spends at
    the predicted rate (`PipelineModel.cores_for_input`) and a fixed prefetch of
    `POOLED_PREFETCH` batches; None when a stage blocks (its waiting threads need the pool),
    when the input's CPU is unknown, when the private pool is fixed or the search may not
    choose that prefetch, or when `base` already runs so.

    The model sizes a computing stage's pool at the calls the cores hold (`CALLS_PER_CORE`
    per core) and does not price what those threads take from the model's step when the two
    share the host; this reference measures the other side of that trade, the study's fifth.
    Its prediction is `base`'s, held to what the pool lets the input spend
    (`PipelineModel.pool_cap`): a pool too small for the input runs at its cap. The prefetch
    is fixed because on a small pool AUTOTUNE's prefetch grows too late and loses what the
    pool gains (docs/limit.md, "The pool the input spends").
    """
    cores = model.cores_for_input
    if model.blocks or cores is None:
        return None
    if isinstance(space.get(POOL), Fixed) or not _admits(space.get("prefetch"), POOLED_PREFETCH):
        return None
    knobs = {**base.knobs, POOL: cores, "prefetch": POOLED_PREFETCH}
    if knobs == base.knobs:
        return None
    cap = model.pool_cap(cores)
    predicted = (
        base.predicted_examples_per_sec
        if cap is None
        else min(base.predicted_examples_per_sec, cap)
    )
    return dataclasses.replace(
        base,
        knobs=knobs,
        predicted_examples_per_sec=predicted,
        trial_number=None,
        measured_examples_per_sec=None,
    )


def _admits(domain: Domain | None, value: int) -> bool:
    """Whether the search may choose `value` in `domain` (a fixed knob admits nothing)."""
    if isinstance(domain, Choices):
        return value in domain.values
    if isinstance(domain, IntRange):
        return domain.low <= value <= domain.high
    return False


def unordered(domain: Domain | None, threads: Mapping[str, int]) -> bool:
    """Whether the estimate lets its parallel stages hand out elements as they finish
    (`deterministic=False`): when it sizes a parallel stage and the search may choose so.

    In order, an element that takes long holds back every finished one behind it, and the
    threads behind it idle; unordered, they go on, and are never slower beyond the runs'
    spread. Order is not part of training's contract here (the
    search draws `deterministic=False` as an input knob, and the hand-over writes it); a file
    that needs order fixes it (`--fix deterministic=None`), and the estimate keeps it.
    """
    sized = any(name != POOL and count > 1 for name, count in threads.items())
    return sized and isinstance(domain, Choices) and any(v is False for v in domain.values)


def prefetch_depth(domain: Domain | None, blocks: bool) -> int:
    """The prefetch the estimate runs: AUTOTUNE, or the deepest buffer when a stage blocks.

    A blocking stage delivers in bursts (each element waits its own latency), and a buffer that
    holds the step's next batches rides them out at the cost of memory only (the RAM budget
    bounds it through the trials). AUTOTUNE's buffer grows only after the step has waited, so
    it lags a bursty stage. Without a blocking stage, AUTOTUNE.
    """
    if not blocks:
        return AUTOTUNE
    if isinstance(domain, IntRange):
        return domain.high
    if isinstance(domain, Choices):
        depths = [v for v in domain.values if isinstance(v, int) and v >= 0]
        return max(depths) if depths else AUTOTUNE
    return max(_PREFETCH_DEPTHS)


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
        if site.method != "interleave" or site.argument != "num_parallel_calls":
            continue
        cycle = str(dataclasses.replace(site, argument="cycle_length"))
        value = _fixed_cycle(space.get(cycle), cores)
        if value is not None:
            caps[name] = value
    interleaves = any(s.kind is StageKind.INTERLEAVE for s in model.stages)
    value = _fixed_cycle(space.get("cycle_length"), cores)
    if interleaves and value is not None:
        caps["num_parallel_calls"] = value
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


def _threads_for(name: str, model: PipelineModel) -> int | None:
    if is_site_name(name):
        site = SiteName.parse(name)
        if site.kind is not SiteKind.PARALLELISM:
            return None
        return model.threads.get(site.argument) or _interleave_threads(site.argument, model)
    if name in _PARALLELISM:
        return model.threads.get(name) or _interleave_threads(name, model)
    return None


def _interleave_threads(argument: str, model: PipelineModel) -> int | None:
    """An interleave's `cycle_length` follows its parallel calls: one open input per call."""
    if argument != "cycle_length":
        return None
    counts = [s.threads for s in model.stages if s.kind is StageKind.INTERLEAVE and s.argument]
    return max(counts) if counts else None


def _value(knobs: Knobs, name: str) -> Any:
    return knobs.sites.get(name) if is_site_name(name) else getattr(knobs, name)
