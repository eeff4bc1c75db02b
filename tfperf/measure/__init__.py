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
    stage_report,
    with_added_costs,
)
from tfperf.measure._bottleneck import checked_against
from tfperf.measure._model import (
    THREAD_CAP,
    InputCpu,
    PipelineModel,
    Restarts,
    StageCost,
    input_cpu_s_per_example,
    model_from_profile,
    nearest_limit_input_cpu,
    pipeline_limit,
    pipeline_model,
    profile_limit,
    profile_restarts,
    revise_limit,
    stage_costs,
)
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
    "PipelineModel",
    "Profiler",
    "Progress",
    "ProgressCallback",
    "Restarts",
    "StageCost",
    "attribute_restarts",
    "batch_examples",
    "checked_against",
    "input_cpu_s_per_example",
    "leaves",
    "model_from_profile",
    "nearest_limit_input_cpu",
    "pipeline_limit",
    "pipeline_model",
    "profile",
    "profile_limit",
    "profile_restarts",
    "restart_stage",
    "revise_limit",
    "stage_costs",
    "stage_report",
    "synchronise",
    "window_steps",
    "with_added_costs",
]
