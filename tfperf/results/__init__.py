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
from tfperf.results._distribution import (
    DistributedInput,
    Distribution,
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
    TrainingRate,
)
from tfperf.results._profile import (
    AutotuneChoice,
    AutotuneReadout,
    BatchShape,
    CpuUsage,
    DatasetOptions,
    Environment,
    EpochSource,
    GpuStats,
    HostMemory,
    Phase,
    PhaseResult,
    ProfileResult,
    RestartCost,
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
from tfperf.results._references import (
    Reference,
    folded_estimates,
)
from tfperf.results._scaling import (
    BatchScaling,
    ReplicaDevice,
    ScalingCurve,
    ScalingFailure,
    ScalingPoint,
)
from tfperf.results._trial import (
    TrialOutcome,
    TrialStatus,
)
from tfperf.results._tune import (
    TRAINING_KNOBS,
    EditGain,
    HandOver,
    InputOnlyChoice,
    Measurement,
    Objective,
    SearchGain,
    Speedup,
    TuneResult,
    input_only_choice,
    keeps_baseline,
    recommend,
    speedup,
    training_changes,
    training_distance,
)

__all__ = [
    "TRAINING_KNOBS",
    "ArgumentForm",
    "AutotuneChoice",
    "AutotuneReadout",
    "BatchScaling",
    "BatchShape",
    "CallSite",
    "CpuUsage",
    "DatasetOptions",
    "Discovery",
    "DistributedInput",
    "Distribution",
    "EditGain",
    "Environment",
    "EpochSource",
    "Estimate",
    "GpuMemoryAdvice",
    "GpuStats",
    "HandOver",
    "HostMemory",
    "InputOnlyChoice",
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
    "Reference",
    "ReplicaDevice",
    "RestartCost",
    "ScalingCurve",
    "ScalingFailure",
    "ScalingPoint",
    "SearchGain",
    "SlowStage",
    "Speedup",
    "StageKind",
    "StageReport",
    "StageStat",
    "StageUnit",
    "StepRecord",
    "StepTimeStats",
    "TimedValue",
    "TrainingRate",
    "TrialOutcome",
    "TrialStatus",
    "TuneResult",
    "Untunable",
    "Verdict",
    "Warmup",
    "describe_discovery",
    "folded_estimates",
    "gpu_memory_advice",
    "input_only_choice",
    "keeps_baseline",
    "recommend",
    "speedup",
    "training_changes",
    "training_distance",
    "validated",
]
