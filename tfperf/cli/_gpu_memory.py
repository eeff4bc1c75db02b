"""The GPU memory advice `tfperf tune` prints for its recommendation, from that trial's profile."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna

    from tfperf.results.tune import TuneResult


def recommended_gpu_memory(study: optuna.Study, result: TuneResult) -> str:
    """The advice for the recommended configuration's own trial; "" when it measured no GPU."""
    from tfperf.report import gpu_memory_text
    from tfperf.study import stored_result

    number = result.best.trial_number
    trial = next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)
    profile = stored_result(trial) if trial is not None else None
    return gpu_memory_text(profile) if profile is not None else ""
