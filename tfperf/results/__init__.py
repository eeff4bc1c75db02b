"""What tfperf measured and found, as plain records that round-trip through JSON.

Everything the report layer reads lives here, with no TensorFlow and no Optuna. This face
holds a profile (`ProfileResult`, its phases, memory and CPU), the limit, the accelerator's
utilisation (`Utilisation`) and how a trial ended (`TrialStatus`, `TrialOutcome`); one public
module per further concept holds the rest: `tfperf.results.stages` (the stage analysis),
`tfperf.results.scaling` (scaling runs and distribution), `tfperf.results.discovery` (call
sites a build found) and `tfperf.results.tune` (a tuning run: `TuneResult`, `Measurement`,
`Reference`).
"""

from __future__ import annotations

from tfperf.results._json import (
    JsonRecord,
    plain_dict,
    validated,
)
from tfperf.results._limit import (
    RATE_NOISE,
    Limit,
    LimitBound,
    LimitTerm,
    TrainingRate,
)
from tfperf.results._profile import (
    MODERATELY_INPUT_BOUND_AT,
    CpuUsage,
    Environment,
    GpuStats,
    HostMemory,
    Phase,
    PhaseResult,
    ProfileResult,
    StepRecord,
    StepTimeStats,
    TimedValue,
    Verdict,
    Warmup,
)
from tfperf.results._trial import (
    TrialOutcome,
    TrialStatus,
)
from tfperf.results._utilisation import Utilisation

__all__ = [
    "MODERATELY_INPUT_BOUND_AT",
    "RATE_NOISE",
    "CpuUsage",
    "Environment",
    "GpuStats",
    "HostMemory",
    "JsonRecord",
    "Limit",
    "LimitBound",
    "LimitTerm",
    "Phase",
    "PhaseResult",
    "ProfileResult",
    "StepRecord",
    "StepTimeStats",
    "TimedValue",
    "TrainingRate",
    "TrialOutcome",
    "TrialStatus",
    "Utilisation",
    "Verdict",
    "Warmup",
    "plain_dict",
    "validated",
]
