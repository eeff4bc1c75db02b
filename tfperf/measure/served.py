"""A script's own training loop as the profiler's train step (`ServedLoop`)."""

from __future__ import annotations

from tfperf.measure._cycle import cycled_at
from tfperf.measure._served import (
    Continued,
    InStep,
    Passes,
    ServedLoop,
    Stop,
    script_phase_s,
)

__all__ = [
    "Continued",
    "InStep",
    "Passes",
    "ServedLoop",
    "Stop",
    "cycled_at",
    "script_phase_s",
]
