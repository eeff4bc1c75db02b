"""What each structure edit was worth: the best trial with it over the best without, carried
by the hand-over into the JSON, the terminal and the study HTML; and `--reorder`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.fakes.trials import FakeRunner
from tests.report.helpers import measured, tune_result
from tfperf.cli._reorder import reorder_when_asked
from tfperf.cli.sites import patch_section
from tfperf.hardware import Machine
from tfperf.knobs import Choices, Fixed, Knobs
from tfperf.pipeline import PipelineFile, PipelineKind, load_pipeline
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery
from tfperf.results.tune import EditGain, HandOver, Speedup, TuneResult
from tfperf.sites import Change, Patch
from tfperf.trials import with_sites
from tfperf.tuner import TuneOptions, Tuner, hand_over
from tfperf.tuner._edit_gains import edit_gains
from tfperf.tuner._search import build_space, site_space

CACHE = "cache@pipeline.py:10.added"
REORDER = "map@pipeline.py:12.after_batch"
MACHINE = Machine(2, 2**33, 2**32, (), False)


def edit(name: str, line: int) -> CallSite:
    method, argument = name.partition("@")[0], name.rpartition(".")[2]
    return CallSite(
        name=name, file="pipeline.py", line=line, col=9, end_line=line, end_col=45,
        method=method, argument=argument, form=ArgumentForm.ABSENT, index=None, value=0,
        calls=0,
    )  # fmt: skip


DISCOVERY = Discovery(sites=(edit(CACHE, 10), edit(REORDER, 12)))


def plain_file(folder: Path) -> PipelineFile:
    return PipelineFile(
        path=folder / "pipeline.py", name="pipeline", kind=PipelineKind.PLAIN, discovery=DISCOVERY
    )


def test_an_edit_site_is_searched_as_written_or_made_and_a_reorder_only_when_asked(
    tmp_path: Path,
) -> None:
    assert site_space({CACHE: 0, REORDER: 0}, MACHINE) == {
        CACHE: Choices((0, 1)),
        REORDER: Fixed(0),
    }
    pipeline = plain_file(tmp_path)

    assert reorder_when_asked(pipeline, asked=False).search_space == {}
    asked = reorder_when_asked(pipeline, asked=True)
    assert asked.search_space == {REORDER: Choices((0, 1))}
    space = build_space(Knobs(sites={CACHE: 0, REORDER: 0}), MACHINE, asked.search_space, {})
    assert (space[CACHE], space[REORDER]) == (Choices((0, 1)), Choices((0, 1)))


def test_each_edit_is_worth_its_best_trial_over_the_best_without_it() -> None:
    patch = Patch("diff", (Change(DISCOVERY.sites[0], 1),), ())
    trials = [({CACHE: 1, REORDER: 0}, 300.0), ({CACHE: 0, REORDER: 1}, 120.0), ({}, 100.0)]

    gains = edit_gains(DISCOVERY, patch, trials)

    assert gains == [
        EditGain(CACHE, "cache() added after the map at pipeline.py:10", True, 2.5, 1, 2),
        EditGain(REORDER, gains[1].what, False, 120.0 / 300.0, 1, 2),
    ]
    assert edit_gains(DISCOVERY, None, [({}, 100.0)])[0].gain is None  # never made: no worth


def test_the_edits_reach_the_json_the_terminal_and_the_html(tmp_path: Path) -> None:
    from tests.reports import fake_profile, make_study
    from tfperf.report import render_study_html
    from tfperf.report._study_data import snapshot_study

    gain = EditGain(CACHE, "cache() added after the map at pipeline.py:10", True, 2.5, 3, 9)
    handover = HandOver("/src", "--- ./pipeline.py\n", [], Speedup(2.4, 0.02, True), None, [gain])
    result = tune_result(handover=handover)

    again = TuneResult.from_dict(result.to_dict())
    assert again.handover is not None and again.handover.edits == [gain]
    written_before = result.to_dict()
    del written_before["handover"]["edits"]  # a JSON written before the field existed
    old = TuneResult.from_dict(written_before)
    assert old.handover is not None and old.handover.edits == []

    best = measured("trial 3", [2400.0])
    shown = dataclasses.replace(result, best=best, speedup_vs_baseline=Speedup(2.4, 0.02, True))
    pipeline = plain_file(tmp_path)
    text = patch_section(pipeline, shown, None)
    assert "Structure edits:" in text
    assert f"  {gain.describe()}" in text
    assert "made; best trial with it 2.50x the best without (3 trials with, 9 without)" in text

    html = render_study_html(snapshot_study(make_study(best_result=fake_profile()), "memory"),
                             tune=result)  # fmt: skip
    assert "<h3>Structure edits</h3>" in html
    assert f"<code>{CACHE}</code>" in html and "2.50x" in html


CACHED = """
import tensorflow as tf

def make_dataset():
    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=1)
    return ds.batch(8)

def make_train_step():
    return lambda batch: batch
"""
CACHED_SITE = "cache@pipeline.py:4.added"


def cache_speed(knobs: Knobs) -> float:
    """Input wait falls eightfold when the cache edit is made (the patched files: as written)."""
    return 0.01 if knobs.sites.get(CACHED_SITE) == 1 else 0.08


@pytest.mark.tf
def test_a_search_makes_the_cache_that_pays_and_the_handover_says_what_it_was_worth(
    tmp_path: Path,
) -> None:
    (tmp_path / "pipeline.py").write_text(CACHED.lstrip(), encoding="utf-8")
    pipeline = with_sites(load_pipeline(tmp_path / "pipeline.py"))
    assert pipeline.baseline.sites[CACHED_SITE] == 0
    fixes = {name: value for name, value in pipeline.baseline.sites.items() if name != CACHED_SITE}
    options = TuneOptions(
        trials=6,
        storage=f"sqlite:///{tmp_path / 'study.db'}",
        seed=3,
        rounds=2,
        finalists=1,
        fixes={**fixes, "deterministic": None, "private_threadpool_size": None},
    )
    tuner = Tuner(pipeline, options, runner=FakeRunner(wait_for=cache_speed), machine=MACHINE)
    result = tuner.run()
    assert result.best.knobs.sites[CACHED_SITE] == 1

    handover = hand_over(tuner, result, verify=False)

    assert handover is not None
    assert "+    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=1).cache()\n" in (
        handover.diff
    )
    gains = {edit.site: edit for edit in handover.edits}
    assert sorted(gains) == [CACHED_SITE, "map@pipeline.py:4.after_batch"]
    assert gains["map@pipeline.py:4.after_batch"].used is False  # not searched: no --reorder
    gain = gains[CACHED_SITE]
    assert gain.used
    assert gain.gain is not None and gain.gain > 2
    assert gain.trials_with >= 1 and gain.trials_without >= 1
