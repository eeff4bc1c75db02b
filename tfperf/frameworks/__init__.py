"""The seam between tfperf and an input framework: one interface, one implementation each.

`Framework` (see `tfperf.frameworks._base` for its invariants) is what the measurement core
holds; `get("tensorflow")` returns the TensorFlow implementation, imported on first use, and
`detect(path)` the framework a pipeline file is written for.

Example:
    >>> from tfperf import frameworks
    >>> frameworks.names()
    ['torch', 'tensorflow']
"""

from __future__ import annotations

from tfperf.frameworks._base import (
    CallSites,
    Framework,
    Input,
    Pipeline,
    Service,
    StageNode,
    Workers,
)
from tfperf.frameworks._devices import (
    DeviceLayout,
    StrategyKind,
)
from tfperf.frameworks._recorder import Place, Seen, SiteRecorder, call_span, site_at
from tfperf.frameworks._registry import (
    DEFAULT,
    detect,
    detect_result,
    detect_source,
    get,
    names,
)
from tfperf.frameworks._request import ProfileOptions, ProfileRequest
from tfperf.frameworks._words import Words

__all__ = [
    "DEFAULT",
    "CallSites",
    "DeviceLayout",
    "Framework",
    "Input",
    "Pipeline",
    "Place",
    "ProfileOptions",
    "ProfileRequest",
    "Seen",
    "Service",
    "SiteRecorder",
    "StageNode",
    "StrategyKind",
    "Words",
    "Workers",
    "call_span",
    "detect",
    "detect_result",
    "detect_source",
    "get",
    "names",
    "site_at",
]
