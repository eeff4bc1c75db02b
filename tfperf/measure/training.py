"""The train step alone under a training setting: the limit's per-setting probe."""

from __future__ import annotations

from tfperf.measure._training import (
    Window,
    fastest_window,
    probe_settings,
    time_step,
    training_rate,
)

__all__ = [
    "Window",
    "fastest_window",
    "probe_settings",
    "time_step",
    "training_rate",
]
