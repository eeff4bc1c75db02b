"""What every subcommand shares: the command interface and argument parsers with clear errors."""

from __future__ import annotations

import abc
import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

from tfperf.errors import KnobError
from tfperf.knobs import check_value


class Command(abc.ABC):
    """One subcommand: its name, its help, its arguments and what it runs."""

    name: str
    help: str
    description: str

    @abc.abstractmethod
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    @abc.abstractmethod
    def run(self, args: argparse.Namespace) -> int:
        """Runs the command; returns the process exit status."""


def say(message: str, args: argparse.Namespace) -> None:
    """Prints `message` on stderr at once, unless `--quiet`."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr, flush=True)


def positive_int(text: str) -> int:
    """argparse type for counts that must be >= 1."""
    return _bounded_int(text, lowest=1, meaning="a positive integer (>= 1)")


def non_negative_int(text: str) -> int:
    """argparse type for counts that may be 0."""
    return _bounded_int(text, lowest=0, meaning="an integer >= 0")


def knob_assignment(text: str) -> tuple[str, Any]:
    """argparse type for `NAME=VALUE` knob settings, validated like `BASELINE` entries."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE such as batch_size=64, but got {text!r}"
        )
    try:
        return name.strip(), check_value(name.strip(), _parse_scalar(raw.strip()))
    except KnobError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def check_assignments(
    assignments: Sequence[tuple[str, Any]], framework: str, *, shown: str, option: str
) -> None:
    """Refuses `--set`/`--fix` knobs that act only in another framework's pipelines: they
    are checked as names when parsed, and against the file's framework once it is known.

    Raises:
        KnobError: naming the knob, the file and the knobs its framework takes.
    """
    from tfperf.pipeline import check_framework_knobs

    names = [name for name, _ in assignments]
    check_framework_knobs(names, framework, shown=shown, source=option)


def _parse_scalar(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return int(raw)
    except ValueError:
        return raw


def _bounded_int(text: str, *, lowest: int, meaning: str, highest: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {meaning}, but got {text!r}") from None
    if value < lowest or (highest is not None and value > highest):
        raise argparse.ArgumentTypeError(f"must be {meaning}, but got {value}")
    return value


_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def byte_size(text: str) -> int:
    """argparse type for memory sizes: 512M, 8G, 1.5GiB, or plain bytes (binary units)."""
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = cleaned, ""
    if cleaned and cleaned[-1] in _UNITS:
        number, unit = cleaned[:-1], cleaned[-1]
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 512M, 8G or 1.5GiB, but got {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a size must be positive, but got {text!r}")
    return int(value)


def non_negative_seconds(text: str) -> float:
    """argparse type for a duration in seconds that may be 0 (off)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, but got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, but got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type for durations in seconds, > 0 and finite."""
    return _positive(text, "a number of seconds above 0, e.g. 30")


def gigabits_per_second(text: str) -> float:
    """argparse type for a bandwidth in Gbit/s (`--network-gbps`), > 0 and finite."""
    return _positive(text, "a bandwidth in Gb/s above 0, e.g. 10 for a 10 Gb/s link")


def examples_per_second(text: str) -> float:
    """argparse type for a rate in examples/s (`--model-examples-per-sec`), > 0 and finite."""
    return _positive(text, "a rate in examples/s above 0, e.g. 2000")


def speedup_factor(text: str) -> float:
    """argparse type for `--accelerator-speedup`: how many times faster a step is, > 0."""
    return _positive(text, "a number above 0 (e.g. 8 for a step eight times faster)")


def _positive(text: str, meaning: str) -> float:
    # float() takes "nan" and "inf": neither is a measure of anything, and NaN would pass
    # every comparison below and reach the result JSON.
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be {meaning}, but got {text!r}")
    return value


#: The highest TCP port.
_PORTS = 65535


def port_number(text: str) -> int:
    """argparse type for a TCP port: 1 to 65535, or 0 for a free one the OS picks."""
    return _bounded_int(
        text,
        lowest=0,
        highest=_PORTS,
        meaning=f"a TCP port from 1 to {_PORTS}, or 0 for any free one",
    )
