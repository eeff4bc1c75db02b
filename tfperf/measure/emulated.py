"""An emulated accelerator step (`--step-time`): a sleep in place of the model's step."""

from __future__ import annotations

from tfperf.measure._emulated import (
    EmulatedStep,
)

__all__ = [
    "EmulatedStep",
]
