"""The configuration tfperf measures and tunes: knobs, call-site knobs and search spaces.

Core types with no TensorFlow: `Knobs` (a closed, frozen dataclass of tf.data settings, each
field a knob's one declaration, read through `KNOBS`), the
grammar of call-site knob names (`SiteName`, `SiteValues`), and the domains a `SEARCH_SPACE`
declares (`Choices`, `IntRange`, `Fixed`).

Example:
    >>> from tfperf.knobs import AUTOTUNE, Knobs
    >>> Knobs(batch_size=64, prefetch=AUTOTUNE).batch_size
    64
"""

from __future__ import annotations

from tfperf.knobs._choices import Precision, ShardPolicy
from tfperf.knobs._knobs import (
    CODE_KNOBS,
    KNOBS,
    SERVICE_KNOBS,
    SITES,
    STRATEGY_KNOBS,
    Knobs,
    check_names,
    check_value,
    framework_knobs,
)
from tfperf.knobs._sitename import (
    AUTOTUNE,
    TUNABLE,
    SiteKind,
    SiteName,
    SiteValues,
    check_site_value,
    format_site_value,
    is_site_name,
    site_kind,
    training_sites,
)
from tfperf.knobs._space import (
    Choices,
    Domain,
    Fixed,
    IntRange,
    cycle_conflicts,
    from_jsonable,
    parse_search_space,
    to_jsonable,
)
from tfperf.knobs._values import format_value

__all__ = [
    "AUTOTUNE",
    "CODE_KNOBS",
    "KNOBS",
    "SERVICE_KNOBS",
    "SITES",
    "STRATEGY_KNOBS",
    "TUNABLE",
    "Choices",
    "Domain",
    "Fixed",
    "IntRange",
    "Knobs",
    "Precision",
    "ShardPolicy",
    "SiteKind",
    "SiteName",
    "SiteValues",
    "check_names",
    "check_site_value",
    "check_value",
    "cycle_conflicts",
    "format_site_value",
    "format_value",
    "framework_knobs",
    "from_jsonable",
    "is_site_name",
    "parse_search_space",
    "site_kind",
    "to_jsonable",
    "training_sites",
]
