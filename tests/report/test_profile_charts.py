"""Profile charts: data functions by equality on a fake-clock profile, figures by structure."""

from __future__ import annotations

import pytest

from tests.reports import fake_profile, with_stages
from tfperf.report import _profile_charts as pc
from tfperf.report import _theme as theme
from tfperf.results import ProfileResult


@pytest.fixture(scope="module")
def result() -> ProfileResult:
    return fake_profile(gpu=True)


def test_verdict_banner_states_the_figures(result):
    banner = pc.verdict_banner(result)
    assert banner.level == "bad"
    assert banner.headline.startswith("Highly input-bound")
    assert banner.wait_fraction == pytest.approx(2 / 3)
    assert banner.speedup_if_input_free == pytest.approx(3.0)
    assert banner.examples_per_sec == pytest.approx(4 / 0.03)
    assert banner.advice == result.advice


def test_throughputs_are_the_three_phases_in_order(result):
    data = pc.throughputs(result)
    assert data.labels == ("end to end", "pipeline only", "compute only (ceiling)")
    assert data.examples_per_sec == pytest.approx((4 / 0.03, 4 / 0.02, 4 / 0.01))
    figure = pc.throughput_figure(data)
    assert figure.layout.xaxis.title.text == "examples per second"
    assert list(figure.data[0].text)[2] == "400 examples/s"
    # Long bars hold their label inside: the longest one's cannot run off a phone's screen.
    assert list(figure.data[0].textposition) == ["outside", "inside", "inside"]
    assert pc.label_positions((1868.0, 500.0)) == ("inside", "outside")


def test_stage_waterfall_draws_stages_counted_in_examples():
    result = with_stages(fake_profile())
    data = pc.stage_waterfall(result)
    assert data == pc.StageWaterfall(
        labels=("1. interleave(TFRecordDataset)", "2. map(parse)", "3. batch(4)"),
        examples_per_sec=(5000.0, 200.0, 190.0),
        stage_indices=(1, 2, 3),
        bottleneck_index=2,
        consumption_examples_per_sec=400.0,
    )
    figure = pc.waterfall_figure(data)
    bars, line = figure.data
    assert bars.orientation == "h"
    assert list(bars.marker.color) == [theme.PIPELINE, theme.WAIT, theme.PIPELINE]
    assert list(bars.text)[1] == "200 (limiting)"
    assert line.name == "the model consumes 400/s"
    assert set(line.x) == {400.0}
    assert figure.layout.xaxis.type == "log"
    assert figure.layout.xaxis.title.text == "examples/s (log scale)"
    # Labelled 1-2-5 ticks from a decade below the slowest stage: no floor, no minor labels.
    assert list(figure.layout.xaxis.tickvals)[:3] == [100, 200, 500]
    assert list(figure.layout.xaxis.ticktext)[:3] == ["100", "200", "500"]
    assert pc.verdict_banner(result).limiting_stage == "map(parse)"


def test_no_waterfall_without_a_stage_analysis(result):
    assert pc.stage_waterfall(result) is None
    assert pc.verdict_banner(result).limiting_stage is None
