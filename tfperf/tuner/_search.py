"""The search space `tfperf tune` explores, and the bridge between it and Optuna trials.

`build_space` starts from ranges sized for the machine and the file's `BASELINE`
(`default_space`), lets the file's `SEARCH_SPACE` replace a knob's domain and `--fix` flags pin
knobs, then makes sure the two reference trials every study starts with (the baseline, and
everything AUTOTUNE) lie inside it. `suggest_knobs` turns an Optuna trial into `Knobs`;
`reference_params` is its inverse, for `study.enqueue_trial`, and `sampler_params` the params a
reference trial records so the sampler learns from it. Optuna is imported only where a
distribution is built: the other functions take a trial object and call its `suggest_*` methods.

A plain file or script tunes its call sites (`Knobs.sites`, found by the framework's recorder):
each site is a dimension of its own, named like the site (`map@train.py:23.num_parallel_calls`),
with a range by what its argument controls (`site_space`). The tuner needs nothing else: the site
values travel inside `Knobs` to the trial, into the stored `knobs` and back.

Example:
    >>> from tfperf.hardware import Machine
    >>> machine = Machine(cpu_count=2, total_ram_bytes=2**34, available_ram_bytes=2**33,
    ...                   gpu_names=(), cpu_bf16=False)
    >>> space = build_space(Knobs(batch_size=64), machine, {}, {"prefetch": 2})
    >>> space["batch_size"], space["prefetch"]
    (Choices(values=(32, 64, 128, 256)), Fixed(value=2))
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from tfperf import frameworks
from tfperf.errors import KnobError
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
    check_names,
    check_value,
    format_value,
    is_site_name,
)
from tfperf.knobs.declare import SearchContext, powers_of_two

if TYPE_CHECKING:
    import optuna


logger = logging.getLogger(__name__)

#: Knobs that take AUTOTUNE, and that the everything-AUTOTUNE reference trial sets to it.
AUTOTUNE_KNOBS = KNOBS.where(lambda knob: knob.autotune)


def default_space(
    baseline: Knobs,
    machine: Machine,
    *,
    distributed: bool = False,
    framework: str = frameworks.DEFAULT,
) -> dict[str, Domain]:
    """Domains for every knob of `framework`, sized for `machine` and centred on `baseline`.

    Each domain holds the baseline's own value; a domain left with one value is `Fixed`.

    These are the domains before the pipeline model exists: they hold both references
    (the baseline, everything on AUTOTUNE) and serve a study whose baseline gave no stage
    analysis. Once the baseline trial has run, the parallelism knobs, parallelism call sites
    and `private_threadpool_size` that tfperf sizes itself (not in the file's `SEARCH_SPACE`,
    not fixed) are no longer searched here: the model sizes them by Little's law (threads ~
    target rate x wall time per element, on any core count) and TPE searches a range around
    that count, widened when the best trial sits on its edge, up to `THREAD_CAP` threads
    (`tfperf.tuner._guide`, docs/limit.md).

    Each knob's domain is the `search` its declaration names (`tfperf.knobs.KNOBS`): e.g.
    the parallelism knobs try powers of two up to `max(8, 4 * cpu_count)`, `cpu_count` and
    AUTOTUNE; `batch_size` and `shuffle_buffer` stay within a few times the baseline's, as
    they change training; the strategy knobs are searched only under a strategy
    (`distributed`), `gpu_memory_growth` only with a GPU. A knob that does not act in
    `framework`'s pipelines (a DataLoader's `num_workers` for tf.data) has no domain.
    """
    context = search_context(machine, distributed=distributed)
    context = dataclasses.replace(context, service=baseline.service is not None)
    declared = [knob for knob in KNOBS if framework in knob.frameworks]
    knobs = {
        knob.name: _domain(_with(knob.domain(value, context), [value]))
        for knob, value in ((knob, getattr(baseline, knob.name)) for knob in declared)
    }
    return {**knobs, **site_space(baseline.sites, machine)}


def search_context(machine: Machine, *, distributed: bool = False) -> SearchContext:
    """What the knobs' declared domains depend on, for `machine`."""
    return SearchContext(machine.cpu_count, machine.has_gpu, machine.cpu_bf16, distributed)


def site_space(sites: Mapping[str, int | None], machine: Machine) -> dict[str, Domain]:
    """A domain for each call site, by what its argument controls, holding its written value.

    Parallelism (`map(num_parallel_calls)`, `interleave(cycle_length)`, readers'
    `num_parallel_reads`) and `prefetch` take the knobs' ranges; a `shuffle` buffer
    1/4-4x and a `batch` size 1/2-4x the written value. A value the call leaves out is None,
    tf.data's default, and stays a choice, so the baseline is reachable.

    Example:
        >>> machine = Machine(cpu_count=2, total_ram_bytes=2**34, available_ram_bytes=2**33,
        ...                   gpu_names=(), cpu_bf16=False)
        >>> site_space({"batch@p.py:9.batch_size": 32}, machine)
        {'batch@p.py:9.batch_size': Choices(values=(16, 32, 64, 128))}
    """
    domains: dict[str, Domain] = {}
    for name, value in sites.items():
        parsed = SiteName.parse(name)
        # A map moved after its batch may compute something else: only with --reorder.
        opt_in = parsed.argument == "after_batch"
        values = [] if opt_in else _site_values(parsed.kind, value, machine)
        domains[name] = _domain(_with(values, [value]))
    return domains


def _site_values(kind: SiteKind, value: int | None, machine: Machine) -> list[Any]:
    # A site takes the domain of the first knob declared as such an argument (`Knob.call`),
    # less that knob's None ("as the file wrote it"): the written value, which the site's
    # domain holds anyway.
    if kind is SiteKind.EDIT:  # a structure edit: as written (0) or made (1)
        return [0, 1]
    if kind is SiteKind.FLAG:  # a DataLoader switch; one left out (None) is off already
        return [1] if value is None else [0, 1]
    if kind in (SiteKind.SHUFFLE, SiteKind.BATCH) and (value is None or value <= 0):
        return []
    like = next(knob for knob in KNOBS if knob.site_kind is kind)
    return [each for each in like.domain(value, search_context(machine)) if each is not None]


def build_space(
    baseline: Knobs,
    machine: Machine,
    file_space: Mapping[str, Domain],
    fixes: Mapping[str, Any],
    *,
    distributed: bool = False,
    framework: str = frameworks.DEFAULT,
) -> dict[str, Domain]:
    """The space a study searches: defaults, then `SEARCH_SPACE`, then fixes, then references.

    1. `default_space(baseline, machine)` gives every knob a domain;
    2. each entry of the file's `SEARCH_SPACE` (`file_space`) replaces its knob's domain;
    3. each fix (`--fix batch_size=256`) makes its knob `Fixed`;
    4. every knob that is not `Fixed` gets the baseline's value and, for the parallelism knobs
       and `prefetch`, AUTOTUNE, so both reference trials can be enqueued. `Choices` gain the
       missing values (a number in its ascending place when the choices were in order, others
       at the end); an `IntRange` widens to reach the baseline, but AUTOTUNE
       (a sentinel) and None are not numbers a range can hold, so such a range becomes
       `Choices` of its ends and the powers of two between them, plus the reference values.

    Raises:
        KnobError: a fix names an unknown knob or holds an invalid value.
    """
    space = default_space(baseline, machine, distributed=distributed, framework=framework)
    space.update(file_space)
    check_names(fixes, source="--fix")
    for name, value in fixes.items():
        if is_site_name(name) and name not in baseline.sites:
            known = ", ".join(baseline.sites) or "none (the file reads knobs)"
            raise KnobError(f"--fix: no call site {name!r} in this pipeline. Sites: {known}.")
        try:
            space[name] = Fixed(check_value(name, value))
        except KnobError as error:
            raise KnobError(f"--fix: {error}") from None
    for name, domain in space.items():
        if not isinstance(domain, Fixed):
            space[name] = _with_references(name, domain, _reference_values(name, baseline))
    return space


def autotune_knobs(baseline: Knobs) -> Knobs:
    """The baseline with every parallelism knob and `prefetch` left to tf.data's autotuner.

    Call sites of parallelism and `prefetch` are set to AUTOTUNE too.
    """
    sites = {name: AUTOTUNE for name in baseline.sites if _autotunes(name)}
    return baseline.replace(**dict.fromkeys(AUTOTUNE_KNOBS, AUTOTUNE), **sites)


def _autotunes(name: str) -> bool:
    return SiteName.parse(name).kind in (SiteKind.PARALLELISM, SiteKind.PREFETCH)


#: Suffix of the parameter a guided knob is suggested as (see `tfperf.tuner._guide`).
GUIDED_SUFFIX = "#threads"


def suggest_knobs(
    trial: optuna.trial.BaseTrial,
    space: Mapping[str, Domain],
    base: Knobs,
    guided: Mapping[str, IntRange] | None = None,
) -> Knobs:
    """The knobs of one trial: fixed values, and Optuna's suggestion for every other domain.

    Knobs absent from `space` keep `base`'s value. Precisions are suggested as their strings,
    since Optuna's categorical choices must be None, bool, int, float or str. A knob in
    `guided` (and not fixed) is suggested from its model range instead, as the integer
    parameter `<name>#threads` on a log scale, whose bounds may differ from trial to trial.

    Example:
        >>> import optuna
        >>> study = optuna.create_study()
        >>> trial = study.ask()
        >>> suggest_knobs(trial, {"batch_size": Fixed(64)}, Knobs()).batch_size
        64
    """
    values: dict[str, Any] = {}
    for name, domain in space.items():
        if isinstance(domain, Fixed):
            values[name] = domain.value
        elif guided and name in guided:
            low, high = guided[name].low, guided[name].high
            values[name] = trial.suggest_int(name + GUIDED_SUFFIX, low, high, log=True)
        elif isinstance(domain, Choices):
            choices = [_param(value) for value in domain.values]
            values[name] = trial.suggest_categorical(name, choices)
        else:
            values[name] = trial.suggest_int(name, domain.low, domain.high, log=domain.log)
    return base.replace(**values)


def reference_params(knobs: Knobs, space: Mapping[str, Domain]) -> dict[str, Any]:
    """Optuna params for `study.enqueue_trial` that make `suggest_knobs` return `knobs`.

    Fixed knobs are left out: `suggest_knobs` takes their value from the space.

    Raises:
        KnobError: a value of `knobs` lies outside its domain, so Optuna would ignore it and
            sample another (build the space with `build_space`, which includes the references).

    Example:
        >>> reference_params(Knobs(batch_size=64), {"batch_size": Choices((32, 64))})
        {'batch_size': 64}
    """
    params: dict[str, Any] = {}
    for name, domain in space.items():
        if isinstance(domain, Fixed):
            continue
        value = _value_of(knobs, name)
        if not _contains(domain, value):
            raise KnobError(
                f"knob {name!r} = {format_value(value)} is outside its search domain "
                f"{_describe_domain(domain)}, so the trial cannot be enqueued. Add the value "
                "to the domain (build_space adds the baseline's and AUTOTUNE)."
            )
        params[name] = _param(value)
    return params


def sampler_params(
    knobs: Knobs, space: Mapping[str, Domain], guided: Mapping[str, IntRange] | None = None
) -> dict[str, tuple[Any, optuna.distributions.BaseDistribution]]:
    """The params `suggest_knobs` would have recorded for `knobs`: name -> (value, distribution).

    A reference trial (the baseline, AUTOTUNE, the model's estimates) runs knobs it was given,
    not ones it suggested, so Optuna records no params for it and TPE, which learns only from
    params, would start from nothing. With these recorded, TPE's first proposals refine the
    best reference. A value outside the distribution TPE samples now (AUTOTUNE, a thread count
    outside the model's range, an unset private pool) is left out: that trial simply has no
    figure for that param, as Optuna allows.

    Example:
        >>> sampler_params(Knobs(batch_size=64), {"batch_size": Choices((32, 64))})
        {'batch_size': (64, CategoricalDistribution(choices=(32, 64)))}
    """
    from optuna.distributions import CategoricalDistribution, IntDistribution

    params: dict[str, tuple[Any, optuna.distributions.BaseDistribution]] = {}
    for name, domain in space.items():
        value = _param(_value_of(knobs, name))
        if isinstance(domain, Fixed):
            continue
        if guided and name in guided:
            low, high = guided[name].low, guided[name].high
            if _whole(value) and low <= value <= high:
                params[name + GUIDED_SUFFIX] = (value, IntDistribution(low, high, log=True))
        elif isinstance(domain, Choices):
            choices = tuple(_param(choice) for choice in domain.values)
            if any(_same(value, choice) for choice in choices):
                params[name] = (value, CategoricalDistribution(choices))
        elif _whole(value) and domain.low <= value <= domain.high:
            params[name] = (value, IntDistribution(domain.low, domain.high, log=domain.log))
    return params


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def describe_space(space: Mapping[str, Domain]) -> list[str]:
    """One line per knob for the terminal, e.g. "batch_size  32, 64, 128 (3 choices)".

    Example:
        >>> describe_space({"prefetch": Fixed(2), "batch_size": IntRange(16, 256, log=True)})
        ['batch_size  16 to 256, log scale', 'prefetch    2 (fixed)']
    """
    names = [name for name in Knobs.names() if name in space]
    names += sorted(name for name in space if is_site_name(name))
    width = max((len(name) for name in names), default=0)
    return [f"{name.ljust(width)}  {_describe_domain(space[name])}" for name in names]


def _value_of(knobs: Knobs, name: str) -> Any:
    return knobs.sites.get(name) if is_site_name(name) else getattr(knobs, name)


def _describe_domain(domain: Domain) -> str:
    if isinstance(domain, Fixed):
        return f"{format_value(domain.value)} (fixed)"
    if isinstance(domain, Choices):
        shown = ", ".join(format_value(value) for value in domain.values)
        return f"{shown} ({len(domain.values)} choices)"
    return f"{domain.low} to {domain.high}{', log scale' if domain.log else ''}"


def _reference_values(name: str, baseline: Knobs) -> list[Any]:
    values = [_value_of(baseline, name)]
    autotuned = _autotunes(name) if is_site_name(name) else name in AUTOTUNE_KNOBS
    return [*values, AUTOTUNE] if autotuned else values


def _with_references(name: str, domain: Choices | IntRange, needed: list[Any]) -> Domain:
    missing = [value for value in needed if not _contains(domain, value)]
    if not missing:
        return domain
    if isinstance(domain, Choices):
        widened: Domain = Choices(tuple(_with(domain.values, missing)))
    elif all(_is_number(value) for value in missing):
        low, high = min(domain.low, *missing), max(domain.high, *missing)
        widened = IntRange(low, high, domain.log)
    else:
        numbers = sorted({domain.low, *powers_of_two(max(domain.low, 1), domain.high), domain.high})
        widened = Choices(tuple(_with(numbers, needed)))
    logger.info(
        "Search space: %s is %s so that the baseline and AUTOTUNE trials fit.",
        name,
        _describe_domain(widened),
    )
    return widened


def _contains(domain: Domain, value: Any) -> bool:
    if isinstance(domain, Fixed):
        return _same(domain.value, value)
    if isinstance(domain, Choices):
        return _has(domain.values, value)
    return _is_number(value) and domain.low <= value <= domain.high


def _same(a: Any, b: Any) -> bool:
    # `False == 0` in Python, but a knob's False and 0 are different settings.
    return type(a) is type(b) and a == b


def _is_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value != AUTOTUNE


def _with(values: Iterable[Any], extra: Iterable[Any]) -> list[Any]:
    """`values` then the `extra` ones they lack; an added number goes in its ascending place.

    Numbers are placed in order only where `values` listed them in order, so a user's own
    ordering of `SEARCH_SPACE` choices is kept; AUTOTUNE, None, booleans and precisions go last.
    """
    merged: list[Any] = []
    for value in values:
        if not _has(merged, value):
            merged.append(value)
    numbers = [value for value in merged if _is_number(value)]
    in_order = numbers == sorted(numbers)
    for value in extra:
        if not _has(merged, value):
            merged.insert(_place(merged, value) if in_order else len(merged), value)
    return merged


def _place(values: list[Any], value: Any) -> int:
    if not _is_number(value):
        return len(values)
    positions = [i for i, v in enumerate(values) if _is_number(v)]
    larger = [i for i in positions if values[i] > value]
    if larger:
        return larger[0]
    return positions[-1] + 1 if positions else len(values)


def _has(values: Iterable[Any], value: Any) -> bool:
    return any(_same(value, seen) for seen in values)


def _domain(values: list[Any]) -> Domain:
    return Fixed(values[0]) if len(values) == 1 else Choices(tuple(values))


def _param(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value
