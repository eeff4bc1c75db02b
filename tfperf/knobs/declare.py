"""What a knob declares (`Knob`), who applies it (`Applier`), and what its search domain
depends on (`SearchContext`, `PREFETCH_DEPTHS`, `powers_of_two`); `tfperf.knobs.KNOBS` holds
every declaration. What follows from the declarations for one configuration: what to check
when a recommendation turns a knob on (`turned_on_checks`, `site_check`), and the knobs as a
DataLoader runs them (`as_run`).
"""

from __future__ import annotations

from tfperf.knobs._as_run import as_run
from tfperf.knobs._checks import site_check, turned_on_checks
from tfperf.knobs._declare import PREFETCH_DEPTHS, Applier, Knob, SearchContext, powers_of_two

__all__ = [
    "PREFETCH_DEPTHS",
    "Applier",
    "Knob",
    "SearchContext",
    "as_run",
    "powers_of_two",
    "site_check",
    "turned_on_checks",
]
