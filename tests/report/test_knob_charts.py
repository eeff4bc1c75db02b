"""Knob charts of a study: importances and the parallel-coordinates view."""

from __future__ import annotations

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
