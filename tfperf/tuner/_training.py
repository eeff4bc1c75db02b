"""The training settings the model weighs: what the baseline trial probes, and the training
estimate.

The estimate changes input only. A larger batch or bf16 often lifts the limit itself
(the model's step gets cheaper per example), and a finite dataset's shuffle buffer costs a
refill every epoch; TPE finds such winners late when nothing aims it there. So the baseline
trial also times the model alone under the settings the search can reach
(`training_settings`, measured by the framework's `probe_training`), and `training_estimate`
restates the model under each: the limit per setting (`SettingLimit`, by which a tuned
configuration that changes training is compared) and, when a setting's predicted rate beats
the input-only estimate beyond the noise, the training estimate
(`tfperf.tuner._proposers.best_training_setting`): of the settings predicted within
`SETTING_TOLERANCE` of the fastest, the one that changes training least. "Beats" holds in
either of two views: input and training overlapping on the host (the model's prediction), or
taking turns (`1 / (1/P + 1/C)`, where a faster model step counts even when the CPU roofline
binds every setting alike). When the next larger batch at the proposed precision is predicted
within the model's error of it (`RUNNER_UP_TOLERANCE`), it is proposed too, as the runner-up
(`runner_up_setting`):
the model cannot see what fewer steps save when input and training share the host, so the study
measures both rather than let the model's error pick. Whether either is recommended is still the
input-only rule's decision, on re-measured figures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tfperf.hardware import Machine
from tfperf.knobs import KNOBS, Choices, Domain, Fixed, IntRange, Knobs, SiteName, is_site_name
from tfperf.measure import InputCpu, PipelineModel, model_from_profile
from tfperf.results import Limit, ProfileResult, TrainingRate
from tfperf.results.tune import same_training, training_distance

#: The predicted gain a training setting needs over the input-only estimate to be proposed.
BEYOND_NOISE = 1.10
#: Training settings predicted this near the fastest are one setting within the model's error:
#: the one nearest the baseline's is proposed (`_least_change`).
SETTING_TOLERANCE = 0.95
#: The model's error on a training setting: its training estimates measure 80-90% of their
#: predictions, so the next larger batch predicted within this share of the chosen setting is
#: measured too (`_runner_up`).
RUNNER_UP_TOLERANCE = 0.85
#: Shuffle buffers predicted within this share of the best rate are one choice within the
#: model's error: the one nearest the baseline's is proposed (`_shuffle_choice`).
SHUFFLE_TOLERANCE = 0.95
#: Most settings the baseline trial probes (each costs a build and ~0.5 s of steps): the
#: default space's 4 batch sizes x 2 precisions, less the baseline's own, fit.
MAX_SETTINGS = 8

# The training knobs a setting is made of, by their declarations.
_BATCH = KNOBS.batch_size.name
_PRECISION = KNOBS.mixed_precision.name
_SHUFFLE = KNOBS.shuffle_buffer.name


@dataclasses.dataclass(frozen=True)
class SettingLimit:
    """The limit under one training setting (the model alone timed under it)."""

    batch_size: int
    mixed_precision: str
    limit: Limit


@dataclasses.dataclass(frozen=True)
class TrainingChoice:
    """The training setting the model predicts fastest, and what it predicts."""

    changes: dict[str, Any]
    model: PipelineModel
    #: The next larger batch at this precision, when within the model's error (`_runner_up`).
    runner_up: TrainingChoice | None = None


def training_settings(baseline: Knobs, space: Mapping[str, Domain]) -> tuple[dict[str, Any], ...]:
    """Settings for the baseline trial to probe: the batch sizes the search may choose, times
    the precisions it may choose, without the baseline's own.

    Larger batches come first (they are where a faster step is likely), then smaller ones,
    nearest first: the search may choose those too, and a winner run under a setting never
    probed has no limit to be compared with. A plain file or script holds its batch size at a
    call site, where the knob does nothing: its batch size is not probed.

    Example:
        >>> space = {"batch_size": Choices((32, 64, 128)), "mixed_precision": Fixed("float32")}
        >>> [s["batch_size"] for s in training_settings(Knobs(batch_size=64), space)]
        [128, 32]
    """
    own = (baseline.batch_size, baseline.mixed_precision.value)
    batches = [own[0]]
    if not baseline.sites:
        batches = list(_values(space.get(_BATCH), own[0]))
    precisions = [str(getattr(p, "value", p)) for p in _values(space.get(_PRECISION), own[1])]
    larger = sorted((b for b in batches if b >= own[0]), reverse=True)
    smaller = sorted((b for b in batches if b < own[0]), reverse=True)
    settings = [(b, p) for b in larger + smaller for p in precisions]
    chosen = [s for s in settings if s != own][:MAX_SETTINGS]
    return tuple({_BATCH: b, _PRECISION: p} for b, p in chosen)


def training_estimate(
    result: ProfileResult,
    machine: Machine,
    baseline: Knobs,
    space: Mapping[str, Domain],
    input_only: PipelineModel,
    input_cpu: InputCpu | None = None,
) -> tuple[TrainingChoice | None, list[SettingLimit]]:
    """The limit under each probed setting, and the setting to propose (None: none is worth it).

    A shuffle buffer is part of the choice when the dataset restarts: of the buffers the
    search may choose whose predicted rate is within `SHUFFLE_TOLERANCE` of the best, the one
    nearest the baseline's (`_shuffle_choice`).
    `input_cpu`: as in `make_guide` (the input's CPU does not depend on the training setting).
    """
    cores = machine.cpu_count
    limits: list[SettingLimit] = []
    candidates: list[tuple[TrainingRate | None, PipelineModel]] = [(None, input_only)]
    for rate in result.training_rates:
        model = model_from_profile(result, cores, rate, input_cpu=input_cpu)
        if model is not None:
            limits.append(SettingLimit(rate.batch_size, rate.mixed_precision, model.limit))
            candidates.append((rate, model))
    base_compute = result.compute_only.examples_per_sec if result.compute_only else None

    def compute_of(rate: TrainingRate | None) -> float | None:
        return rate.examples_per_sec if rate is not None else base_compute

    def gain(candidate: tuple[TrainingRate | None, PipelineModel]) -> float:
        rate, model = candidate
        return max(
            model.predicted_examples_per_sec / max(input_only.predicted_examples_per_sec, 1e-9),
            _turns(model, compute_of(rate)) / max(_turns(input_only, base_compute), 1e-9),
        )

    def proposal(candidate: tuple[TrainingRate | None, PipelineModel]) -> TrainingChoice | None:
        rate, model = candidate
        changes = rate.setting() if rate is not None else {}
        domain = space.get(_SHUFFLE)
        shuffle = _shuffle_choice(result, cores, rate, baseline, domain, input_cpu)
        if shuffle is not None:
            changes[_SHUFFLE], model = shuffle
        changes = {n: v for n, v in changes.items() if _differs(baseline, n, v)}
        if not changes or gain((rate, model)) < BEYOND_NOISE:
            return None
        return TrainingChoice(changes, model)

    # The baseline's own setting stays a candidate: a restarting dataset's shuffle buffer may
    # be worth changing alone.
    worth = [c for c in candidates if c[0] is None or gain(c) >= BEYOND_NOISE]
    chosen = _least_change(worth, baseline, compute_of)
    choice = proposal(chosen)
    if choice is None:
        return None, limits
    second = _runner_up(worth, chosen, baseline, compute_of)
    runner_up = proposal(second) if second is not None else None
    return dataclasses.replace(choice, runner_up=runner_up), limits


def _runner_up(
    candidates: Sequence[tuple[TrainingRate | None, PipelineModel]],
    chosen: tuple[TrainingRate | None, PipelineModel],
    baseline: Knobs,
    compute_of: Callable[[TrainingRate | None], float | None],
) -> tuple[TrainingRate | None, PipelineModel] | None:
    """The next larger batch the probe timed at `chosen`'s precision, when predicted within
    `RUNNER_UP_TOLERANCE` of `chosen` in both views; None when there is none.

    The model restates the phases measured apart, and what it cannot see when the two share the
    host runs one way: half the steps are half the handoffs between input and training, a gain
    end to end that neither phase measured alone shows. So where the larger
    batch is within the model's error, the study measures it rather than let the error decide;
    a larger batch predicted further below is slower beyond what the handoffs give back.
    """
    rate = chosen[0]
    batch = rate.batch_size if rate is not None else baseline.batch_size
    precision = rate.mixed_precision if rate is not None else baseline.mixed_precision.value
    larger = [
        c
        for c in candidates
        if c[0] is not None and c[0].mixed_precision == precision and c[0].batch_size > batch
    ]
    if not larger:
        return None
    nearest = min(larger, key=lambda c: c[0].batch_size if c[0] is not None else 0)
    bar = [RUNNER_UP_TOLERANCE * v for v in _views(chosen, compute_of)]
    near = all(v >= b for v, b in zip(_views(nearest, compute_of), bar, strict=True))
    return nearest if near else None


def _least_change(
    candidates: Sequence[tuple[TrainingRate | None, PipelineModel]],
    baseline: Knobs,
    compute_of: Callable[[TrainingRate | None], float | None],
) -> tuple[TrainingRate | None, PipelineModel]:
    """The setting nearest the baseline's among those predicted within `SETTING_TOLERANCE` of
    the fastest in both views (overlapping and taking turns); the fastest when none is.

    Settings that near each other are one setting within the model's error, and the smaller
    change to training is the one to try: a prediction a few percent higher is inside the
    model's error, and the larger change may well run slower.
    """

    def views(candidate: tuple[TrainingRate | None, PipelineModel]) -> tuple[float, float]:
        return _views(candidate, compute_of)

    fastest = max(candidates, key=views)
    top = [max(views(c)[i] for c in candidates) for i in (0, 1)]
    near = [
        c
        for c in candidates
        if all(v >= SETTING_TOLERANCE * t for v, t in zip(views(c), top, strict=True))
    ]
    if not near:
        return fastest
    return min(near, key=lambda c: (_distance(c[0], baseline), *(-v for v in views(c))))


def _views(
    candidate: tuple[TrainingRate | None, PipelineModel],
    compute_of: Callable[[TrainingRate | None], float | None],
) -> tuple[float, float]:
    """A setting's predicted rate in the two views: overlapping on the host, taking turns."""
    rate, model = candidate
    return model.predicted_examples_per_sec, _turns(model, compute_of(rate))


def _distance(rate: TrainingRate | None, baseline: Knobs) -> float:
    """How far a setting moves training (`tfperf.results.training_distance`)."""
    if rate is None:
        return 0.0
    own = baseline.to_dict()
    return training_distance({**own, **rate.setting()}, own)


def _turns(model: PipelineModel, compute: float | None) -> float:
    """The end-to-end rate if input and training take turns: `1 / (1/P + 1/C)`.

    `P` is the model's predicted rate, `C` the model alone under the setting. The model
    predicts the two overlapping on the host; on a small one they may take turns instead (the
    step's driving loop and a stage that calls Python, for one, share the GIL; docs/limit.md,
    "taking turns"), and then a faster model step lifts the end-to-end rate even where the CPU
    roofline binds every setting alike.
    """
    predicted = model.predicted_examples_per_sec
    if compute is None or compute <= 0 or predicted <= 0:
        return predicted
    return 1 / (1 / predicted + 1 / compute)


def limit_for(
    knobs: Mapping[str, Any], baseline: Knobs, base: Limit | None, limits: Sequence[SettingLimit]
) -> Limit | None:
    """The limit under the training setting `knobs` run with; None when it was not probed.

    Example:
        >>> limit_for({"batch_size": 32}, Knobs(batch_size=32), None, [])  # the baseline's
    """
    batch = knobs.get(_BATCH, baseline.batch_size)
    precision = str(knobs.get(_PRECISION, baseline.mixed_precision.value))
    if _training_sites_changed(knobs, baseline):
        return None
    if batch == baseline.batch_size and precision == baseline.mixed_precision.value:
        return base
    return next(
        (s.limit for s in limits if s.batch_size == batch and s.mixed_precision == precision),
        None,
    )


def _shuffle_choice(
    result: ProfileResult,
    cores: int,
    rate: TrainingRate | None,
    baseline: Knobs,
    domain: Domain | None,
    input_cpu: InputCpu | None,
) -> tuple[int, PipelineModel] | None:
    """The shuffle buffer to propose for a restarting dataset, and the model under it.

    A refill costs in proportion to the buffer, so the buffers within `SHUFFLE_TOLERANCE` of
    the best predicted rate are the small ones; of those the one nearest the baseline's is
    proposed, ties to the smaller: the baseline's own when the model cannot tell it from the
    best, else the largest the tolerance admits. A larger buffer than the baseline's changes
    training and costs refill time for nothing the model predicts.
    """
    if result.restarts is None or baseline.sites or not isinstance(domain, (Choices, IntRange)):
        return None
    own = baseline.shuffle_buffer
    models: dict[int, PipelineModel] = {}
    for value in _values(domain, own):
        model = model_from_profile(result, cores, rate, value / own, input_cpu=input_cpu)
        if model is not None:
            models[value] = model
    if not models:
        return None
    best = max(m.predicted_examples_per_sec for m in models.values())
    near = [
        v for v, m in models.items() if m.predicted_examples_per_sec >= SHUFFLE_TOLERANCE * best
    ]
    keep = min(near, key=lambda v: (abs(math.log2(v / own)), v))
    return keep, models[keep]


def _values(domain: Domain | None, own: Any) -> list[Any]:
    if isinstance(domain, Choices):
        return list(domain.values)
    if isinstance(domain, IntRange):
        return sorted({domain.low, domain.high, own})
    if isinstance(domain, Fixed):
        return [domain.value]
    return [own]


def _differs(baseline: Knobs, name: str, value: Any) -> bool:
    own = getattr(baseline, name)
    return str(getattr(own, "value", own)) != str(getattr(value, "value", value))


def _training_sites_changed(knobs: Mapping[str, Any], baseline: Knobs) -> bool:
    """Whether `knobs` (plain values, call sites nested or at the top) change a training site."""
    sites = {**(knobs.get("sites") or {}), **{n: v for n, v in knobs.items() if is_site_name(n)}}
    return any(
        SiteName.parse(name).kind.changes_training and value != baseline.sites.get(name)
        for name, value in sites.items()
    )


@dataclasses.dataclass
class ModelTimings:
    """The training settings the model alone was timed under by this tuner's trials.

    A trial that trains as one of them leaves its compute-only phase out
    (`ProfileOptions.compute_known`): the model on cached batches runs alike whatever the
    input's knobs. Trials of another tuner of a shared study are not consulted, so a setting
    may be timed twice, never skipped untimed.
    """

    timed: list[Knobs] = dataclasses.field(default_factory=list)

    def known(self, knobs: Knobs) -> bool:
        """Whether a trial of `knobs` would time the model under a setting already timed."""
        return any(same_training(knobs, earlier) for earlier in self.timed)

    def add(self, knobs: Knobs, result: ProfileResult | None) -> None:
        """Records `knobs`' setting when `result` timed the model alone."""
        if result is not None and result.compute_only is not None:
            self.timed.append(knobs)
