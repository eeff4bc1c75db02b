"""Measuring a pipeline, whatever its framework: the step timing loop, the analysis of its
figures, and the pipeline model that states its limit.

`profile` runs the three measurements of one configuration on any iterable input and step;
a framework (`tfperf.frameworks`) builds them, recovers its stages and calls it. Nothing here
imports a framework.
"""

from __future__ import annotations

from tfperf.measure._analysis import (
    CONTENTION_AT,
    attribute_restarts,
)
from tfperf.measure._bottleneck import (
    find_bottleneck,
    stage_report,
    with_added_costs,
)
from tfperf.measure._driver import Measurement, display_path, drive
from tfperf.measure._model import (
    InputCpu,
    PipelineModel,
    model_cpu_s_per_example,
    model_from_profile,
    nearest_limit_input_cpu,
    profile_limit,
)
from tfperf.measure._policy import THREAD_CAP
from tfperf.measure._profiler import (
    Profiler,
    profile,
)
from tfperf.measure._recorder import (
    Progress,
    ProgressCallback,
    batch_examples,
    leaves,
    synchronise,
)
from tfperf.measure._restarts import (
    EpochInfo,
    restart_stage,
)
from tfperf.measure._revise import revise_limit
from tfperf.measure._window import (
    Budget,
    window_steps,
)

__all__ = [
    "CONTENTION_AT",
    "THREAD_CAP",
    "Budget",
    "EpochInfo",
    "InputCpu",
    "Measurement",
    "PipelineModel",
    "Profiler",
    "Progress",
    "ProgressCallback",
    "attribute_restarts",
    "batch_examples",
    "display_path",
    "drive",
    "find_bottleneck",
    "leaves",
    "model_cpu_s_per_example",
    "model_from_profile",
    "nearest_limit_input_cpu",
    "profile",
    "profile_limit",
    "restart_stage",
    "revise_limit",
    "stage_report",
    "synchronise",
    "window_steps",
    "with_added_costs",
]
