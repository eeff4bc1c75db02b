"""A trial whose loader yields other examples than its dataset's is refused, never ranked."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from tests.fakes.trials import FakeRunner
from tests.reports import fake_profile
from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.stages import LoaderReport, PassCheck
from tfperf.trials import Budgets, TrialRequest
from tfperf.tuner._data import data_problem, refusing_changed_data

BASELINE = Knobs(batch_size=4, num_workers=0)
DOUBLED = PassCheck("Lines", 2, examples=48, complete=True, reference_examples=24,
                    reference_complete=True, repeat_factor=2.0, sampled=24)  # fmt: skip
SHARDED = dataclasses.replace(DOUBLED, examples=24, repeat_factor=1.0)


def _complete(check: PassCheck | None) -> TrialOutcome:
    result = dataclasses.replace(fake_profile(), loader=LoaderReport(2, False, pass_check=check))
    return TrialOutcome(TrialStatus.COMPLETE, result, "", 100, None, 1.0)


def _run(knobs: Knobs, check: PassCheck | None) -> TrialOutcome:
    runner = refusing_changed_data(FakeRunner(outcome=lambda _n, _r: _complete(check)), BASELINE)
    return runner(TrialRequest(pipeline=Path(__file__), knobs=knobs, steps=6), Budgets())


def test_a_trial_that_duplicates_its_data_is_refused_with_the_fix() -> None:
    outcome = _run(BASELINE.replace(num_workers=2), DOUBLED)

    assert outcome.status is TrialStatus.PRUNED and outcome.result is None
    assert outcome.reason.startswith("refused: `Lines` is an IterableDataset that every worker")
    assert "get_worker_info()" in outcome.reason
    assert outcome.peak_rss_bytes == 100  # what it cost is kept


def test_a_sharded_trial_and_the_baseline_itself_still_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _run(BASELINE.replace(num_workers=2), SHARDED).status is TrialStatus.COMPLETE
    assert _run(BASELINE.replace(num_workers=2), None).status is TrialStatus.COMPLETE
    # What the user runs today is the reference, whatever it yields: said once, not refused.
    with caplog.at_level(logging.WARNING, logger="tfperf.tuner"):
        runner = refusing_changed_data(
            FakeRunner(outcome=lambda _n, _r: _complete(DOUBLED)), BASELINE
        )
        request = TrialRequest(pipeline=Path(__file__), knobs=BASELINE, steps=6)
        assert runner(request, Budgets()).status is TrialStatus.COMPLETE
        assert runner(request, Budgets()).status is TrialStatus.COMPLETE
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("Your BASELINE changes the data: `Lines` is an IterableDataset")
    assert warning.endswith("fix the dataset, then tune again.")
    assert data_problem(_complete(DOUBLED)) == DOUBLED.statement()
    assert data_problem(_complete(SHARDED)) is None
