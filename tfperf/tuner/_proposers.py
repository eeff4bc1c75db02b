"""The configurations the pipeline model proposes, as a list of small named proposers.

Once the baseline's stage analysis has fitted the pipeline model (`make_guide`), each proposer
in `PROPOSERS` runs in order: it reads the `Fit` and what the proposers before it proposed, and
returns one configuration (an `Estimate` of its own `Reference` kind) or None. The study
measures each as a reference trial: the first as soon as it is proposed, the rest once it has
run, from the refit (`tfperf.tuner._references`).

Adding a proposal is one function here, appended to `PROPOSERS`, and one `Reference` kind with
its words (`tfperf.results._references`); the guide, the study's labels, the result and the
reports take it from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tfperf.hardware import Machine
from tfperf.knobs import (
    AUTOTUNE,
    KNOBS,
    Choices,
    Domain,
    Fixed,
    IntRange,
    Knobs,
    SiteKind,
    SiteName,
    is_site_name,
)
from tfperf.knobs.declare import PREFETCH_DEPTHS
from tfperf.measure import THREAD_CAP, PipelineModel
from tfperf.results.stages import StageKind
from tfperf.results.tune import Estimate, Reference
from tfperf.tuner._training import TrainingChoice

POOL = KNOBS.private_threadpool_size.name
#: The prefetch depth of `pool_estimate` (batches), and its knob.
POOLED_PREFETCH = 2
_PREFETCH = KNOBS.prefetch.name


@dataclasses.dataclass(frozen=True)
class Fit:
    """What every proposer reads: the model fitted to the baseline, and what it may change.

    Attributes:
        model: the pipeline model under the baseline's training setting.
        choice: the training setting the model predicts fastest, when one lifts the limit
            beyond the noise (with its runner-up, `tfperf.tuner._training`); None otherwise.
        baseline: the file's `BASELINE` knobs.
        space: the search space.
        guidable: the knobs and call sites tfperf sizes itself.
        caps: parallelism name -> the fixed `cycle_length` it must stay within.
        machine: the machine the trials run on.
    """

    model: PipelineModel
    choice: TrainingChoice | None
    baseline: Knobs
    space: Mapping[str, Domain]
    guidable: tuple[str, ...]
    caps: Mapping[str, int]
    machine: Machine

    def threads(self, model: PipelineModel) -> dict[str, int]:
        """The thread count `model` sizes each guidable name at."""
        return sized_threads(model, self.guidable, self.caps, self.machine)

    def under(self, setting: TrainingChoice, kind: Reference) -> Estimate:
        """The estimate under a training setting, its threads sized by the model under it."""
        threads = self.threads(setting.model)
        knobs = estimate_knobs(self.baseline, threads, self.space, self.model.blocks)
        return Estimate(
            knobs=knobs.replace(**setting.changes),
            predicted_examples_per_sec=setting.model.predicted_examples_per_sec,
            changes_training=sorted(setting.changes),
            kind=kind,
        )


#: A proposer: the fit and the proposals before it -> one configuration, or None.
Proposer = Callable[[Fit, Sequence[Estimate]], "Estimate | None"]


def best_as_written(fit: Fit, proposed: Sequence[Estimate]) -> Estimate | None:
    """The configuration the model predicts best with training as written: every sized knob
    at the model's thread count, prefetch at `prefetch_depth`, parallel stages unordered where
    the search may choose so (`estimate_knobs`)."""
    knobs = estimate_knobs(fit.baseline, fit.threads(fit.model), fit.space, fit.model.blocks)
    return Estimate(
        knobs=knobs,
        predicted_examples_per_sec=fit.model.predicted_examples_per_sec,
        kind=Reference.ESTIMATE,
    )


def best_training_setting(fit: Fit, proposed: Sequence[Estimate]) -> Estimate | None:
    """The same under the training setting (batch size, precision) the model predicts
    fastest, when it lifts the limit beyond the noise (`tfperf.tuner._training`)."""
    return fit.under(fit.choice, Reference.TRAINING) if fit.choice is not None else None


def input_on_its_cores(fit: Fit, proposed: Sequence[Estimate]) -> Estimate | None:
    """The last proposal (with training changed, when there is one) with its computing stages
    on a private pool of the cores its input spends (`pool_estimate`), when tfperf sizes the
    private pool."""
    if POOL not in fit.guidable:
        return None
    training = _of(proposed, Reference.TRAINING)
    if training is not None and fit.choice is not None:
        pooled = pool_estimate(training, fit.choice.model, fit.space)
    else:
        estimate = _of(proposed, Reference.ESTIMATE)
        pooled = pool_estimate(estimate, fit.model, fit.space) if estimate is not None else None
    return dataclasses.replace(pooled, kind=Reference.POOL) if pooled is not None else None


def runner_up_setting(fit: Fit, proposed: Sequence[Estimate]) -> Estimate | None:
    """The next larger batch, when the model cannot tell it from the training setting it
    predicts fastest (`tfperf.tuner._training`), in the shape of the proposal before it: on
    the cores its input spends when that was proposed, so the two differ in the training
    setting alone."""
    runner = fit.choice.runner_up if fit.choice is not None else None
    if runner is None:
        return None
    base = fit.under(runner, Reference.RUNNER_UP)
    if _of(proposed, Reference.POOL) is None:
        return base
    return pool_estimate(base, runner.model, fit.space) or base


#: The proposers, run in this order; each sees what those before it proposed.
PROPOSERS: tuple[Proposer, ...] = (
    best_as_written,
    best_training_setting,
    input_on_its_cores,
    runner_up_setting,
)


def propose(fit: Fit, proposers: Sequence[Proposer] | None = None) -> list[Estimate]:
    """What `proposers` (by default `PROPOSERS`) propose for `fit`, in order."""
    proposed: list[Estimate] = []
    for proposer in PROPOSERS if proposers is None else proposers:
        estimate = proposer(fit, tuple(proposed))
        if estimate is not None:
            proposed.append(estimate)
    return proposed


def _of(proposed: Sequence[Estimate], kind: Reference) -> Estimate | None:
    return next((e for e in proposed if e.kind is kind), None)


def estimate_knobs(
    baseline: Knobs, threads: Mapping[str, int], space: Mapping[str, Domain], blocks: bool = False
) -> Knobs:
    """The baseline with every sized knob at the model's count, prefetch at `prefetch_depth`,
    and parallel stages unordered where the search may choose so (`unordered`).

    Training knobs keep the baseline's values: the estimate changes input only.
    """
    values: dict[str, Any] = {n: v for n, v in threads.items() if not is_site_name(n)}
    sites = {**baseline.sites, **{n: v for n, v in threads.items() if is_site_name(n)}}
    for name in (*KNOBS.names(), *baseline.sites):
        domain = space.get(name)
        if _kind(name) is SiteKind.PREFETCH and not isinstance(domain, Fixed):
            (sites if is_site_name(name) else values)[name] = prefetch_depth(domain, blocks)
    if unordered(space.get(KNOBS.deterministic.name), threads):
        values[KNOBS.deterministic.name] = False
    return baseline.replace(**values, sites=sites)


def pool_estimate(
    base: Estimate, model: PipelineModel, space: Mapping[str, Domain]
) -> Estimate | None:
    """`base` with its computing stages on a private pool of the cores the input spends at
    the predicted rate (`PipelineModel.cores_for_input`) and a fixed prefetch of
    `POOLED_PREFETCH` batches; None when a stage blocks (its waiting threads need the pool),
    when the input's CPU is unknown, when the private pool is fixed or the search may not
    choose that prefetch, or when `base` already runs so.

    The model sizes a computing stage's pool at the cores' calls (`ModelPolicy.calls_per_core`
    per core) and does not price what those threads take from the model's step when the two
    share the host; this proposal measures the other side of that trade.
    Its prediction is `base`'s, held to what the pool lets the input spend
    (`PipelineModel.pool_cap`): a pool too small for the input runs at its cap. The prefetch
    is fixed because on a small pool AUTOTUNE's prefetch grows too late and loses what the
    pool gains (docs/limit.md, "The pool the input spends").
    """
    cores = model.cores_for_input
    if model.blocks or cores is None:
        return None
    if isinstance(space.get(POOL), Fixed) or not _admits(space.get(_PREFETCH), POOLED_PREFETCH):
        return None
    knobs = base.knobs.replace(**{POOL: cores, _PREFETCH: POOLED_PREFETCH})
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
    return max(PREFETCH_DEPTHS)


def sized_threads(
    model: PipelineModel, guidable: Sequence[str], caps: Mapping[str, int], machine: Machine
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


def _threads_for(name: str, model: PipelineModel) -> int | None:
    if _kind(name) is not SiteKind.PARALLELISM:
        return None
    argument = SiteName.parse(name).argument if is_site_name(name) else name
    return model.threads.get(argument) or _interleave_threads(argument, model)


def _kind(name: str) -> SiteKind | None:
    """What a knob (`Knob.site_kind`) or a call site's argument controls."""
    return SiteName.parse(name).kind if is_site_name(name) else KNOBS[name].site_kind


def _interleave_threads(argument: str, model: PipelineModel) -> int | None:
    """An interleave's `cycle_length` follows its parallel calls: one open input per call."""
    if argument != KNOBS.cycle_length.name:
        return None
    counts = [s.threads for s in model.stages if s.kind is StageKind.INTERLEAVE and s.argument]
    return max(counts) if counts else None
