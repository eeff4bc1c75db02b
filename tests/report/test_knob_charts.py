"""Knob charts of a study: importances and the parallel-coordinates view."""

from __future__ import annotations

import itertools

import pytest

from tests.reports import fake_profile, make_study
from tfperf.report import _knob_charts as kc
from tfperf.report._study_data import StudySnapshot, snapshot_study


@pytest.fixture(scope="module")
def snapshot() -> StudySnapshot:
    return snapshot_study(make_study(best_result=fake_profile()), "memory")


def test_importances_of_a_small_study_are_not_a_ranking(snapshot):
    assert snapshot.importances  # Optuna ranked 6 trials, but that is noise
    data = kc.importances(snapshot)
    assert data.names == ()
    assert data.note == "too few trials to rank knobs: 6 completed, a ranking needs about 10"


def test_parallel_view_axes_are_the_knobs_that_varied(snapshot):
    view = kc.parallel_view(snapshot)
    assert [axis.label for axis in view.axes] == [
        "batch_size",
        "num_parallel_calls",
        "cycle_length",
        "prefetch",
    ]
    assert view.axes[0].tick_text is None  # plain numbers keep a numeric axis
    prefetch = view.axes[3]
    assert prefetch.tick_text == ("0", "2", "AUTOTUNE")
    assert prefetch.values == (0.0, 2.0, 1.0, 2.0, 2.0)
    assert view.examples_per_sec == (1000.0, 1500.0, 2000.0, 1800.0, 1200.0)
    figure = kc.parallel_figure(view)
    assert [d.label for d in figure.data[0].dimensions][-1] == "examples/s"


def _long_site_view(count: int) -> kc.ParallelView:
    names = [f"map@pipelines/imagenet_train.py:{100 + i}.num_parallel_calls" for i in range(count)]
    ticks = (0.0, 1.0, 2.0)
    axes = tuple(kc.Axis(name, ticks, ticks, ("1", "4", "AUTOTUNE")) for name in names)
    return kc.ParallelView(axes, (1.0, 2.0, 3.0))


@pytest.mark.parametrize("count", [1, 3, 6])
def test_parallel_axis_names_neither_overlap_nor_run_off_the_plot(count):
    import math

    layout = kc.label_layout(_long_site_view(count))
    assert layout.names[0] == "map@imagenet_train.py:100.num_parallel_calls"  # folders dropped
    widths = [kc.LABEL_CHAR_PX * len(name) for name in layout.names]
    plot = kc.NARROW_PLOT_PX - layout.left - layout.right
    spacing = plot / (len(widths) - 1)
    if layout.angle == 0:
        assert all((a + b) / 2 < spacing for a, b in itertools.pairwise(widths))
        assert layout.top >= kc.LABEL_LINE_PX
    else:
        # Tilted names are parallel lines `spacing * sin` apart: at least a line's height.
        tilt = math.radians(abs(layout.angle))
        assert spacing * math.sin(tilt) >= kc.LABEL_LINE_PX
        assert layout.top >= max(widths) * math.sin(tilt)
        assert layout.right >= widths[-1] * math.cos(tilt)
    assert layout.left >= kc.LABEL_CHAR_PX * len("AUTOTUNE")  # the first axis's ticks


def test_the_parallel_figure_keeps_its_margins_for_the_axis_names():
    view = _long_site_view(3)
    layout = kc.label_layout(view)
    figure = kc.parallel_figure(view)
    assert figure.data[0].labelangle == layout.angle != 0
    assert [d.label for d in figure.data[0].dimensions] == list(layout.names)
    assert figure.layout.margin.t == layout.top and figure.layout.meta == {"keep_margin": True}


def test_short_knob_names_stay_level():
    view = kc.ParallelView((kc.Axis("prefetch", (1.0, 2.0), None, None),), (1.0, 2.0))
    assert kc.label_layout(view).angle == 0
