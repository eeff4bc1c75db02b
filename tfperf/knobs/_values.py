"""A knob's value checked by its declared `Kind` (`check_kind`: the one check every value
passes, normalising 'AUTOTUNE' to -1), and written for a person (`format_value`)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from tfperf.errors import KnobError
from tfperf.knobs._choices import (
    Precision,
    ProcessingMode,
    ServiceCompression,
    ShardPolicy,
    StartMethod,
    TargetWorkers,
)
from tfperf.knobs._declare import Kind
from tfperf.knobs._sitename import AUTOTUNE, SiteValues, as_int

#: The kinds whose values are one of an enum's, or None (the runtime's default).
_CHOICES: dict[Kind, type[Enum]] = {
    Kind.SHARD_POLICY: ShardPolicy,
    Kind.PROCESSING_MODE: ProcessingMode,
    Kind.SERVICE_COMPRESSION: ServiceCompression,
    Kind.TARGET_WORKERS: TargetWorkers,
    Kind.START_METHOD: StartMethod,
}


def format_value(value: Any) -> str:
    """How a knob value reads to a person: AUTOTUNE by name, strings unquoted."""
    if isinstance(value, Enum):
        return str(value.value)
    if value == AUTOTUNE and isinstance(value, int) and not isinstance(value, bool):
        return "AUTOTUNE"
    return str(value)


def plain_value(value: Any) -> Any:
    """The JSON-ready value: an enum as its string."""
    return value.value if isinstance(value, Enum) else value


def check_kind(name: str, kind: Kind, value: Any) -> Any:
    """`value` for knob `name`, normalised, if it is one `kind` accepts; else `KnobError`."""
    if kind is Kind.SITES:
        if isinstance(value, SiteValues):
            return value
        if isinstance(value, Mapping):
            return SiteValues(value)
        raise bad_value(name, value, kind)
    if kind is Kind.PRECISION:
        return _check_precision(name, value)
    if kind in _CHOICES:
        return _check_choice(name, value, kind)
    if kind in (Kind.SERVICE_ADDRESS, Kind.JOB_NAME):
        if value is None or (isinstance(value, str) and value.strip()):
            return value if value is None else value.strip()
        raise bad_value(name, value, kind)
    if kind is Kind.OPTIONAL_BOOL:
        if value is None or isinstance(value, bool):
            return value
        raise bad_value(name, value, kind)
    if value is None and kind in (
        Kind.OPTIONAL_THREADS,
        Kind.OPTIONAL_PARALLELISM,
        Kind.OPTIONAL_COUNT,
    ):
        return None
    if isinstance(value, str) and value.strip().upper() == "AUTOTUNE":
        value = AUTOTUNE
    number = as_int(value)
    if number is None:
        raise bad_value(name, value, kind)
    accepts_autotune = kind in (Kind.PARALLELISM, Kind.OPTIONAL_PARALLELISM, Kind.BUFFER)
    lowest = 0 if kind in (Kind.NON_NEGATIVE_INT, Kind.BUFFER, Kind.OPTIONAL_COUNT) else 1
    if number >= lowest or (accepts_autotune and number == AUTOTUNE):
        return number
    raise bad_value(name, value, kind)


def _check_precision(name: str, value: Any) -> Precision:
    try:
        return Precision(value)
    except ValueError:
        raise bad_value(name, value, Kind.PRECISION) from None


def _check_choice(name: str, value: Any, kind: Kind) -> Any:
    if value is None:
        return None
    try:
        return _CHOICES[kind](value.lower() if isinstance(value, str) else value)
    except ValueError:
        raise bad_value(name, value, kind) from None


def bad_value(name: str, value: Any, kind: Kind) -> KnobError:
    """The error for a value of knob `name` that `kind` does not accept."""
    return KnobError(f"knob {name!r} must be {kind.value}, but got {value!r}.")
