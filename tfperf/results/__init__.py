"""What tfperf measured and found, as plain records that round-trip through JSON.

Everything the report layer reads lives here, with no TensorFlow and no Optuna: a profile
(`ProfileResult`), a tuning run (`TuneResult`, `Measurement`), how a trial ended
(`TrialStatus`, `TrialOutcome`) and the call sites a build found (`Discovery`).
"""

from __future__ import annotations

from tfperf.results._discovery import (
    ArgumentForm,
    CallSite,
    Discovery,
    SlowStage,
    Untunable,
    describe_discovery,
)
from tfperf.results._gpu_memory import (
    GpuMemoryAdvice,
    PeakSource,
    gpu_memory_advice,
)
from tfperf.results._json import (
    JsonRecord,
    validated,
)
from tfperf.results._limit import (
    Estimate,
    Limit,
    LimitBound,
    LimitTerm,
)
from tfperf.results._profile import (
    AutotuneChoice,
    AutotuneReadout,
    CpuUsage,
    Environment,
    GpuStats,
    HostMemory,
    Phase,
    PhaseResult,
    ProfileResult,
    StageKind,
    StageReport,
    StageStat,
    StageUnit,
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
from tfperf.results._tune import (
    HandOver,
    Measurement,
    Objective,
    Speedup,
    TuneResult,
    recommend,
    relative_spread,
    speedup,
    training_changes,
)

__all__ = [
    "ArgumentForm",
    "AutotuneChoice",
    "AutotuneReadout",
    "CallSite",
    "CpuUsage",
    "Discovery",
    "Environment",
    "Estimate",
    "GpuMemoryAdvice",
    "GpuStats",
    "HandOver",
    "HostMemory",
    "JsonRecord",
    "Limit",
    "LimitBound",
    "LimitTerm",
    "Measurement",
    "Objective",
    "PeakSource",
    "Phase",
    "PhaseResult",
    "ProfileResult",
    "SlowStage",
    "Speedup",
    "StageKind",
    "StageReport",
    "StageStat",
    "StageUnit",
    "StepRecord",
    "StepTimeStats",
    "TimedValue",
    "TrialOutcome",
    "TrialStatus",
    "TuneResult",
    "Untunable",
    "Verdict",
    "Warmup",
    "describe_discovery",
    "gpu_memory_advice",
    "recommend",
    "relative_spread",
    "speedup",
    "training_changes",
    "validated",
]
