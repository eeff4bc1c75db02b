"""What a tuning run found: re-measured configurations, the model's proposals by kind, the
recommendation and its rules, and the hand-over for code that reads no knobs.

Example:
    >>> from tfperf.results.tune import Reference
    >>> Reference.BASELINE.value
    'baseline'
"""

from __future__ import annotations

from tfperf.results._limit import (
    Estimate,
)
from tfperf.results._references import (
    Reference,
    folded_estimates,
)
from tfperf.results._tune import (
    TRAINING_CHANGE_MARGIN,
    TRAINING_KNOBS,
    EditGain,
    HandOver,
    InputOnlyChoice,
    Measurement,
    Objective,
    SearchGain,
    Speedup,
    TuneResult,
    changes_to_training,
    configuration_name,
    input_only_choice,
    keeps_baseline,
    recommend,
    same_training,
    speedup,
    training_changes,
    training_distance,
)

__all__ = [
    "TRAINING_CHANGE_MARGIN",
    "TRAINING_KNOBS",
    "EditGain",
    "Estimate",
    "HandOver",
    "InputOnlyChoice",
    "Measurement",
    "Objective",
    "Reference",
    "SearchGain",
    "Speedup",
    "TuneResult",
    "changes_to_training",
    "configuration_name",
    "folded_estimates",
    "input_only_choice",
    "keeps_baseline",
    "recommend",
    "same_training",
    "speedup",
    "training_changes",
    "training_distance",
]
