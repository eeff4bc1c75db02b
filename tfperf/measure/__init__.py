"""Measuring a pipeline: the step profiler, the analysis of its figures, and each stage alone.

`profile_pipeline` builds a pipeline file for given knobs and measures it end to end, the
pipeline alone and the model alone; `discover_sites` reports the call sites of a plain file or
script with the stage that limits it.
"""

from __future__ import annotations

from tfperf.measure._discover import (
    discover_sites,
)
from tfperf.measure._profiler import (
    Profiler,
    Progress,
    ProgressCallback,
    profile,
)
from tfperf.measure._runner import (
    profile_pipeline,
)
from tfperf.measure._stages import (
    analyse_stages,
)

__all__ = [
    "Profiler",
    "Progress",
    "ProgressCallback",
    "analyse_stages",
    "discover_sites",
    "profile",
    "profile_pipeline",
]
