"""tfperf: profile and tune TensorFlow input pipelines.

The public API is re-exported here and imported lazily, so `import tfperf` costs nothing until
a name is used (TensorFlow itself is imported only where a pipeline is built).

Example:
    >>> import tfperf
    >>> knobs = tfperf.Knobs(batch_size=64, num_parallel_calls=tfperf.AUTOTUNE)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfperf.errors import (
        EmptyDatasetError,
        KnobError,
        PipelineFileError,
        PipelineRuntimeError,
        TfperfError,
    )
    from tfperf.frameworks.tensorflow import profile_pipeline
    from tfperf.knobs import AUTOTUNE, Knobs, Precision
    from tfperf.measure import Profiler, Progress, profile
    from tfperf.pipeline import PipelineFile, load_pipeline
    from tfperf.results import Phase, ProfileResult, Verdict
    from tfperf.results.tune import TuneResult
    from tfperf.study import load_trials_frame as trials_frame
    from tfperf.tuner import TuneOptions, tune

__all__ = [
    "AUTOTUNE",
    "EmptyDatasetError",
    "KnobError",
    "Knobs",
    "Phase",
    "PipelineFile",
    "PipelineFileError",
    "PipelineRuntimeError",
    "Precision",
    "ProfileResult",
    "Profiler",
    "Progress",
    "TfperfError",
    "TuneOptions",
    "TuneResult",
    "Verdict",
    "load_pipeline",
    "profile",
    "profile_pipeline",
    "trials_frame",
    "tune",
]

_HOMES = {
    "AUTOTUNE": "tfperf.knobs",
    "Knobs": "tfperf.knobs",
    "Precision": "tfperf.knobs",
    "EmptyDatasetError": "tfperf.errors",
    "KnobError": "tfperf.errors",
    "PipelineFileError": "tfperf.errors",
    "PipelineRuntimeError": "tfperf.errors",
    "TfperfError": "tfperf.errors",
    "PipelineFile": "tfperf.pipeline",
    "load_pipeline": "tfperf.pipeline",
    "Profiler": "tfperf.measure",
    "Progress": "tfperf.measure",
    "profile": "tfperf.measure",
    "Phase": "tfperf.results",
    "ProfileResult": "tfperf.results",
    "Verdict": "tfperf.results",
    "profile_pipeline": "tfperf.frameworks.tensorflow",
    "TuneOptions": "tfperf.tuner",
    "TuneResult": "tfperf.results.tune",
    "tune": "tfperf.tuner",
    "trials_frame": "tfperf.study",
}

_RENAMED = {"trials_frame": "load_trials_frame"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tfperf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
