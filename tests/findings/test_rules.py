"""The rules that make findings: each states what the figures back, and stays silent where its
preconditions fail."""

from __future__ import annotations

import dataclasses

from tests.reports import fake_profile
from tfperf.findings import conclude
from tfperf.report import render_answer, render_profile_html, render_summary
from tfperf.results import ProfileResult, Verdict
from tfperf.results.findings import Level
from tfperf.results.stages import BufferHold, BufferKind, SizeSource, memory_account


def _rules(result: ProfileResult) -> dict[str, str]:
    return {f.rule: f.sentence for f in conclude(result).findings}


def _with_prefetch(result: ProfileResult, prefetch: int) -> ProfileResult:
    return dataclasses.replace(result, knobs={**result.knobs, "prefetch": prefetch})


def test_input_slower_than_the_model_is_said_with_both_rates():
    result = fake_profile()  # 20 ms a batch of 4 in, 10 ms a step: 200 vs 400 examples/s
    said = _rules(result)["input-slower-than-model"]
    assert "delivers 200 examples/s but the model could consume 400" in said


def test_prefetch_zero_is_said_only_without_a_prefetch():
    result = fake_profile()
    assert "prefetch-zero" in _rules(_with_prefetch(result, 0))
    assert "prefetch-zero" not in _rules(_with_prefetch(result, 2))


def test_a_compute_bound_profile_gets_a_note_and_no_input_fix():
    result = dataclasses.replace(
        fake_profile(),
        verdict=Verdict.COMPUTE_BOUND,
        input_wait_fraction=0.01,
        pipeline_only=None,
        speedup_if_input_free=1.0,
    )
    found = conclude(result).findings
    assert [f.rule for f in found if f.level is Level.FIX] == []
    assert any(f.rule == "compute-bound" for f in found)


def _hold(kind: BufferKind, elements: int, size: float, **extra) -> BufferHold:
    return BufferHold(
        f"{kind.value}({elements})", kind, None, elements, size, SizeSource.SPEC, **extra
    )


def test_a_large_fixed_prefetch_gets_advice_and_an_autotuned_one_does_not():
    big = _hold(BufferKind.PREFETCH, 1024, 384 * 1024.0)
    result = dataclasses.replace(fake_profile(), memory=memory_account([big], 2**30, None))
    assert "prefetch(tf.data.AUTOTUNE) sizes it" in _rules(result)["memory"]
    tuned = dataclasses.replace(big, note="AUTOTUNE chose 1024")
    result = dataclasses.replace(fake_profile(), memory=memory_account([tuned], 2**30, None))
    assert "prefetch(tf.data.AUTOTUNE) sizes it" not in _rules(result).get("memory", "")


def test_a_buffer_account_above_the_peak_rss_prints_no_share_above_the_whole():
    big = _hold(BufferKind.SHUFFLE, 1000, 4 * 2**20)
    result = conclude(
        dataclasses.replace(fake_profile(), memory=memory_account([big], 2**30, None))
    )
    text = render_summary(result)
    assert "never full while profiled" in text
    assert "390%" not in text and "% of the 1 GiB" not in text


def test_the_answer_is_short_and_the_html_carries_every_finding():
    result = conclude(_with_prefetch(fake_profile(), 0))
    answer = render_answer(result)
    assert len([line for line in answer.splitlines() if line.strip()]) <= 20
    assert answer.count("[fix]") + answer.count("[note]") + answer.count("[caution]") <= 3
    html = render_profile_html(result)
    for finding in result.findings:
        assert f'data-rule="{finding.rule}"' in html


def test_the_answer_keeps_to_its_lines_with_every_section_asked_for():
    from tests.report.test_scaling import FEEDS_TWO, curve
    from tfperf.results._utilisation import (
        MLPERF_STORAGE_BAR,
        StepSource,
        Utilisation,
        UtilisationPoint,
    )

    point = UtilisationPoint(0.002, StepSource.EMULATED, 0.2, 0.2)
    utilisation = Utilisation(MLPERF_STORAGE_BAR, 0.0025, 0.00225, [point], True)
    result = dataclasses.replace(
        conclude(_with_prefetch(fake_profile(), 0)),
        scaling=curve(*FEEDS_TWO),
        emulated_step_s=0.002,
        utilisation=utilisation,
    )
    answer = render_answer(result)
    assert len([line for line in answer.splitlines() if line.strip()]) <= 20
    assert "Scaling with replicas" in answer and "[fix]" in answer


def test_a_restart_waiting_on_a_map_autotune_runs_in_parallel_is_not_told_one_thread():
    from tfperf.findings._restart_words import restart_finding
    from tfperf.results.stages import EpochSource, RestartCost, RestartEvidence, StageKind

    cost = RestartCost(
        restarts=20,
        seconds_per_restart=0.03,
        stage="map(decode)",
        stage_kind=StageKind.MAP,
        steady_wait_s_per_step=0.0001,
        steady_wait_fraction=0.01,
        weighted_wait_fraction=0.9,
        window_wait_share=0.98,
        epoch_steps=2,
        epoch_source=EpochSource.CARDINALITY,
        weighted_examples_per_sec=100.0,
        measured=True,
        stage_own_s=0.03,
        stage_sequential=True,
        evidence=RestartEvidence.ENOUGH,
    )
    parallel = restart_finding(cost, threads=2)
    assert parallel is not None and "one thread" not in parallel.sentence
    assert "repeat()" in parallel.sentence
    single = restart_finding(cost, threads=1)
    assert single is not None and "num_parallel_calls=tf.data.AUTOTUNE" in single.sentence


def test_a_budget_that_left_stages_unmeasured_places_the_limit_at_or_before_a_cut():
    from tests.fakes.stages import first_element_stat
    from tfperf.results.stages import StageKind, StageReport

    def stage(index: int, kind: StageKind, label: str, rate: float | None):
        measured = first_element_stat(index, kind, label, 0.01, rate or 1.0)
        if rate is None:
            return dataclasses.replace(measured, examples_per_sec=None, elements_per_sec=None)
        return measured

    stages = [
        stage(0, StageKind.SOURCE, "range", None),
        stage(1, StageKind.MAP, "map(decode)", 4000.0),
        stage(2, StageKind.MAP, "map(shift)", None),
        stage(3, StageKind.PREFETCH, "prefetch(1)", 3300.0),
    ]
    report = StageReport(stages, None, None, None, 0.2, 0.2, 2.4, None, "", unmeasured=[0, 2])
    found = {
        f.rule: f for f in conclude(dataclasses.replace(fake_profile(), stages=report)).findings
    }
    said = found["limit-at-or-before"].text
    assert said.startswith("The limit lies at or before map(decode)")
    assert "cannot tell which of range, map(decode)" in said
    assert "limiting-stage" not in found
