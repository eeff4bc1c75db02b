"""The study's answer as data: one figure per configuration, the banner's colour, the headline,
and the whole change; hand-built records set the tuner's optional fields."""

from __future__ import annotations

import dataclasses

import pytest

from tests.report.helpers import measured, tune_result
from tests.reports import MIB, fake_profile, make_study
from tfperf.knobs import Knobs
from tfperf.report import _study_summary as ss
from tfperf.report import render_study_html
from tfperf.report._study_data import StudySnapshot, snapshot_study
from tfperf.results.tune import HandOver, Measurement, Speedup


@pytest.fixture(scope="module")
def snapshot() -> StudySnapshot:
    return snapshot_study(make_study(best_result=fake_profile()), "memory")


def test_trial_figures_are_remeasured_medians_else_single_runs(snapshot):
    figures = ss.trial_figures(snapshot)
    assert figures[2] == ss.TrialFigure(2000.0, 1900.0, 2100.0, 3, 450 * MIB, True)
    assert figures[3] == ss.TrialFigure(1800.0, 1800.0, 1800.0, 1, 380 * MIB, False)
    assert figures[2].spread == pytest.approx(0.05)
    assert 4 not in figures  # over its budget: no figure to show


def test_a_training_change_within_noise_is_passed_over_for_one_that_keeps_training():
    baseline = measured("baseline", [1000.0, 1000.0], batch_size=32)
    keeps = measured("trial 3", [1580.0, 1620.0], batch_size=32, num_parallel_calls=-1)
    changes = measured("trial 5", [1550.0, 1750.0], batch_size=64, num_parallel_calls=-1)
    choice = ss.choose([baseline, keeps, changes])
    assert choice is not None
    assert (choice.best.label, choice.fastest and choice.fastest.label) == ("trial 3", "trial 5")
    banner = ss.banner(choice, Speedup(1.6, 0.02, True), [], remeasured=True)
    assert banner.level == "warn"
    assert banner.text.startswith("Use trial 3's knobs: 1.60x, training unchanged.")


def test_a_larger_change_to_training_within_noise_is_passed_over_for_the_smaller():
    baseline = measured("baseline", [1000.0, 1000.0], batch_size=32, shuffle_buffer=1024)
    smaller = measured("trial 4", [2160.0, 2280.0], batch_size=128, shuffle_buffer=1024)
    larger = measured("trial 18", [2240.0, 2420.0], batch_size=128, shuffle_buffer=2048)
    choice = ss.choose([baseline, smaller, larger])
    assert choice is not None
    assert (choice.best.label, choice.fastest and choice.fastest.label) == ("trial 4", "trial 18")
    banner = ss.banner(choice, Speedup(2.22, 0.03, True), ["batch_size"], remeasured=True)
    assert banner.level == "warn"
    assert "The fastest, trial 18's knobs, changes training more" in banner.text
    assert "(1.05x ± 0.07 (within noise: not a measured gain))" in banner.text


def test_the_banner_is_green_only_for_a_measured_gain_that_keeps_training():
    baseline = measured("baseline", [1000.0, 1000.0], batch_size=32)
    keeps = measured("trial 3", [1600.0, 1600.0], batch_size=32, num_parallel_calls=-1)
    choice = ss.choose([baseline, keeps])
    assert choice is not None and choice.fastest is None
    gain = Speedup(1.6, 0.0, True)
    assert ss.banner(choice, gain, [], remeasured=True).level == "ok"
    assert ss.banner(choice, gain, [], remeasured=False).level == "warn"
    assert ss.banner(choice, gain, ["batch_size"], remeasured=True).level == "warn"
    assert ss.banner(choice, Speedup(1.01, 0.05, False), [], remeasured=True).level == "warn"


def test_every_finalist_is_listed_in_the_summary():
    study = make_study(best_result=fake_profile())
    snapshot = snapshot_study(study, "memory")
    # Below the input-only best (AUTOTUNE, 1,500): a finalist that is neither chosen nor the
    # input-only figure the choice weighed (at 1,750 it would be, trial 2's 1.14x over it short
    # of the training-change margin).
    extra = Measurement("trial 3", 3, Knobs(batch_size=32).to_dict(), [1400.0, 1450.0], 1, None)
    snapshot = dataclasses.replace(snapshot, measurements=(*snapshot.measurements, extra))
    found = ss.summary(snapshot)
    assert found is not None
    assert [row.label for row in found.rows][-1] == "also re-measured: trial 3"


def test_a_finalist_a_memory_budget_stopped_is_named_so_and_not_chosen():
    study = make_study(best_result=fake_profile())
    snapshot = snapshot_study(study, "memory")
    over = Measurement("trial 3", 3, Knobs(batch_size=32).to_dict(), [9e6, 9e6], 1, None)
    over = dataclasses.replace(over, over_budget=1)
    snapshot = dataclasses.replace(snapshot, measurements=(*snapshot.measurements, over))
    found = ss.summary(snapshot)
    assert found is not None
    labels = [row.label for row in found.rows]
    assert labels[-1] == "also re-measured: trial 3 (over the memory budget in 1 repeat)"
    assert all(row.role != "best" or row.trial != 3 for row in found.rows)


def test_the_patch_block_is_the_handover_when_the_tuner_wrote_one(snapshot):
    handover = HandOver(
        root="/src",
        diff="--- train.py\n+++ train.py\n",
        manual_edits=['Add keras.mixed_precision.set_global_policy("mixed_bfloat16").'],
        verified=Speedup(1.58, 0.03, True),
    )
    best = snapshot.measurements[0]
    block = ss.patch_block(snapshot, best, None, tune_result(handover=handover))
    assert block == ss.PatchBlock(
        "/src",
        "--- train.py\n+++ train.py\n",
        ('Add keras.mixed_precision.set_global_policy("mixed_bfloat16").',),
        "patched/original 1.58x ± 0.05",
        None,
    )
    html = render_study_html(snapshot, tune=tune_result(handover=handover))
    assert 'id="patch-manual"' in html and "set_global_policy(&#34;mixed_bfloat16&#34;)" in html


def test_settings_no_call_holds_become_edits_by_hand():
    baseline = measured("baseline", [1.0], batch_size=32)
    best = measured("trial 2", [2.0], batch_size=32, mixed_precision="mixed_bfloat16",
                    private_threadpool_size=2)  # fmt: skip
    assert ss.applied_edits(best, baseline) == [
        'Add keras.mixed_precision.set_global_policy("mixed_bfloat16") before the model is built.',
        "Add to the dataset given to fit or your own loop: options = tf.data.Options(); "
        "options.threading.private_threadpool_size = 2; ds = ds.with_options(options).",
    ]


def test_keeping_the_baseline_shows_no_change_snippet_or_patch():
    baseline = measured("baseline", [1000.0, 1400.0], batch_size=32)
    noisy = measured("trial 3", [1250.0, 1300.0], batch_size=32, num_parallel_calls=4)
    study = make_study(best_result=fake_profile())
    found = ss.summary(
        dataclasses.replace(snapshot_study(study, "memory"), measurements=(baseline, noisy))
    )
    assert found is not None and found.keeps_baseline
    assert found.recommendation.startswith("Keep your baseline")
    assert (found.changes, found.baseline_code, found.tf_data_code, found.patch) == (
        (),
        "",
        "",
        None,
    )
    gained = dataclasses.replace(baseline, examples_per_sec=[600.0, 610.0])
    used = ss.summary(
        dataclasses.replace(snapshot_study(study, "memory"), measurements=(gained, noisy))
    )
    assert used is not None and not used.keeps_baseline
    assert [change.name for change in used.changes] == ["num_parallel_calls"]
    assert "num_parallel_calls" in used.baseline_code


def test_the_chosen_configurations_confirmed_runs_are_its_figure_and_say_so():
    study = make_study(best_result=fake_profile())
    snapshot = snapshot_study(study, "memory")
    best = max(snapshot.measurements, key=lambda m: m.median)
    confirmed = dataclasses.replace(best, confirmed=[1800.0, 1840.0, 1820.0])
    others = tuple(m for m in snapshot.measurements if m is not best)
    snapshot = dataclasses.replace(snapshot, measurements=(confirmed, *others))
    found = ss.summary(snapshot)
    assert found is not None
    row = next(row for row in found.rows if row.role == "best")
    assert (row.label, row.median, row.runs, row.confirmed) == ("best: trial 2", 1820.0, 3, True)
    assert ss.trial_figures(snapshot)[best.trial_number].examples_per_sec == 1820.0
    html = render_study_html(snapshot)
    assert "after the choice" in html
