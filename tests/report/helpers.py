"""Records the study-report tests build by hand: a measurement and a finished tune."""

from __future__ import annotations

import re

from tests.reports import MIB
from tfperf.knobs import Knobs
from tfperf.results.tune import Measurement, Objective, Speedup, TuneResult


def trial_number(label: str) -> int | None:
    """The trial a label such as `trial 5` names, as a measured trial carries it; None for a
    reference or a variant no trial ran."""
    match = re.fullmatch(r"trial (\d+)", label)
    return int(match.group(1)) if match else None


def measured(label: str, values: list[float], **knobs: object) -> Measurement:
    knobs_dict = Knobs(**knobs).to_dict()  # type: ignore[arg-type]
    return Measurement(label, trial_number(label), knobs_dict, values, 100 * MIB, None)


def tune_result(**fields: object) -> TuneResult:
    m = measured("trial 2", [2000.0])
    return TuneResult(
        pipeline="demo.py", study_name="demo", storage="memory", objective=Objective("throughput"),
        best=m, baseline=m, autotune=None, candidates=[], speedup_vs_baseline=Speedup(1, 0, False),
        speedup_vs_autotune=None, recommendation="", changes_training=[], pareto_trials=[],
        trial_counts={}, trials_this_run=0, wall_s=1.0, ram_budget_bytes=None,
        gpu_memory_budget_bytes=None, **fields,
    )  # fmt: skip
