"""Every invariant of the consistency check, broken on purpose: each test fails when its
invariant is no longer enforced."""

from __future__ import annotations

import dataclasses

from tests.fakes.stages import first_element_stat
from tests.reports import fake_profile
from tfperf.findings import conclude
from tfperf.findings._checks import cannot_tell_alone, shares_at_most_whole, threads_agree
from tfperf.findings._facts import PipelineFacts
from tfperf.measure import with_added_costs
from tfperf.report import render_answer, render_profile_html
from tfperf.results import Limit, LimitBound, ProfileResult, Verdict
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import AutotuneChoice, AutotuneReadout, StageKind, StageReport


def _rates(result: ProfileResult, alone: float, model: float) -> ProfileResult:
    """`result` with its pipeline-only rate at `alone` and its ceiling at `model` examples/s."""
    assert result.pipeline_only is not None
    pipeline = dataclasses.replace(result.pipeline_only, examples_per_sec=alone)
    rate = result.end_to_end.examples_per_sec
    return dataclasses.replace(result, pipeline_only=pipeline, speedup_if_input_free=model / rate)


def test_a_compute_bound_verdict_beside_a_slower_input_is_corrected_and_recorded():
    # The wait share says compute-bound (as a rule that followed the wait between restarts
    # did), but the input alone runs at a sixteenth of the model's rate.
    result = _rates(fake_profile(), alone=50.0, model=800.0)
    result = dataclasses.replace(result, verdict=Verdict.COMPUTE_BOUND, input_wait_fraction=0.01)
    checked = conclude(result)
    assert checked.verdict is Verdict.HIGHLY_INPUT_BOUND
    assert checked.input_wait_fraction >= 1 - 50 / 800
    assert [c.invariant for c in checked.conflicts] == ["verdict-follows-rates"]
    assert "COMPUTE-BOUND" not in render_answer(checked)
    # Concluded again (a saved result re-rendered), nothing changes and nothing is lost.
    again = conclude(checked)
    assert (again.verdict, again.conflicts) == (checked.verdict, checked.conflicts)


def test_an_input_bound_verdict_with_no_gain_from_free_input_is_corrected():
    result = fake_profile()
    result = dataclasses.replace(result, pipeline_only=None, speedup_if_input_free=1.01)
    checked = conclude(result)
    assert checked.verdict is Verdict.COMPUTE_BOUND
    assert checked.conflicts[0].invariant == "verdict-follows-rates"


def test_rates_that_agree_with_the_verdict_record_no_conflict():
    checked = conclude(_rates(fake_profile(), alone=150.0, model=400.0))
    assert checked.verdict is Verdict.HIGHLY_INPUT_BOUND
    assert checked.conflicts == []


def test_a_limit_below_a_measured_training_rate_is_withdrawn():
    result = fake_profile()
    measured = result.end_to_end.examples_per_sec
    low = Limit(measured / 2, LimitBound.CPU, "The host's cores bound it.", [])
    checked = conclude(dataclasses.replace(result, limit=low))
    assert checked.limit is None
    assert [c.invariant for c in checked.conflicts] == ["limit-holds"]
    assert any(f.rule == "limit-unknown" for f in checked.findings)
    assert "Limit:" not in render_answer(checked)


def _finding(rule: str, level: Level, text: str, topic: str | None = None) -> Finding:
    return Finding(rule, level, text, None, Evidence("stages", 5), topic=topic)


def test_cannot_tell_never_stands_beside_a_named_answer():
    unsure = _finding("stages-disturbed", Level.CAUTION, "cannot tell", topic="limiting-stage")
    named = _finding("limiting-stage", Level.FIX, "The limiting stage is map", "limiting-stage")
    other = _finding("memory", Level.FIX, "shuffle holds 1 GiB")
    kept, conflicts = cannot_tell_alone([unsure, named, other], PipelineFacts.from_parts([]))
    assert kept == [unsure, other]
    assert conflicts[0].invariant == "cannot-tell-alone"


def test_a_stage_said_to_run_on_one_thread_agrees_with_autotune():
    stage = first_element_stat(1, StageKind.MAP, "map(decode)", 0.1, 100.0)
    readout = AutotuneReadout(
        [AutotuneChoice(1, "map(decode)", "ParallelMapV2", "parallelism", None, 2, True)]
    )
    facts = PipelineFacts.from_parts([stage], readout)
    wrong = _finding("restarts", Level.FIX, "Give map(decode) more: it runs on one thread.")
    kept, conflicts = threads_agree([wrong], facts)
    assert kept == [] and conflicts[0].invariant == "threads-agree"
    # Without AUTOTUNE's read-out saying otherwise, the sentence stands.
    kept, _ = threads_agree([wrong], PipelineFacts.from_parts([stage]))
    assert kept == [wrong]


def test_no_share_above_the_whole():
    over = _finding("memory", Level.FIX, "The buffers hold 585% of the 4 GiB peak RSS.")
    fine = _finding("memory", Level.FIX, "The buffers hold 58% of the 4 GiB peak RSS.")
    kept, conflicts = shares_at_most_whole([over, fine], PipelineFacts.from_parts([]))
    assert kept == [fine] and conflicts[0].invariant == "shares-at-most-whole"


def test_disturbed_stage_figures_name_no_limiting_stage_anywhere():
    result = fake_profile()
    alone = result.pipeline_only.examples_per_sec if result.pipeline_only else 0.0
    # The last cut ran at half the pipeline-only rate: disturbed.
    stages = with_added_costs(
        [
            first_element_stat(0, StageKind.SOURCE, "range", 0.01, 10 * alone),
            first_element_stat(1, StageKind.MAP, "map(decode)", 0.01, alone / 2),
        ]
    )
    report = StageReport(stages, 1, 1, 10 * alone, 0.5, 0.1, 1.0, None, "")
    checked = conclude(dataclasses.replace(result, stages=report))
    rules = [f.rule for f in checked.findings]
    assert "stages-disturbed" in rules and "limiting-stage" not in rules
    assert "The limiting stage" not in render_answer(checked)
    assert checked.stages is not None and checked.stages.advice == ""
    html = render_profile_html(checked)
    assert "cannot tell which stage limits" in html
    assert "the stage that limits the pipeline" not in html
