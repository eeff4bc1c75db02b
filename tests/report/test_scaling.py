"""The scaling curve rendered: the answer sentence, the terminal table, the chart, the HTML card."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from tests.deadlines import HANG_MS
from tests.reports import fake_profile
from tfperf.measure.scaling import scaling_curve
from tfperf.report import render_profile_html, render_summary, write_html
from tfperf.report._scaling import (
    ScalingChart,
    render_scaling,
    scaling_answer,
    scaling_chart,
    scaling_figure,
    scaling_notes,
)
from tfperf.results.scaling import (
    BatchScaling,
    ReplicaDevice,
    ScalingCurve,
    ScalingFailure,
    ScalingPoint,
)


def point(replicas: int, wait: float, rate: float, in_step: int | None = None) -> ScalingPoint:
    return ScalingPoint(
        replicas=replicas,
        replicas_in_step=replicas if in_step is None else in_step,
        global_batch=32 * replicas,
        examples_per_sec=rate,
        input_wait_fraction=wait,
        compute_only_examples_per_sec=1500.0 * replicas,
        pipeline_only_examples_per_sec=2000.0,
        keeps_up=wait < 0.05,
    )


def curve(
    *points: ScalingPoint,
    device: ReplicaDevice = ReplicaDevice.CPU,
    batch: BatchScaling = BatchScaling.PER_REPLICA_FIXED,
    failures: tuple[ScalingFailure, ...] = (),
) -> ScalingCurve:
    return scaling_curve(
        points,
        device=device,
        batch=batch,
        per_replica_batch=32 if batch is BatchScaling.PER_REPLICA_FIXED else None,
        strategy="mirrored",
        failures=failures,
    )


FEEDS_TWO = (point(1, 0.01, 1000.0), point(2, 0.02, 1900.0), point(4, 0.48, 2100.0))


def test_the_answer_names_the_count_fed_and_the_wait_at_the_next():
    assert scaling_answer(curve(*FEEDS_TWO)) == (
        "Your pipeline feeds 2 replicas; at 4 they wait 48% of each step."
    )


def test_the_answer_for_a_curve_that_never_saturates():
    found = curve(point(1, 0.0, 1000.0), point(2, 0.01, 2000.0), point(4, 0.02, 3900.0))
    assert scaling_answer(found) == (
        "Your pipeline feeds all 4 replicas measured: the wait stays under 5% of each step at "
        "every count."
    )


def test_the_answer_when_one_replica_is_all_it_feeds():
    found = curve(point(1, 0.02, 1000.0), point(2, 0.35, 1100.0))
    assert (
        scaling_answer(found) == "Your pipeline feeds 1 replica; at 2 they wait 35% of each step."
    )


def test_the_answer_when_even_one_replica_waits():
    found = curve(point(1, 0.4, 600.0), point(2, 0.7, 620.0))
    assert scaling_answer(found) == (
        "Your pipeline does not keep up even with 1 replica: it waits 40% of each step."
    )


def test_the_answer_with_one_count_or_none():
    assert scaling_answer(curve(point(1, 0.0, 1000.0))) == (
        "Your pipeline feeds 1 replica, the only count measured."
    )
    nothing = curve(failures=(ScalingFailure(1, "crashed: killed by SIGKILL"),))
    assert scaling_answer(nothing).startswith("No replica count could be measured")


def test_notes_say_cpu_replicas_share_the_cores_and_how_the_batch_grew():
    notes = scaling_notes(curve(*FEEDS_TWO), cpu_count=2)
    assert notes[0] == (
        "Each count ran `--strategy mirrored` over that many logical CPU devices, which share "
        "the same 2 CPU cores: the curve shows how the input scales with replicas, not a GPU "
        "speed-up."
    )
    assert notes[1] == (
        "The per-replica batch stays at 32 (the `batch_size` knob times the replicas): global "
        "batches 32, 64, 128, as data-parallel training scales."
    )
    assert len(notes) == 2


def test_notes_for_gpus_a_batch_set_in_code_an_undistributed_step_and_a_failure():
    found = curve(
        point(1, 0.0, 1000.0, in_step=1),
        point(2, 0.0, 1000.0, in_step=1),
        device=ReplicaDevice.GPU,
        batch=BatchScaling.GLOBAL_FIXED,
        failures=(ScalingFailure(4, "timeout: stopped after 60 s"),),
    )
    notes = scaling_notes(found)
    assert notes[0] == "Each count ran `--strategy mirrored` with one replica per GPU."
    assert notes[1].startswith("The file sets its batch in code")
    assert notes[2].startswith("The train step ran on fewer replicas than laid out (1 of 2): ")
    assert notes[3] == "4 replicas: not measured (timeout: stopped after 60 s)."


def test_the_terminal_section_is_a_table_then_the_answer():
    lines = render_scaling(curve(*FEEDS_TWO), cpu_count=2).splitlines()
    assert lines[0] == "Scaling with replicas (--scaling):"
    assert lines[1].split() == [
        "replicas", "global", "batch", "examples/s", "per", "replica", "input", "wait",
        "compute-only",
    ]  # fmt: skip
    assert lines[2].split() == ["1", "32", "1,000", "1,000", "1.0%", "1,500"]
    assert lines[4].split() == ["4", "128", "2,100", "525", "48.0%", "6,000"]
    assert lines[5] == "  Your pipeline feeds 2 replicas; at 4 they wait 48% of each step."


def test_the_profile_summary_carries_the_section_only_with_a_curve():
    plain = fake_profile()
    assert "Scaling with replicas" not in render_summary(plain)
    summary = render_summary(dataclasses.replace(plain, scaling=curve(*FEEDS_TWO)))
    assert "Scaling with replicas" in summary
    assert "Your pipeline feeds 2 replicas; at 4 they wait 48% of each step." in summary
    assert summary.index("Scaling with replicas") < summary.index("Findings:")


def test_chart_data():
    assert scaling_chart(curve(*FEEDS_TWO)) == ScalingChart(
        replicas=(1, 2, 4),
        examples_per_sec=(1000.0, 1900.0, 2100.0),
        per_replica_examples_per_sec=(1000.0, 950.0, 525.0),
        ceiling_examples_per_sec=(1500.0, 3000.0, 6000.0),
        wait_percent=(1.0, 2.0, 48.0),
        keeps_up_below_percent=5.0,
        answer="Your pipeline feeds 2 replicas; at 4 they wait 48% of each step.",
    )


def test_figure_draws_rates_on_the_left_and_the_wait_on_the_right():
    figure = scaling_figure(scaling_chart(curve(*FEEDS_TWO)))
    names = [trace.name for trace in figure.data]
    assert names == [
        "examples/s, all replicas",
        "examples/s per replica",
        "compute-only ceiling",
        "input wait, % of each step (right axis)",
    ]
    wait = figure.data[3]
    assert wait.yaxis == "y2" and list(wait.y) == [1.0, 2.0, 48.0]
    assert list(figure.layout.xaxis.tickvals) == [1, 2, 4]
    assert figure.layout.yaxis.title.text == "examples per second"
    assert figure.layout.yaxis2.title.text == "input wait, % of step (dotted: 5%)"
    assert figure.layout.yaxis2.overlaying == "y"
    assert tuple(figure.layout.yaxis2.range) == (0, 50.0)  # the highest wait is 48%
    assert figure.layout.xaxis.type == "log"  # 1, 2, 4 evenly spaced
    (threshold,) = figure.layout.shapes
    assert (threshold.yref, threshold.y0, threshold.y1) == ("y2", 5.0, 5.0)


def test_figure_without_a_ceiling_leaves_that_line_out():
    chart = dataclasses.replace(
        scaling_chart(curve(*FEEDS_TWO)), ceiling_examples_per_sec=(None, None, None)
    )
    assert "compute-only ceiling" not in [trace.name for trace in scaling_figure(chart).data]


def test_the_html_report_has_the_card_chart_and_text_alternative():
    html = render_profile_html(dataclasses.replace(fake_profile(), scaling=curve(*FEEDS_TWO)))
    assert "<h2>Scaling with replicas</h2>" in html
    assert "Your pipeline feeds 2 replicas; at 4 they wait 48% of each step." in html
    assert 'data-chart="profile-scaling"' in html
    assert 'aria-label="Scaling: examples/s and input wait against replicas. ' in html
    assert "falls behind" in html  # the table marks the count past the threshold
    assert "<code>--strategy mirrored</code>" in html
    plain = render_profile_html(fake_profile())
    assert "Scaling with replicas" not in plain and "profile-scaling" not in plain


def test_a_curve_with_no_point_shows_the_card_without_a_chart():
    nothing = curve(failures=(ScalingFailure(1, "crashed: killed by SIGKILL"),))
    html = render_profile_html(dataclasses.replace(fake_profile(), scaling=nothing))
    assert "No replica count could be measured" in html
    assert "1 replica: not measured (crashed: killed by SIGKILL)." in html
    assert "profile-scaling" not in html


def test_the_scaling_chart_draws_in_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("TFPERF_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        pytest.fail("this test needs Chromium: `apt-get install chromium`, or TFPERF_CHROMIUM")
    result = dataclasses.replace(fake_profile(), scaling=curve(*FEEDS_TWO))
    path = write_html(render_profile_html(result), tmp_path / "scaling.html")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_selector('[data-chart="profile-scaling"][data-drawn]', timeout=HANG_MS)
        legend = page.locator('[data-chart="profile-scaling"] .legend').text_content() or ""
        page.locator('[data-chart="profile-scaling"]').screenshot(path=str(tmp_path / "chart.png"))
        lines = page.locator('[data-chart="profile-scaling"] .scatterlayer .trace').count()
        browser.close()
    assert errors == []
    assert "input wait, % of each step (right axis)" in legend
    assert lines == 4
    assert (tmp_path / "chart.png").stat().st_size > 0
