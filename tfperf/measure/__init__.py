"""Measuring a pipeline: the step profiler, the analysis of its figures, and each stage alone.

`profile_pipeline` builds a pipeline file for given knobs and measures it end to end, the
pipeline alone and the model alone; `discover_sites` reports the call sites of a plain file or
script with the stage that limits it.
"""

from __future__ import annotations

from tfperf.measure._analysis import (
    CONTENTION_AT,
)
from tfperf.measure._chain import (
    recover_stages,
)
from tfperf.measure._discover import (
    discover_sites,
)
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
    stage_costs,
)
from tfperf.measure._profiler import (
    Profiler,
    profile,
)
from tfperf.measure._recorder import (
    Progress,
    ProgressCallback,
)
from tfperf.measure._runner import (
    profile_pipeline,
)
from tfperf.measure._scaling import (
    replica_counts,
    scaling_curve,
    scaling_point,
)
from tfperf.measure._stages import (
    analyse_stages,
)
from tfperf.measure._training import (
    probe_training,
)

__all__ = [
    "CONTENTION_AT",
    "THREAD_CAP",
    "InputCpu",
    "PipelineModel",
    "Profiler",
    "Progress",
    "ProgressCallback",
    "Restarts",
    "StageCost",
    "analyse_stages",
    "discover_sites",
    "input_cpu_s_per_example",
    "model_from_profile",
    "nearest_limit_input_cpu",
    "pipeline_limit",
    "pipeline_model",
    "probe_training",
    "profile",
    "profile_limit",
    "profile_pipeline",
    "profile_restarts",
    "recover_stages",
    "replica_counts",
    "scaling_curve",
    "scaling_point",
    "stage_costs",
]
