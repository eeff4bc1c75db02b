"""The search for the fastest configuration: an Optuna study, trials in child processes.

Example:
    >>> import tfperf
    >>> pipeline = tfperf.load_pipeline("pipeline.py")
    >>> result = tfperf.tune(pipeline, tfperf.TuneOptions(trials=20))  # doctest: +SKIP
"""

from __future__ import annotations

from tfperf.study.ledger import Wait
from tfperf.tuner._handover import (
    hand_over,
)
from tfperf.tuner._options import (
    Expected,
    OverBudget,
    TooManyFailures,
    TrialRunner,
    TuneInterrupted,
    TuneListener,
    TuneOptions,
)
from tfperf.tuner._remeasure import (
    MIN_ROUNDS,
    Finalist,
)
from tfperf.tuner._search import (
    build_space,
    describe_space,
)
from tfperf.tuner._tuner import (
    Tuner,
    tune,
)

__all__ = [
    "MIN_ROUNDS",
    "Expected",
    "Finalist",
    "OverBudget",
    "TooManyFailures",
    "TrialRunner",
    "TuneInterrupted",
    "TuneListener",
    "TuneOptions",
    "Tuner",
    "Wait",
    "build_space",
    "describe_space",
    "hand_over",
    "tune",
]
