"""How quantities read to a person: bytes in binary units, durations in ms or s, a list of
names."""

from __future__ import annotations

import re
from collections.abc import Sequence


def format_names(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) < 2 else f"{', '.join(names[:-1])} and {names[-1]}"


def format_bytes(count: float) -> str:
    """Binary units, three significant figures: "1.5 GiB", "512 MiB", "1 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024:
            return f"{count:.3g} {unit}"
        count /= 1024
    return f"{count:.3g} TiB"


def format_seconds(seconds: float) -> str:
    """Milliseconds below a second ("36.2 ms"), seconds above ("1.23 s")."""
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


#: Seconds per unit a duration may be written in; a bare number is seconds.
_DURATION_UNITS = {"": 1.0, "h": 3600.0, "min": 60.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z]*)\s*")


def parse_duration(text: str) -> float:
    """Seconds in a duration as a person writes it: "5ms", "0.02s", "20 ms", "0.5", "5m".

    A bare number is seconds; the units are h, min (or m), s, ms and us. The duration must be
    positive.

    Raises:
        ValueError: the text is no duration, or not a positive one; the message quotes it.

    Example:
        >>> parse_duration("20 ms")
        0.02
    """
    match = _DURATION.fullmatch(text.lower())
    if match is None or match.group(2) not in _DURATION_UNITS:
        raise ValueError(
            f"{text!r} is not a duration: write a number and a unit, e.g. 5ms, 0.02s, "
            "'20 ms' or 5m (units: h, min or m, s, ms, us; a bare number is seconds)"
        )
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if not 0 < seconds < float("inf"):
        raise ValueError(f"a duration must be positive, but got {text!r}")
    return seconds
