"""What a knob declares (`Knob`), who applies it (`Applier`), and what its search domain
depends on (`SearchContext`); `tfperf.knobs.KNOBS` holds every declaration.
"""

from __future__ import annotations

from tfperf.knobs._declare import (
    Applier,
    Knob,
    SearchContext,
)

__all__ = [
    "Applier",
    "Knob",
    "SearchContext",
]
