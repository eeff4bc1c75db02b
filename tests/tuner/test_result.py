"""The tune result's limit: never below a rate the study measured under the same setting."""

from __future__ import annotations

import optuna

from tests.report.helpers import measured, tune_result
from tfperf.knobs import Knobs
from tfperf.report._tune_text import _limit
from tfperf.results import Limit, LimitBound, LimitTerm
from tfperf.tuner._result import revised_limits


class _References:
    """The limit under the baseline's setting; none probed under batch size 64."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit

    def limit_for(self, knobs: Knobs) -> Limit | None:
        return self.limit if knobs.batch_size != 64 else None


def test_a_recommendation_above_the_limit_revises_it_and_the_summary_says_so():
    term = LimitTerm(LimitBound.SEQUENTIAL_STAGE, 1000.0, "batch(8) runs on one thread", "b")
    model = Limit(1000.0, LimitBound.SEQUENTIAL_STAGE, "batch(8) binds.", [term])
    best = measured("trial 4", [1500.0, 1520.0, 1480.0], batch_size=8)
    others = [
        measured("baseline", [900.0], batch_size=8),
        measured("trial 5", [9e3], batch_size=64),
    ]
    study = optuna.create_study(direction="maximize")

    limit, under_best = revised_limits(study, [best, *others], _References(model), best)  # type: ignore[arg-type]

    assert limit is not None and under_best is not None
    assert limit.examples_per_sec == 1500.0 and limit.revised  # trial 5 ran another setting
    assert best.median / under_best.examples_per_sec <= 1.05
    text = _limit(tune_result(limit=limit, best_limit=under_best, tuned_over_limit=1.0))
    assert text.startswith(
        "Limit: 1,500 examples/s, revised to the measured rate (trial 4, re-measured median); "
        "the recommendation reaches 100% of it"
    )
    assert "Revised to the measured 1,500 examples/s" in text and "50% lower" in text


def test_two_limits_read_as_written_then_under_the_recommendations_setting():
    written = Limit(3_192.0, LimitBound.COMPUTE, "The model's own step binds.", [])
    setting = Limit(4_635.0, LimitBound.COMPUTE, "The model's own step binds.", [])
    text = _limit(tune_result(limit=written, best_limit=setting, tuned_over_limit=0.84))
    assert text.startswith(
        "Limit: 3,192 examples/s as written, bound by compute; 4,635 examples/s under the "
        "recommendation's training setting, bound by compute; the recommendation reaches 84%"
    )


def test_code_that_reads_no_knobs_gets_no_baseline_to_paste():
    # A script whose fit gets arrays has no sites: its answer is a patch (or nothing), never a
    # BASELINE for a pipeline file it is not, nor tf.data calls it does not make.
    import dataclasses

    from tfperf.report import render_tune_summary
    from tfperf.results.tune import Speedup

    best = measured("trial 3", [3000.0, 3010.0], private_threadpool_size=4)
    result = dataclasses.replace(
        tune_result(), best=best, speedup_vs_baseline=Speedup(1.5, 0.02, True)
    )
    assert "paste as BASELINE" in render_tune_summary(result)
    assert "paste as BASELINE" not in render_tune_summary(result, reads_knobs=False)
    assert "TFRecordDataset" not in render_tune_summary(result, reads_knobs=False)
