"""Records the study-report tests build by hand: a measurement and a finished tune."""

from __future__ import annotations

from tests.reports import MIB
from tfperf.knobs import Knobs
from tfperf.results.tune import Measurement, Objective, Speedup, TuneResult


def measured(label: str, values: list[float], **knobs: object) -> Measurement:
    return Measurement(label, None, Knobs(**knobs).to_dict(), values, 100 * MIB, None)  # type: ignore[arg-type]


def tune_result(**fields: object) -> TuneResult:
    m = measured("trial 2", [2000.0])
    return TuneResult(
        pipeline="demo.py", study_name="demo", storage="memory", objective=Objective("throughput"),
        best=m, baseline=m, autotune=None, candidates=[], speedup_vs_baseline=Speedup(1, 0, False),
        speedup_vs_autotune=None, recommendation="", changes_training=[], pareto_trials=[],
        trial_counts={}, trials_this_run=0, wall_s=1.0, ram_budget_bytes=None,
        gpu_memory_budget_bytes=None, **fields,
    )  # fmt: skip
