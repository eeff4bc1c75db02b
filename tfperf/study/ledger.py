"""The ledger of a study's reference trials: who claims which, which are done, and waiting
for another tuner's.
"""

from __future__ import annotations

from tfperf.study._ledger import (
    DONE,
    Claim,
    Done,
    Ledger,
    Lock,
    Wait,
    Waiting,
    open_study,
    quiet_optuna,
)

__all__ = [
    "DONE",
    "Claim",
    "Done",
    "Ledger",
    "Lock",
    "Wait",
    "Waiting",
    "open_study",
    "quiet_optuna",
]
