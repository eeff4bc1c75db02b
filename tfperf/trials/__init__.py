"""One tuning trial in a child process, so that whatever goes wrong stays in that trial."""

from __future__ import annotations

from tfperf.trials._discovery import with_sites
from tfperf.trials._runner import (
    Budgets,
    TrialRequest,
    gpu_budget_problem,
    run_trial,
    stall_reason,
)
from tfperf.trials._zygote import forked_trials

__all__ = [
    "Budgets",
    "TrialRequest",
    "forked_trials",
    "gpu_budget_problem",
    "run_trial",
    "stall_reason",
    "with_sites",
]
