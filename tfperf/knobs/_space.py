"""The search space a pipeline file's `SEARCH_SPACE` declares for `tfperf tune`.

Each knob named in `SEARCH_SPACE` gets a `Domain`: a list of `Choices`, an `IntRange`, or a
`Fixed` value. Values are validated and normalised like `Knobs` values ("AUTOTUNE" becomes -1),
so a typo stops the run before any trial starts. Knobs left out keep their `BASELINE` value;
the tuner decides that, not this module. Nothing here imports TensorFlow.

Example:
    >>> space = parse_search_space(
    ...     {"batch_size": [32, 64], "prefetch": {"low": 1, "high": 8}, "cycle_length": 4},
    ...     source="pipeline.py: SEARCH_SPACE",
    ... )
    >>> space["batch_size"], space["prefetch"], space["cycle_length"]
    (Choices(values=(32, 64)), IntRange(low=1, high=8, log=False), Fixed(value=4))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeAlias, get_type_hints

from tfperf.errors import KnobError
from tfperf.knobs._knobs import KNOBS, Knobs, check_names, check_value
from tfperf.knobs._sitename import AUTOTUNE
from tfperf.knobs._values import plain_value

_RANGE_KEYS = ("low", "high", "log")


@dataclasses.dataclass(frozen=True)
class Choices:
    """Try each of `values` (validated, normalised, without duplicates, at least two)."""

    values: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class IntRange:
    """Any integer in `[low, high]`, both ends included; `log` samples on a log scale.

    Only integer knobs take ranges, and never AUTOTUNE: it is a sentinel, not a number.
    """

    low: int
    high: int
    log: bool = False


@dataclasses.dataclass(frozen=True)
class Fixed:
    """Hold the knob at `value` in every trial."""

    value: Any


Domain: TypeAlias = Choices | IntRange | Fixed


def parse_search_space(raw: Mapping[str, Any], *, source: str) -> dict[str, Domain]:
    """Validates a `SEARCH_SPACE` mapping and returns one `Domain` per knob named in it.

    A list or tuple gives `Choices` (a one-element list gives `Fixed`); a dict
    `{"low": a, "high": b, "log": bool}` gives an `IntRange` (`Fixed` when low == high); any
    other value gives `Fixed`.

    Args:
        raw: The user's mapping from knob name to list, range dict or single value.
        source: Where `raw` came from, e.g. "pipeline.py: SEARCH_SPACE"; prefixes every message.

    Raises:
        KnobError: an unknown knob name (the message lists the valid ones), an invalid value,
            an empty list, or a malformed range.
    """
    if not isinstance(raw, Mapping):
        raise KnobError(
            f"{source} must be a dict mapping knob names to a list of choices, a range "
            f'{{"low": 1, "high": 8}} or a single value, but it is a {type(raw).__name__}.'
        )
    check_names(raw, source=source)
    return {name: _parse_domain(name, value, source) for name, value in raw.items()}


def to_jsonable(space: Mapping[str, Domain]) -> dict[str, Any]:
    """Plain JSON-ready form, e.g. `{"batch_size": {"type": "choices", "values": [32, 64]}}`."""
    return {name: _domain_to_jsonable(domain) for name, domain in space.items()}


def from_jsonable(
    data: Mapping[str, Any], *, source: str = "saved search space"
) -> dict[str, Domain]:
    """Reads back what `to_jsonable` wrote, validating it as `parse_search_space` does.

    Raises:
        KnobError: an entry is not in the form `to_jsonable` writes, or holds an invalid value.
    """
    raw = {name: _raw_from_jsonable(name, entry, source) for name, entry in data.items()}
    return parse_search_space(raw, source=source)


def _parse_domain(name: str, value: Any, source: str) -> Domain:
    if isinstance(value, (list, tuple)):
        return _parse_choices(name, value, source)
    if isinstance(value, Mapping):
        return _parse_range(name, value, source)
    if isinstance(value, (set, frozenset, range)):
        raise KnobError(
            f"{source}: {name!r} is a {type(value).__name__} ({value!r}); write the choices as "
            f"a list, e.g. {name!r}: {_sorted(value)!r}, or a range as "
            f'{{"low": 1, "high": 8}}.'
        )
    return Fixed(_checked(name, value, source))


def _parse_choices(name: str, values: list[Any] | tuple[Any, ...], source: str) -> Domain:
    if not values:
        raise KnobError(
            f"{source}: {name!r} has an empty list of choices. Give at least one value, "
            f"e.g. {name!r}: [{_example(name)!r}], or leave {name!r} out to keep its "
            "BASELINE value."
        )
    unique: list[Any] = []
    for value in values:
        normalised = _checked(name, value, source, context=f" (in the list {list(values)!r})")
        if normalised not in unique:
            unique.append(normalised)
    return Fixed(unique[0]) if len(unique) == 1 else Choices(tuple(unique))


def _parse_range(name: str, spec: Mapping[Any, Any], source: str) -> Domain:
    where = f"{source}: {name!r}"
    _check_range_keys(name, spec, where)
    if name not in _integer_knobs():
        raise KnobError(
            f"{where} is a range {dict(spec)!r}, but ranges work for integer knobs only "
            f"({', '.join(sorted(_integer_knobs()))}). List the values to try instead, "
            f"e.g. {name!r}: {_list_example(name)!r}."
        )
    low = _range_bound(name, "low", spec["low"], where)
    high = _range_bound(name, "high", spec["high"], where)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise KnobError(f"{where}: `log` must be true or false, but got {log!r}.")
    if low > high:
        raise KnobError(
            f"{where}: `low <= high` must hold, but got (low={low}, high={high}). "
            "Swap the two values?"
        )
    if log and low < 1:
        raise KnobError(
            f"{where}: `low >= 1` must hold when log is true, but got (low={low}). "
            'Start the range at 1, or drop "log".'
        )
    return Fixed(low) if low == high else IntRange(low, high, log)


def _check_range_keys(name: str, spec: Mapping[Any, Any], where: str) -> None:
    unknown = [key for key in spec if key not in _RANGE_KEYS]
    missing = [key for key in ("low", "high") if key not in spec]
    if unknown or missing:
        problem = (
            f"has unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}"
            if unknown
            else f"lacks {' and '.join(repr(k) for k in missing)}"
        )
        raise KnobError(
            f"{where} is a range {dict(spec)!r} that {problem}. Write a range as "
            f'{{"low": 1, "high": 8}} with an optional "log": true, or a list of values.'
        )


def _range_bound(name: str, key: str, value: Any, where: str) -> int:
    bound = _checked(name, value, where, context=f" (range bound {key!r})")
    if not isinstance(bound, int) or bound == AUTOTUNE:
        raise KnobError(
            f"{where}: range bound {key}={value!r} is not a number; a range covers integers "
            f"only. To try {value!r} as well, list the values instead, e.g. "
            f"{name!r}: [{value!r}, 1, 2, 4, 8]."
        )
    return bound


def _checked(name: str, value: Any, source: str, context: str = "") -> Any:
    try:
        return check_value(name, value)
    except KnobError as error:
        raise KnobError(f"{source}: {str(error).rstrip('.')}{context}.") from None


def _sorted(values: Any) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:  # mixed types, e.g. {None, 4}
        return sorted(values, key=repr)


def _integer_knobs() -> frozenset[str]:
    hints = get_type_hints(KNOBS.record)
    return frozenset(name for name in KNOBS.names() if hints[name] in (int, int | None))


def _example(name: str) -> Any:
    return plain_value(KNOBS[name].default)


def _list_example(name: str) -> list[Any]:
    hint = get_type_hints(KNOBS.record)[name]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return [plain_value(member) for member in hint][:2]
    return [True, False] if hint == bool | None else [_example(name)]


def _raw_from_jsonable(name: str, entry: Any, source: str) -> Any:
    kind = entry.get("type") if isinstance(entry, Mapping) else None
    try:
        if kind == "choices":
            return list(entry["values"])
        if kind == "int_range":
            return {"low": entry["low"], "high": entry["high"], "log": entry["log"]}
        if kind == "fixed":
            return entry["value"]
    except (KeyError, TypeError):
        pass
    raise KnobError(
        f"{source}: entry {name!r} is {entry!r}; expected a dict such as "
        '{"type": "choices", "values": [32, 64]}, {"type": "int_range", "low": 1, "high": 8, '
        '"log": false} or {"type": "fixed", "value": 64}. Was it written by tfperf?'
    )


def _domain_to_jsonable(domain: Domain) -> dict[str, Any]:
    if isinstance(domain, Choices):
        return {"type": "choices", "values": [plain_value(v) for v in domain.values]}
    if isinstance(domain, IntRange):
        return {"type": "int_range", "low": domain.low, "high": domain.high, "log": domain.log}
    return {"type": "fixed", "value": plain_value(domain.value)}


def cycle_conflicts(
    knobs: Knobs, *, knob_interleave: bool = False, cores: int | None = None
) -> list[str]:
    """Why tf.data would refuse `knobs`: interleave parallelism above a fixed `cycle_length`.

    tf.data raises when `interleave(cycle_length=c, num_parallel_calls=p)` has a number `c`
    and `p > c` (AUTOTUNE for `p` is accepted). A `cycle_length` of AUTOTUNE is fixed to the
    core count when the iterator is made, so with `cores` given, `p > cores` is refused too.
    Checked per call site (`interleave@f.py:9`'s two arguments), and for the `cycle_length`
    and `num_parallel_calls` knobs when `knob_interleave` says the file passes both to an
    interleave. Empty when valid.

    Example:
        >>> sites = {"interleave@p.py:9.cycle_length": 2,
        ...          "interleave@p.py:9.num_parallel_calls": 4}
        >>> cycle_conflicts(Knobs(sites=sites))
        ['interleave@p.py:9: num_parallel_calls=4 > cycle_length=2']
    """
    from tfperf.knobs._sitename import SiteName

    problems = []
    for name, value in knobs.sites.items():
        site = SiteName.parse(name)
        if site.method != "interleave" or site.argument != "num_parallel_calls":
            continue
        cycle = knobs.sites.get(str(dataclasses.replace(site, argument="cycle_length")))
        cycle = _effective_cycle(cycle, cores)
        if _exceeds(value, cycle):
            where = str(site).rsplit(".", 1)[0]
            problems.append(f"{where}: num_parallel_calls={value} > cycle_length={cycle}")
    cycle = _effective_cycle(knobs.cycle_length, cores)
    if knob_interleave and _exceeds(knobs.num_parallel_calls, cycle):
        problems.append(f"num_parallel_calls={knobs.num_parallel_calls} > cycle_length={cycle}")
    return problems


def _effective_cycle(cycle: Any, cores: int | None) -> Any:
    return cores if cycle == AUTOTUNE and cores is not None else cycle


def _exceeds(parallelism: Any, cycle: Any) -> bool:
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (parallelism, cycle))
    return numbers and cycle > 0 and parallelism != AUTOTUNE and parallelism > cycle
